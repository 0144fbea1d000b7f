//! One result of one benchmark, whatever file it came from.

use fusebench_measure::{stats::median_ci_ranks, Measurement};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// For people: the fusion's or the benchmark's name.
    pub name: String,
    /// What must be equal for two entries to be the same benchmark: for a
    /// fusion its definition hash, input shapes and dtypes, cache policy and
    /// context; for other tools the benchmark's full name.
    pub identity: String,
    /// The GPU (or machine) it ran on.
    pub gpu: String,
    pub median_us: f64,
    /// 95% interval of the median (from the samples when there are samples,
    /// else from the mean and standard deviation the tool reported).
    pub ci_low_us: f64,
    pub ci_high_us: f64,
    pub n: usize,
    #[serde(skip)]
    pub samples_us: Vec<f64>,
    #[serde(skip)]
    pub record: Option<Measurement>,
    /// Seconds since the Unix epoch, 0 when unknown: the later of two entries
    /// for one identity wins when runs are merged.
    pub taken_at: u64,
    pub source: String,
}

impl Entry {
    /// `median [low, high]` in µs.
    pub fn interval_text(&self) -> String {
        format!(
            "{:.2} [{:.2}, {:.2}]",
            self.median_us, self.ci_low_us, self.ci_high_us
        )
    }

    /// From raw samples: the median and its interval from order statistics.
    pub fn from_samples(
        name: String,
        identity: String,
        gpu: String,
        samples_us: Vec<f64>,
        source: &str,
    ) -> Option<Entry> {
        let mut s: Vec<f64> = samples_us
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let (lo, hi) = median_ci_ranks(s.len());
        Some(Entry {
            name,
            identity,
            gpu,
            median_us: fusebench_measure::stats::quantile_sorted(&s, 0.5),
            ci_low_us: s[lo],
            ci_high_us: s[hi],
            n: s.len(),
            samples_us,
            record: None,
            taken_at: 0,
            source: source.to_string(),
        })
    }

    /// From a centre (the median where the tool gives one, else the mean), a relative
    /// standard deviation and a sample count, as tools that keep no samples report: the
    /// normal approximation of the interval.
    pub fn from_summary(
        name: String,
        identity: String,
        gpu: String,
        center_us: f64,
        rel_stdev: f64,
        n: usize,
        source: &str,
    ) -> Entry {
        let half = 1.96 * rel_stdev.abs() * center_us / (n.max(1) as f64).sqrt();
        Entry {
            name,
            identity,
            gpu,
            median_us: center_us,
            ci_low_us: center_us - half,
            ci_high_us: center_us + half,
            n,
            samples_us: Vec::new(),
            record: None,
            taken_at: 0,
            source: source.to_string(),
        }
    }

    /// A fusebench measurement.
    pub fn from_record(m: &Measurement, source: &str) -> Entry {
        let shapes: Vec<String> = m
            .subject
            .inputs
            .iter()
            .map(|i| format!("{}{:?}", i.dtype, i.shape))
            .collect();
        let policy = serde_json::to_value(m.cache)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        Entry {
            name: m.subject.name.clone(),
            identity: format!(
                "{}|{}|{}|{}",
                m.subject.definition_hash,
                shapes.join(","),
                policy,
                m.context.as_deref().unwrap_or("standalone")
            ),
            gpu: m.environment.gpu_name.clone(),
            median_us: m.summary.median,
            ci_low_us: m.summary.ci_low,
            ci_high_us: m.summary.ci_high,
            n: m.summary.n,
            samples_us: m.samples.iter().map(|s| s.time_us).collect(),
            record: Some(m.clone()),
            taken_at: m.taken_at,
            source: source.to_string(),
        }
    }
}
