//! The record of one measurement, as stored and as written in JSON: what was
//! measured, how, where, every raw sample, and the summary. Versioned so that
//! old files and databases stay readable or are refused with a reason.

use crate::stats::{summarize, Summary};
use crate::stopping::{RuleSpec, Stop};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// Version of the record's JSON schema (docs/result-schema.md). Version 1
/// records are read too (their environment moved to version 2's fields).
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Error, Debug, Clone, PartialEq)]
pub enum MeasureError {
    #[error("no samples: a measurement needs at least one")]
    NoSamples,
    #[error("sample {index} is {value}: a kernel time must be a finite number above zero")]
    BadSample { index: usize, value: f64 },
    #[error("measurement JSON: {0}")]
    Json(String),
    #[error("measurement schema version {found} is not supported; this build reads versions 1 to {SCHEMA_VERSION}")]
    Version { found: u32 },
}

/// GPU clocks and state read (never set) while a sample was taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Clocks {
    pub sm_mhz: u32,
    pub mem_mhz: u32,
    pub temperature_c: u32,
    pub power_w: f64,
    /// NVML's clock-throttle-reason bits; 0 means none.
    pub throttle_reasons: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub time_us: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks: Option<Clocks>,
    /// With CUPTI kernel times, the same sample timed by CUDA events around the
    /// launches: what the events method would have reported, for `explain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_us: Option<f64>,
}

impl Sample {
    pub fn time(time_us: f64) -> Sample {
        Sample {
            time_us,
            clocks: None,
            events_us: None,
        }
    }
    pub fn throttled(&self) -> bool {
        self.clocks
            .as_ref()
            .is_some_and(|c| c.throttle_reasons != 0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CachePolicy {
    /// L2 flushed before every sample.
    Cold,
    /// Back to back.
    Warm,
    /// Cycling through copies of the inputs that together exceed L2.
    Rotate,
    /// Whatever the surrounding program left in L2 (timing inside a program).
    InProgram,
}

impl CachePolicy {
    /// The policy as records and tables spell it.
    pub fn name(self) -> &'static str {
        match self {
            CachePolicy::Cold => "cold",
            CachePolicy::Warm => "warm",
            CachePolicy::Rotate => "rotate",
            CachePolicy::InProgram => "in_program",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Kernel durations from CUPTI activity records.
    Cupti,
    /// CUDA events around the launches, a blocking kernel in front.
    CudaEvents,
    /// CUDA events around many launches back to back, divided by their count
    /// (nvbench's batch time): launch overhead overlaps the kernels.
    CudaEventsBatch,
    /// A host clock around the call (pytest-benchmark, Google Benchmark's real
    /// time): the call itself, the launches and the wait for the GPU.
    HostClock,
}

impl Method {
    /// The method as records spell it.
    pub fn name(self) -> &'static str {
        match self {
            Method::Cupti => "cupti",
            Method::CudaEvents => "cuda_events",
            Method::CudaEventsBatch => "cuda_events_batch",
            Method::HostClock => "host_clock",
        }
    }

    /// The method in words, as tables head their times.
    pub fn words(self) -> &'static str {
        match self {
            Method::Cupti => "CUPTI kernel records",
            Method::CudaEvents => "CUDA events",
            Method::CudaEventsBatch => "CUDA events over a batch",
            Method::HostClock => "a host clock",
        }
    }
}

/// Where the measurement was taken.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub gpu_name: String,
    pub gpu_uuid: String,
    /// The GPU's PCI address ("0000:18:00.0"): which board of a host it was,
    /// when a host has several of one kind; empty when unknown (records
    /// before it was kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pci_bus: String,
    /// The driver release, as NVML reports it ("580.159.04"); empty when unknown.
    pub driver: String,
    /// The CUDA API version the driver supports ("13.0").
    pub cuda: String,
    /// The NVRTC version kernels were compiled with ("13.0"); empty when none were.
    #[serde(default)]
    pub nvrtc: String,
    pub sm_count: u32,
    pub l2_bytes: u64,
    pub fusebench_version: String,
    /// The libraries that ran part of what was measured, with their versions
    /// ("cuBLASLt 130000, cuDNN 91400"): their kernels are theirs, not
    /// fusebench's. Empty when none did (and in records before it was kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub libraries: String,
}

/// One kernel of the measured fusion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRecord {
    pub name: String,
    /// Hash of the kernel's code.
    pub code_hash: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub registers: u32,
    pub median_us: f64,
}

