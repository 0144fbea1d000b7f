//! Pieces of a measurement record every timing verb fills the same way: the
//! environment, the kernels, the subject, the bytes moved, the method.

use crate::bench::MethodArg;
use crate::exit;
use fusebench_engine::Prepared;
use fusebench_ir::Fusion;
use fusebench_measure::{
    CachePolicy, KernelRecord, Measurement, Method, Run, StoppingRule, Subject,
};
use fusebench_reference::Arg;
use fusebench_runtime::{ClockReader, Cupti};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn kernels(prep: &Prepared, median_us: &[f64]) -> Vec<KernelRecord> {
    prep.plan
        .kernels
        .iter()
        .zip(&prep.kernels)
        .zip(median_us)
        .map(|((pk, k), &us)| KernelRecord {
            name: pk.name.clone(),
            code_hash: pk.code_hash.clone(),
            grid: pk.grid,
            block: pk.block,
            shared_bytes: k.attributes().static_shared_bytes,
            registers: k.attributes().registers_per_thread,
            median_us: us,
        })
        .collect()
}

pub fn subject(name: &str, f: &Fusion, inputs: &[Arg]) -> Subject {
    let (inputs_hash, layouts) = crate::fingerprint::inputs(inputs);
    Subject {
        name: name.to_string(),
        definition_hash: crate::fingerprint::definition(f),
        inputs_hash,
        inputs: layouts,
    }
}

/// Everything a run of samples of one prepared fusion needs to become a record.
pub struct Measured<'a> {
    pub name: &'a str,
    pub fusion: &'a Fusion,
    pub inputs: &'a [Arg],
    pub prep: &'a Prepared,
    pub cache: CachePolicy,
    pub cupti: bool,
    pub rule: &'a dyn StoppingRule,
    pub run: &'a Run,
    pub per_kernel_median_us: &'a [f64],
    pub context: Option<String>,
}

impl Measured<'_> {
    /// The record; an invalid sample makes it an error, never a stored result.
    pub fn record(&self) -> anyhow::Result<Measurement> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut m = Measurement::new(
            subject(self.name, self.fusion, self.inputs),
            if self.cupti {
                Method::Cupti
            } else {
                Method::CudaEvents
            },
            self.cache,
            self.rule.describe(),
            self.run.stop.clone(),
            self.run.warmup,
            fusebench_engine::environment(self.prep.gpu.info()),
            kernels(self.prep, self.per_kernel_median_us),
            self.run.samples.clone(),
            now,
        )?;
        m.bytes = Some(self.prep.bytes_moved(self.inputs) as u64);
        m.device_bytes = Some(self.prep.device_bytes() as u64);
        m.context = self.context.clone();
        m.cold_setup =
            (self.cache == CachePolicy::Cold).then(|| fusebench_engine::cold_setup(&self.prep.gpu));
        Ok(m)
    }
}

/// CUPTI as `--method` asks: `Ok(None)` means CUDA events (asked for, or the
/// fallback of `auto`, said on stderr); a CUPTI that `cupti` needs and cannot
/// start is a usage error.
pub fn start_cupti(method: MethodArg) -> Result<Option<Cupti>, ExitCode> {
    match method {
        MethodArg::Events => Ok(None),
        MethodArg::Cupti => Cupti::start().map(Some).map_err(|e| {
            eprintln!("error: --method cupti: {e}");
            ExitCode::from(exit::USAGE)
        }),
        MethodArg::Auto => match Cupti::start() {
            Ok(c) => Ok(Some(c)),
            Err(e) => {
                eprintln!("note: timing with CUDA events, CUPTI is unavailable: {e}");
                Ok(None)
            }
        },
    }
}

/// NVML's clock reader, or none with the reason said.
pub fn clock_reader() -> Option<ClockReader> {
    match ClockReader::new(0) {
        Ok(c) => Some(c),
        Err(reason) => {
            eprintln!("note: samples carry no clock readings: {reason}");
            None
        }
    }
}
