//! Readers, writers, diff and reports on recorded results (fixtures/README.md).

use fusebench_report::formats::{nvbench, pytest_benchmark};
use fusebench_report::{diff, load, load_paths, markdown, svg, Across, Verdict};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn records() -> Vec<fusebench_measure::Measurement> {
    load(&fixture("corpus-run-1.json"))
        .unwrap()
        .into_iter()
        .map(|e| e.record.expect("fusebench results carry their record"))
        .collect()
}

/// A summary's value in an nvbench state, by tag (nvbench writes numbers as strings).
fn nvbench_summary(state: &serde_json::Value, tag: &str) -> f64 {
    let s = state["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["tag"] == tag)
        .unwrap_or_else(|| panic!("{tag} missing"));
    let d = &s["data"][0]["value"];
    d.as_f64()
        .or_else(|| d.as_str().and_then(|x| x.parse().ok()))
        .unwrap()
}

/// `doc` written to `path` and read back as fusebench records.
fn read_back(doc: &serde_json::Value, path: &Path) -> Vec<fusebench_measure::Measurement> {
    std::fs::write(path, doc.to_string()).unwrap();
    load(path)
        .unwrap()
        .into_iter()
        .map(|e| e.record.unwrap())
        .collect()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fusebench-report-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn two_runs_of_one_build_have_no_regression() {
    let (a, b) = (
        load(&fixture("corpus-run-1.json")).unwrap(),
        load(&fixture("corpus-run-2.json")).unwrap(),
    );
    assert_eq!(a.len(), 32);
    let d = diff(&a, &b, 0.02, Across::default());
    assert_eq!(d.pairs.len(), 32);
    assert_eq!(
        d.regressions().count(),
        0,
        "{:#?}",
        d.regressions().collect::<Vec<_>>()
    );
    assert!(d.pairs.iter().all(|p| p.ratio > 0.98 && p.ratio < 1.02));
}

#[test]
fn one_fusion_five_percent_slower_is_the_one_regression() {
    let (a, b) = (
        load(&fixture("corpus-run-1.json")).unwrap(),
        load(&fixture("corpus-run-2-029-slower.json")).unwrap(),
    );
    let d = diff(&a, &b, 0.02, Across::default());
    let r: Vec<&str> = d.regressions().map(|p| p.name.as_str()).collect();
    assert_eq!(r, ["029_pythia-1b_bw_nvFusion6.py"]);
    // Below the threshold the same change is reported, not failed.
    let d = diff(&a, &b, 0.10, Across::default());
    assert_eq!(d.regressions().count(), 0);
    let p = d.pairs.iter().find(|p| p.name.starts_with("029")).unwrap();
    assert_eq!(p.verdict, Verdict::Slower);
}

#[test]
fn results_of_another_gpu_are_refused_unless_asked() {
    let a = load(&fixture("corpus-run-1.json")).unwrap();
    let mut b = load(&fixture("corpus-run-2.json")).unwrap();
    for e in &mut b {
        e.gpu = "NVIDIA A100-SXM4-80GB".into();
    }
    let d = diff(&a, &b, 0.02, Across::default());
    assert!(d.pairs.iter().all(|p| p.verdict == Verdict::DifferentGpu));
    let d = diff(
        &a,
        &b,
        0.02,
        Across {
            gpus: true,
            ..Across::default()
        },
    );
    assert!(d.pairs.iter().all(|p| p.verdict != Verdict::DifferentGpu));
}

#[test]
fn partial_runs_merge_with_the_latest_result_winning() {
    // The full run, then a rerun of one fusion: the merged set has every fusion once, 029 from the rerun.
    let dir = tmp("merge");
    let mut one = serde_json::from_str::<serde_json::Value>(
        &std::fs::read_to_string(fixture("corpus-run-2-029-slower.json")).unwrap(),
    )
    .unwrap();
    let rows: Vec<serde_json::Value> = one["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["file"].as_str().unwrap().starts_with("029"))
        .cloned()
        .collect();
    let mut rerun = rows[0].clone();
    rerun["record"]["taken_at"] =
        serde_json::json!(rerun["record"]["taken_at"].as_u64().unwrap() + 100_000);
    one["rows"] = serde_json::json!([rerun]);
    std::fs::copy(fixture("corpus-run-1.json"), dir.join("a.json")).unwrap();
    std::fs::write(dir.join("b.json"), one.to_string()).unwrap();
    let merged = load_paths(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(merged.len(), 32);
    let base = load(&fixture("corpus-run-1.json")).unwrap();
    let d = diff(&base, &merged, 0.02, Across::default());
    let r: Vec<&str> = d.regressions().map(|p| p.name.as_str()).collect();
    assert_eq!(r, ["029_pythia-1b_bw_nvFusion6.py"]);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn nvbench_round_trip_keeps_every_number() {
    let recs = records();
    let doc = nvbench::write(&recs);
    // The summaries nvbench's own tools read: GPU time in seconds, sample count.
    let v = nvbench_summary(&doc["benchmarks"][0]["states"][0], "nv/cold/time/gpu/mean");
    assert!((v * 1e6 - recs[0].summary.mean).abs() < 1e-9 * recs[0].summary.mean.max(1.0));
    let dir = tmp("nvbench");
    let p = dir.join("nvbench.json");
    assert_eq!(read_back(&doc, &p), recs);
    // Without fusebench's own record, as nvbench itself writes it: median, noise and count are read.
    let mut plain = doc.clone();
    for b in plain["benchmarks"].as_array_mut().unwrap() {
        let sums = b["states"][0]["summaries"].as_array_mut().unwrap();
        sums.retain(|s| s["tag"] != "fusebench/record");
    }
    std::fs::write(&p, plain.to_string()).unwrap();
    let entries = load(&p).unwrap();
    assert_eq!(entries.len(), recs.len());
    assert!((entries[0].median_us - recs[0].summary.median).abs() < 1e-6);
    assert_eq!(entries[0].n, recs[0].summary.n);
    assert_eq!(entries[0].gpu, "NVIDIA H200");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn pytest_benchmark_round_trip_keeps_every_number() {
    let recs = records();
    let doc = pytest_benchmark::write(&recs);
    let st = &doc["benchmarks"][0]["stats"];
    assert_eq!(st["rounds"], recs[0].summary.n);
    assert_eq!(st["data"].as_array().unwrap().len(), recs[0].samples.len());
    assert!((st["median"].as_f64().unwrap() * 1e6 - recs[0].summary.median).abs() < 1e-6);
    let dir = tmp("pytest");
    assert_eq!(read_back(&doc, &dir.join("pb.json")), recs);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_file_pytest_benchmark_wrote_is_read() {
    let e = load(&fixture("pytest_benchmark.json")).unwrap();
    assert_eq!(e.len(), 2);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("pytest_benchmark.json")).unwrap())
            .unwrap();
    for (entry, b) in e.iter().zip(v["benchmarks"].as_array().unwrap()) {
        assert_eq!(entry.name, b["name"].as_str().unwrap());
        assert_eq!(entry.n, b["stats"]["data"].as_array().unwrap().len());
        let median_us = b["stats"]["median"].as_f64().unwrap() * 1e6;
        assert!(
            (entry.median_us - median_us).abs() < 1e-6 * median_us,
            "{} vs {median_us}",
            entry.median_us
        );
    }
}

#[test]
fn a_file_nvbench_wrote_is_read() {
    let path = fixture("nvbench_copy.json");
    let e = load(&path).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let bench = &v["benchmarks"][0];
    let states = bench["states"].as_array().unwrap();
    assert_eq!(e.len(), states.len(), "one entry per state");
    for (entry, st) in e.iter().zip(states) {
        assert_eq!(
            entry.name,
            format!("bf16_copy [{}]", st["name"].as_str().unwrap())
        );
        assert_eq!(entry.gpu, "NVIDIA H200");
        assert_eq!(entry.n, nvbench_summary(st, "nv/cold/sample_size") as usize);
        let median_us = nvbench_summary(st, "nv/cold/time/gpu/median") * 1e6;
        assert!((entry.median_us - median_us).abs() < 1e-9 * median_us);
        assert!(entry.ci_low_us < entry.median_us && entry.median_us < entry.ci_high_us);
    }
    // 2^24 bf16 elements copied (64 MiB moved) take longer than 2^20.
    assert!(
        e[1].median_us > 3.0 * e[0].median_us,
        "{} vs {}",
        e[1].median_us,
        e[0].median_us
    );
    // A file compared with itself has no regression.
    let d = diff(&e, &e, 0.02, Across::default());
    assert_eq!(d.regressions().count(), 0);
}

#[test]
fn a_file_google_benchmark_wrote_is_read() {
    let e = load(&fixture("google_benchmark.json")).unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].name, "rmsnorm_4096");
    assert_eq!(e[0].n, 3, "one sample per repetition, aggregates skipped");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("google_benchmark.json")).unwrap())
            .unwrap();
    let mut t: Vec<f64> = v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["run_type"] == "iteration")
        .map(|b| b["real_time"].as_f64().unwrap() / 1e3)
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert!((e[0].median_us - t[1]).abs() < 1e-9);
}

