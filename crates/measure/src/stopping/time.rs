//! `time:2s`: samples for a set time (at least `min-samples`), whatever the noise.

use super::{spec, Params, Rule, RuleSpec, Stop, StoppingRule};
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) const RULE: Rule = Rule {
    name: "time",
    first: "seconds",
    usage: "time:2s (sample for a set time; also min-samples=2)",
    from_params,
};

fn from_params(p: &BTreeMap<String, f64>) -> Result<Box<dyn StoppingRule>, String> {
    let mut q = Params::new(p);
    let seconds = q.get("seconds", 1.0, 1e-3, 86_400.0)?;
    let min_samples = q.get("min_samples", 2.0, 1.0, 1e9)?;
    q.done()?;
    Ok(Box::new(TimeLimit {
        time: Duration::from_secs_f64(seconds),
        min_samples: min_samples as usize,
    }))
}

#[derive(Clone, Debug, PartialEq)]
pub struct TimeLimit {
    pub time: Duration,
    pub min_samples: usize,
}

impl StoppingRule for TimeLimit {
    fn decide(&self, samples: &[f64], elapsed: Duration) -> Option<Stop> {
        (samples.len() >= self.min_samples && elapsed >= self.time).then_some(Stop::Elapsed)
    }
    fn describe(&self) -> String {
        format!(
            "samples for {:.3} s (>= {} samples)",
            self.time.as_secs_f64(),
            self.min_samples
        )
    }
    fn spec(&self) -> RuleSpec {
        spec(
            "time",
            &[
                ("seconds", self.time.as_secs_f64()),
                ("min_samples", self.min_samples as f64),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_when_the_time_is_up_and_not_before() {
        let r = TimeLimit {
            time: Duration::from_millis(100),
            min_samples: 2,
        };
        assert_eq!(r.decide(&[1.0, 2.0], Duration::from_millis(50)), None);
        assert_eq!(r.decide(&[1.0], Duration::from_millis(150)), None);
        assert_eq!(
            r.decide(&[1.0, 2.0], Duration::from_millis(150)),
            Some(Stop::Elapsed)
        );
    }
}
