//! `fusebench explain` and `fusebench diff` as a user runs them, on recorded
//! results with fields changed where a case needs it (the changed copies are
//! written to a temporary directory).

mod common;
use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn explain_fixture(name: &str) -> String {
    format!("crates/measure/tests/fixtures/explain/{name}.json")
}

fn report_fixture(name: &str) -> String {
    format!("crates/report/tests/fixtures/{name}")
}

fn read(rel: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join(rel)).unwrap()).unwrap()
}

/// A temporary directory for one test.
fn tmp(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fusebench-explain-diff-{}-{test}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p.to_str().unwrap().to_string()
}

/// A record with every sample also timed by events `extra` µs later.
fn with_events(mut r: Value, extra: f64) -> Value {
    for s in r["samples"].as_array_mut().unwrap() {
        s["events_us"] = json!(s["time_us"].as_f64().unwrap() + extra);
    }
    r
}

/// A record as the events method took it: every sample and kernel `add` µs longer.
fn as_events(mut r: Value, add: f64) -> Value {
    r["method"] = json!("cuda_events");
    for s in r["samples"].as_array_mut().unwrap() {
        s["time_us"] = json!(s["time_us"].as_f64().unwrap() + add);
    }
    for k in r["kernels"].as_array_mut().unwrap() {
        k["median_us"] = json!(k["median_us"].as_f64().unwrap() + add);
    }
    r
}

/// A `bench --json` run with every row's record changed by `f`.
fn rows(rel: &str, f: impl Fn(usize, &mut Value)) -> Value {
    let mut v = read(rel);
    for (i, row) in v["rows"].as_array_mut().unwrap().iter_mut().enumerate() {
        f(i, &mut row["record"]);
    }
    v
}

#[test]
fn a_record_against_itself_is_the_same() {
    let a = explain_fixture("seed-cold-1");
    let o = fusebench(&["explain", &a, &a]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("Same: A and B are the same measurement; nothing differs."),
        "{t}"
    );
    assert!(!t.contains("DIFFERS"), "{t}");
    let o = fusebench(&["explain", "--json", &a, &a]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["causes"], json!([]));
    assert_eq!(v["answer"]["kind"], "same");
}

