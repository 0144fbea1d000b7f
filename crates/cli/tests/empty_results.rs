//! `report`, `export` and `diff` given no results: a clear error and exit 2,
//! never a hang (a chart of nothing once spun forever on its log axis) and
//! never a table or a file before the error.

mod common;
use common::*;

/// Runs fusebench (killed after 30 s: a hang fails) and checks it refused
/// with exit 2; its stdout and stderr.
fn refused(args: &[&str]) -> (std::process::Output, String) {
    let o = fusebench_within(30, args);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    (o, t)
}

#[test]
fn report_of_an_empty_directory_is_an_error() {
    let dir = tmp_dir("empty", "report");
    let (empty, out) = (dir.join("none"), dir.join("r"));
    std::fs::create_dir_all(&empty).unwrap();
    let (_, t) = refused(&[
        "report",
        empty.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(t.contains("none: holds no results"), "{t}");
    assert!(!out.join("report.md").exists(), "{t}");
    // Against an empty directory likewise.
    let (_, t) = refused(&[
        "report",
        "crates/report/tests/fixtures/corpus-run-1.json",
        "--against",
        empty.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(t.contains("none: holds no results"), "{t}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn report_of_an_empty_list_of_results_is_an_error() {
    let dir = tmp_dir("empty", "report-list");
    let (file, out) = (dir.join("none.json"), dir.join("r"));
    std::fs::write(&file, "[]").unwrap();
    let (_, t) = refused(&[
        "report",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(t.contains("none.json: holds no results"), "{t}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn export_of_nothing_is_an_error() {
    let dir = tmp_dir("empty", "export");
    let (o, t) = refused(&["export", dir.to_str().unwrap(), "--format", "nvbench"]);
    assert!(o.stdout.is_empty(), "{t}");
    assert!(t.contains("holds no results"), "{t}");
    // Results of another tool only: nothing of fusebench's to export.
    let nv = dir.join("nv.json");
    std::fs::write(&nv, r#"{"benchmarks": [], "devices": []}"#).unwrap();
    let (o, t) = refused(&[
        "export",
        nv.to_str().unwrap(),
        "--format",
        "pytest-benchmark",
    ]);
    assert!(o.stdout.is_empty(), "{t}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn diff_of_empty_results_is_an_error_with_no_table() {
    let dir = tmp_dir("empty", "diff");
    let empty = dir.join("none.json");
    std::fs::write(&empty, "[]").unwrap();
    for (old, new) in [
        (
            empty.to_str().unwrap(),
            "crates/report/tests/fixtures/corpus-run-1.json",
        ),
        (
            "crates/report/tests/fixtures/corpus-run-1.json",
            empty.to_str().unwrap(),
        ),
        (dir.to_str().unwrap(), dir.to_str().unwrap()),
    ] {
        let (o, t) = refused(&["diff", old, new]);
        assert!(o.stdout.is_empty(), "no table before the error: {t}");
        assert!(t.contains("holds no results"), "{t}");
    }
    std::fs::remove_dir_all(dir).ok();
}
