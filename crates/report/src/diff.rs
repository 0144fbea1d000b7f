//! Two sets of results compared per benchmark: a change counts only when it
//! is beyond the noise of both (their 95% intervals of the median do not
//! overlap) and, to fail a CI job, also beyond a threshold.

use crate::Entry;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Intervals overlap: no change beyond the noise.
    Same,
    /// Beyond the noise, but within the threshold.
    Faster,
    Slower,
    /// Beyond the noise and the threshold.
    Improvement,
    Regression,
    /// Only in the new results, or only in the old.
    New,
    Missing,
    /// Not compared: measured on different GPUs.
    DifferentGpu,
}

impl Verdict {
    /// The verdict in words, as tables print it.
    pub fn label(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
            .unwrap_or_default()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    pub name: String,
    pub old: Option<Entry>,
    pub new: Option<Entry>,
    /// New median over old, and the range their intervals allow.
    pub ratio: f64,
    pub ratio_low: f64,
    pub ratio_high: f64,
    pub verdict: Verdict,
}

impl Pair {
    /// `ratio [low, high]`, or a dash when one side is missing.
    pub fn ratio_text(&self) -> String {
        if self.ratio.is_finite() {
            format!(
                "{:.3} [{:.3}, {:.3}]",
                self.ratio, self.ratio_low, self.ratio_high
            )
        } else {
            "–".into()
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub threshold: f64,
    pub pairs: Vec<Pair>,
}

impl Diff {
    pub fn regressions(&self) -> impl Iterator<Item = &Pair> {
        self.pairs
            .iter()
            .filter(|p| p.verdict == Verdict::Regression)
    }
}

/// Pairs old and new entries by identity. Entries of different GPUs are
/// refused unless `across_gpus`.
pub fn diff(old: &[Entry], new: &[Entry], threshold: f64, across_gpus: bool) -> Diff {
    let mut pairs = Vec::new();
    for n in new {
        let same_id: Vec<&Entry> = old.iter().filter(|o| o.identity == n.identity).collect();
        let o = same_id
            .iter()
            .find(|o| o.gpu == n.gpu)
            .or_else(|| same_id.first())
            .copied();
        let Some(o) = o else {
            pairs.push(Pair {
                name: n.name.clone(),
                old: None,
                new: Some(n.clone()),
                ratio: f64::NAN,
                ratio_low: f64::NAN,
                ratio_high: f64::NAN,
                verdict: Verdict::New,
            });
            continue;
        };
        let ratio = n.median_us / o.median_us;
        let (lo, hi) = (n.ci_low_us / o.ci_high_us, n.ci_high_us / o.ci_low_us);
        let beyond_noise = n.ci_low_us > o.ci_high_us || n.ci_high_us < o.ci_low_us;
        let verdict = if o.gpu != n.gpu && !across_gpus {
            Verdict::DifferentGpu
        } else if !beyond_noise {
            Verdict::Same
        } else if ratio > 1.0 + threshold {
            Verdict::Regression
        } else if ratio < 1.0 - threshold {
            Verdict::Improvement
        } else if ratio > 1.0 {
            Verdict::Slower
        } else {
            Verdict::Faster
        };
        pairs.push(Pair {
            name: n.name.clone(),
            old: Some(o.clone()),
            new: Some(n.clone()),
            ratio,
            ratio_low: lo,
            ratio_high: hi,
            verdict,
        });
    }
    for o in old {
        if !new.iter().any(|n| n.identity == o.identity) {
            pairs.push(Pair {
                name: o.name.clone(),
                old: Some(o.clone()),
                new: None,
                ratio: f64::NAN,
                ratio_low: f64::NAN,
                ratio_high: f64::NAN,
                verdict: Verdict::Missing,
            });
        }
    }
    Diff { threshold, pairs }
}
