//! Opening a results database: a file that is not one (another program's
//! SQLite file, a newer layout, text, a truncated copy) is refused with its
//! name and left exactly as it was; reading creates no file.

mod common;

use common::{measurement, snapshot};
use fusebench_store::{Store, StoreError, DB_VERSION};
use std::path::Path;

/// Both opens refuse `path`, naming it, and leave it and its directory as they were.
fn refused_untouched(path: &Path, why: &str) {
    let before = snapshot(path);
    for (how, r) in [
        ("open", Store::open(path).map(drop)),
        ("open_read_only", Store::open_read_only(path).map(drop)),
    ] {
        let e = r.err().unwrap_or_else(|| panic!("{how} accepted it"));
        let text = e.to_string();
        assert!(
            text.contains(&path.display().to_string()),
            "{how}: the error names the file: {text}"
        );
        assert!(text.contains(why), "{how}: {text}");
        assert_eq!(
            snapshot(path),
            before,
            "{how}: same bytes, no file added beside it"
        );
    }
}

#[test]
fn another_programs_sqlite_file_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for wal in [false, true] {
        let path = dir.path().join(format!("app-{wal}.sqlite"));
        let c = rusqlite::Connection::open(&path).unwrap();
        if wal {
            c.pragma_update(None, "journal_mode", "WAL").unwrap();
        }
        c.execute_batch(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);
             INSERT INTO users (name) VALUES ('ada');",
        )
        .unwrap();
        drop(c);
        refused_untouched(&path, "not a fusebench results database");
    }
    // A `meta` table, but not ours; a file of views only.
    for (file, sql) in [
        (
            "meta.sqlite",
            "CREATE TABLE meta (name TEXT, size INTEGER);",
        ),
        ("view.sqlite", "CREATE VIEW answer AS SELECT 42;"),
    ] {
        let path = dir.path().join(file);
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(sql).unwrap();
        drop(c);
        refused_untouched(&path, "not a fusebench results database");
    }
}

#[test]
fn a_newer_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut store = Store::open(&path).unwrap();
    store.save(&measurement("f", &[1.0, 2.0], 1)).unwrap();
    drop(store);
    let newer = DB_VERSION + 1;
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'db_version'",
        [newer.to_string()],
    )
    .unwrap();
    drop(c);
    refused_untouched(
        &path,
        &format!("database version {newer} is newer than this build reads (version {DB_VERSION})"),
    );
}

#[test]
fn a_corrupt_file_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.sqlite");
    std::fs::write(
        &text,
        "these are not the results you are looking for\n".repeat(100),
    )
    .unwrap();
    refused_untouched(&text, "not an SQLite database");

    let short = dir.path().join("short.sqlite");
    std::fs::write(&short, b"SQLite format 3\0\x10\x00").unwrap();
    refused_untouched(&short, "damaged");

    // A real database cut after its first page: the header reads, the tables do not.
    let whole = dir.path().join("whole.sqlite");
    let mut store = Store::open(&whole).unwrap();
    for i in 0..20 {
        store
            .save(&measurement("f", &common::quiet(20.0), i))
            .unwrap();
    }
    drop(store);
    let bytes = std::fs::read(&whole).unwrap();
    assert!(bytes.len() > 8 * 4096, "{} bytes", bytes.len());
    let cut = dir.path().join("cut.sqlite");
    std::fs::write(&cut, &bytes[..4096]).unwrap();
    let before = snapshot(&cut);
    let read = Store::open_read_only(&cut).and_then(|s| s.history("f"));
    let e = read.expect_err("a truncated database is an error");
    assert!(e.to_string().contains("cut.sqlite"), "{e}");
    assert!(Store::open(&cut).is_err(), "refused for writing too");
    assert_eq!(snapshot(&cut), before);
}

#[test]
fn a_missing_or_empty_file_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("new/dir/r.sqlite");
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    for path in [missing, empty] {
        let mut store = Store::open(&path).unwrap();
        store.save(&measurement("f", &[1.0], 1)).unwrap();
        drop(store);
        assert_eq!(Store::open(&path).unwrap().counts().unwrap(), (1, 1));
    }
}

#[test]
fn reading_creates_no_file_or_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere/r.sqlite");
    let e = Store::open_read_only(&missing).err().expect("missing");
    assert!(matches!(e, StoreError::Missing { .. }), "{e:?}");
    assert!(e.to_string().contains("nowhere/r.sqlite"), "{e}");
    assert!(!dir.path().join("nowhere").exists());

    // An empty file holds nothing, and stays empty.
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let before = snapshot(&empty);
    let store = Store::open_read_only(&empty).unwrap();
    assert!(store.history("f").unwrap().records.is_empty());
    assert_eq!(store.counts().unwrap(), (0, 0));
    drop(store);
    assert_eq!(snapshot(&empty), before);

    // A database in WAL mode with no writer: SQLite's read-only flag alone
    // would leave -wal and -shm files beside it.
    let path = dir.path().join("r.sqlite");
    let mut store = Store::open(&path).unwrap();
    store.save(&measurement("f", &[1.0, 2.0], 1)).unwrap();
    drop(store);
    let before = snapshot(&path);
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.history("f").unwrap().records.len(), 1);
    assert_eq!(store.counts().unwrap(), (1, 2));
    drop(store);
    assert_eq!(snapshot(&path), before);
}

#[test]
fn a_reader_sees_what_was_saved_after_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    Store::open(&path)
        .unwrap()
        .save(&measurement("f", &[1.0], 1))
        .unwrap();
    let reader = Store::open_read_only(&path).unwrap();
    assert_eq!(reader.history("f").unwrap().records.len(), 1);
    let mut writer = Store::open(&path).unwrap();
    writer.save(&measurement("f", &[2.0], 2)).unwrap();
    assert_eq!(
        reader.history("f").unwrap().records.len(),
        2,
        "while the writer is open"
    );
    writer.save(&measurement("f", &[3.0], 3)).unwrap();
    drop(writer);
    assert_eq!(
        reader.history("f").unwrap().records.len(),
        3,
        "after the writer closed"
    );
    assert_eq!(reader.counts().unwrap(), (3, 3));
}

/// An SQLite error is said once: the message holds SQLite's text, so the
/// error has no source for a `{:#}` chain to print again.
#[test]
fn an_sqlite_error_is_said_once_with_its_path() {
    // A directory that exists but takes no new file: SQLite itself fails to open.
    let path = Path::new("/proc/self/fusebench-results.db");
    let Err(e) = fusebench_store::Store::open(path) else {
        panic!("{} opened", path.display());
    };
    let mut chain = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        chain.push_str(&format!(": {s}"));
        source = s.source();
    }
    assert!(chain.contains("/proc/self/fusebench-results.db"), "{chain}");
    assert_eq!(chain.matches("results database").count(), 1, "{chain}");
    let first = chain.split(": ").nth(1).unwrap_or_default().to_string();
    assert_eq!(chain.matches(first.as_str()).count(), 1, "said twice: {chain}");
}