/// How one tensor input lay in memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InputLayout {
    /// torch's name: `bfloat16`, `float32`, ...; `scalar` for a scalar input.
    pub dtype: String,
    pub shape: Vec<usize>,
    /// In elements.
    pub strides: Vec<i64>,
    /// Offset of the first element from a 256-byte aligned allocation.
    pub byte_offset: usize,
}

/// What was measured: the fusion's definition and its inputs' layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Subject {
    /// A name for people (the script's file name).
    pub name: String,
    /// Hash of the fusion's definition (its JSON form).
    pub definition_hash: String,
    /// Hash of `inputs`.
    pub inputs_hash: String,
    #[serde(default)]
    pub inputs: Vec<InputLayout>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub schema: u32,
    pub subject: Subject,
    pub method: Method,
    pub cache: CachePolicy,
    /// The stopping rule, described.
    pub rule: String,
    pub stop: Stop,
    pub warmup: usize,
    pub environment: Environment,
    pub kernels: Vec<KernelRecord>,
    pub summary: Summary,
    /// Samples taken while the GPU reported a throttle reason.
    pub throttled_samples: usize,
    pub samples: Vec<Sample>,
    /// Seconds since the Unix epoch.
    pub taken_at: u64,
    /// Bytes the fusion moves (inputs it addresses plus outputs it writes): its working set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Device memory the engine allocated to run the fusion (inputs, outputs, temporaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<u64>,
    /// Where it ran: standalone, or inside a program ("program NAME, fusion i of n").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// For the cold policy, what ran before each sample ("write flush of 120 MiB,
    /// instruction caches evicted, inputs in 4 placements"): two cold times taken with
    /// different set-ups can differ by more than 10%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_setup: Option<String>,
    /// The stopping rule by name with every parameter (`rule` says it in words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<RuleSpec>,
    /// How `bytes` was counted ("inputs as addressed, broadcast dims once; ...").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_counted: Option<String>,
    /// A copy of `bytes` timed beside the subject by the same method, cache policy
    /// and set-up: the ceiling "% of copy" is read against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<Ceiling>,
    /// FUSEBENCH_* settings that were set and change this measurement.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
    /// The same subject timed right after under the other cache policy and by the
    /// other method (cold and warm, CUPTI and CUDA events: every combination but
    /// this record's own): how much this subject's own time moves with each, which
    /// `explain` needs to tell the environment's share of a difference from the
    /// kernels'. An events sibling of a CUPTI record is timed with CUPTI paused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub siblings: Vec<Sibling>,
}

/// A short measurement of the same subject under another policy or method.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sibling {
    pub cache: CachePolicy,
    pub method: Method,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_setup: Option<String>,
    pub median_us: f64,
    pub ci_low_us: f64,
    pub ci_high_us: f64,
    pub n: usize,
    /// The events window of the same samples, with CUPTI kernel times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_median_us: Option<f64>,
    /// Each kernel's median, in launch order.
    pub kernels_us: Vec<f64>,
}

impl Sibling {
    /// The sibling of a record: its summary, events median and kernel medians.
    pub fn of(m: &Measurement) -> Sibling {
        Sibling {
            cache: m.cache,
            method: m.method,
            cold_setup: m.cold_setup.clone(),
            median_us: m.summary.median,
            ci_low_us: m.summary.ci_low,
            ci_high_us: m.summary.ci_high,
            n: m.summary.n,
            events_median_us: m.events_median_us(),
            kernels_us: m.kernels.iter().map(|k| k.median_us).collect(),
        }
    }
}

/// A device-to-device copy timed like the subject beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// Bytes read plus bytes written (half each).
    pub bytes: u64,
    /// The best median over the launch shapes tried, and its interval.
    pub median_us: f64,
    pub ci_low_us: f64,
    pub ci_high_us: f64,
    pub n: usize,
    /// The launch shape of that best median.
    pub grid: [u32; 3],
    pub block: [u32; 3],
}

