//! Opening a results database without changing anything it should not: the
//! file is read and its layout checked before any write, a file that is not
//! ours (or is newer) is left exactly as it was, and reading creates no file.

use crate::{StoreError, DB_VERSION};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension};
use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

/// What is at the database's path, judged from the file alone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum FileKind {
    Missing,
    /// Zero bytes: SQLite takes it as an empty database.
    Empty,
    /// An SQLite file with a rollback journal.
    Rollback,
    /// An SQLite file in write-ahead-log mode (how this store keeps its own).
    Wal,
}

/// What an SQLite file holds, read without changing it.
#[derive(Debug, PartialEq)]
pub(crate) enum Layout {
    /// Nothing at all (no table, view, index or trigger): ours to set up.
    Empty,
    /// A results database of this build's layout version.
    Current,
}

/// The start of every SQLite database file (the file format's header string).
const MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// SQLite's header is 100 bytes; a shorter file cannot be a database.
const HEADER_BYTES: usize = 100;

pub(crate) fn invalid(name: &str, message: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        path: name.to_string(),
        message: message.into(),
    }
}

/// Looks at the file's header only, so that a text file or a truncated one is
/// refused before SQLite is involved.
pub(crate) fn file_kind(path: &Path, name: &str) -> Result<FileKind, StoreError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileKind::Missing),
        Err(e) => return Err(invalid(name, e.to_string())),
    };
    if meta.is_dir() {
        return Err(invalid(name, "is a directory, not a database file"));
    }
    if meta.len() == 0 {
        return Ok(FileKind::Empty);
    }
    let mut head = Vec::with_capacity(HEADER_BYTES);
    std::fs::File::open(path)
        .and_then(|f| f.take(HEADER_BYTES as u64).read_to_end(&mut head))
        .map_err(|e| invalid(name, e.to_string()))?;
    let prefix = head.len().min(MAGIC.len());
    if head[..prefix] != MAGIC[..prefix] {
        return Err(invalid(name, "not an SQLite database (no SQLite header)"));
    }
    if head.len() < HEADER_BYTES {
        return Err(invalid(
            name,
            format!(
                "damaged: {} bytes, shorter than an SQLite header",
                head.len()
            ),
        ));
    }
    // Bytes 18 and 19 are the write and read format versions: 2 means WAL.
    Ok(if head[19] == 2 {
        FileKind::Wal
    } else {
        FileKind::Rollback
    })
}

/// A cheap fingerprint of the database file and whether a write-ahead log is
/// beside it: unchanged across a read means no writer touched the file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    wal: bool,
}

impl Stamp {
    pub(crate) fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            wal: Path::new(&format!("{}-wal", path.display())).exists(),
        })
    }
}

/// A connection that reads and never creates a file.
///
/// SQLite's read-only flag is not enough for a WAL database: when its `-wal`
/// and `-shm` files are absent, a read-only connection creates them and, not
/// being allowed to checkpoint, leaves them behind. Absent files mean no
/// connection is using the database and every committed write is in the main
/// file, so it is read directly as an immutable file (no locks, no side
/// files); the returned stamp lets the caller check that no writer arrived
/// while it read. With the side files present, SQLite's usual locking is used.
pub(crate) fn reader(
    path: &Path,
    kind: FileKind,
    name: &str,
) -> Result<(Connection, Option<Stamp>), StoreError> {
    let quiet = match kind {
        FileKind::Wal => Stamp::of(path).filter(|s| !s.wal),
        _ => None,
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = match quiet {
        Some(_) => Connection::open_with_flags(immutable_uri(path), flags),
        None => Connection::open_with_flags(path, flags),
    }
    .map_err(|e| classify(name, e))?;
    Ok((conn, quiet))
}

/// `file:PATH?immutable=1` with the path percent-encoded, as SQLite's URI
/// syntax needs for `?`, `#` and `%` in file names.
fn immutable_uri(path: &Path) -> String {
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().replace('\\', "/").into_bytes();
    let mut uri = String::from("file:");
    for b in bytes {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?mode=ro&immutable=1");
    uri
}

/// An SQLite error with the file named, and the two that mean the file itself
/// is bad said in words.
pub(crate) fn classify(name: &str, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => invalid(name, "not an SQLite database"),
        Some(ErrorCode::DatabaseCorrupt) => invalid(name, format!("damaged: {e}")),
        _ => StoreError::Sqlite {
            path: name.to_string(),
            cause: e,
        },
    }
}

/// Reads what the file holds; writes nothing.
pub(crate) fn layout(conn: &Connection, name: &str) -> Result<Layout, StoreError> {
    let objects: Vec<(String, String)> = conn
        .prepare("SELECT type, name FROM sqlite_master ORDER BY name")
        .and_then(|mut st| st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(|e| classify(name, e))?;
    // Empty only when it holds nothing at all: a file with only views or
    // triggers is someone else's too.
    if objects.is_empty() {
        return Ok(Layout::Empty);
    }
    let named = |kinds: &[&str]| -> Vec<&str> {
        objects
            .iter()
            .filter(|(kind, _)| kinds.contains(&kind.as_str()))
            .map(|(_, name)| name.as_str())
            .collect()
    };
    let tables = named(&["table"]);
    let foreign = |why: &str| {
        invalid(
            name,
            format!(
                "not a fusebench results database ({why}; it holds {}); left untouched",
                named(&["table", "view"]).join(", ")
            ),
        )
    };
    if !tables.contains(&"meta") {
        return Err(foreign("no meta table"));
    }
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('meta')")
        .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| classify(name, e))?;
    if !["key", "value"]
        .iter()
        .all(|c| columns.iter().any(|n| n == c))
    {
        return Err(foreign("its meta table is not ours"));
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT CAST(value AS TEXT) FROM meta WHERE key = 'db_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| classify(name, e))?;
    let Some(version) = version else {
        return Err(foreign("its meta table has no db_version"));
    };
    let v = version
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| invalid(name, format!("unreadable db_version {version:?}")))?;
    if v > DB_VERSION {
        return Err(invalid(
            name,
            format!(
                "database version {v} is newer than this build reads (version {DB_VERSION}); \
                 left untouched: read it with the fusebench that wrote it, or a newer one"
            ),
        ));
    }
    if v < DB_VERSION {
        // Only reachable once DB_VERSION is bumped: until that bump comes with
        // a migration, an older database is refused rather than misread.
        return Err(invalid(
            name,
            format!("database version {v} is older than this build's ({DB_VERSION}) and has no migration; left untouched"),
        ));
    }
    for needed in ["measurements", "samples"] {
        if !tables.contains(&needed) {
            return Err(foreign(&format!("no {needed} table")));
        }
    }
    Ok(Layout::Current)
}
