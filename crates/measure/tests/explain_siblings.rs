//! Each sibling-measured estimate's arithmetic, on H200 records recorded
//! without siblings (fixtures/explain/planted-no-siblings): the siblings are
//! built here from the other records of the same run (`Sibling::of` the arm
//! that was timed that way), so every expected number is a difference of two
//! recorded medians, worked out here independently of explain. The records
//! as recorded, without siblings, check the fallbacks to the models.

mod common;
use common::*;

fn load(name: &str) -> Measurement {
    load_from("planted-no-siblings", name)
}

use fusebench_measure::explain::Together;
use fusebench_measure::{explain, Answer, Basis, Cause, Explanation, Measurement, Sibling};

fn median(name: &str) -> f64 {
    load(name).summary.median
}

/// `name` with the records `others` as its siblings (built here: each record
/// stands for the sibling that would have been timed its way).
fn with_siblings(name: &str, others: &[&str]) -> Measurement {
    let mut m = load(name);
    m.siblings = others.iter().map(|o| Sibling::of(&load(o))).collect();
    m
}

/// A cold CUPTI base with the three siblings the harness takes beside it.
fn base(size: &str) -> Measurement {
    with_siblings(
        &format!("{size}-cold"),
        &[
            &format!("{size}-warm"),
            &format!("{size}-cold-events"),
            &format!("{size}-warm-events"),
        ],
    )
}

fn measured_from(e: &Explanation, c: Cause) -> String {
    match &finding(e, c).basis {
        Basis::Measured { from } => from.clone(),
        other => panic!("{c:?}: {other:?}"),
    }
}

fn together(e: &Explanation, c: Cause) -> &Together {
    e.together
        .iter()
        .find(|t| t.cause == c)
        .unwrap_or_else(|| panic!("no together term under {c:?}: {:#?}", e.together))
}

/// The causes are ordered by share, and the answer names the first when its
/// share is above half.
fn ordered(e: &Explanation) {
    let shares: Vec<f64> = e
        .causes
        .iter()
        .map(|c| finding(e, *c).share.unwrap_or(f64::NEG_INFINITY))
        .collect();
    assert!(shares.windows(2).all(|w| w[0] >= w[1]), "{shares:?}");
    if shares[0] > 0.5 {
        assert_eq!(
            e.answer,
            Answer::Cause {
                cause: e.causes[0],
                share: shares[0]
            }
        );
    }
}

#[test]
fn other_kernels_under_another_policy_are_each_measured_at_a_s_conditions() {
    let a = base("b1");
    let b = with_siblings(
        "b1-warm-unroll1",
        &["b1-cold-unroll1", "b1-cold-unroll1-events"],
    );
    let e = explain(&a, &b);
    let text = e.render(&a, &b);
    // The kernels: B's cold CUPTI sibling less A, what the kernels-only arm measures.
    let kernels = median("b1-cold-unroll1") - median("b1-cold");
    assert!(close(effect(&e, Cause::Kernels), kernels), "{text}");
    assert_eq!(
        measured_from(&e, Cause::Kernels),
        "B's sibling (cold, CUPTI) − A"
    );
    // The policy: A's warm sibling less A, counted under working set vs L2 (17 MB fit in L2).
    let policy = median("b1-warm") - median("b1-cold");
    assert!(close(effect(&e, Cause::WorkingSetVsL2), policy), "{text}");
    assert_eq!(
        measured_from(&e, Cause::WorkingSetVsL2),
        "A's sibling (warm, CUPTI) − A"
    );
    assert_eq!(
        finding(&e, Cause::CachePolicy).basis,
        Basis::CountedUnder {
            cause: Cause::WorkingSetVsL2
        }
    );
    // What warm L2 does to B's kernels beyond what it does to A's.
    let on_b = median("b1-warm-unroll1") - median("b1-cold-unroll1");
    let t = together(&e, Cause::Kernels);
    assert!(close(t.effect_us, on_b - policy), "{text}");
    assert!(
        t.detail
            .contains(&format!("A's kernels by {policy:+.2} us"))
            && t.detail.contains(&format!("B's by {on_b:+.2} us")),
        "{}",
        t.detail
    );
    let (lo, hi) = (t.low_us.unwrap(), t.high_us.unwrap());
    assert!(lo < t.effect_us && t.effect_us < hi, "{lo} {hi}");
    // Every part of B − A is measured: nothing is left over.
    assert!(e.remainder_us.abs() < 1e-9, "{text}");
    assert!(text.contains("Together: "), "{text}");
    assert!(
        text.contains("measured: B's sibling (cold, CUPTI) − A"),
        "{text}"
    );
    adds_up(&e);
    ordered(&e);
}

