//! fusebench's GPU runtime: the thin layer the engine launches generated kernels through.
//!
//! - [`probe`] says whether a GPU can be used here, and why not, without ever panicking.
//! - [`Gpu`] owns a context and one stream; everything it does is ordered on that stream.
//! - [`Gpu::compile`] runs NVRTC for the device's own architecture, through a disk cache;
//!   [`Gpu::compile_units`] several translation units at once, a thread each.
//! - [`DeviceBuffer`] is untyped device memory; [`Gpu::flush_l2`] evicts L2 before a cold run.
//! - [`Gpu::matmul_plan`] and [`Gpu::matmul`] run matrix products through cuBLASLt;
//!   [`Gpu::attention_plan`] and [`Gpu::attention`] flash attention through cuDNN.
//! - [`Gpu::launch`] enqueues a kernel with a run-time argument list; [`Gpu::time_ms`] times
//!   enqueued work with CUDA events.
//!
//! Kernel cache location: `$FUSEBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/fusebench/kernels`, else
//! `~/.cache/fusebench/kernels`; `FUSEBENCH_NO_KERNEL_CACHE=1` turns it off.
//!
//! Built on cudarc with dynamic loading: the binary starts on machines without CUDA, and
//! every entry point checks for the libraries before calling into them.

mod arch;
mod blas;
mod cache;
mod clocks;
mod compile;
mod cupti;
mod device;
mod dnn;
mod error;
mod gpu;
mod harness;
mod launch;
mod memory;
mod resources;
mod tensor_map;

pub use arch::{choose_target, compute_arch, sm_arch, ImageKind, Target};
pub use dnn::{dnn_available, dnn_version, Attention, AttentionSpec, AttentionTensor};
pub use blas::{blas_available, blas_version, BlasEpilogue, BlasScales, BlasType, Matmul, MatmulSpec, MatrixStrides};
pub use cache::{
    cache_key, default_cache_dir, CacheKeyParts, CachedImage, KernelCache, CACHE_FORMAT,
};
pub use clocks::{driver_release, ClockReader, ClockReading};
pub use compile::{
    build_options, compile_apart, compile_offline, compile_offline_resources, compile_offline_units, source_excerpt, CompiledModule, ModuleInfo, OfflineCompile, BASE_OPTIONS,
};
pub use cupti::{Activity, ActivityKind, Cupti, Records};
pub use device::{device_count, probe, probe_ordinal, Availability, DeviceInfo, Unavailable};
pub use error::RuntimeError;
pub use gpu::Gpu;
pub use harness::HARNESS_KERNELS;
pub use launch::{check_launch, Kernel, KernelArg, KernelAttributes, DEFAULT_DYNAMIC_SMEM_LIMIT};
pub use memory::DeviceBuffer;
pub use tensor_map::encode_tensor_map;
pub use resources::{parse_ptxas_verbose, KernelResources};

/// cudarc, for callers that need what this crate does not wrap (CUPTI).
pub use cudarc;
