//! Whether a sample's CUPTI records are exactly the kernels it launched. A
//! sample is rejected, never summed, when CUPTI dropped records, when a
//! record ends before it starts, or when the kernels recorded differ from the
//! launches (missing, extra, reordered, or another launch shape).

use crate::subject::{KernelFacts, Launch};
use fusebench_runtime::{Activity, ActivityKind, Records, HARNESS_KERNELS};

/// The subject's kernels in the sample, in the order they ran, with their
/// durations in microseconds and the registers and shared memory CUPTI
/// recorded for each; checked against `expected` when it is known.
pub fn check(records: &Records, expected: Option<&[Launch]>) -> Result<Vec<(Launch, f64, KernelFacts)>, String> {
    if records.dropped > 0 {
        return Err(format!(
            "CUPTI dropped {} during the sample; it is incomplete and rejected",
            fusebench_measure::plural(records.dropped as usize, "activity record")
        ));
    }
    let mut seen: Vec<&Activity> = records
        .activities
        .iter()
        .filter(|a| a.kind == ActivityKind::Kernel && !HARNESS_KERNELS.contains(&a.name.as_str()))
        .collect();
    if let Some(bad) = seen.iter().find(|a| a.end_ns < a.start_ns) {
        return Err(format!(
            "CUPTI's record of {} ends before it starts ({} ns < {} ns); the sample is rejected",
            bad.name, bad.end_ns, bad.start_ns
        ));
    }
    seen.sort_by_key(|a| a.start_ns);
    let recorded: Vec<Launch> = seen.iter().map(|a| a.launch()).collect();
    if let Some(expected) = expected {
        if recorded != expected {
            return Err(format!(
                "{}; the sample is rejected, not summed",
                mismatch(expected, &recorded)
            ));
        }
    }
    Ok(recorded
        .into_iter()
        .zip(&seen)
        .map(|(l, a)| {
            let facts = KernelFacts {
                code_hash: String::new(),
                shared_bytes: a.shared_bytes,
                registers: a.registers,
            };
            (l, a.duration_us(), facts)
        })
        .collect())
}

fn shape(l: &Launch) -> String {
    let s = l.1;
    format!(
        "grid [{}, {}, {}] block [{}, {}, {}]",
        s[0], s[1], s[2], s[3], s[4], s[5]
    )
}

