//! Kernels and their launch.
//!
//! Launches go through cuLaunchKernel directly with an untyped argument list, because the
//! engine's argument lists are built at run time from a fusion, not known to the compiler.

use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use cudarc::driver::sys::{self as dsys, CUfunction_attribute_enum as FnAttr, CUresult};
use cudarc::driver::{result as dr, CudaContext, CudaFunction, CudaModule};
use serde::{Deserialize, Serialize};

use crate::error::{describe_driver, DriverContext, RuntimeError};
use crate::gpu::Gpu;

/// Above this much dynamic shared memory the kernel must opt in through
/// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
pub const DEFAULT_DYNAMIC_SMEM_LIMIT: u32 = 48 * 1024;

/// What the driver reports about a loaded kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelAttributes {
    pub name: String,
    pub registers_per_thread: u32,
    pub static_shared_bytes: u32,
    /// Local memory per thread: register spills and stack.
    pub local_bytes_per_thread: u32,
    pub const_bytes: u32,
    /// The most threads per block this kernel can launch with (register use can lower it).
    pub max_threads_per_block: u32,
    /// Opt-in limit minus the static shared memory.
    pub max_dynamic_shared_bytes: u32,
    pub ptx_version: u32,
    pub binary_version: u32,
    /// Byte size of each parameter, when the driver can say (cuFuncGetParamInfo, CUDA 12.4+).
    pub param_sizes: Option<Vec<usize>>,
}

