//! One result of one benchmark, whatever file it came from.

use fusebench_measure::{
    stats::median_ci_ranks, summarize, CachePolicy, Cause, Environment, Measurement, Method,
    Sample, Side, Stop, Subject, Summary,
};
use serde::Serialize;
use std::borrow::Cow;

/// The tool that took a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tool {
    Fusebench,
    Nvbench,
    PytestBenchmark,
    GoogleBenchmark,
}

impl Tool {
    /// The tool as people write it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Fusebench => "fusebench",
            Tool::Nvbench => "nvbench",
            Tool::PytestBenchmark => "pytest-benchmark",
            Tool::GoogleBenchmark => "Google Benchmark",
        }
    }
}

/// The tool that took a result and how, as far as its file says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Origin {
    pub tool: Tool,
    pub method: Method,
    /// What was in L2 before each sample; `None` when the file does not say.
    pub cache: Option<CachePolicy>,
    /// What ran before each cold sample, in words.
    pub cold_setup: Option<String>,
    /// What the time is, in the tool's words, when the method says less.
    pub timed_by: Option<String>,
}

impl Origin {
    /// nvbench's cold time (isolated launches, L2 flushed) or its batch time.
    pub fn nvbench(cold: bool) -> Origin {
        if cold {
            Origin {
                tool: Tool::Nvbench,
                method: Method::CudaEvents,
                cache: Some(CachePolicy::Cold),
                cold_setup: Some("nvbench's flush: a memset of the L2's size before each sample".into()),
                timed_by: Some(
                    "nvbench's cold time: CUDA events around one launch after nvbench's own L2 flush (launch processing inside)".into(),
                ),
            }
        } else {
            Origin {
                tool: Tool::Nvbench,
                method: Method::CudaEventsBatch,
                cache: Some(CachePolicy::Warm),
                cold_setup: None,
                timed_by: Some(
                    "nvbench's batch time: CUDA events around many launches back to back, divided by their count".into(),
                ),
            }
        }
    }

