//! Pairs that differ in two ways at once, recorded on the GPU with an arm for
//! each single change (fixtures/explain/README.md, `planted/`): explain of
//! base against the pair must estimate each cause's effect within 25% of what
//! its arm measured alone (arm median − base median), from the records' own
//! times (their siblings), not from a model. The pairs of one change are
//! named as before, now with their shares.

mod common;
use common::*;

fn load(name: &str) -> Measurement {
    load_from("planted", name)
}

use fusebench_measure::{explain, Answer, Basis, Cause, Explanation, Measurement};

/// The changes the pairs combine, with the arm that makes each alone.
#[derive(Clone, Copy, Debug)]
enum Change {
    Kernels,
    Policy,
    Method,
}

impl Change {
    fn arm(self) -> &'static str {
        match self {
            Change::Kernels => "cold-unroll1",
            Change::Policy => "warm",
            Change::Method => "cold-events",
        }
    }

    /// The causes explain may hold this change under. The cache policy's
    /// effect is counted under working set vs L2 when the working set fits.
    fn causes(self) -> &'static [Cause] {
        match self {
            Change::Kernels => &[Cause::Kernels],
            Change::Policy => &[Cause::WorkingSetVsL2, Cause::CachePolicy],
            Change::Method => &[Cause::Method],
        }
    }

    /// The effect explain measured for this change, or why there is none.
    fn estimate(self, e: &Explanation) -> Result<f64, String> {
        let f = e
            .findings
            .iter()
            .find(|f| self.causes().contains(&f.cause) && f.effect_us.is_some())
            .ok_or("no estimate")?;
        match &f.basis {
            Basis::Measured { .. } => Ok(f.effect_us.unwrap()),
            other => Err(format!("not measured: {other:?}")),
        }
    }
}

const PAIRS: [(&str, [Change; 2]); 3] = [
    ("warm-unroll1", [Change::Kernels, Change::Policy]),
    ("warm-events", [Change::Policy, Change::Method]),
    ("cold-unroll1-events", [Change::Kernels, Change::Method]),
];

/// The shares, what the causes add together and the remainder make up B − A.
fn adds_up(e: &Explanation) -> bool {
    let parts: f64 = e.findings.iter().filter_map(|f| f.effect_us).sum();
    let d = e.b_us - e.a_us;
    (parts + e.together_us + e.remainder_us - d).abs() <= 1e-9 * d.abs().max(1.0)
}

#[test]
fn each_cause_of_a_two_cause_pair_matches_its_single_change_arm() {
    let mut failures = Vec::new();
    for size in ["b1", "seed"] {
        let base = load(&format!("{size}-cold"));
        for (pair, changes) in PAIRS {
            let name = format!("{size}-{pair}");
            let b = load(&name);
            let e = explain(&base, &b);
            if !adds_up(&e) {
                failures.push(format!("{name}: the parts do not add up"));
            }
            for c in changes {
                let arm = load(&format!("{size}-{}", c.arm()));
                let alone = arm.summary.median - base.summary.median;
                match c.estimate(&e) {
                    Ok(est) if (est - alone).abs() <= 0.25 * alone.abs() => {}
                    est => failures.push(format!(
                        "{name}: {c:?} estimated {est:?} us, its arm {size}-{} measured {alone:+.2} us\n{}",
                        c.arm(),
                        e.render(&base, &b)
                    )),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn each_single_change_is_named_with_its_measured_share() {
    let mut failures = Vec::new();
    for size in ["b1", "seed"] {
        let base = load(&format!("{size}-cold"));
        for c in [Change::Kernels, Change::Policy, Change::Method] {
            let name = format!("{size}-{}", c.arm());
            let b = load(&name);
            let e = explain(&base, &b);
            let named = match e.answer {
                Answer::Cause { cause, share } => c.causes().contains(&cause) && share > 0.5,
                _ => false,
            };
            // Timed the same way, the kernels' change is their own medians;
            // the policy and the method are measured by A's siblings.
            if !named || !adds_up(&e) || c.estimate(&e).is_err() {
                failures.push(format!("{name}: {:?}\n{}", e.answer, e.render(&base, &b)));
            }
        }
    }
    // The b1 working set (17 MB) fits in the 60 MiB L2, the seed's (67 MB) does not.
    let b1 = explain(&load("b1-cold"), &load("b1-warm"));
    assert_eq!(b1.causes.first(), Some(&Cause::WorkingSetVsL2));
    let seed = explain(&load("seed-cold"), &load("seed-warm"));
    assert_eq!(seed.causes.first(), Some(&Cause::CachePolicy));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_transposed_input_is_named_with_its_share() {
    let (a, b) = (load("square-rows"), load("square-columns"));
    let e = explain(&a, &b);
    assert!(
        matches!(e.answer, Answer::Cause { cause: Cause::InputLayout, share } if share > 0.5),
        "{}",
        e.render(&a, &b)
    );
    assert!(e.causes.contains(&Cause::Kernels));
    assert!(adds_up(&e));
}

#[test]
fn two_runs_of_the_base_are_not_explained_by_a_cause() {
    for size in ["b1", "seed"] {
        let (a, b) = (
            load(&format!("{size}-cold")),
            load(&format!("{size}-cold-2")),
        );
        let e = explain(&a, &b);
        // Nothing but the run differs: within noise, or a drift no cause takes.
        assert!(
            matches!(e.answer, Answer::WithinNoise | Answer::Unexplained { .. }),
            "{size}: {}",
            e.render(&a, &b)
        );
    }
}

/// The kernels' finding names the setting that chose other kernels.
#[test]
fn the_setting_that_changed_the_kernels_is_named() {
    let (a, b) = (load("seed-cold"), load("seed-cold-unroll1"));
    let e = explain(&a, &b);
    let k = e.findings.iter().find(|f| f.cause == Cause::Kernels).unwrap();
    assert!(
        k.detail.contains("the settings that change kernels differ: FUSEBENCH_ROW_UNROLL unset in A, 1 in B"),
        "{}",
        k.detail
    );
    // Nothing is said of settings where both sides have the same.
    let same = explain(&b, &b.clone());
    let k = same.findings.iter().find(|f| f.cause == Cause::Kernels).unwrap();
    assert!(!k.detail.contains("settings"), "{}", k.detail);
}