#[test]
fn a_cause_that_cannot_account_for_the_difference_is_not_named() {
    // Only the method differs, but the events overhead (2.3 us, measured on A's
    // own samples) is a third of the 6.8 us difference.
    let dir = tmp("size");
    let base = read(&explain_fixture("seed-cold-1"));
    let a = write(&dir, "a.json", &with_events(base.clone(), 2.3));
    let b = write(&dir, "b.json", &as_events(base, 6.8));
    let o = fusebench(&["explain", &a, &b]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(!t.contains("Most likely cause"), "{t}");
    assert!(t.contains("unexplained: 66% of the difference"), "{t}");
    assert!(t.contains("effect +2.30 us, 34% of the difference"), "{t}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_cause_with_the_largest_share_is_named_not_the_first_in_a_list() {
    // B is timed by events (2.3 us more, measured on A's samples) and has a
    // throttle reason on every sample at unchanged clocks: the clocks differ,
    // but cannot account for any of it.
    let dir = tmp("largest");
    let base = read(&explain_fixture("seed-cold-1"));
    let a = write(&dir, "a.json", &with_events(base.clone(), 2.3));
    let mut b = as_events(base, 2.3);
    for s in b["samples"].as_array_mut().unwrap() {
        s["clocks"]["throttle_reasons"] = json!(4);
    }
    let b = write(&dir, "b.json", &b);
    let o = fusebench(&["explain", &a, &b]);
    let t = text(&o);
    assert!(
        t.contains("Most likely cause: different timing method."),
        "{t}"
    );
    assert!(t.contains("Also differing: clocks or throttling."), "{t}");
    let o = fusebench(&["explain", "--json", &a, &b]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["causes"], json!(["method", "clocks"]));
    let method = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["cause"] == "method")
        .unwrap();
    assert!(
        (method["effect_us"].as_f64().unwrap() - 2.3).abs() < 1e-6,
        "{method}"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// A record of `planted-no-siblings/` (recorded without siblings).
fn planted(name: &str) -> Value {
    read(&format!(
        "crates/measure/tests/fixtures/explain/planted-no-siblings/{name}.json"
    ))
}

/// The sibling the record `r` stands for: its summary, as the harness writes
/// a sibling.
fn sibling_of(r: &Value) -> Value {
    let s = &r["summary"];
    json!({
        "cache": r["cache"],
        "method": r["method"],
        "cold_setup": r["cold_setup"],
        "median_us": s["median"],
        "ci_low_us": s["ci_low"],
        "ci_high_us": s["ci_high"],
        "n": s["n"],
        "kernels_us": r["kernels"].as_array().unwrap().iter().map(|k| k["median_us"].clone()).collect::<Vec<_>>(),
    })
}

#[test]
fn explain_measures_each_cause_from_the_siblings_and_what_they_add_together() {
    // Other kernels timed by events against the base timed by CUPTI; the
    // siblings the harness takes beside each are built here from the records
    // of the same run that were timed those ways.
    let dir = tmp("siblings");
    let mut a = planted("b1-cold");
    a["siblings"] =
        json!(["b1-warm", "b1-cold-events", "b1-warm-events"].map(|n| sibling_of(&planted(n))));
    let mut b = planted("b1-cold-unroll1-events");
    b["siblings"] = json!([sibling_of(&planted("b1-cold-unroll1"))]);
    let median = |r: &Value| r["summary"]["median"].as_f64().unwrap();
    let on_a = median(&planted("b1-cold-events")) - median(&a);
    let on_b = median(&b) - median(&planted("b1-cold-unroll1"));
    let (a, b) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let o = fusebench(&["explain", &a, &b]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("measured: A's sibling (cold, CUDA events) − A"),
        "{t}"
    );
    assert!(t.contains("measured: B's sibling (cold, CUPTI) − A"), "{t}");
    assert!(
        t.contains(&format!(
            "B's method (CUDA events) changes A's kernels by {on_a:+.2} us"
        )) && t.contains(&format!("B's by {on_b:+.2} us")),
        "{t}"
    );
    let o = fusebench(&["explain", "--json", &a, &b]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["causes"], json!(["method", "kernels"]));
    assert_eq!(v["together"][0]["cause"], "kernels");
    assert_eq!(v["answer"]["cause"], "method");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn explain_reports_each_causes_share_in_json() {
    let o = fusebench(&[
        "explain",
        "--json",
        &explain_fixture("seed-cold-1"),
        &explain_fixture("seed-cold-unroll1"),
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["answer"]["kind"], "cause");
    assert_eq!(v["answer"]["cause"], "kernels");
    let k = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["cause"] == "kernels")
        .unwrap();
    // 24.704 us with the other launch configuration against 20.16 us.
    assert!(
        (k["effect_us"].as_f64().unwrap() - 4.544).abs() < 1e-9,
        "{k}"
    );
    assert!((k["share"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{k}");
    assert_eq!(k["basis"]["kind"], "measured");
}

#[test]
fn explain_reads_other_tools_files_and_says_what_they_cannot() {
    let nv = report_fixture("nvbench_copy.json");
    let run = report_fixture("corpus-run-1.json");
    let o = fusebench(&["explain", &nv, &run]);
    assert_eq!(o.status.code(), Some(2), "several results: {}", text(&o));
    assert!(text(&o).contains("choose one with --name"), "{}", text(&o));
    let dir = tmp("tools");
    let rec = read(&run)["rows"][0]["record"].clone();
    let one = write(&dir, "one.json", &rec);
    let o = fusebench(&[
        "explain",
        "--name",
        "bf16_copy [Device=0 Elements=2^24]",
        &nv,
        &one,
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("unknown: nvbench's file does not record the kernels"),
        "{t}"
    );
    assert!(
        t.contains("nvbench's cold time: CUDA events around one launch"),
        "{t}"
    );
    let pb = report_fixture("pytest_benchmark.json");
    let o = fusebench(&["explain", "--name", "test_rmsnorm_small", &pb, &one]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("pytest-benchmark's time: a host clock"), "{t}");
    let o = fusebench(&["explain", &report_fixture("fixtures-missing.json"), &one]);
    assert_eq!(o.status.code(), Some(2));
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"hello\": 1}").unwrap();
    let o = fusebench(&["explain", bad.to_str().unwrap(), &one]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("bad.json"), "{}", text(&o));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn diff_counts_only_the_pairs_it_compared() {
    let dir = tmp("count");
    let b = rows(&report_fixture("corpus-run-2.json"), |i, r| {
        if i < 12 {
            r["environment"]["gpu_name"] = json!("NVIDIA A100-SXM4-80GB");
        }
    });
    let b = write(&dir, "b.json", &b);
    let o = fusebench(&["diff", &report_fixture("corpus-run-1.json"), &b]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("(20 compared)"), "{t}");
    assert!(
        t.contains("12 results measured on different GPUs"),
        "{t}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn diff_with_every_pair_refused_says_so_and_fails() {
    let dir = tmp("refused");
    let b = rows(&report_fixture("corpus-run-2.json"), |_, r| {
        r["environment"]["gpu_name"] = json!("NVIDIA A100-SXM4-80GB");
    });
    let b = write(&dir, "b.json", &b);
    let o = fusebench(&["diff", &report_fixture("corpus-run-1.json"), &b]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("no result was compared: 32 pairs measured on different GPUs"),
        "{t}"
    );
    assert!(o.stdout.is_empty(), "no table before the error: {t}");
    let o = fusebench(&[
        "diff",
        "--across-gpus",
        &report_fixture("corpus-run-1.json"),
        &b,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn cupti_against_events_is_not_comparable_unless_forced() {
    let dir = tmp("methods");
    let b = rows(&report_fixture("corpus-run-2.json"), |_, r| {
        r["method"] = json!("cuda_events");
        for s in r["samples"].as_array_mut().unwrap() {
            s["time_us"] = json!(s["time_us"].as_f64().unwrap() + 2.3);
        }
    });
    let b = write(&dir, "b.json", &b);
    let a = report_fixture("corpus-run-1.json");
    let o = fusebench(&["diff", &a, &b]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "not a regression: {t}");
    assert!(t.contains("32 pairs taken another way"), "{t}");
    assert!(t.contains("not comparable: cupti vs cuda_events"), "{t}");
    let o = fusebench(&["diff", "--across-methods", &a, &b]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains(" beyond the noise"), "{t}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_read_flush_against_a_write_flush_is_not_comparable() {
    let dir = tmp("flush");
    let set_up = |flush: &'static str| {
        move |_: usize, r: &mut Value| {
            r["cold_setup"] = json!(format!("{flush} flush of 120 MiB, inputs in 4 placements"));
        }
    };
    let a = write(
        &dir,
        "a.json",
        &rows(&report_fixture("corpus-run-1.json"), set_up("write")),
    );
    let b = write(
        &dir,
        "b.json",
        &rows(&report_fixture("corpus-run-2.json"), set_up("read")),
    );
    let o = fusebench(&["diff", "--json", &a, &b]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(o.stdout.is_empty(), "{t}");
    let o = fusebench(&["diff", "--json", "--across-methods", &a, &b]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["verdict"] != "not_comparable"));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn diff_prints_no_table_before_an_error() {
    let dir = tmp("empty");
    let (a, b) = (dir.join("old"), dir.join("new"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let o = fusebench(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(o.stdout.is_empty(), "{t}");
    assert!(t.contains("old: holds no results"), "{t}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn report_against_shows_refused_pairs() {
    let dir = tmp("report");
    let b = rows(&report_fixture("corpus-run-2.json"), |i, r| {
        if i == 0 {
            r["method"] = json!("cuda_events");
        }
    });
    let b = write(&dir, "b.json", &b);
    let out = dir.join("r");
    let o = fusebench(&[
        "report",
        "--against",
        &report_fixture("corpus-run-1.json"),
        "--out",
        out.to_str().unwrap(),
        &b,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("not comparable: cupti vs cuda_events"), "{md}");
    assert!(md.contains("31 compared; 1 not compared"), "{md}");
    std::fs::remove_dir_all(dir).ok();
}
