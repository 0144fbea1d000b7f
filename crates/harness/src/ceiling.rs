//! The copy ceiling: a device-to-device copy moving the same bytes as a
//! subject (half read, half written), timed by the harness exactly as the
//! subject is (same method, cache policy and set-up, placements included), at
//! several launch shapes; the best median is the ceiling "% of copy" is read
//! against.

use crate::harness::{Harness, Options};
use crate::subject::{Launch, Subject};
use crate::HarnessError;
use fusebench_measure::{CachePolicy, Ceiling, FixedCount};
use fusebench_runtime::{DeviceBuffer, Gpu, Kernel, KernelArg};
use std::cell::{Cell, RefCell};

pub(crate) const COPY_KERNEL: &str = r#"
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

/// Blocks per SM tried; the best median wins.
const SHAPES: [u32; 4] = [2, 4, 8, 16];
/// Samples per launch shape (after 2 warm-up runs).
const SAMPLES: usize = 20;

/// A copy of `half` bytes from one of several source placements to one destination.
struct Copy<'a> {
    gpu: &'a Gpu,
    kernel: Kernel,
    sources: RefCell<Vec<DeviceBuffer>>,
    current: Cell<usize>,
    dst: DeviceBuffer,
    half: usize,
    /// Set for each launch shape tried.
    grid: Cell<u32>,
}

impl Copy<'_> {
    fn elements(&self) -> i64 {
        (self.half / 16) as i64
    }
}

impl Subject for Copy<'_> {
    fn identity(&self) -> fusebench_measure::Subject {
        fusebench_measure::Subject {
            name: format!("copy of {} bytes", 2 * self.half),
            definition_hash: "copy".into(),
            inputs_hash: String::new(),
            inputs: Vec::new(),
        }
    }

    fn launches(&self) -> Option<Vec<Launch>> {
        Some(vec![("fb_copy".into(), [self.grid.get(), 1, 1, 256, 1, 1])])
    }

    fn launch(&self, _: usize) -> Result<(), HarnessError> {
        let sources = self.sources.borrow();
        let src = &sources[self.current.get() % sources.len()];
        let args = [src.arg(), self.dst.arg(), KernelArg::I64(self.elements())];
        Ok(self
            .gpu
            .launch(&self.kernel, (self.grid.get(), 1, 1), (256, 1, 1), 0, &args)?)
    }

    fn input_bytes(&self) -> u64 {
        self.half as u64
    }

    fn make_placements(&self, n: usize) -> Result<usize, HarnessError> {
        let mut sources = self.sources.borrow_mut();
        while sources.len() < n {
            let b = self.gpu.alloc(self.half)?;
            b.fill(0x3c)?;
            sources.push(b);
        }
        Ok(sources.len())
    }

    fn use_placement(&self, i: usize) {
        self.current.set(i);
    }
}

impl Harness {
    /// The copy ceiling of `bytes` under `cache` (a cold one flushed by `flush`), timed as a subject is.
    pub fn ceiling(&self, bytes: u64, cache: CachePolicy, flush: Option<fusebench_knobs::Flush>) -> Result<Ceiling, HarnessError> {
        let gpu = self.gpu();
        let half = ((bytes as usize / 2).div_ceil(16) * 16).max(16);
        let first = gpu.alloc(half)?;
        first.fill(0x3c)?;
        let copy = Copy {
            gpu,
            kernel: self.copy_kernel()?,
            sources: RefCell::new(vec![first]),
            current: Cell::new(0),
            dst: gpu.alloc(half)?,
            half,
            grid: Cell::new(1),
        };
        let rule = FixedCount(SAMPLES);
        let mut best: Option<Ceiling> = None;
        for per_sm in SHAPES {
            let grid =
                (gpu.info().sm_count * per_sm).min(((half / 16) as u32).div_ceil(256).max(1));
            copy.grid.set(grid);
            let m = self
                .measure(
                    &copy,
                    &Options {
                        cache,
                        warmup: 2,
                        rule: &rule,
                        context: None,
                        ceiling: false,
                        siblings: false,
                        flush,
                    },
                )?
                .record;
            let s = &m.summary;
            if best.as_ref().is_none_or(|b| s.median < b.median_us) {
                best = Some(Ceiling {
                    bytes: 2 * half as u64,
                    median_us: s.median,
                    ci_low_us: s.ci_low,
                    ci_high_us: s.ci_high,
                    n: s.n,
                    grid: [grid, 1, 1],
                    block: [256, 1, 1],
                });
            }
        }
        Ok(best.expect("at least one launch shape"))
    }
}
