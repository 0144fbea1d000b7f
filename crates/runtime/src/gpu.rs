//! The GPU handle: one context, one stream, everything ordered on that stream.
//!
//! One stream keeps the timing simple (events bracket exactly the enqueued work) and makes
//! freeing safe without cross-stream bookkeeping: a buffer dropped after a launch is freed
//! in stream order, after the kernel that uses it.

use std::sync::{Arc, Mutex};

use cudarc::driver::result::DriverError;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};

use crate::arch::{choose_target, supported_archs, Target};
use crate::cache::KernelCache;
use crate::device::{check_libraries, init_driver, DeviceInfo};
use crate::error::{describe_driver, guard, DriverContext, RuntimeError};

/// Cheap to clone; clones share the context and the stream.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<GpuInner>,
}

pub(crate) struct GpuInner {
    /// The cuBLASLt handle, created on first use; first so it goes before the context.
    pub(crate) blas: std::sync::OnceLock<crate::blas::BlasHandle>,
    /// The cuDNN handle, created on first use, before the context goes too.
    pub(crate) dnn: std::sync::OnceLock<crate::dnn::DnnHandle>,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    target: Target,
    cache: KernelCache,
    launches: Mutex<LaunchLog>,
    /// Scratch for `flush_l2`, allocated on first use.
    pub(crate) l2_scratch: Mutex<Option<CudaSlice<u8>>>,
    /// The kernel of a read flush, compiled on first use.
    pub(crate) flush_read: std::sync::OnceLock<crate::Kernel>,
    /// The spinning kernel, compiled on first use.
    pub(crate) spin: std::sync::OnceLock<crate::Kernel>,
    /// The page-touch kernel and its buffer (FUSEBENCH_TLB_GIB experiments).
    pub(crate) touch: std::sync::OnceLock<crate::Kernel>,
    pub(crate) evict: std::sync::OnceLock<crate::Kernel>,
    pub(crate) tlb_pages: Mutex<Option<CudaSlice<u8>>>,
    /// Every module loaded, kept until the GPU handle goes: CUPTI names a kernel
    /// record by its function handle, and an unloaded module's handles are
    /// reused by the next one, whose records then carry the old names.
    pub(crate) modules: Mutex<Vec<Arc<cudarc::driver::CudaModule>>>,
}

/// Kernels launched since the last successful synchronization, to name the culprit of an
/// asynchronous fault.
#[derive(Default)]
struct LaunchLog {
    count: u64,
    last: Option<Arc<str>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

impl Gpu {
    /// Opens device `ordinal` with the kernel cache from the environment.
    pub fn new(ordinal: usize) -> Result<Gpu, RuntimeError> {
        Self::with_cache(ordinal, KernelCache::from_env()?)
    }

    pub fn with_cache(ordinal: usize, cache: KernelCache) -> Result<Gpu, RuntimeError> {
        check_libraries().map_err(RuntimeError::Unavailable)?;
        init_driver(ordinal).map_err(RuntimeError::Unavailable)?;
        guard("opening the GPU", || {
            let ctx = CudaContext::new(ordinal)
                .ctx(|| format!("creating a context on device {ordinal}"))?;
            // Before any allocation: without per-buffer event records nothing extra is enqueued
            // around timed work (everything here is on one stream, so they are not needed).
            // SAFETY: all work of this handle is ordered on its single stream.
            unsafe { ctx.disable_event_tracking() };
            let stream = ctx.new_stream().ctx(|| "creating a stream".into())?;
            let info = DeviceInfo::query(ordinal)?;
            let target = choose_target(info.compute_capability, supported_archs().as_deref())
                .map_err(|m| {
                    RuntimeError::Invalid(format!("no NVRTC target for {}: {m}", info.name))
                })?;
            Ok(Gpu {
                inner: Arc::new(GpuInner {
                    blas: std::sync::OnceLock::new(),
                    dnn: std::sync::OnceLock::new(),
                    ctx,
                    stream,
                    info,
                    target,
                    cache,
                    launches: Mutex::new(LaunchLog::default()),
                    l2_scratch: Mutex::new(None),
                    flush_read: std::sync::OnceLock::new(),
                    spin: std::sync::OnceLock::new(),
                    touch: std::sync::OnceLock::new(),
                    evict: std::sync::OnceLock::new(),
                    tlb_pages: Mutex::new(None),
                    modules: Mutex::new(Vec::new()),
                }),
            })
        })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The NVRTC target used for this device.
    pub fn target(&self) -> Target {
        self.inner.target
    }

    pub fn cache(&self) -> &KernelCache {
        &self.inner.cache
    }

    /// For work this crate does not wrap (CUPTI, graphs). Work enqueued elsewhere is not
    /// ordered with this handle's stream.
    pub fn cuda_context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    pub fn cuda_stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// Waits for all enqueued work; a fault is reported with the kernel that likely caused it.
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        self.inner
            .ctx
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        match self.inner.stream.synchronize() {
            Ok(()) => {
                self.clear_launches();
                Ok(())
            }
            Err(e) => Err(self.fault(e, "synchronizing the stream")),
        }
    }

    /// Elapsed GPU time, in ms, of the work `enqueue` puts on this GPU's stream, measured with
    /// a pair of CUDA events around it. Waits for that work to finish.
    pub fn time_ms(
        &self,
        enqueue: impl FnOnce() -> Result<(), RuntimeError>,
    ) -> Result<f64, RuntimeError> {
        let ctx = &self.inner.ctx;
        // Timing needs CU_EVENT_DEFAULT: cudarc's default (None) disables timing.
        let start = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .ctx(|| "creating an event".into())?;
        let end = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .ctx(|| "creating an event".into())?;
        start
            .record(&self.inner.stream)
            .ctx(|| "recording the start event".into())?;
        enqueue()?;
        end.record(&self.inner.stream)
            .ctx(|| "recording the end event".into())?;
        end.synchronize()
            .map_err(|e| self.fault(e, "waiting for timed work"))?;
        let ms = start.elapsed_ms(&end).ctx(|| "cuEventElapsedTime".into())?;
        self.clear_launches();
        Ok(ms as f64)
    }

    pub(crate) fn record_launch(&self, name: &Arc<str>) {
        let mut log = self
            .inner
            .launches
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        log.count += 1;
        log.last = Some(name.clone());
    }

    fn clear_launches(&self) {
        *self
            .inner
            .launches
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = LaunchLog::default();
    }

    /// An error surfaced while waiting: blamed on the launched kernels if there were any.
    pub(crate) fn fault(&self, e: DriverError, during: &str) -> RuntimeError {
        let log = std::mem::take(
            &mut *self
                .inner
                .launches
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        match log.last {
            Some(kernel) => RuntimeError::KernelFailed {
                kernel: format!("`{kernel}`"),
                launches: log.count,
                error: format!("{} (while {during})", describe_driver(&e)),
            },
            None => RuntimeError::Driver {
                context: during.to_string(),
                error: describe_driver(&e),
            },
        }
    }

    pub(crate) fn l2_scratch(&self) -> &Mutex<Option<CudaSlice<u8>>> {
        &self.inner.l2_scratch
    }
}
