//! Each cause's estimate and share, on recorded H200 records with fields
//! changed where the recorded ones lack a measurement (events times beside
//! CUPTI times, copy ceilings, per-sample clocks): every expected number is
//! worked out here from the records' own values, independently of explain.

mod common;
use common::*;

fn load(name: &str) -> Measurement {
    load_from("", name)
}

use fusebench_measure::{
    explain, median, Answer, Basis, Cause, Ceiling, KernelRecord, Measurement, Method, Verdict,
};

/// The record read back, so that its summary is recomputed from its samples.
fn fresh(m: Measurement) -> Measurement {
    Measurement::from_json(&m.to_json()).unwrap()
}

/// `m` with each sample also timed by events, `extra(i)` later.
fn with_events(mut m: Measurement, extra: impl Fn(usize) -> f64) -> Measurement {
    for (i, s) in m.samples.iter_mut().enumerate() {
        s.events_us = Some(s.time_us + extra(i));
    }
    fresh(m)
}

/// `m` as the events method would have timed it: every sample and kernel
/// `add` µs longer.
fn as_events(mut m: Measurement, add: f64) -> Measurement {
    m.method = Method::CudaEvents;
    for s in &mut m.samples {
        s.time_us += add;
        s.events_us = None;
    }
    let k = m.kernels.len() as f64;
    for kr in &mut m.kernels {
        kr.median_us += add / k;
    }
    fresh(m)
}

fn shifted(mut m: Measurement, add: f64) -> Measurement {
    for s in &mut m.samples {
        s.time_us += add;
    }
    fresh(m)
}

fn ceiling(m: &Measurement, median_us: f64) -> Option<Ceiling> {
    Some(Ceiling {
        bytes: m.bytes.unwrap(),
        median_us,
        ci_low_us: median_us * 0.995,
        ci_high_us: median_us * 1.005,
        n: 50,
        grid: [1056, 1, 1],
        block: [512, 1, 1],
    })
}


fn events_over_cupti(m: &Measurement) -> f64 {
    let ev: Vec<f64> = m.samples.iter().map(|s| s.events_us.unwrap()).collect();
    let cu: Vec<f64> = m.samples.iter().map(|s| s.time_us).collect();
    median(&ev) - median(&cu)
}

#[test]
fn the_method_is_the_events_overhead_per_kernel_from_the_record_holding_both() {
    let a = with_events(load("seed-cold-1"), |i| 2.3 + 0.01 * (i % 7) as f64);
    let b = as_events(load("seed-cold-1"), 2.4);
    let o = events_over_cupti(&a);
    let e = explain(&a, &b);
    assert!(close(effect(&e, Cause::Method), o), "{}", e.render(&a, &b));
    // No sibling by the other method: the overhead model, said as one.
    assert!(
        matches!(&finding(&e, Cause::Method).basis, Basis::Model { model } if model.starts_with("model: the events overhead per kernel")),
        "{:?}",
        finding(&e, Cause::Method).basis
    );
    assert!(close(
        finding(&e, Cause::Method).share.unwrap(),
        o / (e.b_us - e.a_us)
    ));
    assert_eq!(e.causes, vec![Cause::Method]);
    assert!(
        matches!(
            e.answer,
            Answer::Cause {
                cause: Cause::Method,
                ..
            }
        ),
        "{}",
        e.render(&a, &b)
    );
    adds_up(&e);
    // The other way round the events side is A: the method made B faster.
    let back = explain(&b, &a);
    assert!(close(effect(&back, Cause::Method), -o));
    adds_up(&back);
}

#[test]
fn the_overhead_is_per_kernel_and_counts_the_events_sides_launches() {
    // A CUPTI record of two kernels holding events times; B timed by events with one
    // more kernel of the same code: its window holds the overhead three times.
    let mut a = load("seed-cold-1");
    let k = a.kernels[0].clone();
    a.kernels = vec![
        KernelRecord {
            median_us: 12.0,
            ..k.clone()
        },
        KernelRecord {
            median_us: 8.16,
            ..k.clone()
        },
    ];
    let a = with_events(a, |_| 4.6);
    let per_kernel = events_over_cupti(&a) / 2.0;
    let mut b = as_events(a.clone(), 0.0);
    b.kernels.push(KernelRecord {
        code_hash: "another".into(),
        median_us: 3.0,
        ..k
    });
    // B's third kernel runs 3.0 us by events, 3.0 − o of its own; the other two
    // hold one overhead more each.
    let b = shifted(b, 2.0 * per_kernel + 3.0);
    let e = explain(&a, &b);
    assert!(
        close(effect(&e, Cause::Method), 3.0 * per_kernel),
        "{}",
        e.render(&a, &b)
    );
    // The kernel B adds, less the overhead its events time holds.
    assert!(
        close(effect(&e, Cause::Kernels), 3.0 - per_kernel),
        "{}",
        e.render(&a, &b)
    );
    adds_up(&e);
}

