//! Untyped device buffers and the L2 flush.
//!
//! Buffers are bytes: the engine knows dtypes and shapes, the runtime only moves memory.
//! Copies and fills are enqueued on the GPU's one stream, so they are ordered with launches.

use cudarc::driver::result as dr;
use cudarc::driver::{CudaSlice, DevicePtr};

use crate::error::{DriverContext, RuntimeError};
use crate::gpu::Gpu;
use crate::launch::KernelArg;

/// Device memory owned by this process; freed (in stream order) on drop.
pub struct DeviceBuffer {
    /// Owns the allocation: dropping it frees the memory in stream order.
    _alloc: CudaSlice<u8>,
    ptr: u64,
    len: usize,
    gpu: Gpu,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({} bytes at {:#x})", self.len, self.ptr)
    }
}

impl Gpu {
    /// Device memory free now (cuMemGetInfo), for checking a fusion's buffers
    /// before any is allocated.
    pub fn free_memory(&self) -> Result<u64, RuntimeError> {
        self.cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        let (free, _) = self
            .cuda_context()
            .mem_get_info()
            .ctx(|| "cuMemGetInfo".into())?;
        Ok(free as u64)
    }

    /// `bytes` of device memory with undefined contents (poison with `fill` before use as an
    /// output).
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, RuntimeError> {
        self.cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        // A zero-byte request is an error for cuMemAlloc; one byte keeps the pointer valid.
        let n = bytes.max(1);
        // SAFETY: the contents are uninitialized bytes, which any u8 pattern is.
        let slice = unsafe { self.cuda_stream().alloc::<u8>(n) }.ctx(|| {
            let free = self
                .cuda_context()
                .mem_get_info()
                .map(|(f, _)| f)
                .unwrap_or(0);
            format!("allocating {bytes} bytes of device memory ({free} bytes free)")
        })?;
        // Event tracking is off, so the guard returned with the pointer does nothing.
        let (ptr, _) = slice.device_ptr(self.cuda_stream());
        Ok(DeviceBuffer {
            _alloc: slice,
            ptr,
            len: bytes,
            gpu: self.clone(),
        })
    }

    pub fn alloc_zeroed(&self, bytes: usize) -> Result<DeviceBuffer, RuntimeError> {
        let b = self.alloc(bytes)?;
        b.fill(0)?;
        Ok(b)
    }

    /// A new buffer holding a copy of `data`.
    pub fn alloc_from(&self, data: &[u8]) -> Result<DeviceBuffer, RuntimeError> {
        let b = self.alloc(data.len())?;
        b.upload(data)?;
        Ok(b)
    }
}

impl DeviceBuffer {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address, for kernel arguments and pointer arithmetic into the buffer.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    pub fn arg(&self) -> KernelArg {
        KernelArg::Ptr(self.ptr)
    }

    /// Copies `data` (exactly `len()` bytes) to the device. `data` may be reused as soon as this
    /// returns: the driver stages pageable memory before returning.
    pub fn upload(&self, data: &[u8]) -> Result<(), RuntimeError> {
        if data.len() != self.len {
            return Err(RuntimeError::Invalid(format!(
                "upload of {} bytes into a {}-byte buffer",
                data.len(),
                self.len
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        self.gpu
            .cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        // SAFETY: the destination holds `len` bytes; the source is borrowed for the call and
        // pageable host memory is staged before cuMemcpyHtoDAsync returns.
        unsafe { dr::memcpy_htod_async(self.ptr, data, self.gpu.cuda_stream().cu_stream()) }
            .map_err(|e| self.gpu.fault(e, &format!("uploading {} bytes", self.len)))
    }

    /// Waits for the stream, then returns the buffer's bytes.
    pub fn download(&self) -> Result<Vec<u8>, RuntimeError> {
        let mut out = vec![0u8; self.len];
        self.download_into(&mut out)?;
        Ok(out)
    }

    pub fn download_into(&self, out: &mut [u8]) -> Result<(), RuntimeError> {
        if out.len() != self.len {
            return Err(RuntimeError::Invalid(format!(
                "download of a {}-byte buffer into {} bytes",
                self.len,
                out.len()
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        self.gpu
            .cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        let during = format!("downloading {} bytes", self.len);
        let stream = self.gpu.cuda_stream();
        // SAFETY: `out` holds `len` bytes and stays borrowed until the stream is synchronized.
        unsafe { dr::memcpy_dtoh_async(out, self.ptr, stream.cu_stream()) }
            .map_err(|e| self.gpu.fault(e, &during))?;
        self.gpu.synchronize().map_err(|e| match e {
            RuntimeError::Driver { error, .. } => RuntimeError::Driver {
                context: during,
                error,
            },
            other => other,
        })
    }

    /// Copies the first `bytes` bytes of this buffer to device address `dst`,
    /// ordered on the stream (an output written into an input's buffer).
    ///
    /// # Safety
    /// `dst` must be device memory of this context with `bytes` bytes.
    pub unsafe fn copy_to_ptr(&self, dst: u64, bytes: usize) -> Result<(), RuntimeError> {
        if bytes > self.len {
            return Err(RuntimeError::Invalid(format!(
                "copy of {bytes} bytes out of a {}-byte buffer",
                self.len
            )));
        }
        if bytes == 0 {
            return Ok(());
        }
        self.gpu
            .cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        // SAFETY: the source holds `bytes` bytes; the caller vouches for `dst`.
        unsafe { dr::memcpy_dtod_async(dst, self.ptr, bytes, self.gpu.cuda_stream().cu_stream()) }
            .map_err(|e| self.gpu.fault(e, &format!("copying {bytes} bytes on the device")))
    }

    /// Sets every byte to `byte` (e.g. 0xFF, a NaN pattern, to poison outputs before a run so
    /// an element the kernel fails to write is visible).
    pub fn fill(&self, byte: u8) -> Result<(), RuntimeError> {
        if self.len == 0 {
            return Ok(());
        }
        self.gpu
            .cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        // SAFETY: writes `len` bytes inside the allocation, ordered on the stream.
        unsafe { dr::memset_d8_async(self.ptr, byte, self.len, self.gpu.cuda_stream().cu_stream()) }
            .map_err(|e| self.gpu.fault(e, &format!("filling {} bytes", self.len)))
    }
}

impl From<&DeviceBuffer> for KernelArg {
    fn from(b: &DeviceBuffer) -> Self {
        b.arg()
    }
}
