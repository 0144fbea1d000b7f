//! The results store: every measurement with its raw samples (and the clock
//! reading of each) in an SQLite database, written in one transaction so a
//! killed run leaves either the whole measurement or none of it.

use fusebench_measure::{MeasureError, Measurement};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Version of the database layout; bump with a migration when it changes.
pub const DB_VERSION: u32 = 1;

#[derive(Error, Debug)]
pub enum StoreError {
    #[error("results database {path}: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    #[error("results database {path}: {message}")]
    Invalid { path: String, message: String },
    #[error(transparent)]
    Measurement(#[from] MeasureError),
    #[error("no place for the results database: set FUSEBENCH_DB, XDG_DATA_HOME or HOME")]
    NoPath,
}

pub struct Store {
    conn: Connection,
    path: String,
}

/// `$FUSEBENCH_DB`, else `$XDG_DATA_HOME/fusebench/results.sqlite`, else
/// `~/.local/share/fusebench/results.sqlite`.
pub fn default_path(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = var("FUSEBENCH_DB").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let base = var("XDG_DATA_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            var("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| Path::new(&h).join(".local/share"))
        })?;
    Some(base.join("fusebench/results.sqlite"))
}

/// A stored measurement and its row id.
#[derive(Clone, Debug)]
pub struct Stored {
    pub id: i64,
    pub measurement: Measurement,
}

/// A later measurement slower than the one before it beyond both their noise.
#[derive(Clone, Debug, PartialEq)]
pub struct Regression {
    pub before: i64,
    pub after: i64,
    /// after median / before median.
    pub ratio: f64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY,
    taken_at INTEGER NOT NULL,
    subject_name TEXT NOT NULL,
    definition_hash TEXT NOT NULL,
    inputs_hash TEXT NOT NULL,
    gpu_name TEXT NOT NULL,
    gpu_uuid TEXT NOT NULL,
    method TEXT NOT NULL,
    cache TEXT NOT NULL,
    n INTEGER NOT NULL,
    median_us REAL NOT NULL,
    ci_low_us REAL NOT NULL,
    ci_high_us REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS measurements_subject ON measurements (definition_hash, inputs_hash, gpu_uuid, taken_at);
CREATE TABLE IF NOT EXISTS samples (
    measurement_id INTEGER NOT NULL REFERENCES measurements (id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    time_us REAL NOT NULL,
    sm_mhz INTEGER,
    mem_mhz INTEGER,
    temperature_c INTEGER,
    power_w REAL,
    throttle_reasons INTEGER,
    PRIMARY KEY (measurement_id, idx)
);
";

impl Store {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let name = path.display().to_string();
        let sq = |source| StoreError::Sqlite {
            path: name.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Invalid {
                path: name.clone(),
                message: format!("creating {}: {e}", dir.display()),
            })?;
        }
        let conn = Connection::open(path).map_err(sq)?;
        // WAL keeps readers working while a run writes, and survives a kill.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sq)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(sq)?;
        conn.execute_batch(SCHEMA).map_err(sq)?;
        let version: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'db_version'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(sq)?;
        match version.as_deref().map(str::parse::<u32>) {
            None => {
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('db_version', ?1)",
                    params![DB_VERSION.to_string()],
                )
                .map_err(sq)?;
            }
            Some(Ok(v)) if v == DB_VERSION => {}
            Some(Ok(v)) => {
                return Err(StoreError::Invalid {
                    path: name,
                    message: format!("database version {v}; this build reads version {DB_VERSION}"),
                })
            }
            Some(Err(_)) => {
                return Err(StoreError::Invalid {
                    path: name,
                    message: "unreadable db_version".into(),
                })
            }
        }
        Ok(Store { conn, path: name })
    }

    /// Opens the database at the default per-user path.
    pub fn open_default() -> Result<Store, StoreError> {
        let p = default_path(|v| std::env::var(v).ok()).ok_or(StoreError::NoPath)?;
        Store::open(&p)
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Saves a measurement and all its samples in one transaction. A record
    /// that does not hold up (no samples, a bad sample) is refused.
    pub fn save(&mut self, m: &Measurement) -> Result<i64, StoreError> {
        // Re-derive from the samples: what is stored is valid by construction.
        let m = Measurement::from_json(&m.to_json())?;
        let tx = self.conn.transaction().map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        let id = insert(&tx, &m).map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        tx.commit().map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        Ok(id)
    }

    /// Every stored measurement of a subject (matched by name or definition
    /// hash), oldest first.
    pub fn history(&self, subject: &str) -> Result<Vec<Stored>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT id, record FROM measurements WHERE subject_name = ?1 OR definition_hash = ?1 ORDER BY taken_at, id")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![subject], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, record) = row.map_err(|e| self.err(e))?;
            out.push(Stored {
                id,
                measurement: Measurement::from_json(&record)?,
            });
        }
        Ok(out)
    }

    /// Number of stored measurements and samples.
    pub fn counts(&self) -> Result<(i64, i64), StoreError> {
        let m = self
            .conn
            .query_row("SELECT count(*) FROM measurements", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        let s = self
            .conn
            .query_row("SELECT count(*) FROM samples", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        Ok((m, s))
    }
}

fn insert(tx: &rusqlite::Transaction, m: &Measurement) -> Result<i64, rusqlite::Error> {
    let enum_text = |v: String| v.trim_matches('"').to_string();
    tx.execute(
        "INSERT INTO measurements (taken_at, subject_name, definition_hash, inputs_hash, gpu_name, gpu_uuid, method, cache,
             n, median_us, ci_low_us, ci_high_us, record)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            m.taken_at as i64,
            m.subject.name,
            m.subject.definition_hash,
            m.subject.inputs_hash,
            m.environment.gpu_name,
            m.environment.gpu_uuid,
            enum_text(serde_json::to_string(&m.method).unwrap_or_default()),
            enum_text(serde_json::to_string(&m.cache).unwrap_or_default()),
            m.summary.n as i64,
            m.summary.median,
            m.summary.ci_low,
            m.summary.ci_high,
            m.to_json(),
        ],
    )?;
    let id = tx.last_insert_rowid();
    let mut st = tx.prepare(
        "INSERT INTO samples (measurement_id, idx, time_us, sm_mhz, mem_mhz, temperature_c, power_w, throttle_reasons)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for (i, s) in m.samples.iter().enumerate() {
        let c = s.clocks.as_ref();
        st.execute(params![
            id,
            i as i64,
            s.time_us,
            c.map(|c| c.sm_mhz),
            c.map(|c| c.mem_mhz),
            c.map(|c| c.temperature_c),
            c.map(|c| c.power_w),
            c.map(|c| c.throttle_reasons as i64),
        ])?;
    }
    Ok(id)
}

/// Consecutive measurements of one subject on one GPU where the later is
/// slower beyond the noise of both (their intervals of the median do not
/// overlap) and by more than `threshold` (0.02 = 2%).
pub fn regressions(history: &[Stored], threshold: f64) -> Vec<Regression> {
    let mut out = Vec::new();
    for w in history.windows(2) {
        let (a, b) = (&w[0].measurement, &w[1].measurement);
        if a.environment.gpu_uuid != b.environment.gpu_uuid
            || a.subject != b.subject
            || a.cache != b.cache
        {
            continue;
        }
        let ratio = b.summary.median / a.summary.median;
        if fusebench_measure::differ(&a.summary, &b.summary) && ratio > 1.0 + threshold {
            out.push(Regression {
                before: w[0].id,
                after: w[1].id,
                ratio,
            });
        }
    }
    out
}
