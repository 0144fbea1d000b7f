//! Pairs that differ in two ways at once, recorded on the GPU with an arm for
//! each single change (fixtures/explain/README.md, `planted/`): explain of
//! base against the pair must estimate each cause's effect within 25% of what
//! its arm measured alone (arm median − base median).

use fusebench_measure::{explain, Basis, Cause, Explanation, Measurement};

fn load(name: &str) -> Measurement {
    let path = format!(
        "{}/tests/fixtures/explain/planted/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Measurement::from_json(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

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

    /// The estimate explain made for this change. The cache policy's effect is
    /// counted under working set vs L2 when the working set fits, so the
    /// policy is whichever of the two was measured.
    fn estimate(self, e: &Explanation) -> Option<f64> {
        let causes: &[Cause] = match self {
            Change::Kernels => &[Cause::Kernels],
            Change::Policy => &[Cause::WorkingSetVsL2, Cause::CachePolicy],
            Change::Method => &[Cause::Method],
        };
        e.findings
            .iter()
            .filter(|f| causes.contains(&f.cause) && f.basis == Basis::Measured)
            .find_map(|f| f.effect_us)
    }
}

const PAIRS: [(&str, [Change; 2]); 3] = [
    ("warm-unroll1", [Change::Kernels, Change::Policy]),
    ("warm-events", [Change::Policy, Change::Method]),
    ("cold-unroll1-events", [Change::Kernels, Change::Method]),
];

#[test]
#[ignore = "needs the GPU-recorded planted pairs"]
fn each_cause_of_a_two_cause_pair_matches_its_single_change_arm() {
    let mut failures = Vec::new();
    for size in ["b1", "seed"] {
        let base = load(&format!("{size}-cold"));
        for (pair, changes) in PAIRS {
            let name = format!("{size}-{pair}");
            let b = load(&name);
            let e = explain(&base, &b);
            for c in changes {
                let arm = load(&format!("{size}-{}", c.arm()));
                let alone = arm.summary.median - base.summary.median;
                match c.estimate(&e) {
                    Some(est) if (est - alone).abs() <= 0.25 * alone.abs() => {}
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
