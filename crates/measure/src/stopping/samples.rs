//! `samples:N`: a fixed count, for comparisons with tools that take N samples.

use super::{spec, Params, Rule, RuleSpec, Stop, StoppingRule};
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) const RULE: Rule = Rule {
    name: "samples",
    first: "count",
    usage: "samples:30 (a fixed count)",
    from_params,
};

fn from_params(p: &BTreeMap<String, f64>) -> Result<Box<dyn StoppingRule>, String> {
    let mut q = Params::new(p);
    let n = q.get("count", 10.0, 1.0, 1e9)?;
    q.done()?;
    if n.fract() != 0.0 {
        return Err(format!("count = {n} is not a whole number"));
    }
    Ok(Box::new(FixedCount(n as usize)))
}

#[derive(Clone, Debug, PartialEq)]
pub struct FixedCount(pub usize);

impl StoppingRule for FixedCount {
    fn decide(&self, samples: &[f64], _: Duration) -> Option<Stop> {
        (samples.len() >= self.0).then_some(Stop::Count)
    }
    fn describe(&self) -> String {
        format!("fixed count of {} samples", self.0)
    }
    fn spec(&self) -> RuleSpec {
        spec("samples", &[("count", self.0 as f64)])
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
}