#[test]
fn without_both_times_the_method_is_not_estimated_and_takes_only_what_it_can() {
    let a = load("seed-cold-1");
    let b = as_events(load("seed-cold-1"), 2.4);
    let e = explain(&a, &b);
    let m = finding(&e, Cause::Method);
    match &m.basis {
        Basis::Rest { why } => assert!(
            why.contains("neither record holds both methods' times of the same samples"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(close(m.effect_us.unwrap(), e.b_us - e.a_us));
    // Events add time: a B timed by events yet faster cannot be the method's doing.
    let faster = as_events(load("seed-cold-1"), -2.4);
    let e = explain(&a, &faster);
    assert_eq!(finding(&e, Cause::Method).effect_us, None);
    assert!(
        matches!(e.answer, Answer::Unexplained { share } if close(share, 1.0)),
        "{}",
        e.render(&a, &faster)
    );
    assert!(e
        .render(&a, &faster)
        .contains("unexplained: 100% of the difference"));
}

#[test]
fn a_cause_that_cannot_account_for_the_size_leaves_the_rest_unexplained() {
    // The method differs, but its overhead is a third of the difference.
    let a = with_events(load("seed-cold-1"), |_| 2.3);
    let b = as_events(load("seed-cold-1"), 2.3 + 4.5);
    let e = explain(&a, &b);
    let d = e.b_us - e.a_us;
    let o = events_over_cupti(&a);
    assert!(close(effect(&e, Cause::Method), o));
    assert!(close(e.remainder_us, d - o));
    assert!(!e.remainder_within_noise);
    match e.answer {
        Answer::Unexplained { share } => assert!(close(share, (d - o) / d)),
        ref other => panic!("{other:?}\n{}", e.render(&a, &b)),
    }
    let pct = format!("unexplained: {:.0}% of the difference", 100.0 * (d - o) / d);
    assert!(e.render(&a, &b).contains(&pct), "{}", e.render(&a, &b));
    assert_eq!(
        e.causes,
        vec![Cause::Method],
        "it still differs, with its share"
    );
}

#[test]
fn the_largest_share_is_named_not_the_first_cause_that_differs() {
    // The clocks differ a little (one reading step), the method a lot.
    let mut a = with_events(load("seed-cold-1"), |_| 2.3);
    a.ceiling = ceiling(&a, 15.0);
    let mut b = as_events(load("seed-cold-1"), 2.3);
    for s in &mut b.samples {
        s.clocks.as_mut().unwrap().sm_mhz = 1965;
    }
    let b = fresh(b);
    let e = explain(&a, &b);
    assert_eq!(e.causes[0], Cause::Method, "{}", e.render(&a, &b));
    assert!(e.causes.contains(&Cause::Clocks));
    assert!(matches!(
        e.answer,
        Answer::Cause {
            cause: Cause::Method,
            ..
        }
    ));
    // The clocks' own estimate: A's memory-bound share from its ceiling.
    let m = 15.0 / a.summary.median;
    let ratio = m + (1.0 - m) * 1980.0 / 1965.0;
    assert!(close(
        effect(&e, Cause::Clocks),
        a.summary.median * (ratio - 1.0)
    ));
    adds_up(&e);
}

#[test]
fn warm_against_cold_is_predicted_from_the_two_copy_ceilings() {
    let mut a = load("b1-cold");
    let mut b = load("b1-warm");
    a.ceiling = ceiling(&a, 6.0);
    b.ceiling = ceiling(&b, 4.4);
    let e = explain(&a, &b);
    let m = 6.0 / a.summary.median;
    let expect = a.summary.median * m * (4.4 / 6.0 - 1.0);
    assert!(
        close(effect(&e, Cause::WorkingSetVsL2), expect),
        "{}",
        e.render(&a, &b)
    );
    assert!(
        matches!(&finding(&e, Cause::WorkingSetVsL2).basis, Basis::Model { model } if model.contains("overstates")),
        "{:?}",
        finding(&e, Cause::WorkingSetVsL2).basis
    );
    assert_eq!(
        finding(&e, Cause::CachePolicy).basis,
        Basis::CountedUnder {
            cause: Cause::WorkingSetVsL2
        }
    );
    assert_eq!(finding(&e, Cause::CachePolicy).effect_us, None);
    assert_eq!(e.causes[0], Cause::WorkingSetVsL2);
    adds_up(&e);
    // A copy slower than the kernel makes the kernel wholly memory-bound (m = 1).
    a.ceiling = ceiling(&a, 8.0);
    b.ceiling = ceiling(&b, 5.0);
    let e = explain(&a, &b);
    assert!(close(
        effect(&e, Cause::WorkingSetVsL2),
        a.summary.median * (5.0 / 8.0 - 1.0)
    ));
}

#[test]
fn two_cold_set_ups_are_the_cache_policy_from_their_ceilings() {
    let mut a = load("seed-cold-write-flush");
    let mut b = load("seed-cold-read-flush");
    a.ceiling = ceiling(&a, 18.0);
    b.ceiling = ceiling(&b, 15.5);
    let e = explain(&a, &b);
    let m = 18.0 / a.summary.median;
    let expect = a.summary.median * m * (15.5 / 18.0 - 1.0);
    assert!(
        close(effect(&e, Cause::CachePolicy), expect),
        "{}",
        e.render(&a, &b)
    );
    assert_eq!(
        finding(&e, Cause::WorkingSetVsL2).verdict,
        Verdict::RuledOut
    );
    adds_up(&e);
}

#[test]
fn with_methods_differing_the_copies_lose_one_kernels_overhead_first() {
    let mut a = with_events(load("b1-cold"), |_| 2.3);
    let mut b = as_events(load("b1-warm"), 2.3);
    a.ceiling = ceiling(&a, 6.0);
    // B's copy was timed by events too: it holds one kernel's overhead.
    b.ceiling = ceiling(&b, 4.4 + 2.3);
    let e = explain(&a, &b);
    let o = events_over_cupti(&a);
    let m = 6.0 / a.summary.median;
    let expect = a.summary.median * m * ((6.7 - o) / 6.0 - 1.0);
    assert!(
        close(effect(&e, Cause::WorkingSetVsL2), expect),
        "{}",
        e.render(&a, &b)
    );
    assert!(close(effect(&e, Cause::Method), o));
    adds_up(&e);
}

#[test]
fn other_kernels_under_another_policy_are_compared_at_a_s_conditions() {
    let mut a = load("b1-cold");
    let mut b = load("b1-warm");
    a.ceiling = ceiling(&a, 6.0);
    b.ceiling = ceiling(&b, 4.4);
    b.kernels[0].code_hash = "unrolled-once".into();
    b.kernels[0].grid = [1024, 1, 1];
    b.kernels[0].median_us = 5.5;
    let to_median = 5.5 - b.summary.median;
    let b = shifted(b, to_median);
    let e = explain(&a, &b);
    let ka = a.summary.median;
    let cache = ka * (6.0 / ka) * (4.4 / 6.0 - 1.0);
    let r = 1.0 + cache / ka;
    let alone = 5.5 / r - a.kernels[0].median_us;
    assert!(close(effect(&e, Cause::WorkingSetVsL2), cache));
    assert!(
        close(effect(&e, Cause::Kernels), alone),
        "{}",
        e.render(&a, &b)
    );
    assert!(close(e.together_us, (r - 1.0) * alone));
    adds_up(&e);
}

#[test]
fn a_record_against_itself_is_the_same_and_nothing_differs() {
    let a = load("seed-cold-1");
    let e = explain(&a, &a);
    assert_eq!(e.answer, Answer::Same);
    assert!(e.causes.is_empty());
    assert!(e.findings.iter().all(|f| f.verdict != Verdict::Differs));
    assert!(e
        .render(&a, &a)
        .contains("Same: A and B are the same measurement"));
}

#[test]
fn shares_add_up_for_every_recorded_pair() {
    for (x, y) in [
        ("seed-cold-1", "seed-cold-unroll1"),
        ("square-rows", "square-columns"),
        ("seed-cold-1", "seed-warm"),
        ("b1-cold", "b1-warm"),
        ("seed-cold-2", "seed-cold-throttled"),
        ("seed-cold-write-flush", "seed-cold-read-flush"),
    ] {
        let (a, b) = (load(x), load(y));
        let e = explain(&a, &b);
        adds_up(&e);
        let top = e.causes[0];
        assert!(
            matches!(e.answer, Answer::Cause { cause, share } if cause == top && share > 0.5),
            "{x} vs {y}: {}",
            e.render(&a, &b)
        );
        assert!(e.remainder_within_noise, "{x} vs {y}: {}", e.render(&a, &b));
    }
}

#[test]
fn degenerate_measurements_give_no_estimate_rather_than_nonsense() {
    // A copy ceiling of no bytes, clock readings of 0 MHz, and an events
    // overhead longer than the kernel: nothing to estimate from, no NaN.
    let mut a = with_events(load("b1-cold"), |_| 40.0);
    a.ceiling = ceiling(&a, 6.0);
    a.ceiling.as_mut().unwrap().bytes = 0;
    let mut b = as_events(load("b1-warm"), 2.0);
    for s in &mut b.samples {
        let c = s.clocks.as_mut().unwrap();
        c.sm_mhz = 0;
        c.mem_mhz = 0;
    }
    b.ceiling = ceiling(&b, 4.4);
    let b = fresh(b);
    let e = explain(&a, &b);
    for f in &e.findings {
        assert!(f.effect_us.is_none_or(f64::is_finite), "{f:?}");
        assert!(f.share.is_none_or(f64::is_finite), "{f:?}");
    }
    assert!(e.remainder_us.is_finite());
    assert_eq!(finding(&e, Cause::Clocks).verdict, Verdict::Unknown);
    adds_up(&e);
}
