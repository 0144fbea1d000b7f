//! `explain` over results of other tools (fixtures/README.md): what their
//! files cannot say is reported unknown, with the reason, and the method
//! finding says what each tool's time is.

use fusebench_measure::{explain_sides, Basis, Cause, Explanation, Finding, Verdict};
use fusebench_report::{load, Entry};
use std::path::Path;

fn run(name: &str) -> Vec<Entry> {
    load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

fn finding(e: &Explanation, c: Cause) -> &Finding {
    e.findings.iter().find(|f| f.cause == c).unwrap()
}

#[test]
fn an_nvbench_cold_time_against_a_fusebench_record() {
    let nv = run("nvbench_copy.json");
    let fb = run("corpus-run-1.json");
    // A cold set-up on the fusebench side, as records of this version write it.
    let mut m = fb[0].record.clone().unwrap();
    m.cold_setup =
        Some("write flush of 120 MiB, instruction caches evicted, inputs in 4 placements".into());
    let fb = Entry::from_record(&m, "corpus-run-1.json");
    let (a, b) = (nv[1].side(), fb.side());
    let e = explain_sides(&a, &b);
    let k = finding(&e, Cause::Kernels);
    assert_eq!(k.verdict, Verdict::Unknown);
    assert!(
        k.detail
            .contains("nvbench's file does not record the kernels"),
        "{}",
        k.detail
    );
    for c in [Cause::InputLayout, Cause::Clocks] {
        assert_eq!(finding(&e, c).verdict, Verdict::Unknown, "{c:?}");
        assert!(finding(&e, c).detail.starts_with("unknown: nvbench's file"));
    }
    // Both name the GPU model: the same model is not a difference, but the
    // card and driver are not known.
    let g = finding(&e, Cause::Gpu);
    assert_eq!(g.verdict, Verdict::Unknown, "{}", g.detail);
    let m = finding(&e, Cause::Method);
    assert_eq!(m.verdict, Verdict::Differs);
    assert!(
        m.detail.contains(
            "nvbench's cold time: CUDA events around one launch after nvbench's own L2 flush"
        ),
        "{}",
        m.detail
    );
    assert!(m.detail.contains("CUPTI kernel records"), "{}", m.detail);
    // Both cold, prepared differently: nvbench flushes by a memset of the L2's size.
    let p = finding(&e, Cause::CachePolicy);
    assert_eq!(p.verdict, Verdict::Differs);
    assert!(p.detail.contains("memset of the L2's size"), "{}", p.detail);
    // A record that does not say how it was prepared leaves the set-up unknown.
    let old = explain_sides(&a, &run("corpus-run-1.json")[0].side());
    assert_eq!(finding(&old, Cause::CachePolicy).verdict, Verdict::Unknown);
    // The fusion differs (another benchmark), so nothing is handed the rest alone.
    assert!(e.causes.contains(&Cause::Fusion));
}

#[test]
fn a_pytest_benchmark_time_is_a_host_clock_time() {
    let pb = run("pytest_benchmark.json");
    let (a, b) = (pb[0].side(), pb[1].side());
    let e = explain_sides(&a, &b);
    let m = finding(&e, Cause::Method);
    assert_eq!(m.verdict, Verdict::RuledOut);
    assert!(
        m.detail.contains("pytest-benchmark's time: a host clock"),
        "{}",
        m.detail
    );
    for c in [Cause::CachePolicy, Cause::WorkingSetVsL2] {
        let f = finding(&e, c);
        assert_eq!(f.verdict, Verdict::Unknown, "{c:?}");
        assert!(
            f.detail.contains("does not say what was in L2"),
            "{}",
            f.detail
        );
    }
    let g = finding(&e, Cause::Gpu);
    assert_eq!(g.verdict, Verdict::Unknown);
    assert!(g.detail.contains("names the machine"), "{}", g.detail);
    // Two benchmarks of the file: their names differ, and that is all that is known.
    let f = finding(&e, Cause::Fusion);
    assert_eq!(f.verdict, Verdict::Differs, "{}", f.detail);
    if e.beyond_noise {
        assert_eq!(
            f.basis,
            Basis::Rest {
                why: "not measured separately".into()
            }
        );
    }
    // Against a fusebench record the method differs and is not estimated.
    let fb = run("corpus-run-1.json");
    let e = explain_sides(&pb[0].side(), &fb[0].side());
    let m = finding(&e, Cause::Method);
    assert_eq!(m.verdict, Verdict::Differs);
    assert!(
        matches!(&m.basis, Basis::NotEstimated { why } if why.contains("no record times the same samples both ways")),
        "{:?}",
        m.basis
    );
}

#[test]
fn a_result_against_itself_is_the_same_for_every_tool() {
    for file in [
        "nvbench_copy.json",
        "pytest_benchmark.json",
        "google_benchmark.json",
    ] {
        let e = &run(file)[0];
        let x = explain_sides(&e.side(), &e.side());
        assert_eq!(x.answer, fusebench_measure::Answer::Same, "{file}");
        assert!(x.causes.is_empty(), "{file}: {:?}", x.causes);
    }
}