#[test]
fn the_policy_and_the_method_add_what_they_do_together_on_a_s_subject() {
    let a = base("b1");
    // B a little slower than A's warm events sibling: a drift between the runs.
    let mut b = load("b1-warm-events");
    for s in &mut b.samples {
        s.time_us += 0.3;
    }
    let b = Measurement::from_json(&b.to_json()).unwrap();
    let e = explain(&a, &b);
    let text = e.render(&a, &b);
    let (cold, warm) = (median("b1-cold"), median("b1-warm"));
    let (cold_ev, warm_ev) = (median("b1-cold-events"), median("b1-warm-events"));
    assert!(close(effect(&e, Cause::Method), cold_ev - cold), "{text}");
    assert_eq!(
        measured_from(&e, Cause::Method),
        "A's sibling (cold, CUDA events) − A"
    );
    assert!(
        close(effect(&e, Cause::WorkingSetVsL2), warm - cold),
        "{text}"
    );
    // The method's cost under warm L2 against under cold, on A's subject.
    let t = together(&e, Cause::WorkingSetVsL2);
    assert!(
        close(t.effect_us, (warm_ev - warm) - (cold_ev - cold)),
        "{text}"
    );
    // What is left is B against A's sibling timed B's way: the drift, said as such.
    assert!(close(e.remainder_us, b.summary.median - warm_ev), "{text}");
    let runs = e.remainder_detail.as_deref().unwrap_or_default();
    assert!(
        runs.starts_with("two runs of the same subject timed the same way")
            && runs.contains(&format!("A's sibling (warm, CUDA events) {warm_ev:.2} us")),
        "{text}"
    );
    adds_up(&e);
    ordered(&e);
    // Warm L2 undid most of what the method added: the method's share is
    // above the whole difference, and the answer says why.
    assert!(
        matches!(e.answer, Answer::Cause { cause: Cause::Method, share } if share > 1.0),
        "{text}"
    );
    assert!(
        text.contains("(more than all of it: what else differs pulled the other way)"),
        "{text}"
    );
}

#[test]
fn the_method_costs_less_on_other_kernels_and_explain_says_how_much() {
    let a = base("seed");
    let b = with_siblings("seed-cold-unroll1-events", &["seed-cold-unroll1"]);
    let e = explain(&a, &b);
    let text = e.render(&a, &b);
    let (cold, cold_ev) = (median("seed-cold"), median("seed-cold-events"));
    let (unroll, unroll_ev) = (
        median("seed-cold-unroll1"),
        median("seed-cold-unroll1-events"),
    );
    assert!(close(effect(&e, Cause::Kernels), unroll - cold), "{text}");
    assert!(close(effect(&e, Cause::Method), cold_ev - cold), "{text}");
    let t = together(&e, Cause::Kernels);
    let (on_a, on_b) = (cold_ev - cold, unroll_ev - unroll);
    assert!(close(t.effect_us, on_b - on_a), "{text}");
    // CUPTI slows the unrolled-once kernel itself: the events method costs less on it.
    assert!(on_b < on_a, "{on_a} {on_b}");
    assert!(
        t.detail.starts_with(&format!(
            "B's method (CUDA events) changes A's kernels by {on_a:+.2} us"
        )) && t.detail.contains(&format!("B's by {on_b:+.2} us")),
        "{}",
        t.detail
    );
    assert!(e.remainder_us.abs() < 1e-9, "{text}");
    assert!(
        matches!(e.answer, Answer::Cause { cause: Cause::Kernels, share } if share > 0.5),
        "{text}"
    );
    adds_up(&e);
    ordered(&e);
}

