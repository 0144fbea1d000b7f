//! Which results `diff` compares: paired by what was measured, compared only
//! when taken the same way on the same GPU (fixtures/README.md).

use fusebench_measure::{Measurement, Method};
use fusebench_report::{diff, load, load_paths, markdown, Across, Entry, Verdict};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn run(name: &str) -> Vec<Entry> {
    load(&fixture(name)).unwrap()
}

/// Every entry's record changed by `f`, as a new entry.
fn changed(entries: &[Entry], f: impl Fn(&mut Measurement)) -> Vec<Entry> {
    entries
        .iter()
        .map(|e| {
            let mut m = e.record.clone().unwrap();
            f(&mut m);
            Entry::from_record(&m, "changed")
        })
        .collect()
}

fn slower(m: &mut Measurement, by: f64) {
    for s in &mut m.samples {
        s.time_us *= by;
    }
    *m = Measurement::from_json(&m.to_json()).unwrap();
}

#[test]
fn cupti_against_events_is_not_comparable_and_never_a_regression() {
    let a = run("corpus-run-1.json");
    // The same fusions timed by events: slower by the launch overhead.
    let b = changed(&run("corpus-run-2.json"), |m| {
        m.method = Method::CudaEvents;
        slower(m, 1.1);
    });
    let d = diff(&a, &b, 0.02, Across::default());
    assert_eq!(d.pairs.len(), 32);
    assert!(d.pairs.iter().all(|p| p.verdict == Verdict::NotComparable));
    assert_eq!(d.regressions().count(), 0);
    assert_eq!(d.compared(), 0);
    assert_eq!(d.refused().count(), 32);
    assert_eq!(
        d.pairs[0].verdict_text(),
        "not comparable: cupti vs cuda_events"
    );
    // Forced, the comparison is made, and the events times are regressions.
    let forced = diff(
        &a,
        &b,
        0.02,
        Across {
            methods: true,
            ..Across::default()
        },
    );
    assert_eq!(forced.compared(), 32);
    assert_eq!(forced.regressions().count(), 32);
}

#[test]
fn a_read_flush_against_a_write_flush_is_not_comparable() {
    let setup = |flush: &'static str| {
        move |m: &mut Measurement| {
            m.cold_setup = Some(format!("{flush} flush of 120 MiB, inputs in 4 placements"));
        }
    };
    let a = changed(&run("corpus-run-1.json"), setup("write"));
    let b = changed(&run("corpus-run-2.json"), setup("read"));
    let d = diff(&a, &b, 0.02, Across::default());
    assert!(d.pairs.iter().all(|p| p.verdict == Verdict::NotComparable));
    assert!(d.pairs[0].verdict_text().contains("write flush of 120 MiB"));
    // The same set-up on both sides compares.
    let c = changed(&run("corpus-run-2.json"), setup("write"));
    let d = diff(&a, &c, 0.02, Across::default());
    assert_eq!(d.compared(), 32);
}

#[test]
fn refused_pairs_are_not_counted_as_compared() {
    let a = run("corpus-run-1.json");
    let mut b = run("corpus-run-2.json");
    for e in b.iter_mut().take(12) {
        e.gpu = "NVIDIA A100-SXM4-80GB".into();
    }
    let d = diff(&a, &b, 0.02, Across::default());
    assert_eq!(d.compared(), 20);
    assert_eq!(d.refused().count(), 12);
    let md = markdown::diff(&d, None);
    assert!(md.contains("20 compared; 12 not compared"), "{md}");
    assert!(
        md.contains("not compared: NVIDIA H200 vs NVIDIA A100-SXM4-80GB"),
        "{md}"
    );
}

#[test]
fn an_old_result_taken_the_same_way_is_preferred() {
    // The old side holds each fusion twice, by events and by CUPTI: the new
    // CUPTI results pair with the CUPTI ones.
    let cupti = run("corpus-run-1.json");
    let events = changed(&cupti, |m| {
        m.method = Method::CudaEvents;
        slower(m, 1.2);
    });
    let old: Vec<Entry> = events.into_iter().chain(cupti).collect();
    let d = diff(&old, &run("corpus-run-2.json"), 0.02, Across::default());
    assert_eq!(d.compared(), 32);
    assert_eq!(d.regressions().count(), 0);
    assert_eq!(d.pairs.len(), 32, "no pair reported missing");
}

#[test]
fn merged_directories_keep_results_taken_different_ways() {
    let dir =
        std::env::temp_dir().join(format!("fusebench-report-merge-how-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("corpus-run-1.json"), dir.join("a.json")).unwrap();
    let events: Vec<Measurement> = changed(&run("corpus-run-2.json"), |m| {
        m.method = Method::CudaEvents;
        m.taken_at += 100_000;
    })
    .into_iter()
    .map(|e| e.record.unwrap())
    .collect();
    std::fs::write(dir.join("b.json"), serde_json::to_string(&events).unwrap()).unwrap();
    let merged = load_paths(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(
        merged.len(),
        64,
        "a later events result does not replace a CUPTI one"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn other_tools_results_say_how_they_were_taken() {
    let nv = run("nvbench_copy.json");
    assert!(
        nv[0].how().starts_with("cuda_events|nvbench's flush"),
        "{}",
        nv[0].how()
    );
    let pb = run("pytest_benchmark.json");
    assert_eq!(pb[0].how(), "host_clock|");
    let gb = run("google_benchmark.json");
    assert_eq!(gb[0].how(), "host_clock|");
    let fb = run("corpus-run-1.json");
    assert_eq!(fb[0].how(), fb[0].record.as_ref().unwrap().how());
    assert_eq!(fb[0].identity, fb[0].record.as_ref().unwrap().what());
}