/// In words, how the recorded kernels differ from the launched ones.
pub fn mismatch(launched: &[Launch], recorded: &[Launch]) -> String {
    let names = |v: &[Launch]| v.iter().map(|(n, _)| short(n)).collect::<Vec<_>>();
    if names(launched) == names(recorded) {
        let (i, (l, r)) = launched
            .iter()
            .zip(recorded)
            .enumerate()
            .find(|(_, (l, r))| l != r)
            .expect("the lists differ and their names agree");
        return format!(
            "kernel {i} ({}) was launched with {} but CUPTI recorded {}",
            short(&l.0),
            shape(l),
            shape(r)
        );
    }
    let mut missing: Vec<&Launch> = launched.iter().collect();
    let mut extra = Vec::new();
    for r in recorded {
        match missing.iter().position(|l| *l == r) {
            Some(p) => {
                missing.remove(p);
            }
            None => extra.push(r),
        }
    }
    let list = |v: &[&Launch]| {
        v.iter()
            .map(|l| format!("{} ({})", short(&l.0), shape(l)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("no record of {}", list(&missing)));
    }
    if !extra.is_empty() {
        parts.push(format!("records of kernels not launched: {}", list(&extra)));
    }
    if parts.is_empty() {
        parts.push(format!(
            "the kernels ran in another order: recorded {:?} for the launches {:?}",
            names(recorded),
            names(launched)
        ));
    }
    parts.join("; ")
}

/// Long (C++ mangled) names cut for messages.
fn short(name: &str) -> String {
    if name.chars().count() > 60 {
        format!("{}...", name.chars().take(60).collect::<String>())
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str, start: u64, end: u64, grid: i32) -> Activity {
        Activity {
            kind: ActivityKind::Kernel,
            name: name.into(),
            start_ns: start,
            end_ns: end,
            correlation_id: 0,
            stream_id: 7,
            grid: [grid, 1, 1],
            block: [256, 1, 1],
            registers: 40,
            shared_bytes: 128,
        }
    }

    fn launch(name: &str, grid: u32) -> Launch {
        (name.into(), [grid, 1, 1, 256, 1, 1])
    }

    fn records(a: Vec<Activity>) -> Records {
        Records {
            activities: a,
            dropped: 0,
        }
    }

    const LAUNCHED: fn() -> Vec<Launch> = || vec![launch("fb_a", 132), launch("fb_b", 264)];

    #[test]
    fn exact_records_give_durations_in_launch_order() {
        // Handed back out of order, with the harness's own kernels and a memset among them.
        let r = records(vec![
            kernel("fb_b", 5_000, 8_000, 264),
            kernel("fb_spin", 0, 900, 1),
            Activity::transfer(ActivityKind::Memset, "memset", 100, 200, 1, 7),
            kernel("fb_a", 1_000, 3_500, 132),
        ]);
        let got = check(&r, Some(&LAUNCHED())).unwrap();
        let facts = KernelFacts { code_hash: String::new(), shared_bytes: 128, registers: 40 };
        assert_eq!(
            got,
            vec![(launch("fb_a", 132), 2.5, facts.clone()), (launch("fb_b", 264), 3.0, facts)]
        );
    }

    #[test]
    fn a_missing_record_is_rejected_naming_it() {
        let r = records(vec![kernel("fb_a", 1_000, 3_500, 132)]);
        let e = check(&r, Some(&LAUNCHED())).unwrap_err();
        assert!(e.contains("no record of fb_b"), "{e}");
        assert!(e.contains("rejected"), "{e}");
    }

    #[test]
    fn an_extra_record_is_rejected_naming_it() {
        let r = records(vec![
            kernel("fb_a", 1_000, 3_500, 132),
            kernel("fb_b", 5_000, 8_000, 264),
            kernel("other_kernel", 9_000, 9_500, 1),
        ]);
        let e = check(&r, Some(&LAUNCHED())).unwrap_err();
        assert!(e.contains("not launched: other_kernel"), "{e}");
    }

    #[test]
    fn reordered_records_are_rejected() {
        let r = records(vec![
            kernel("fb_b", 1_000, 3_500, 264),
            kernel("fb_a", 5_000, 8_000, 132),
        ]);
        let e = check(&r, Some(&LAUNCHED())).unwrap_err();
        assert!(e.contains("another order"), "{e}");
    }

    #[test]
    fn another_launch_shape_is_rejected_with_both_shapes() {
        let r = records(vec![
            kernel("fb_a", 1_000, 3_500, 132),
            kernel("fb_b", 5_000, 8_000, 265),
        ]);
        let e = check(&r, Some(&LAUNCHED())).unwrap_err();
        assert!(e.contains("kernel 1 (fb_b)"), "{e}");
        assert!(
            e.contains("grid [264, 1, 1]") && e.contains("grid [265, 1, 1]"),
            "{e}"
        );
    }

    #[test]
    fn dropped_records_reject_the_sample() {
        let mut r = records(vec![
            kernel("fb_a", 1_000, 3_500, 132),
            kernel("fb_b", 5_000, 8_000, 264),
        ]);
        r.dropped = 3;
        let e = check(&r, Some(&LAUNCHED())).unwrap_err();
        assert!(e.contains("dropped 3"), "{e}");
    }

    #[test]
    fn a_record_ending_before_it_starts_rejects_the_sample() {
        let r = records(vec![
            kernel("fb_a", 1_000, 3_500, 132),
            kernel("fb_b", 8_000, 5_000, 264),
        ]);
        let e = check(&r, Some(&LAUNCHED())).unwrap_err();
        assert!(e.contains("fb_b ends before it starts"), "{e}");
    }

    #[test]
    fn without_expected_launches_the_recorded_ones_come_back() {
        let r = records(vec![kernel("triton_x", 10, 20, 8)]);
        let got = check(&r, None).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0 .0, "triton_x");
    }
}
