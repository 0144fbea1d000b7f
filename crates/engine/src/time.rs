//! Kernel timing of one fusion under a cache policy and a stopping rule
//! (`fusebench-measure`), from CUPTI kernel records or CUDA events, and the
//! copy ceiling.

use crate::error::EngineError;
use crate::prepared::Prepared;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;
use fusebench_measure::{sample, CachePolicy, Run, Sample, StoppingRule};
use fusebench_runtime::{
    Activity, ActivityKind, ClockReader, Cupti, Gpu, KernelArg, HARNESS_KERNELS,
};

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub(crate) fn err(e: impl std::fmt::Display) -> EngineError {
    EngineError::Inputs(format!("timing: {e}"))
}

/// A measurement of a prepared fusion: the run of samples (times of all its
/// kernels together) and each kernel's median.
pub struct Timed {
    pub run: Run,
    pub per_kernel_median_us: Vec<f64>,
}

impl Prepared {
    /// Times the fusion's kernels with CUDA events, one event before and
    /// after every kernel, until `rule` stops. `Cold` flushes the L2 before
    /// each sample, `Warm` runs back to back, `Rotate` runs back to back
    /// over copies of the inputs that together exceed twice the L2. Either way something is
    /// enqueued in front of the first event (the flush, or a kernel that
    /// spins without touching memory) so that the GPU is still busy while
    /// the host enqueues the launches: launch latency stays out of the
    /// window, as with nvbench's blocking kernel. Other policies are not
    /// measured by this method.
    ///
    /// With `clocks`, each sample carries a reading of the GPU's clocks,
    /// temperature, power and throttle reasons taken right after it (outside
    /// the timed window).
    ///
    /// With `cupti`, a sample is the sum of the fusion's kernel durations from
    /// CUPTI's kernel records (gaps between kernels, the flush and the spin
    /// kernel excluded), and a sample whose records do not match the kernels
    /// launched is rejected, ending the run, rather than summed.
    pub fn measure(
        &self,
        cache: CachePolicy,
        warmup: usize,
        rule: &dyn StoppingRule,
        clocks: Option<&ClockReader>,
        cupti: Option<&Cupti>,
    ) -> Result<Timed, EngineError> {
        if cache == CachePolicy::InProgram {
            return Err(EngineError::Inputs(
                "the in-program policy is measured inside a program, not on a single fusion".into(),
            ));
        }
        let copies = match cache {
            CachePolicy::Rotate => {
                rotation_copies(self.input_bytes(), self.gpu.info().l2_cache_bytes as usize)
            }
            CachePolicy::Cold => cold_input_sets(),
            _ => 1,
        };
        self.make_input_copies(copies)?;
        let cold = cache == CachePolicy::Cold;
        let ctx = self.gpu.cuda_context();
        let stream = self.gpu.cuda_stream();
        let n = self.kernels.len();
        let events = (0..=n)
            .map(|_| ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let mut per: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut taken = 0usize;
        if let Some(c) = cupti {
            // Records of earlier work (uploads, other measurements) are not this fusion's.
            self.gpu.synchronize()?;
            c.take()?;
        }
        let run = sample(warmup, rule, || -> Result<Sample, EngineError> {
            if copies > 1 {
                self.use_input_set(taken);
            }
            if cold {
                self.gpu.flush_l2()?;
            } else {
                self.gpu.spin(SPIN_CYCLES)?;
            }
            events[0].record(stream).map_err(err)?;
            for k in 0..n {
                self.launch(k)?;
                events[k + 1].record(stream).map_err(err)?;
            }
            self.gpu.synchronize()?;
            taken += 1;
            let kernel_us: Vec<f64> = match cupti {
                Some(c) => self.kernel_records(c)?,
                None => between_events_us(&events)?,
            };
            // Warm-up runs are not samples: only keep kernel times of samples.
            if taken > warmup {
                for (p, &us) in per.iter_mut().zip(&kernel_us) {
                    p.push(us);
                }
            }
            let time_us = match cupti {
                Some(_) => kernel_us.iter().sum(),
                None => events[0].elapsed_ms(&events[n]).map_err(err)? as f64 * 1e3,
            };
            let clocks = crate::read_clocks(clocks);
            Ok(Sample {
                time_us,
                clocks,
                events_us: None,
            })
        })?;
        self.use_input_set(0);
        Ok(Timed {
            run,
            per_kernel_median_us: per.iter_mut().map(|v| median(v)).collect(),
        })
    }
}

impl Prepared {
    /// Name and launch shape of each kernel, in launch order.
    pub fn launch_list(&self) -> Vec<(String, [u32; 6])> {
        self.plan
            .kernels
            .iter()
            .map(|k| {
                let (g, b) = (k.grid, k.block);
                (k.name.clone(), [g[0], g[1], g[2], b[0], b[1], b[2]])
            })
            .collect()
    }

