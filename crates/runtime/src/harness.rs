//! Work the harness enqueues around timed kernels, never timed itself: the L2 flush
//! before a cold sample and a kernel that keeps the GPU busy without touching memory.

use cudarc::driver::result as dr;
use cudarc::driver::DevicePtr;

use crate::error::{DriverContext, RuntimeError};
use crate::gpu::Gpu;
use crate::launch::{Kernel, KernelArg};
use fusebench_knobs::{Flush, Knobs};
use std::sync::OnceLock;

/// The FUSEBENCH_* settings, or the error naming what is accepted.
fn knobs() -> Result<&'static Knobs, RuntimeError> {
    fusebench_knobs::get().map_err(|e| RuntimeError::Invalid(e.to_string()))
}

impl Gpu {
    /// Bytes written by `flush_l2`: twice the L2 size, and at least 8 MiB.
    /// FUSEBENCH_FLUSH_MIB makes it larger, to study what else a bigger
    /// flush evicts (address translations).
    pub fn l2_flush_bytes(&self) -> Result<usize, RuntimeError> {
        let base = (2 * self.info().l2_cache_bytes as usize).max(8 << 20);
        Ok(base.max(knobs()?.flush_mib.map_or(0, |m| m << 20)))
    }

    /// Evicts the inputs of the next kernel from L2 (enqueued on this stream, so it runs right
    /// before whatever is enqueued next) with a buffer twice the L2's size, allocated on first
    /// use and kept, after evicting cached address translations (`touch_pages`). How, see
    /// [`FlushKind`]. The flush is FUSEBENCH_FLUSH's; `flush_l2_as` picks one.
    pub fn flush_l2(&self) -> Result<(), RuntimeError> {
        self.flush_l2_as(None)
    }

    /// `flush_l2` by `flush`, or FUSEBENCH_FLUSH's where `None`.
    pub fn flush_l2_as(&self, flush: Option<Flush>) -> Result<(), RuntimeError> {
        self.cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        self.touch_pages()?;
        self.evict_code()?;
        let flush = flush.unwrap_or(knobs()?.flush);
        let mut scratch = self.l2_scratch().lock().unwrap_or_else(|p| p.into_inner());
        if scratch.is_none() {
            let n = self.l2_flush_bytes()?;
            // SAFETY: filled right below, before anything reads it.
            let s = unsafe { self.cuda_stream().alloc::<u8>(n) }
                .ctx(|| format!("allocating the {n}-byte L2 flush buffer"))?;
            {
                let (ptr, _sync) = s.device_ptr(self.cuda_stream());
                // SAFETY: `ptr` is a live allocation of `n` bytes, ordered on this stream.
                unsafe { dr::memset_d8_async(ptr, 0x5a, n, self.cuda_stream().cu_stream()) }
                    .ctx(|| "filling the L2 flush buffer".into())?;
            }
            *scratch = Some(s);
        }
        let s = scratch.as_ref().expect("allocated above");
        let (ptr, _sync) = s.device_ptr(self.cuda_stream());
        match flush {
            // SAFETY: `ptr` is a live allocation of `s.len()` bytes, ordered on this stream.
            Flush::Write => {
                unsafe { dr::memset_d8_async(ptr, 0x5a, s.len(), self.cuda_stream().cu_stream()) }
                    .ctx(|| "flushing L2 (cuMemsetD8Async)".into())
            }
            Flush::Read => {
                let k = self.harness_kernel(&self.inner.flush_read, FLUSH_READ_NAME, || {
                    FLUSH_READ_KERNEL.into()
                })?;
                let n = (s.len() / 16) as i64;
                let grid = self.info().sm_count * 8;
                // The sink is never written (the XOR of the flush buffer is not all ones).
                let args = [KernelArg::Ptr(ptr), KernelArg::I64(n), KernelArg::Ptr(ptr)];
                self.launch(&k, (grid, 1, 1), (256, 1, 1), 0, &args)
            }
        }
    }

    /// Bytes of the page-touch buffer: FUSEBENCH_TLB_GIB GiB, none by default.
    pub fn tlb_touch_bytes(&self) -> Result<usize, RuntimeError> {
        Ok(knobs()?.tlb_gib << 30)
    }

    /// What `flush_l2` does, for records: two cold times are comparable only with the same.
    pub fn flush_description(&self) -> Result<String, RuntimeError> {
        self.flush_description_as(None)
    }

    /// `flush_description` of `flush_l2_as(flush)`.
    pub fn flush_description_as(&self, flush: Option<Flush>) -> Result<String, RuntimeError> {
        let k = knobs()?;
        let mut d = format!(
            "{} flush of {} MiB",
            flush.unwrap_or(k.flush).name(),
            self.l2_flush_bytes()? >> 20
        );
        if k.evict_code {
            d.push_str(", instruction caches evicted");
        }
        let tlb = self.tlb_touch_bytes()?;
        if tlb > 0 {
            d.push_str(&format!(", pages of {} GiB touched", tlb >> 30));
        }
        Ok(d)
    }

