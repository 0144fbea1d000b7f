//! The measurement core of fusebench: statistics of samples (`stats`), when
//! to stop sampling (`stopping`), the sampling loop (`sampler`) and the record
//! of a measurement (`record`). The GPU side (CUPTI, L2 policies, clocks)
//! feeds samples into this; the store keeps the records.

pub mod explain;
pub mod record;
pub mod sampler;
pub mod stats;
pub mod stopping;
pub mod words;

pub use explain::{
    explain, explain_sides, Answer, Basis, Cause, Explanation, Finding, Side, Together, Verdict,
};
pub use record::{
    CachePolicy, Ceiling, Clocks, Environment, InputLayout, KernelRecord, MeasureError,
    Measurement, Method, Sample, Sibling, Subject, SCHEMA_VERSION,
};
pub use sampler::{sample, sample_steps, Run, Taken};
pub use stats::{differ, median, summarize, Summary};
pub use words::plural;
pub use stopping::{FixedCount, NoiseTarget, RuleSpec, Stop, StoppingRule, TimeLimit};
