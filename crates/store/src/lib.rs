//! The results store: every measurement with its raw samples (and the clock
//! reading of each) in an SQLite database, written in one transaction so a
//! killed run leaves either the whole measurement or none of it.
//!
//! Opening checks the file before changing it (`open.rs`); a stored record
//! that no longer reads is skipped with its reason rather than failing the
//! whole history; regressions compare records of one identity
//! (`regressions.rs`).

mod open;
mod path;
mod regressions;

use fusebench_measure::{MeasureError, Measurement};
use open::{classify, file_kind, invalid, layout, reader, FileKind, Layout, Stamp};
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use thiserror::Error;

pub use path::{default_path, default_path_from};
pub use regressions::{regressions, Regression};

/// Version of the database layout; bump with a migration when it changes.
pub const DB_VERSION: u32 = 1;

#[derive(Error, Debug)]
pub enum StoreError {
    // Not a `source`: its text is in the message already, and a chain printed
    // with `{:#}` would say it again (and its own source a third time).
    #[error("results database {path}: {cause}")]
    Sqlite {
        path: String,
        cause: rusqlite::Error,
    },
    #[error("results database {path}: {message}")]
    Invalid { path: String, message: String },
    #[error("results database {path} does not exist: nothing has been saved there")]
    Missing { path: String },
    #[error(transparent)]
    Measurement(#[from] MeasureError),
    #[error("no place for the results database: set FUSEBENCH_DB, XDG_DATA_HOME or HOME")]
    NoPath,
    /// The `FUSEBENCH_*` settings do not validate (the settings' own message).
    #[error("{0}")]
    Settings(String),
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    name: String,
    /// Set when an idle WAL database is read as an immutable file: the file as
    /// it was then. A read that finds it changed is done again with locks.
    quiet: Option<Stamp>,
}

/// A stored measurement and its row id.
#[derive(Clone, Debug)]
pub struct Stored {
    pub id: i64,
    pub measurement: Measurement,
}

/// A stored record that could not be read, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    pub id: i64,
    pub reason: String,
}

/// The stored measurements of a subject, oldest first, and the records of it
/// that were skipped because they do not read (damaged, or written by a newer
/// fusebench).
#[derive(Clone, Debug, Default)]
pub struct History {
    pub records: Vec<Stored>,
    pub skipped: Vec<Skipped>,
}

const SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE measurements (
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
CREATE INDEX measurements_subject ON measurements (definition_hash, inputs_hash, gpu_uuid, taken_at);
CREATE TABLE samples (
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
    /// Opens the database at `path` for writing, creating it (and its
    /// directory) when missing or empty. An existing file is read first and
    /// refused untouched when it is not SQLite, not a results database, or of
    /// a newer layout version.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let name = path.display().to_string();
        let kind = file_kind(path, &name)?;
        let found = match kind {
            FileKind::Missing | FileKind::Empty => Layout::Empty,
            FileKind::Rollback | FileKind::Wal => {
                Store::reading(path, name.clone(), kind)?.layout()?
            }
        };
        if kind == FileKind::Missing {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| invalid(&name, format!("creating {}: {e}", dir.display())))?;
            }
        }
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(&name, e))?;
        if found == Layout::Empty {
            // Checked again under the write lock: another process may have
            // set the file up since it was read.
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| classify(&name, e))?;
            if layout(&tx, &name)? == Layout::Empty {
                tx.execute_batch(SCHEMA)
                    .and_then(|()| {
                        tx.execute(
                            "INSERT INTO meta (key, value) VALUES ('db_version', ?1)",
                            params![DB_VERSION.to_string()],
                        )
                    })
                    .map_err(|e| classify(&name, e))?;
            }
            tx.commit().map_err(|e| classify(&name, e))?;
        }
        // WAL keeps readers working while a run writes, and survives a kill.
        conn.pragma_update(None, "journal_mode", "WAL")
            .and_then(|()| conn.pragma_update(None, "foreign_keys", "ON"))
            .map_err(|e| classify(&name, e))?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            name,
            quiet: None,
        })
    }

    /// Opens the database at `path` for reading only: no file or directory is
    /// created, and nothing in the file changes. A missing file is
    /// [`StoreError::Missing`]; the file is checked as [`Store::open`] does.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let name = path.display().to_string();
        let kind = file_kind(path, &name)?;
        if kind == FileKind::Missing {
            return Err(StoreError::Missing { path: name });
        }
        let store = Store::reading(path, name, kind)?;
        store.layout()?;
        Ok(store)
    }

    /// A store that only reads `path`, before its layout is checked.
    fn reading(path: &Path, name: String, kind: FileKind) -> Result<Store, StoreError> {
        let (conn, quiet) = reader(path, kind, &name)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            name,
            quiet,
        })
    }

    /// What the file holds now: [`Layout::Empty`] for an empty file opened
    /// read-only, which has no tables to read.
    fn layout(&self) -> Result<Layout, StoreError> {
        self.read(|c| Ok(layout(c, &self.name)))?
    }

    /// Opens the database at the default per-user path for writing.
    pub fn open_default() -> Result<Store, StoreError> {
        Store::open(&default_path()?)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        classify(&self.name, e)
    }

    /// Runs a read. On a database read as an immutable file, a writer that
    /// came meanwhile may have changed what was read, so the read is done
    /// again with SQLite's locks (a few times, should writers keep coming).
    fn read<T>(&self, f: impl Fn(&Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        let first = f(&self.conn);
        let Some(stamp) = &self.quiet else {
            return first.map_err(|e| self.err(e));
        };
        if Stamp::of(&self.path).as_ref() == Some(stamp) {
            return first.map_err(|e| self.err(e));
        }
        for _ in 0..3 {
            let (conn, quiet) = reader(&self.path, FileKind::Wal, &self.name)?;
            let r = f(&conn);
            if quiet.is_none() || Stamp::of(&self.path) == quiet {
                return r.map_err(|e| self.err(e));
            }
        }
        Err(invalid(
            &self.name,
            "kept changing while being read; try again",
        ))
    }

    /// Saves a measurement and all its samples in one transaction. A record
    /// that does not hold up (no samples, a bad sample) is refused.
    pub fn save(&mut self, m: &Measurement) -> Result<i64, StoreError> {
        // Re-derive from the samples: what is stored is valid by construction.
        let m = Measurement::from_json(&m.to_json())?;
        let tx = self
            .conn
            .transaction()
            .map_err(|e| classify(&self.name, e))?;
        let id = insert(&tx, &m).map_err(|e| classify(&self.name, e))?;
        tx.commit().map_err(|e| classify(&self.name, e))?;
        Ok(id)
    }

    /// Every stored measurement of a subject (matched by name or definition
    /// hash), oldest first. A record that does not read is skipped and said,
    /// so one damaged row does not hide the rest.
    pub fn history(&self, subject: &str) -> Result<History, StoreError> {
        if self.layout()? == Layout::Empty {
            return Ok(History::default());
        }
        let rows = self.read(|c| {
            let mut st = c.prepare(
                "SELECT id, record FROM measurements WHERE subject_name = ?1 OR definition_hash = ?1
                 ORDER BY taken_at, id",
            )?;
            let rows = st.query_map(params![subject], |r| {
                Ok((r.get::<_, i64>(0)?, record_text(r.get_ref(1)?)))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        let mut out = History::default();
        for (id, text) in rows {
            match text.and_then(|t| Measurement::from_json(&t).map_err(|e| e.to_string())) {
                Ok(measurement) => out.records.push(Stored { id, measurement }),
                Err(reason) => out.skipped.push(Skipped { id, reason }),
            }
        }
        Ok(out)
    }

    /// Number of stored measurements and samples.
    pub fn counts(&self) -> Result<(i64, i64), StoreError> {
        if self.layout()? == Layout::Empty {
            return Ok((0, 0));
        }
        self.read(|c| {
            let m = c.query_row("SELECT count(*) FROM measurements", [], |r| r.get(0))?;
            let s = c.query_row("SELECT count(*) FROM samples", [], |r| r.get(0))?;
            Ok((m, s))
        })
    }
}

/// The `record` column as text, or why it is not.
fn record_text(v: ValueRef) -> Result<String, String> {
    let what = match v {
        ValueRef::Text(t) => {
            return String::from_utf8(t.to_vec()).map_err(|_| "the record is not UTF-8 text".into())
        }
        ValueRef::Null => "empty",
        ValueRef::Integer(_) | ValueRef::Real(_) => "a number",
        ValueRef::Blob(_) => "binary data",
    };
    Err(format!("the record is {what}, not JSON text"))
}

fn insert(tx: &rusqlite::Transaction, m: &Measurement) -> Result<i64, rusqlite::Error> {
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
            m.method.name(),
            m.cache.name(),
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
