//! `explain` on recorded measurements (fixtures/explain/README.md): each pair
//! differs in one planted way, and explain must name that cause first, as
//! the one that accounts for more than half of the difference.

mod common;
use common::*;

fn load(name: &str) -> Measurement {
    load_from("", name)
}

use fusebench_measure::{explain, Answer, Cause, Measurement, Verdict};

fn first_cause(a: &str, b: &str) -> Cause {
    let (x, y) = (load(a), load(b));
    let e = explain(&x, &y);
    let first = *e
        .causes
        .first()
        .unwrap_or_else(|| panic!("{a} vs {b}: no cause named\n{}", e.render(&x, &y)));
    match e.answer {
        Answer::Cause { cause, share } => {
            assert_eq!(cause, first, "{}", e.render(&x, &y));
            assert!(share > 0.5, "{}", e.render(&x, &y));
        }
        ref other => panic!("{a} vs {b}: {other:?}\n{}", e.render(&x, &y)),
    }
    first
}

#[test]
fn another_launch_configuration_is_named() {
    assert_eq!(
        first_cause("seed-cold-1", "seed-cold-unroll1"),
        Cause::Kernels
    );
}

#[test]
fn a_transposed_input_is_named_before_the_kernels_it_causes() {
    let (a, b) = (load("square-rows"), load("square-columns"));
    let e = explain(&a, &b);
    assert_eq!(e.causes[0], Cause::InputLayout, "{}", e.render(&a, &b));
    let layout = e
        .findings
        .iter()
        .find(|f| f.cause == Cause::InputLayout)
        .unwrap();
    assert!(layout.detail.contains("transposed"), "{}", layout.detail);
    assert!(e.causes.contains(&Cause::Kernels));
}

#[test]
fn warm_against_cold_is_the_cache_policy() {
    assert_eq!(first_cause("seed-cold-1", "seed-warm"), Cause::CachePolicy);
}

#[test]
fn a_working_set_that_fits_in_l2_is_named() {
    let (a, b) = (load("b1-cold"), load("b1-warm"));
    let e = explain(&a, &b);
    assert_eq!(e.causes[0], Cause::WorkingSetVsL2, "{}", e.render(&a, &b));
    assert!(e.ratio < 0.9, "warm data in L2 is read faster: {}", e.ratio);
    // The seed's 67 MB do not fit in the 60 MiB L2: there the policy is the cause.
    let (c, w) = (load("seed-cold-1"), load("seed-warm"));
    let ws = explain(&c, &w)
        .findings
        .into_iter()
        .find(|f| f.cause == Cause::WorkingSetVsL2)
        .unwrap();
    assert_eq!(ws.verdict, Verdict::RuledOut, "{}", ws.detail);
}

#[test]
fn throttled_samples_are_named() {
    let (a, b) = (load("seed-cold-2"), load("seed-cold-throttled"));
    let e = explain(&a, &b);
    assert_eq!(e.causes[0], Cause::Clocks, "{}", e.render(&a, &b));
    assert!(e.render(&a, &b).contains("1410 MHz"));
}

#[test]
fn two_runs_within_noise_are_called_noise() {
    let (a, b) = (load("seed-cold-1"), load("seed-cold-2"));
    let e = explain(&a, &b);
    assert!(!e.beyond_noise);
    assert_eq!(e.causes, vec![Cause::Noise], "{}", e.render(&a, &b));
}

#[test]
fn a_single_sample_cannot_be_judged() {
    let a = load("seed-cold-1");
    let mut b = load("seed-cold-2");
    b.samples.truncate(1);
    let b = Measurement::from_json(&b.to_json()).unwrap();
    assert_eq!(explain(&a, &b).causes, vec![Cause::SingleSample]);
}

#[test]
fn cold_times_prepared_differently_are_the_cache_policy() {
    let (a, b) = (load("seed-cold-write-flush"), load("seed-cold-read-flush"));
    let e = explain(&a, &b);
    assert!(
        e.ratio < 0.9,
        "a read flush leaves no dirty lines to write back: {}",
        e.ratio
    );
    assert_eq!(e.causes[0], Cause::CachePolicy, "{}", e.render(&a, &b));
    let f = e
        .findings
        .iter()
        .find(|f| f.cause == Cause::CachePolicy)
        .unwrap();
    assert!(f.detail.contains("read flush"), "{}", f.detail);
    // Two cold records with the same set-up leave the policy ruled out.
    let (c, d) = (load("seed-cold-1"), load("seed-cold-2"));
    let same = explain(&c, &d);
    let p = same
        .findings
        .iter()
        .find(|f| f.cause == Cause::CachePolicy)
        .unwrap();
    assert_eq!(p.verdict, Verdict::RuledOut, "{}", p.detail);
}

/// The same kernel source compiled by another NVRTC (here: the unroll arm's
/// kernels given the seed's code hashes, as if only the compiler had changed
/// them) is the toolchain's change, and the kernels' time counts under it.
#[test]
fn another_compiler_of_the_same_source_is_named() {
    let (mut a, mut b) = (load("seed-cold-1"), load("seed-cold-unroll1"));
    a.environment.nvrtc = "13.0".into();
    b.environment.nvrtc = "12.9".into();
    for (kb, ka) in b.kernels.iter_mut().zip(&a.kernels) {
        kb.code_hash = ka.code_hash.clone();
    }
    let e = explain(&a, &b);
    assert_eq!(e.causes[0], Cause::Toolchain, "{}", e.render(&a, &b));
    let t = finding(&e, Cause::Toolchain);
    assert!(t.detail.contains("NVRTC 13.0 vs 12.9"), "{}", t.detail);
    assert!(effect(&e, Cause::Toolchain).abs() > 0.0, "{}", e.render(&a, &b));
}

/// Where the source changed too, the kernels keep their change and the
/// compiler's is not measured apart; another library version is named.
#[test]
fn a_compiler_beside_changed_source_leaves_the_kernels_their_change() {
    let (mut a, mut b) = (load("seed-cold-1"), load("seed-cold-unroll1"));
    a.environment.nvrtc = "13.0".into();
    b.environment.nvrtc = "12.9".into();
    a.environment.libraries = "cuBLASLt 130100".into();
    b.environment.libraries = "cuBLASLt 130200".into();
    let e = explain(&a, &b);
    assert_eq!(e.causes[0], Cause::Kernels, "{}", e.render(&a, &b));
    let t = finding(&e, Cause::Toolchain);
    assert_eq!(t.verdict, Verdict::Differs, "{}", t.detail);
    assert!(t.detail.contains("libraries cuBLASLt 130100 vs cuBLASLt 130200"), "{}", t.detail);
    // The same toolchain on both sides is ruled out, saying what was compared.
    let same = explain(&a, &a.clone());
    let t = finding(&same, Cause::Toolchain);
    assert_eq!(t.verdict, Verdict::RuledOut, "{}", t.detail);
    assert!(t.detail.contains("same NVRTC (13.0)") && t.detail.contains("cuBLASLt 130100"), "{}", t.detail);
}