    /// Durations of this sample's kernels from CUPTI, in launch order, after
    /// checking that exactly the kernels launched were recorded.
    fn kernel_records(&self, cupti: &Cupti) -> Result<Vec<f64>, EngineError> {
        kernel_records(cupti, &self.launch_list())
    }
}

/// Durations of the kernels CUPTI recorded since the last call, in launch
/// order, after checking that they are exactly `launched` (name and launch
/// shape, in order): a missing, extra or different kernel rejects the sample.
pub(crate) fn kernel_records(
    cupti: &Cupti,
    launched: &[(String, [u32; 6])],
) -> Result<Vec<f64>, EngineError> {
    let mut seen: Vec<Activity> = cupti
        .take()?
        .into_iter()
        .filter(|a| a.kind == ActivityKind::Kernel && !HARNESS_KERNELS.contains(&a.name.as_str()))
        .collect();
    seen.sort_by_key(|a| a.start_ns);
    let recorded: Vec<(String, [u32; 6])> = seen.iter().map(Activity::launch).collect();
    if recorded != launched {
        let names = |v: &[(String, [u32; 6])]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        return Err(EngineError::Inputs(format!(
            "CUPTI recorded kernels {:?} for the launches {:?}; the sample is rejected, not summed",
            names(&recorded),
            names(launched)
        )));
    }
    Ok(seen.iter().map(Activity::duration_us).collect())
}

/// Microseconds between each event and the next: one time per kernel bracketed.
pub(crate) fn between_events_us(events: &[CudaEvent]) -> Result<Vec<f64>, EngineError> {
    events
        .windows(2)
        .map(|w| {
            w[0].elapsed_ms(&w[1])
                .map(|ms| ms as f64 * 1e3)
                .map_err(err)
        })
        .collect()
}

/// Sets of inputs the rotate policy cycles through: enough that together they
/// are at least twice the L2, so a set is evicted before it is read again; at
/// most 4096 sets (tiny inputs then stay partly cached, and say so by being fast).
pub fn rotation_copies(input_bytes: usize, l2_bytes: usize) -> usize {
    if input_bytes == 0 {
        return 1;
    }
    (2 * l2_bytes).div_ceil(input_bytes).clamp(2, 4096)
}

/// Placements of the inputs a cold sample cycles through (FUSEBENCH_COLD_SETS, default 4):
/// the same values in separate allocations, so that a median is not one allocation's luck
/// (on the H200 one placement of a fusion's inputs can be 2-3% slower than another).
pub fn cold_input_sets() -> usize {
    std::env::var("FUSEBENCH_COLD_SETS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(4)
        .max(1)
}

/// About 25 µs at the H200's 1980 MHz, longer at idle clocks.
const SPIN_CYCLES: i64 = 50_000;

/// What precedes every cold sample, for the record.
pub fn cold_setup(gpu: &Gpu) -> String {
    let n = cold_input_sets();
    let s = if n == 1 { "" } else { "s" };
    format!("{}, inputs in {n} placement{s}", gpu.flush_description())
}

const COPY_KERNEL: &str = r#"
extern "C" __global__ void __launch_bounds__(256) fb_copy(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * 256 + threadIdx.x;
    const long long step = (long long)gridDim.x * 256;
    for (; i + 3 * step < n; i += 4 * step) {
        uint4 a = __ldg(&src[i]), b = __ldg(&src[i + step]), c = __ldg(&src[i + 2 * step]), d = __ldg(&src[i + 3 * step]);
        dst[i] = a; dst[i + step] = b; dst[i + 2 * step] = c; dst[i + 3 * step] = d;
    }
    for (; i < n; i += step) dst[i] = __ldg(&src[i]);
}
"#;

/// Best cold-L2 time (us, median of `samples`) of a device-to-device copy that
/// moves `bytes` in all (half read, half written), over several launch shapes.
pub fn copy_ceiling(gpu: &Gpu, bytes: usize, samples: usize) -> Result<f64, EngineError> {
    copy_time(gpu, bytes, samples, true)
}

/// Best median time (us) of a copy moving `bytes` in all, over several
/// launch shapes; `cold` flushes the L2 before each sample, otherwise a
/// spinning kernel in front hides the launch (warm: data that fits in L2 is
/// copied from L2).
pub fn copy_time(gpu: &Gpu, bytes: usize, samples: usize, cold: bool) -> Result<f64, EngineError> {
    let half = (bytes / 2).div_ceil(16) * 16;
    let module = gpu.compile(COPY_KERNEL, &["fb_copy"])?;
    let k = module.function("fb_copy")?;
    let src = gpu.alloc(half)?;
    src.fill(0x3c)?;
    let dst = gpu.alloc(half)?;
    let n = (half / 16) as i64;
    let sms = gpu.info().sm_count;
    let mut best = f64::INFINITY;
    for blocks_per_sm in [2u32, 4, 8, 16] {
        let grid = (sms * blocks_per_sm).min(((n as u64).div_ceil(256)).max(1) as u32);
        let args = [src.arg(), dst.arg(), KernelArg::I64(n)];
        let mut t = Vec::new();
        for i in 0..samples + 2 {
            if cold {
                gpu.flush_l2()?;
            } else {
                gpu.spin(SPIN_CYCLES)?;
            }
            let ms = gpu.time_ms(|| gpu.launch(&k, (grid, 1, 1), (256, 1, 1), 0, &args))?;
            if i >= 2 {
                t.push(ms * 1e3);
            }
        }
        best = best.min(median(&mut t));
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rotation_exceeds_twice_the_l2() {
        let l2 = 60 << 20;
        assert_eq!(super::rotation_copies(525 << 20, l2), 2);
        assert_eq!(super::rotation_copies(32 << 20, l2), 4);
        assert!(super::rotation_copies(24 << 20, l2) * (24 << 20) >= 2 * l2);
        assert_eq!(super::rotation_copies(16 << 10, l2), 4096);
        assert_eq!(super::rotation_copies(0, l2), 1);
    }
}