    /// With FUSEBENCH_TLB_GIB=N, one load per 64 KiB of an N GiB buffer before the flush:
    /// evicts cached address translations, which an L2 flush keeps. Off by default: on the
    /// H200, with instruction caches evicted, 32 GiB changed no fusion's cold time beyond
    /// noise (BENCHMARKS.md), and it costs the memory.
    fn touch_pages(&self) -> Result<(), RuntimeError> {
        let n = self.tlb_touch_bytes()?;
        if n == 0 {
            return Ok(());
        }
        let mut pages = self
            .inner
            .tlb_pages
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if pages.is_none() {
            // SAFETY: only ever read for its addresses; the values do not matter.
            let b = unsafe { self.cuda_stream().alloc::<u8>(n) }.ctx(|| {
                format!(
                    "allocating the {} MiB page-touch buffer (FUSEBENCH_TLB_GIB=0 turns it off)",
                    n >> 20
                )
            })?;
            *pages = Some(b);
        }
        let b = pages.as_ref().expect("allocated above");
        let (ptr, _sync) = b.device_ptr(self.cuda_stream());
        let n = (b.len() >> 16) as i64;
        let k = self.harness_kernel(&self.inner.touch, TOUCH_NAME, || TOUCH_KERNEL.into())?;
        let grid = (n as u64).div_ceil(256) as u32;
        self.launch(
            &k,
            (grid, 1, 1),
            (256, 1, 1),
            0,
            &[KernelArg::Ptr(ptr), KernelArg::I64(n), KernelArg::I32(256)],
        )
    }

    /// A kernel of long straight-line code on every SM before the flush, evicting the
    /// instruction caches the previous kernels left warm (an L2 flush leaves the SMs' own
    /// caches alone). Measured on the H200: without it a fusion timed after itself runs
    /// 1.2% faster (geomean, up to 3.7%) than after other fusions. FUSEBENCH_EVICT_CODE=0
    /// leaves them warm.
    fn evict_code(&self) -> Result<(), RuntimeError> {
        if !knobs()?.evict_code {
            return Ok(());
        }
        let k = self.harness_kernel(&self.inner.evict, EVICT_NAME, evict_code_source)?;
        let grid = self.info().sm_count * 4;
        self.launch(
            &k,
            (grid, 1, 1),
            (128, 1, 1),
            0,
            &[KernelArg::F32(1.0), KernelArg::Ptr(0)],
        )
    }

    /// One of the harness's kernels, compiled (or loaded from the cache) on first use and
    /// kept in `cell`.
    fn harness_kernel(
        &self,
        cell: &OnceLock<Kernel>,
        name: &str,
        source: impl FnOnce() -> String,
    ) -> Result<Kernel, RuntimeError> {
        if let Some(k) = cell.get() {
            return Ok(k.clone());
        }
        let k = self.compile(&source(), &[name])?.function(name)?;
        Ok(cell.get_or_init(|| k).clone())
    }

    /// Spins for `cycles` SM clock cycles on one thread, touching no memory (about 25 µs
    /// for 50 000 cycles at 1980 MHz): keeps the GPU busy while the host enqueues work.
    pub fn spin(&self, cycles: i64) -> Result<(), RuntimeError> {
        let k = self.harness_kernel(&self.inner.spin, SPIN_NAME, || SPIN_KERNEL.into())?;
        self.launch(&k, (1, 1, 1), (1, 1, 1), 0, &[KernelArg::I64(cycles)])
    }
}

/// Kernels the harness itself launches around timed work; kernel records of
/// these names are not a fusion's.
pub const HARNESS_KERNELS: &[&str] = &[SPIN_NAME, FLUSH_READ_NAME, TOUCH_NAME, EVICT_NAME];

const FLUSH_READ_NAME: &str = "fb_flush_read";
const FLUSH_READ_KERNEL: &str = r#"
extern "C" __global__ void __launch_bounds__(256) fb_flush_read(const uint4* __restrict__ p, long long n, uint4* sink) {
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < n; i += (long long)gridDim.x * 256) {
        const uint4 v = __ldcg(&p[i]);
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    if ((acc.x & acc.y & acc.z & acc.w) == 0xffffffffu) sink[0] = acc;
}
"#;

const SPIN_NAME: &str = "fb_spin";
const SPIN_KERNEL: &str = r#"
extern "C" __global__ void fb_spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}
"#;

const TOUCH_NAME: &str = "fb_touch_pages";
const TOUCH_KERNEL: &str = r#"
extern "C" __global__ void fb_touch_pages(unsigned char* p, long long n, int never) {
    const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
    // `never` is 256, which no byte equals: the load stays, the store never happens.
    if (i < n && (int)__ldcg(&p[i << 16]) == never) p[0] = 0;
}
"#;

const EVICT_NAME: &str = "fb_evict_code";

/// 12 288 dependent multiply-adds with distinct constants: about 200 KiB of code that
/// cannot be folded or looped, more than an SM's instruction caches hold.
fn evict_code_source() -> String {
    let mut s = String::from(
        "extern \"C\" __global__ void fb_evict_code(float x, float* sink) {\n    float a = x + threadIdx.x;\n",
    );
    for i in 0..12288 {
        s.push_str(&format!("    a = fmaf(a, 0.99991f, {}.5f);\n", i % 4093));
    }
    s.push_str("    if (a == 12345.0f && sink) *sink = a;\n}\n");
    s
}