#[test]
fn without_a_s_siblings_a_change_is_measured_at_b_s_conditions() {
    // A recorded without siblings; B holds its subject timed A's way.
    let a = load("b1-cold");
    let b = with_siblings("b1-cold-unroll1-events", &["b1-cold-unroll1"]);
    let e = explain(&a, &b);
    let text = e.render(&a, &b);
    let (b_us, b_cupti) = (b.summary.median, median("b1-cold-unroll1"));
    assert!(close(effect(&e, Cause::Method), b_us - b_cupti), "{text}");
    assert_eq!(
        measured_from(&e, Cause::Method),
        "B − B's sibling (cold, CUPTI)"
    );
    assert!(
        close(effect(&e, Cause::Kernels), b_cupti - a.summary.median),
        "{text}"
    );
    // One path from A to B, measured step by step: nothing left, nothing together.
    assert!(e.together.is_empty());
    assert!(e.remainder_us.abs() < 1e-9, "{text}");
    adds_up(&e);

    // The other way round: A holds its subject timed B's way, B nothing.
    let a = base("b1");
    let b = load("b1-warm-unroll1");
    let e = explain(&a, &b);
    let text = e.render(&a, &b);
    let warm = median("b1-warm");
    assert!(
        close(effect(&e, Cause::Kernels), b.summary.median - warm),
        "{text}"
    );
    assert_eq!(
        measured_from(&e, Cause::Kernels),
        "B − A's sibling (warm, CUPTI)"
    );
    assert!(close(
        effect(&e, Cause::WorkingSetVsL2),
        warm - a.summary.median
    ));
    assert!(e.remainder_us.abs() < 1e-9, "{text}");
    adds_up(&e);
}

#[test]
fn a_sibling_prepared_another_way_is_not_at_a_s_conditions() {
    let a = base("b1");
    let mut b = with_siblings("b1-warm-unroll1", &["b1-cold-unroll1"]);
    b.siblings[0].cold_setup =
        Some("read flush of 120 MiB, instruction caches evicted, inputs in 4 placements".into());
    let e = explain(&a, &b);
    // B's cold sibling was flushed by reading, A by writing: not A's
    // conditions, so the kernels are measured against A's warm sibling.
    assert_eq!(
        measured_from(&e, Cause::Kernels),
        "B − A's sibling (warm, CUPTI)",
        "{}",
        e.render(&a, &b)
    );
    adds_up(&e);
}

#[test]
fn the_clocks_model_is_taken_out_of_the_measured_change_of_the_subject() {
    let a = base("b1");
    let mut b = with_siblings("b1-warm-unroll1", &["b1-cold-unroll1"]);
    for s in &mut b.samples {
        let c = s.clocks.as_mut().unwrap();
        c.sm_mhz = 1410;
        c.throttle_reasons = 4;
    }
    let b = Measurement::from_json(&b.to_json()).unwrap();
    let e = explain(&a, &b);
    let text = e.render(&a, &b);
    let clocks = effect(&e, Cause::Clocks);
    assert!(clocks > 0.0, "a slower SM clock: {text}");
    assert!(matches!(
        finding(&e, Cause::Clocks).basis,
        Basis::Model { .. }
    ));
    // B's sibling ran at B's clocks: its difference from A holds the clocks' effect too.
    let step = median("b1-cold-unroll1") - a.summary.median;
    assert!(close(effect(&e, Cause::Kernels), step - clocks), "{text}");
    assert!(e.remainder_us.abs() < 1e-9, "{text}");
    adds_up(&e);
}

#[test]
fn without_siblings_the_models_estimate_and_say_what_they_get_wrong() {
    let (cold, warm) = (load("b1-cold"), load("b1-warm"));
    let e = explain(&cold, &warm);
    let ws = finding(&e, Cause::WorkingSetVsL2);
    assert!(
        matches!(&ws.basis, Basis::Model { model } if model.contains("overstates") && model.contains("1.6-1.9x")),
        "{:?}",
        ws.basis
    );
    let text = e.render(&cold, &warm);
    assert!(text.contains("model: the copy ceilings"), "{text}");
    assert_eq!(e.causes.first(), Some(&Cause::WorkingSetVsL2), "{text}");

    let events = load("b1-cold-events");
    let e = explain(&cold, &events);
    let m = finding(&e, Cause::Method);
    assert!(
        matches!(&m.basis, Basis::Model { model } if model.contains("CUPTI slows some kernels itself")),
        "{:?}",
        m.basis
    );
    adds_up(&e);
}
