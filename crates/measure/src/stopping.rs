//! When to stop taking samples. Rules are pluggable: a fixed count for
//! comparisons with tools that take N samples, and a noise target that stops
//! once the median is known well enough.

use crate::stats::summarize;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Why sampling stopped. Recorded with every result: a result that stopped
/// on its budget is less certain than one that converged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Stop {
    /// The interval of the median reached the target.
    Converged { rel_ci: f64 },
    /// A fixed number of samples was asked for and taken.
    Count,
    /// The time budget ran out first.
    TimeBudget { rel_ci: f64 },
    /// The sample budget ran out first.
    SampleBudget { rel_ci: f64 },
}

pub trait StoppingRule {
    /// `None` to go on; `Some` to stop, with the reason.
    fn decide(&self, samples: &[f64], elapsed: Duration) -> Option<Stop>;
    /// One line for reports: "noise target +-1.0% (>= 10 samples, >= 0.05 s, <= 1 s)".
    fn describe(&self) -> String;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedCount(pub usize);

impl StoppingRule for FixedCount {
    fn decide(&self, samples: &[f64], _: Duration) -> Option<Stop> {
        (samples.len() >= self.0).then_some(Stop::Count)
    }
    fn describe(&self) -> String {
        format!("fixed count of {} samples", self.0)
    }
}

/// Stop when the 95% interval of the median is within `target` (relative
/// half-width) after at least `min_samples` samples and `min_time`, or when
/// `max_time` or `max_samples` is reached.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoiseTarget {
    pub target: f64,
    pub min_samples: usize,
    pub min_time: Duration,
    pub max_time: Duration,
    pub max_samples: usize,
}

impl Default for NoiseTarget {
    /// +-1%, at least 10 samples and 50 ms, at most 1 s or 100,000 samples.
    fn default() -> Self {
        NoiseTarget {
            target: 0.01,
            min_samples: 10,
            min_time: Duration::from_millis(50),
            max_time: Duration::from_secs(1),
            max_samples: 100_000,
        }
    }
}

impl StoppingRule for NoiseTarget {
    fn decide(&self, samples: &[f64], elapsed: Duration) -> Option<Stop> {
        if samples.is_empty() {
            return None;
        }
        let rel_ci = summarize(samples).rel_ci;
        if samples.len() >= self.min_samples && elapsed >= self.min_time && rel_ci <= self.target {
            return Some(Stop::Converged { rel_ci });
        }
        if elapsed >= self.max_time {
            return Some(Stop::TimeBudget { rel_ci });
        }
        if samples.len() >= self.max_samples {
            return Some(Stop::SampleBudget { rel_ci });
        }
        None
    }
    fn describe(&self) -> String {
        format!(
            "noise target +-{:.1}% (>= {} samples, >= {:.3} s, <= {:.3} s)",
            self.target * 100.0,
            self.min_samples,
            self.min_time.as_secs_f64(),
            self.max_time.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_count_stops_at_its_count() {
        let r = FixedCount(3);
        assert_eq!(r.decide(&[1.0, 1.0], Duration::ZERO), None);
        assert_eq!(
            r.decide(&[1.0, 1.0, 1.0], Duration::ZERO),
            Some(Stop::Count)
        );
    }

    #[test]
    fn noise_target_waits_for_minimums_then_converges() {
        let r = NoiseTarget {
            min_time: Duration::from_millis(10),
            ..Default::default()
        };
        let steady = vec![10.0; 20];
        assert_eq!(
            r.decide(&steady[..5], Duration::from_secs(1) / 2),
            None,
            "too few samples"
        );
        assert_eq!(
            r.decide(&steady, Duration::from_millis(1)),
            None,
            "too little time"
        );
        assert!(matches!(
            r.decide(&steady, Duration::from_millis(20)),
            Some(Stop::Converged { .. })
        ));
    }

    #[test]
    fn noise_target_gives_up_on_budget_and_says_so() {
        let r = NoiseTarget::default();
        let noisy: Vec<f64> = (0..50)
            .map(|i| if i % 2 == 0 { 10.0 } else { 20.0 })
            .collect();
        match r.decide(&noisy, Duration::from_secs(2)) {
            Some(Stop::TimeBudget { rel_ci }) => assert!(rel_ci > 0.01),
            other => panic!("{other:?}"),
        }
        let r = NoiseTarget {
            max_samples: 50,
            ..Default::default()
        };
        assert!(matches!(
            r.decide(&noisy, Duration::from_millis(100)),
            Some(Stop::SampleBudget { .. })
        ));
    }
}