    /// A host clock around each call or iteration, L2 left as the last one left it.
    pub fn host_clock(tool: Tool) -> Origin {
        let timed_by = match tool {
            Tool::GoogleBenchmark => "Google Benchmark's real time: a host clock around each iteration (unless the benchmark set its own time)",
            _ => "pytest-benchmark's time: a host clock around the Python call (the call itself, the launches, and the wait for the GPU if the call waits)",
        };
        Origin {
            tool,
            method: Method::HostClock,
            cache: None,
            cold_setup: None,
            timed_by: Some(timed_by.into()),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// For people: the fusion's or the benchmark's name.
    pub name: String,
    /// What must be equal for two entries to be the same benchmark: for a
    /// fusebench record its `what()` (definition, input dtypes and shapes,
    /// cache policy, context); for other tools the benchmark's full name.
    pub identity: String,
    /// The GPU (or machine) it ran on.
    pub gpu: String,
    pub median_us: f64,
    /// 95% interval of the median (from the samples when there are samples,
    /// else from the mean and standard deviation the tool reported).
    pub ci_low_us: f64,
    pub ci_high_us: f64,
    pub n: usize,
    pub origin: Origin,
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

    /// How it was measured: the method and the cold set-up, as
    /// `Measurement::how` writes them. Two results of one benchmark compare
    /// only when these are equal.
    pub fn how(&self) -> String {
        match &self.record {
            Some(m) => m.how(),
            None => Measurement::how_of(self.origin.method, self.origin.cold_setup.as_deref()),
        }
    }

    /// From raw samples: the median and its interval from order statistics.
    pub fn from_samples(
        name: String,
        identity: String,
        gpu: String,
        samples_us: Vec<f64>,
        origin: Origin,
        source: &str,
    ) -> Option<Entry> {
        // Samples that are not numbers were failed runs: not kept.
        let kept: Vec<f64> = samples_us.into_iter().filter(|x| x.is_finite()).collect();
        if kept.is_empty() {
            return None;
        }
        let mut s = kept.clone();
        s.sort_by(|a, b| a.total_cmp(b));
        let (lo, hi) = median_ci_ranks(s.len());
        Some(Entry {
            name,
            identity,
            gpu,
            median_us: fusebench_measure::stats::quantile_sorted(&s, 0.5),
            ci_low_us: s[lo],
            ci_high_us: s[hi],
            n: s.len(),
            origin,
            samples_us: kept,
            record: None,
            taken_at: 0,
            source: source.to_string(),
        })
    }

    /// From a centre (the median where the tool gives one, else the mean), a relative
    /// standard deviation and a sample count, as tools that keep no samples report: the
    /// normal approximation of the interval.
    #[allow(clippy::too_many_arguments)]
    pub fn from_summary(
        name: String,
        identity: String,
        gpu: String,
        center_us: f64,
        rel_stdev: f64,
        n: usize,
        origin: Origin,
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
            origin,
            samples_us: Vec::new(),
            record: None,
            taken_at: 0,
            source: source.to_string(),
        }
    }

    /// A fusebench measurement.
    pub fn from_record(m: &Measurement, source: &str) -> Entry {
        Entry {
            name: m.subject.name.clone(),
            identity: m.what(),
            gpu: m.environment.gpu_name.clone(),
            median_us: m.summary.median,
            ci_low_us: m.summary.ci_low,
            ci_high_us: m.summary.ci_high,
            n: m.summary.n,
            origin: Origin {
                tool: Tool::Fusebench,
                method: m.method,
                cache: Some(m.cache),
                cold_setup: m.cold_setup.clone(),
                timed_by: None,
            },
            samples_us: m.samples.iter().map(|s| s.time_us).collect(),
            record: Some(m.clone()),
            taken_at: m.taken_at,
            source: source.to_string(),
        }
    }

    /// The entry as one side of `explain`: its record, or for another tool's
    /// result a record of what the file says, with every cause it cannot
    /// speak to marked unknown and why.
    pub fn side(&self) -> Side<'_> {
        if let Some(m) = &self.record {
            return Side::from(m);
        }
        let tool = self.origin.tool.name();
        let mut unknown = vec![
            (
                Cause::Kernels,
                format!("{tool}'s file does not record the kernels"),
            ),
            (
                Cause::InputLayout,
                format!("{tool}'s file does not record the inputs' layouts"),
            ),
            (
                Cause::Fusion,
                format!("{tool}'s file names the benchmark, not what it ran"),
            ),
            (
                Cause::Clocks,
                format!("{tool}'s file holds no clock reading per sample"),
            ),
        ];
        let gpu_known = self.origin.tool == Tool::Nvbench;
        unknown.push((
            Cause::Gpu,
            if gpu_known {
                format!("{tool}'s file names the GPU model, not the card or the driver")
            } else {
                format!(
                    "{tool}'s file names the machine ({}), not the GPU",
                    self.gpu
                )
            },
        ));
        unknown.push((
            Cause::Toolchain,
            format!("{tool}'s file does not say which compiler or library versions built what it ran"),
        ));
        if self.origin.cache.is_none() {
            let why = format!("{tool}'s file does not say what was in L2 before each sample");
            unknown.push((Cause::CachePolicy, why.clone()));
            unknown.push((Cause::WorkingSetVsL2, why));
        }
        let samples: Vec<Sample> = self.samples_us.iter().map(|&t| Sample::time(t)).collect();
        let summary = if samples.is_empty() {
            Summary {
                n: self.n,
                min: self.median_us,
                median: self.median_us,
                p90: self.median_us,
                max: self.median_us,
                mean: self.median_us,
                ci_low: self.ci_low_us,
                ci_high: self.ci_high_us,
                rel_ci: (self.ci_high_us - self.ci_low_us) / 2.0 / self.median_us,
                outliers_low: 0,
                outliers_high: 0,
            }
        } else {
            summarize(&self.samples_us)
        };
        let record = Measurement {
            schema: fusebench_measure::SCHEMA_VERSION,
            subject: Subject {
                name: self.name.clone(),
                definition_hash: self.identity.clone(),
                inputs_hash: String::new(),
                inputs: Vec::new(),
            },
            method: self.origin.method,
            // A placeholder where the file does not say: marked unknown above.
            cache: self.origin.cache.unwrap_or(CachePolicy::Warm),
            rule: format!("as {tool} sampled it"),
            stop: Stop::Count,
            warmup: 0,
            environment: Environment {
                gpu_name: if gpu_known {
                    self.gpu.clone()
                } else {
                    String::new()
                },
                ..Environment::default()
            },
            kernels: Vec::new(),
            summary,
            throttled_samples: 0,
            samples,
            taken_at: self.taken_at,
            bytes: None,
            device_bytes: None,
            context: None,
            cold_setup: self.origin.cold_setup.clone(),
            stopping: None,
            bytes_counted: None,
            ceiling: None,
            knobs: Default::default(),
            siblings: Vec::new(),
        };
        Side {
            record: Cow::Owned(record),
            unknown,
            timed_by: self.origin.timed_by.clone(),
        }
    }
}
