//! Two sets of results compared per benchmark: a change counts only when it
//! is beyond the noise of both (their 95% intervals of the median do not
//! overlap) and, to fail a CI job, also beyond a threshold. Results are paired
//! by what was measured (`Entry::identity`) and compared only when they were
//! measured the same way (`Entry::how`: method and cold set-up) on the same
//! GPU: a CUPTI time against an events time, or a cold time after a read
//! flush against one after a write flush, differs by how it was taken, not by
//! what ran.

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
    /// Not compared: measured another way (method or cold set-up).
    NotComparable,
}

impl Verdict {
    /// The verdict in words, as tables print it.
    pub fn label(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
            .unwrap_or_default()
    }

    /// Whether the two sides were compared.
    pub fn compared(self) -> bool {
        matches!(
            self,
            Verdict::Same
                | Verdict::Faster
                | Verdict::Slower
                | Verdict::Improvement
                | Verdict::Regression
        )
    }

    /// Whether a pair was found but not compared.
    pub fn refused(self) -> bool {
        matches!(self, Verdict::DifferentGpu | Verdict::NotComparable)
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
    /// Why a pair was not compared ("NVIDIA H200 vs NVIDIA A100-SXM4-80GB").
    pub refused: Option<String>,
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

    /// The verdict as tables print it, with the reason for a refusal.
    pub fn verdict_text(&self) -> String {
        match (self.verdict, &self.refused) {
            (Verdict::DifferentGpu, Some(why)) => format!("not compared: {why}"),
            (Verdict::NotComparable, Some(why)) => format!("not comparable: {why}"),
            (v, _) => v.label(),
        }
    }
}

/// Comparisons to make although the two sides differ in a way that usually
/// makes them meaningless.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Across {
    /// Results taken on different GPUs.
    pub gpus: bool,
    /// Results taken by another method or cold set-up.
    pub methods: bool,
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

    /// How many pairs were compared (not refused, not one-sided).
    pub fn compared(&self) -> usize {
        self.pairs.iter().filter(|p| p.verdict.compared()).count()
    }

    /// The pairs found on both sides but not compared.
    pub fn refused(&self) -> impl Iterator<Item = &Pair> {
        self.pairs.iter().filter(|p| p.verdict.refused())
    }
}

/// The method and cold set-up of `how` in words: "cupti" or "cupti, write flush ...".
fn how_text(e: &Entry) -> String {
    let how = e.how();
    match how.split_once('|') {
        Some((method, "")) => method.to_string(),
        Some((method, setup)) => format!("{method}, {setup}"),
        None => how,
    }
}

/// Why `o` and `n` are not compared, if they are not.
fn refusal(o: &Entry, n: &Entry, across: Across) -> Option<(Verdict, String)> {
    if o.gpu != n.gpu && !across.gpus {
        return Some((Verdict::DifferentGpu, format!("{} vs {}", o.gpu, n.gpu)));
    }
    if o.how() != n.how() && !across.methods {
        return Some((
            Verdict::NotComparable,
            format!("{} vs {}", how_text(o), how_text(n)),
        ));
    }
    None
}

/// Pairs old and new entries by identity, preferring an old result from the
/// same GPU taken the same way. Pairs from different GPUs, or taken another
/// way, are refused unless `across` says otherwise.
pub fn diff(old: &[Entry], new: &[Entry], threshold: f64, across: Across) -> Diff {
    let mut pairs = Vec::new();
    for n in new {
        let o = old
            .iter()
            .filter(|o| o.identity == n.identity)
            // The first of the best: reversed, as max_by_key keeps the last.
            .rev()
            .max_by_key(|o| (o.gpu == n.gpu, o.how() == n.how()));
        let Some(o) = o else {
            pairs.push(Pair {
                name: n.name.clone(),
                old: None,
                new: Some(n.clone()),
                ratio: f64::NAN,
                ratio_low: f64::NAN,
                ratio_high: f64::NAN,
                verdict: Verdict::New,
                refused: None,
            });
            continue;
        };
        let ratio = n.median_us / o.median_us;
        let (lo, hi) = (n.ci_low_us / o.ci_high_us, n.ci_high_us / o.ci_low_us);
        let beyond_noise = n.ci_low_us > o.ci_high_us || n.ci_high_us < o.ci_low_us;
        let refused = refusal(o, n, across);
        let verdict = match &refused {
            Some((v, _)) => *v,
            None if !beyond_noise => Verdict::Same,
            None if ratio > 1.0 + threshold => Verdict::Regression,
            None if ratio < 1.0 - threshold => Verdict::Improvement,
            None if ratio > 1.0 => Verdict::Slower,
            None => Verdict::Faster,
        };
        pairs.push(Pair {
            name: n.name.clone(),
            old: Some(o.clone()),
            new: Some(n.clone()),
            ratio,
            ratio_low: lo,
            ratio_high: hi,
            verdict,
            refused: refused.map(|(_, why)| why),
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
                refused: None,
            });
        }
    }
    Diff { threshold, pairs }
}