/// What a record derives from its samples (the summary and the throttled
/// count), after checking them: none, or one that is not a positive finite
/// time, makes no measurement.
fn derived(samples: &[Sample]) -> Result<(Summary, usize), MeasureError> {
    if samples.is_empty() {
        return Err(MeasureError::NoSamples);
    }
    if let Some((index, s)) = samples
        .iter()
        .enumerate()
        .find(|(_, s)| !(s.time_us.is_finite() && s.time_us > 0.0))
    {
        return Err(MeasureError::BadSample {
            index,
            value: s.time_us,
        });
    }
    let times: Vec<f64> = samples.iter().map(|s| s.time_us).collect();
    Ok((
        summarize(&times),
        samples.iter().filter(|s| s.throttled()).count(),
    ))
}

impl Measurement {
    /// A record from valid samples; a sample that is not a positive finite
    /// time makes the whole measurement invalid.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        subject: Subject,
        method: Method,
        cache: CachePolicy,
        rule: String,
        stop: Stop,
        warmup: usize,
        environment: Environment,
        kernels: Vec<KernelRecord>,
        samples: Vec<Sample>,
        taken_at: u64,
    ) -> Result<Measurement, MeasureError> {
        let (summary, throttled_samples) = derived(&samples)?;
        Ok(Measurement {
            schema: SCHEMA_VERSION,
            summary,
            throttled_samples,
            subject,
            method,
            cache,
            rule,
            stop,
            warmup,
            environment,
            kernels,
            samples,
            cold_setup: None,
            taken_at,
            bytes: None,
            device_bytes: None,
            context: None,
            stopping: None,
            bytes_counted: None,
            ceiling: None,
            knobs: BTreeMap::new(),
            siblings: Vec::new(),
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a measurement always serializes")
    }

    /// Reads a record, refusing unknown schema versions and invalid samples.
    /// The summary and the throttled count are derived: recomputed from the
    /// samples rather than trusted.
    pub fn from_json(text: &str) -> Result<Measurement, MeasureError> {
        #[derive(Deserialize)]
        struct Version {
            schema: u32,
        }
        let v: Version =
            serde_json::from_str(text).map_err(|e| MeasureError::Json(e.to_string()))?;
        if !(1..=SCHEMA_VERSION).contains(&v.schema) {
            return Err(MeasureError::Version { found: v.schema });
        }
        let mut m: Measurement =
            serde_json::from_str(text).map_err(|e| MeasureError::Json(e.to_string()))?;
        if v.schema == 1 {
            // Version 1 wrote the CUDA API version as `driver` and NVRTC's as `cuda`.
            let e = &mut m.environment;
            e.nvrtc = e.cuda.trim_start_matches("NVRTC ").to_string();
            e.cuda = std::mem::take(&mut e.driver);
        }
        m.schema = SCHEMA_VERSION;
        (m.summary, m.throttled_samples) = derived(&m.samples)?;
        Ok(m)
    }

    /// What was measured: the definition, the inputs' dtypes and shapes, the
    /// cache policy and the context. Two results with the same `what` are the
    /// same benchmark (and `diff` pairs them).
    pub fn what(&self) -> String {
        let shapes: Vec<String> = self
            .subject
            .inputs
            .iter()
            .map(|i| format!("{}{:?}", i.dtype, i.shape))
            .collect();
        format!(
            "{}|{}|{}|{}",
            self.subject.definition_hash,
            shapes.join(","),
            self.cache.name(),
            self.context.as_deref().unwrap_or("standalone")
        )
    }

    /// How it was measured: the method and the cold set-up. Results of one
    /// benchmark taken differently are not comparable (a CUPTI time against an
    /// events time, a read flush against a write flush).
    pub fn how(&self) -> String {
        Measurement::how_of(self.method, self.cold_setup.as_deref())
    }

    /// `how` of a result taken by `method` with `cold_setup`, for results that
    /// are not fusebench records (other tools' files).
    pub fn how_of(method: Method, cold_setup: Option<&str>) -> String {
        format!("{}|{}", method.name(), cold_setup.unwrap_or(""))
    }

    /// The sibling timed under `cache` by `method`, if the record has one.
    pub fn sibling(&self, cache: CachePolicy, method: Method) -> Option<&Sibling> {
        self.siblings
            .iter()
            .find(|s| s.cache == cache && s.method == method)
    }

    /// "% of copy": the copy ceiling's median over this median, in percent.
    pub fn pct_of_ceiling(&self) -> Option<f64> {
        self.ceiling
            .as_ref()
            .map(|c| 100.0 * c.median_us / self.summary.median)
    }

    /// The median of the events times the samples carry beside their CUPTI times.
    pub fn events_median_us(&self) -> Option<f64> {
        let v: Vec<f64> = self.samples.iter().filter_map(|s| s.events_us).collect();
        (v.len() == self.samples.len() && !v.is_empty()).then(|| crate::stats::median(&v))
    }

    /// The median SM clock over the samples that carry a reading.
    pub fn median_sm_mhz(&self) -> Option<f64> {
        let v: Vec<f64> = self
            .samples
            .iter()
            .filter_map(|s| s.clocks.as_ref().map(|c| c.sm_mhz as f64))
            .collect();
        (!v.is_empty()).then(|| crate::stats::median(&v))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_libraries_a_measurement_ran_are_kept_and_older_records_read_without() {
        let e = Environment { libraries: "cuDNN 91400".into(), ..Default::default() };
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains("\"libraries\":\"cuDNN 91400\""), "{json}");
        assert_eq!(serde_json::from_str::<Environment>(&json).unwrap(), e);
        let plain = serde_json::to_string(&Environment::default()).unwrap();
        assert!(!plain.contains("libraries"), "{plain}");
        assert_eq!(serde_json::from_str::<Environment>(&plain).unwrap().libraries, "");
    }

    pub fn example(times: &[f64]) -> Result<Measurement, MeasureError> {
        Measurement::new(
            Subject {
                name: "seed_rmsnorm_legacy.py".into(),
                definition_hash: "d1".into(),
                inputs_hash: "i1".into(),
                inputs: vec![InputLayout {
                    dtype: "bfloat16".into(),
                    shape: vec![4, 1024, 4096],
                    strides: vec![4194304, 4096, 1],
                    byte_offset: 0,
                }],
            },
            Method::CudaEvents,
            CachePolicy::Cold,
            "fixed count of 3 samples".into(),
            Stop::Count,
            3,
            Environment {
                gpu_name: "NVIDIA H200".into(),
                sm_count: 132,
                ..Default::default()
            },
            vec![],
            times.iter().map(|&t| Sample::time(t)).collect(),
            1_764_480_000,
        )
    }

    #[test]
    fn invalid_samples_make_no_measurement() {
        assert_eq!(example(&[]).unwrap_err(), MeasureError::NoSamples);
        assert!(matches!(
            example(&[1.0, f64::NAN]).unwrap_err(),
            MeasureError::BadSample { index: 1, .. }
        ));
        assert!(matches!(
            example(&[1.0, 0.0]).unwrap_err(),
            MeasureError::BadSample { index: 1, .. }
        ));
    }

    #[test]
    fn json_round_trip_keeps_every_sample_and_recomputes_the_summary() {
        let mut m = example(&[20.0, 19.0, 21.0, 19.5]).unwrap();
        m.bytes = Some(67 << 20);
        m.device_bytes = Some(70 << 20);
        m.context = Some("program p, fusion 1 of 2".into());
        m.cold_setup = Some("write flush of 120 MiB, inputs in 4 placements".into());
        let back = Measurement::from_json(&m.to_json()).unwrap();
        assert_eq!(back, m, "every field, the optional ones too");
        let mut v: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        v["summary"]["median"] = serde_json::json!(1.0);
        let fixed = Measurement::from_json(&v.to_string()).unwrap();
        assert_eq!(
            fixed.summary.median, 19.75,
            "a tampered summary is recomputed from the samples"
        );
        v["schema"] = serde_json::json!(99);
        assert_eq!(
            Measurement::from_json(&v.to_string()).unwrap_err(),
            MeasureError::Version { found: 99 }
        );
    }

    #[test]
    fn throttled_samples_are_counted() {
        let clocks = |t: u64| {
            Some(Clocks {
                sm_mhz: 1980,
                mem_mhz: 3201,
                temperature_c: 40,
                power_w: 300.0,
                throttle_reasons: t,
            })
        };
        let mut m = example(&[1.0, 1.0, 1.0]).unwrap();
        m.samples[1].clocks = clocks(4);
        m.samples[2].clocks = clocks(0);
        let m = Measurement::from_json(&m.to_json()).unwrap();
        assert_eq!(m.throttled_samples, 1);
    }
}
