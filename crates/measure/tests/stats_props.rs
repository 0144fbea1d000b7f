//! Properties of the statistics: ordering invariants on any samples, and the
//! confidence interval of the median covering the true median about 95% of
//! the time on skewed data like kernel times.

use fusebench_measure::summarize;
use proptest::prelude::*;
use rand::{rngs::StdRng, SeedableRng};
use rand_distr::{Distribution, Exp};

proptest! {
    #[test]
    fn summary_is_ordered_and_order_free(mut v in prop::collection::vec(0.001f64..1e6, 1..300)) {
        let s = summarize(&v);
        prop_assert!(s.min <= s.ci_low && s.ci_low <= s.median && s.median <= s.ci_high && s.ci_high <= s.max);
        prop_assert!(s.median <= s.p90 || (s.p90 - s.median).abs() < 1e-9);
        prop_assert!(s.rel_ci >= 0.0);
        v.reverse();
        prop_assert_eq!(summarize(&v), s);
    }
}

#[test]
fn median_interval_covers_the_true_median_about_95_percent() {
    // Kernel-like times: a floor of 20 us plus an exponential tail (mean 1 us);
    // the true median is 20 + ln 2.
    let mut rng = StdRng::seed_from_u64(7);
    let tail = Exp::new(1.0).unwrap();
    let truth = 20.0 + std::f64::consts::LN_2;
    for n in [10usize, 30, 100, 400] {
        let trials = 2000;
        let covered = (0..trials)
            .filter(|_| {
                let v: Vec<f64> = (0..n).map(|_| 20.0 + tail.sample(&mut rng)).collect();
                let s = summarize(&v);
                s.ci_low <= truth && truth <= s.ci_high
            })
            .count();
        let rate = covered as f64 / trials as f64;
        assert!((0.93..=0.995).contains(&rate), "n={n}: coverage {rate}");
    }
}
