//! The GPU engine's compiler half: segments a fusion into kernels, schedules
//! each (pointwise, inner persistent, outer reduction) and writes CUDA C for
//! it. Everything here is plain Rust; `fusebench-runtime` compiles and runs it.
//!
//! The chain: `segment` decides kernels -> the first schedule of the registry
//! `schedule::SCHEDULES` that fits lays out threads (`rowwise`, `persistent`,
//! `grid`, `outer`, `pointwise`; launch numbers from `launch`, which reads
//! `device`) -> `lower` writes each value at a symbolic index (`ix`, `view`)
//! -> `ctype` spells it in C.

pub mod alias;
pub mod attention;
pub mod alias_write;
pub mod complex;
pub mod contiguous;
pub mod epilogue;
pub mod epilogue_fn;
pub mod ctype;
pub mod device;
pub mod error;
pub mod expanded;
pub mod gemm;
pub mod grid;
pub mod grid_moments;
pub mod grouped_mm;
pub mod index;
pub mod index_kernels;
pub mod ix;
pub mod kernel;
pub mod launch;
pub mod last_block;
pub mod layout;
pub mod lower;
pub mod memory;
pub mod moments;
pub mod next_row;
pub mod outer;
pub mod passes;
pub mod persistent;
pub mod plan;
pub mod prelude;
pub mod pointwise;
pub mod reduction;
mod refuse;
pub mod reshaped;
pub mod rewrite;
pub mod row_cache;
pub mod rowwise;
pub mod scan;
pub mod strided;
pub mod schedule;
pub mod segment;
pub mod totals;
pub mod transpose;
pub mod view;
pub mod walk;

pub use error::CodegenError;
pub use epilogue_fn::Epilogue;
pub use plan::{AttentionOperand, AttentionRole, Choice, Fill, Kernel, KernelArg, LibraryAttention, LibraryCall, Operand, OutputSource, Plan, Product, Schedule, TensorMap};
pub use device::{ColumnSums, Device, FitWaves, GroupedMn, LoadHint};
pub use segment::plan;