/// A loaded kernel. Cheap to clone; keeps its module loaded.
#[derive(Clone)]
pub struct Kernel {
    name: Arc<str>,
    func: CudaFunction,
    ctx: Arc<CudaContext>,
    attrs: Arc<KernelAttributes>,
    /// The MAX_DYNAMIC_SHARED_SIZE_BYTES already set on this function, shared by clones
    /// because the attribute belongs to the function, not to a handle.
    dyn_smem_set: Arc<AtomicU32>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("attrs", &self.attrs)
            .finish_non_exhaustive()
    }
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn attributes(&self) -> &KernelAttributes {
        &self.attrs
    }

    pub(crate) fn load(
        gpu: &Gpu,
        module: &Arc<CudaModule>,
        name: &str,
    ) -> Result<Kernel, RuntimeError> {
        let hint = "kernels must be `extern \"C\" __global__` so their names are not mangled";
        if CString::new(name).is_err() {
            return Err(RuntimeError::KernelNotFound {
                name: name.into(),
                hint: "name contains a NUL byte".into(),
            });
        }
        let func = module.load_function(name).map_err(|e| match e.0 {
            CUresult::CUDA_ERROR_NOT_FOUND => RuntimeError::KernelNotFound {
                name: name.into(),
                hint: hint.into(),
            },
            _ => RuntimeError::Driver {
                context: format!("cuModuleGetFunction({name})"),
                error: describe_driver(&e),
            },
        })?;
        let get = |a: FnAttr| -> Result<u32, RuntimeError> {
            Ok(func
                .get_attribute(a)
                .ctx(|| format!("cuFuncGetAttribute({a:?}) for `{name}`"))?
                .max(0) as u32)
        };
        let static_shared_bytes = get(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
        let optin = gpu.info().max_shared_memory_per_block_optin;
        let attrs = KernelAttributes {
            name: name.to_string(),
            registers_per_thread: get(FnAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared_bytes,
            local_bytes_per_thread: get(FnAttr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            const_bytes: get(FnAttr::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
            max_threads_per_block: get(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_dynamic_shared_bytes: optin.saturating_sub(static_shared_bytes),
            ptx_version: get(FnAttr::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: get(FnAttr::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
            param_sizes: param_sizes(func.cu_function()),
        };
        let static_shared = attrs.static_shared_bytes;
        Ok(Kernel {
            name: name.into(),
            func,
            ctx: gpu.cuda_context().clone(),
            attrs: Arc::new(attrs),
            dyn_smem_set: Arc::new(AtomicU32::new(dynamic_limit_before_opt_in(static_shared))),
        })
    }
}

/// Parameter sizes from the driver. None when the driver cannot tell (older than 12.4, or a
/// kernel without parameters, which is indistinguishable here and needs no check anyway).
fn param_sizes(f: dsys::CUfunction) -> Option<Vec<usize>> {
    // The symbol is looked up on first use; a driver without it makes cudarc panic.
    catch_unwind(AssertUnwindSafe(|| {
        let mut sizes = Vec::new();
        for i in 0..4096usize {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: `f` is a live function; the driver writes two usizes.
            match unsafe { dsys::cuFuncGetParamInfo(f, i, &mut offset, &mut size) } {
                CUresult::CUDA_SUCCESS => sizes.push(size),
                // One past the last parameter.
                CUresult::CUDA_ERROR_INVALID_VALUE => break,
                _ => return None,
            }
        }
        (!sizes.is_empty()).then_some(sizes)
    }))
    .ok()
    .flatten()
}

/// One kernel argument. Device pointers are `Ptr` (a `DeviceBuffer` converts to one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelArg {
    Ptr(u64),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    /// A TMA tensor map (`crate::encode_tensor_map`), a 128-byte
    /// `__grid_constant__` parameter.
    Map([u64; 16]),
}

impl KernelArg {
    pub fn size(&self) -> usize {
        match self {
            KernelArg::I32(_) | KernelArg::F32(_) => 4,
            KernelArg::Ptr(_) | KernelArg::I64(_) | KernelArg::F64(_) => 8,
            KernelArg::Map(_) => 128,
        }
    }

    /// The argument's bytes at the start of an 8-byte slot, which is how cuLaunchKernel reads
    /// it (it copies as many bytes as the parameter's size from the given address).
    fn slot(&self) -> u64 {
        let mut b = [0u8; 8];
        match *self {
            KernelArg::Ptr(v) => b = v.to_ne_bytes(),
            KernelArg::I64(v) => b = v.to_ne_bytes(),
            KernelArg::F64(v) => b = v.to_ne_bytes(),
            KernelArg::I32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
            KernelArg::F32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
            // Passed from its own bytes (`Gpu::launch`).
            KernelArg::Map(_) => {}
        }
        u64::from_ne_bytes(b)
    }
}

impl From<i32> for KernelArg {
    fn from(v: i32) -> Self {
        KernelArg::I32(v)
    }
}
impl From<i64> for KernelArg {
    fn from(v: i64) -> Self {
        KernelArg::I64(v)
    }
}
impl From<f32> for KernelArg {
    fn from(v: f32) -> Self {
        KernelArg::F32(v)
    }
}
impl From<f64> for KernelArg {
    fn from(v: f64) -> Self {
        KernelArg::F64(v)
    }
}

/// Dynamic shared memory a kernel may launch with before opting in: the
/// 48 KiB without opt-in cover static and dynamic together (a kernel with
/// 640 static bytes launched with exactly 48 KiB dynamic was refused with
/// CUDA_ERROR_INVALID_VALUE).
pub fn dynamic_limit_before_opt_in(static_shared_bytes: u32) -> u32 {
    DEFAULT_DYNAMIC_SMEM_LIMIT.saturating_sub(static_shared_bytes)
}

/// Refuses launches that the driver would reject with a bare CUDA_ERROR_INVALID_VALUE, or
/// that would read garbage parameters, with a message that says what is wrong.
pub fn check_launch(
    attrs: &KernelAttributes,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    dynamic_smem_bytes: u32,
    args: &[KernelArg],
) -> Result<(), String> {
    let dims = [grid.0, grid.1, grid.2, block.0, block.1, block.2];
    if dims.contains(&0) {
        return Err(format!(
            "grid {grid:?} and block {block:?} must have no zero dimension"
        ));
    }
    if grid.0 > i32::MAX as u32 || grid.1 > 65535 || grid.2 > 65535 {
        return Err(format!("grid {grid:?} exceeds (2^31-1, 65535, 65535)"));
    }
    if block.0 > 1024 || block.1 > 1024 || block.2 > 64 {
        return Err(format!("block {block:?} exceeds (1024, 1024, 64)"));
    }
    let threads = block.0 as u64 * block.1 as u64 * block.2 as u64;
    if threads > attrs.max_threads_per_block as u64 {
        return Err(format!(
            "block of {threads} threads exceeds this kernel's limit of {} (registers: {}/thread)",
            attrs.max_threads_per_block, attrs.registers_per_thread
        ));
    }
    if dynamic_smem_bytes > attrs.max_dynamic_shared_bytes {
        return Err(format!(
            "{dynamic_smem_bytes} bytes of dynamic shared memory requested, at most {} available \
             ({} static)",
            attrs.max_dynamic_shared_bytes, attrs.static_shared_bytes
        ));
    }
    if let Some(sizes) = &attrs.param_sizes {
        let given: Vec<usize> = args.iter().map(KernelArg::size).collect();
        if given != *sizes {
            return Err(format!(
                "takes {} parameter(s) of sizes {sizes:?} bytes, got {} argument(s) of sizes {given:?}",
                sizes.len(),
                args.len()
            ));
        }
    }
    Ok(())
}

impl Gpu {
    /// Enqueues `kernel` on this GPU's stream. Returns once enqueued: a fault inside the
    /// kernel shows up at the next `synchronize` (or download, or timing).
    pub fn launch(
        &self,
        kernel: &Kernel,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        dynamic_smem_bytes: u32,
        args: &[KernelArg],
    ) -> Result<(), RuntimeError> {
        let name = &kernel.name;
        if *kernel.ctx != **self.cuda_context() {
            return Err(RuntimeError::Invalid(format!(
                "kernel `{name}` was loaded on another device/context"
            )));
        }
        check_launch(&kernel.attrs, grid, block, dynamic_smem_bytes, args)
            .map_err(|m| RuntimeError::Invalid(format!("kernel `{name}`: {m}")))?;
        self.cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        if dynamic_smem_bytes > kernel.dyn_smem_set.load(Ordering::Relaxed) {
            kernel
                .func
                .set_attribute(
                    FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic_smem_bytes as i32,
                )
                .ctx(|| {
                    format!("raising `{name}`'s dynamic shared memory limit to {dynamic_smem_bytes} bytes")
                })?;
            kernel
                .dyn_smem_set
                .fetch_max(dynamic_smem_bytes, Ordering::Relaxed);
        }
        let mut slots: Vec<u64> = args.iter().map(KernelArg::slot).collect();
        // A tensor map from its own 128 bytes in `args`, which the driver
        // only reads.
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .zip(args)
            .map(|(s, a)| match a {
                KernelArg::Map(m) => m.as_ptr() as *mut c_void,
                _ => s as *mut u64 as *mut c_void,
            })
            .collect();
        // SAFETY: the parameter count and sizes were checked against the kernel when the
        // driver could report them; `slots` and `args` outlive the call, which copies the values.
        unsafe {
            dr::launch_kernel(
                kernel.func.cu_function(),
                grid,
                block,
                dynamic_smem_bytes,
                self.cuda_stream().cu_stream(),
                &mut params,
            )
        }
        .ctx(|| {
            format!("launching kernel `{name}` (grid {grid:?}, block {block:?}, dynamic smem {dynamic_smem_bytes} B)")
        })?;
        self.record_launch(name);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(params: Option<Vec<usize>>) -> KernelAttributes {
        KernelAttributes {
            name: "k".into(),
            registers_per_thread: 32,
            static_shared_bytes: 1024,
            local_bytes_per_thread: 0,
            const_bytes: 0,
            max_threads_per_block: 1024,
            max_dynamic_shared_bytes: 227 * 1024 - 1024,
            ptx_version: 90,
            binary_version: 90,
            param_sizes: params,
        }
    }

    #[test]
    fn static_shared_memory_counts_against_the_limit_without_opt_in() {
        assert_eq!(dynamic_limit_before_opt_in(0), 48 * 1024);
        assert_eq!(dynamic_limit_before_opt_in(640), 48 * 1024 - 640);
        assert_eq!(dynamic_limit_before_opt_in(64 * 1024), 0);
    }

    #[test]
    fn slots_hold_the_value_bytes_first() {
        let s = KernelArg::I32(-2).slot().to_ne_bytes();
        assert_eq!(&s[..4], &(-2i32).to_ne_bytes());
        let s = KernelArg::F32(1.5).slot().to_ne_bytes();
        assert_eq!(&s[..4], &1.5f32.to_ne_bytes());
        assert_eq!(KernelArg::Ptr(0xdead_beef_0000).slot(), 0xdead_beef_0000);
        assert_eq!(KernelArg::F64(2.0).slot(), 2.0f64.to_bits());
        assert_eq!(KernelArg::from(3i64), KernelArg::I64(3));
    }

    #[test]
    fn valid_launch_passes() {
        let a = attrs(Some(vec![8, 8, 4, 8]));
        let args = [
            KernelArg::Ptr(1),
            KernelArg::Ptr(2),
            KernelArg::F32(2.0),
            KernelArg::I64(10),
        ];
        assert_eq!(
            check_launch(&a, (100, 1, 1), (256, 1, 1), 64 * 1024, &args),
            Ok(())
        );
        // Unknown parameter layout: no argument check.
        assert_eq!(
            check_launch(&attrs(None), (1, 1, 1), (1, 1, 1), 0, &[]),
            Ok(())
        );
    }

    #[test]
    fn bad_launches_are_explained() {
        let a = attrs(Some(vec![8, 4]));
        let ok = [KernelArg::Ptr(1), KernelArg::I32(1)];
        let e = check_launch(&a, (1, 1, 1), (1, 1, 1), 0, &[KernelArg::Ptr(1)]).unwrap_err();
        assert!(e.contains("takes 2 parameter(s)"), "{e}");
        let e = check_launch(
            &a,
            (1, 1, 1),
            (1, 1, 1),
            0,
            &[KernelArg::Ptr(1), KernelArg::I64(1)],
        )
        .unwrap_err();
        assert!(e.contains("[8, 8]"), "{e}");
        assert!(check_launch(&a, (0, 1, 1), (1, 1, 1), 0, &ok)
            .unwrap_err()
            .contains("zero"));
        assert!(check_launch(&a, (1, 70000, 1), (1, 1, 1), 0, &ok).is_err());
        assert!(check_launch(&a, (1, 1, 1), (1024, 2, 1), 0, &ok)
            .unwrap_err()
            .contains("2048 threads"));
        assert!(check_launch(&a, (1, 1, 1), (1, 1, 1), 227 * 1024, &ok)
            .unwrap_err()
            .contains("shared memory"));
    }
}
