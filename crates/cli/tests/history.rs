//! `fusebench history` as a user runs it: exit codes (0 fine, 1 a regression,
//! 2 nothing stored or a database that does not read), regressions found
//! within each kind of record, damaged records skipped with a warning, and a
//! database that is never created or changed by reading it.

mod common;
use common::text;
use fusebench_measure::{CachePolicy, Environment, Measurement, Method, Sample, Stop, Subject};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory of this test's own under the system's temporary one.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fusebench-history-{}-{name}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn history(args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fusebench"));
    c.arg("history").args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("fusebench runs");
    (o.status.code(), text(&o))
}

/// 40 samples around `base` (an interval of the median of about +-0.25%),
/// taken `hour` hours after a fixed time.
fn record(cache: CachePolicy, base: f64, hour: u64, rule: &str) -> Measurement {
    let samples = (0..40)
        .map(|k| Sample::time(base + (k % 5) as f64 * 0.05))
        .collect();
    let mut m = Measurement::new(
        Subject {
            name: "seed.py".into(),
            definition_hash: "d".into(),
            inputs_hash: "i".into(),
            inputs: vec![],
        },
        Method::Cupti,
        cache,
        rule.into(),
        Stop::Count,
        3,
        Environment {
            gpu_name: "NVIDIA H200".into(),
            gpu_uuid: "GPU-1".into(),
            ..Default::default()
        },
        vec![],
        samples,
        1_764_480_000 + hour * 3600,
    )
    .unwrap();
    m.cold_setup = (cache == CachePolicy::Cold).then(|| "write flush of 120 MiB".into());
    m
}

fn save(db: &Path, records: &[Measurement]) {
    let mut store = fusebench_store::Store::open(db).unwrap();
    for m in records {
        store.save(m).unwrap();
    }
}

#[test]
fn a_regression_is_found_among_records_of_its_own_kind() {
    let dir = scratch("kinds");
    let db = dir.join("r.sqlite");
    // Cold and warm records alternate: the 5% slower cold one (id 3) follows a warm one.
    save(
        &db,
        &[
            record(CachePolicy::Cold, 20.0, 0, "r"),
            record(CachePolicy::Warm, 10.0, 1, "r"),
            record(CachePolicy::Cold, 21.0, 2, "r"),
            record(CachePolicy::Warm, 10.02, 3, "r"),
        ],
    );
    let db_arg = db.to_str().unwrap();
    let (code, t) = history(&["seed.py", "--db", db_arg], &[]);
    assert_eq!(code, Some(1), "a regression fails the command: {t}");
    let flagged: Vec<&str> = t.lines().filter(|l| l.contains("REGRESSION")).collect();
    assert_eq!(flagged.len(), 1, "{t}");
    assert!(
        flagged[0].trim_start().starts_with("3 ") && flagged[0].contains("vs id 1"),
        "{t}"
    );
    assert!(
        t.contains("2025-11-30 07:20 UTC") && t.contains("cupti"),
        "{t}"
    );
    let (code, t) = history(&["seed.py", "--db", db_arg, "--threshold", "10%"], &[]);
    assert_eq!(code, Some(0), "5% is under a 10% threshold: {t}");
    let (code, t) = history(&["nothing.py", "--db", db_arg], &[]);
    assert_eq!(code, Some(2), "nothing stored: {t}");
    assert!(t.contains("no stored measurements"), "{t}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_missing_database_exits_two_and_nothing_is_created() {
    let dir = scratch("missing");
    let db = dir.join("none/r.sqlite");
    let (code, t) = history(&["seed.py", "--db", db.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{t}");
    assert!(
        t.contains(&format!("{} does not exist", db.display())),
        "{t}"
    );
    assert!(!dir.join("none").exists(), "no directory made");

    // The default path, from XDG_DATA_HOME.
    let xdg = dir.join("xdg");
    let (code, t) = history(
        &["seed.py"],
        &[("FUSEBENCH_DB", Path::new("")), ("XDG_DATA_HOME", &xdg)],
    );
    assert_eq!(code, Some(2), "{t}");
    assert!(
        t.contains(&xdg.join("fusebench/results.sqlite").display().to_string()),
        "{t}"
    );
    assert!(!xdg.exists(), "no directory made");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_setting_exits_two_naming_it() {
    let dir = scratch("setting");
    let (code, t) = history(
        &["seed.py"],
        &[
            ("FUSEBENCH_FLUHS", Path::new("read")),
            ("XDG_DATA_HOME", &dir.join("xdg")),
        ],
    );
    assert_eq!(code, Some(2), "{t}");
    assert!(
        t.contains("FUSEBENCH_FLUHS is not a fusebench setting"),
        "{t}"
    );
    assert!(!dir.join("xdg").exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_database_that_does_not_read_exits_two_naming_it() {
    let dir = scratch("corrupt");
    let db = dir.join("notes.sqlite");
    std::fs::write(&db, "not a database\n".repeat(50)).unwrap();
    let (code, t) = history(&["seed.py", "--db", db.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{t}");
    assert!(
        t.contains(&db.display().to_string()) && t.contains("not an SQLite database"),
        "{t}"
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        "not a database\n".repeat(50).as_bytes()
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_record_that_does_not_read_is_skipped_with_a_warning() {
    let dir = scratch("skipped");
    let db = dir.join("r.sqlite");
    save(
        &db,
        &[
            record(CachePolicy::Cold, 20.0, 0, "r"),
            record(CachePolicy::Cold, 20.0, 1, "MARKED"),
            record(CachePolicy::Cold, 20.0, 2, "r"),
        ],
    );
    // Record 2 as a newer fusebench would write it: its schema version is the
    // last one before its marked rule in the file (SQLite keeps text as is).
    let mut bytes = std::fs::read(&db).unwrap();
    let marker = bytes
        .windows(8)
        .position(|w| w == b"\"MARKED\"")
        .expect("the marked record is in the file");
    let schema = bytes[..marker]
        .windows(11)
        .rposition(|w| w == b"\"schema\": 2")
        .expect("its schema field precedes it");
    bytes[schema + 10] = b'9';
    std::fs::write(&db, bytes).unwrap();

    let (code, t) = history(&["seed.py", "--db", db.to_str().unwrap()], &[]);
    assert_eq!(code, Some(0), "{t}");
    let warning = format!(
        "warning: results database {}: record 2 skipped: measurement schema version 9",
        db.display()
    );
    assert!(t.contains(&warning), "{t}");
    let ids: Vec<&str> = t
        .lines()
        .filter(|l| l.contains("UTC"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(ids, ["1", "3"], "{t}");
    std::fs::remove_dir_all(&dir).ok();
}
