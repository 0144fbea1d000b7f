//! When to stop taking samples. Each rule is one file here and one line in
//! [`RULES`]; a rule is chosen by name, as nvbench's `--stopping-criterion`:
//! `noise:1%`, `samples:30`, `time:2s`, with optional `key=value` parameters
//! after the first (`noise:0.5%,max-time=3s,min-samples=20`). The rule's
//! name and every parameter go into each record ([`RuleSpec`]).

mod noise;
mod samples;
mod time;

pub use noise::NoiseTarget;
pub use samples::FixedCount;
pub use time::TimeLimit;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    /// A rule that samples for a set time reached it.
    Elapsed,
}

pub trait StoppingRule {
    /// `None` to go on; `Some` to stop, with the reason.
    fn decide(&self, samples: &[f64], elapsed: Duration) -> Option<Stop>;
    /// One line for reports: "noise target +-1.0% (>= 10 samples, >= 0.05 s, <= 1 s)".
    fn describe(&self) -> String;
    /// The rule's name and parameters, for the record.
    fn spec(&self) -> RuleSpec;
}

/// A rule as a record keeps it: its registry name and every parameter
/// (durations in seconds, fractions as fractions: 0.01 for 1%).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleSpec {
    pub name: String,
    pub params: BTreeMap<String, f64>,
}

impl RuleSpec {
    /// The rule back from its record.
    pub fn build(&self) -> Result<Box<dyn StoppingRule>, String> {
        let entry = RULES
            .iter()
            .find(|r| r.name == self.name)
            .ok_or_else(|| format!("no stopping rule named {:?}", self.name))?;
        (entry.from_params)(&self.params)
    }
}

/// One registered rule.
pub struct Rule {
    pub name: &'static str,
    /// The first, positional parameter's key (`noise:1%` sets `target`).
    pub first: &'static str,
    /// For `--help` and error messages.
    pub usage: &'static str,
    /// Builds the rule from its parameters (defaults for those not given);
    /// an unknown key or a bad value is an error naming what is accepted.
    pub from_params: FromParams,
}

/// Builds a rule from its parameters.
pub type FromParams = fn(&BTreeMap<String, f64>) -> Result<Box<dyn StoppingRule>, String>;

/// Every stopping rule, by name.
pub const RULES: &[Rule] = &[noise::RULE, samples::RULE, time::RULE];

/// The rules' usage lines, for `--help` texts and errors.
pub fn usage() -> String {
    RULES.iter().map(|r| r.usage).collect::<Vec<_>>().join("; ")
}

/// A number with an optional unit: `1%` (0.01), `2s`, `500ms`, `30`.
fn number(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix('%') {
        (n, 0.01)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * scale)
        .ok_or_else(|| format!("{s:?} is not a number (such as 1%, 2s, 500ms or 30)"))
}

/// `noise:1%`, `samples:30`, `time:2s`, `noise:0.5%,max-time=3s`: the rule, or
/// an error that lists the rules.
pub fn parse(spec: &str) -> Result<Box<dyn StoppingRule>, String> {
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let rule = RULES
        .iter()
        .find(|r| r.name == name.trim())
        .ok_or_else(|| {
            format!(
                "no stopping rule {:?}; the rules are: {}",
                name.trim(),
                usage()
            )
        })?;
    let mut params = BTreeMap::new();
    for (i, part) in rest.split(',').filter(|p| !p.trim().is_empty()).enumerate() {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim().replace('-', "_"), v),
            None if i == 0 => (rule.first.to_string(), part),
            None => {
                return Err(format!(
                    "{spec:?}: {part:?} needs a name (key=value); {}",
                    rule.usage
                ))
            }
        };
        let v = number(value).map_err(|e| format!("{spec:?}: {key}: {e}; {}", rule.usage))?;
        params.insert(key, v);
    }
    (rule.from_params)(&params).map_err(|e| format!("{spec:?}: {e}; {}", rule.usage))
}

/// Takes the known keys out of `params` with their defaults; anything left is an error.
pub(crate) struct Params<'a> {
    given: &'a BTreeMap<String, f64>,
    used: Vec<&'static str>,
}

impl<'a> Params<'a> {
    pub(crate) fn new(given: &'a BTreeMap<String, f64>) -> Params<'a> {
        Params {
            given,
            used: Vec::new(),
        }
    }

    /// `key`, or `default`; it must lie in `lo..=hi`.
    pub(crate) fn get(
        &mut self,
        key: &'static str,
        default: f64,
        lo: f64,
        hi: f64,
    ) -> Result<f64, String> {
        self.used.push(key);
        let v = self.given.get(key).copied().unwrap_or(default);
        if v.is_finite() && v >= lo && v <= hi {
            Ok(v)
        } else {
            Err(format!("{key} = {v} is outside {lo} to {hi}"))
        }
    }

    /// Errors on a key no `get` asked for.
    pub(crate) fn done(self) -> Result<(), String> {
        match self.given.keys().find(|k| !self.used.contains(&k.as_str())) {
            Some(k) => Err(format!(
                "unknown parameter {k:?} (known: {})",
                self.used.join(", ")
            )),
            None => Ok(()),
        }
    }
}

pub(crate) fn spec(name: &str, params: &[(&str, f64)]) -> RuleSpec {
    RuleSpec {
        name: name.into(),
        params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_by_name_and_keep_their_parameters() {
        let r = parse("noise:0.5%,max-time=3s,min-samples=20").unwrap();
        let s = r.spec();
        assert_eq!(s.name, "noise");
        assert_eq!(s.params["target"], 0.005);
        assert_eq!(s.params["max_time"], 3.0);
        assert_eq!(s.params["min_samples"], 20.0);
        assert_eq!(parse("samples:30").unwrap().spec().params["count"], 30.0);
        assert_eq!(parse("time:500ms").unwrap().spec().params["seconds"], 0.5);
        // The record's spec builds the same rule back.
        let back = s.build().unwrap();
        assert_eq!(back.spec(), s);
        assert_eq!(back.describe(), r.describe());
    }

    #[test]
    fn bad_specs_are_errors_that_say_what_is_accepted() {
        for bad in [
            "nosie:1%",
            "noise:lots",
            "noise:1%,speed=3",
            "samples:0",
            "samples:2.5",
            "time:-1s",
            "noise:1%,2s",
        ] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(
                RULES.iter().any(|r| e.contains(r.usage)) || e.contains("the rules are"),
                "{bad}: {e}"
            );
        }
    }
}
