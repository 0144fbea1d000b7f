//! `noise:TARGET`: stop once the 95% interval of the median is within
//! +-TARGET of it, after a minimum of samples and time, or give up at a
//! budget (and say so in the record).

use super::{spec, Params, Rule, RuleSpec, Stop, StoppingRule};
use crate::stats::summarize;
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) const RULE: Rule = Rule {
    name: "noise",
    first: "target",
    usage: "noise:1% (interval of the median within +-1%; also min-samples=10, min-time=50ms, max-time=1s, max-samples=100000)",
    from_params,
};

fn from_params(p: &BTreeMap<String, f64>) -> Result<Box<dyn StoppingRule>, String> {
    let d = NoiseTarget::default();
    let mut q = Params::new(p);
    let target = q.get("target", d.target, 1e-6, 1.0)?;
    let min_samples = q.get("min_samples", d.min_samples as f64, 1.0, 1e9)?;
    let min_time = q.get("min_time", d.min_time.as_secs_f64(), 0.0, 86_400.0)?;
    let max_time = q.get("max_time", d.max_time.as_secs_f64(), 1e-3, 86_400.0)?;
    let max_samples = q.get("max_samples", d.max_samples as f64, 1.0, 1e9)?;
    q.done()?;
    if min_samples.fract() != 0.0 || max_samples.fract() != 0.0 {
        return Err("sample counts are whole numbers".into());
    }
    Ok(Box::new(NoiseTarget {
        target,
        min_samples: min_samples as usize,
        min_time: Duration::from_secs_f64(min_time),
        max_time: Duration::from_secs_f64(max_time),
        max_samples: max_samples as usize,
    }))
}

/// Stop when the 95% interval of the median is within `target` (relative
/// half-width) after at least `min_samples` samples and `min_time`, or when
/// `max_time` or `max_samples` is reached.
#[derive(Clone, Debug, PartialEq)]
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
    fn spec(&self) -> RuleSpec {
        spec(
            "noise",
            &[
                ("target", self.target),
                ("min_samples", self.min_samples as f64),
                ("min_time", self.min_time.as_secs_f64()),
                ("max_time", self.max_time.as_secs_f64()),
                ("max_samples", self.max_samples as f64),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