#[test]
fn unknown_files_are_refused_with_what_is_supported() {
    let dir = tmp("unknown");
    let p = dir.join("x.json");
    std::fs::write(&p, r#"{"hello": 1}"#).unwrap();
    let e = load(&p).unwrap_err().to_string();
    assert!(
        e.contains("x.json") && e.contains("supported: fusebench records"),
        "{e}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn reports_render_for_a_corpus_run_and_a_diff() {
    let dir = tmp("render");
    let a = load(&fixture("corpus-run-1.json")).unwrap();
    let b = load(&fixture("corpus-run-2-029-slower.json")).unwrap();
    svg::times(&a, &dir.join("times.svg")).unwrap();
    let t = std::fs::read_to_string(dir.join("times.svg")).unwrap();
    assert!(
        t.starts_with("<svg") && t.matches("<circle").count() >= a.len(),
        "one point per fusion"
    );
    let md = markdown::run(&a, Some(3100.0), Some("times.svg"));
    assert_eq!(
        md.matches("\n| 0").count() + md.matches("\n| seed").count(),
        a.len()
    );
    // A record with its own ceiling shows that, timed beside it, whatever bandwidth is given;
    // without one, the share is of the given bandwidth, and marked as not measured alike.
    let mut planted = load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../measure/tests/fixtures/explain/planted/seed-cold.json"
    )))
    .unwrap();
    let own = planted[0]
        .record
        .as_ref()
        .unwrap()
        .pct_of_ceiling()
        .unwrap();
    let md = markdown::run(&planted, Some(3100.0), None);
    assert!(
        md.contains(&format!("| {own:.0}% |")) && !md.contains('†'),
        "{md}"
    );
    planted[0].record.as_mut().unwrap().ceiling = None;
    let md = markdown::run(&planted, Some(3100.0), None);
    assert!(
        md.contains("%† |") && md.contains("† of the given copy bandwidth"),
        "{md}"
    );
    let d = diff(&a, &b, 0.02, Across::default());
    svg::diff(&d, &dir.join("diff.svg")).unwrap();
    let md = markdown::diff(&d, Some("diff.svg"));
    assert!(
        md.contains("| 029_pythia-1b_bw_nvFusion6.py |")
            && md.contains("**regression**")
            && md.contains("1 regression."),
        "{md}"
    );
    std::fs::remove_dir_all(dir).ok();
}
