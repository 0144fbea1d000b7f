//! The CPU reference executor of fusebench: runs any valid [`Fusion`]
//! exactly, with nvFuser's dtype semantics, on all cores.
//!
//! - Values are stored in the definition's dtypes ([`Buffer`]); a [`Tensor`]
//!   is a strided view of shared storage, so broadcast, expand, permute,
//!   squeeze, slice and most reshapes copy nothing, and strided or
//!   zero-stride inputs are read as given.
//! - Elementwise ops convert their operands to the op's compute dtype,
//!   compute in f64 (i64 on the integer path) with `fusebench_ir::scalar`,
//!   and round once to the output dtype with `fusebench_ir::round`. Chains of
//!   them are evaluated tile by tile without storing intermediates; each op
//!   still rounds to its own dtype, so the values are those of running op by
//!   op.
//! - Reductions accumulate in f64 (i64 for integers) and round once;
//!   welford and var_mean use two passes in f64.
//!
//! - Duplicated work is removed first: equal constants become one value and
//!   an op applied twice to the same operands is computed once.
//!
//! [`run`] executes, [`generate_inputs`] makes seeded inputs, [`stats`]
//! summarizes an output. With the environment variable
//! `FUSEBENCH_REF_PROFILE` set, [`run`] prints the time of every node to
//! stderr.

pub mod bounds;
pub mod compare;
mod complex;
mod exec;
mod expr;
mod attention;
mod gemm;
mod index;
pub mod golden;
mod ops;
mod reduce;
pub mod rng;
mod scan;
pub mod sum_bound;
mod stats;

pub use stats::{stats, OutputStats};

pub use fusebench_host::{
    contiguous_strides, facts, generate_inputs, view_strides, Arg, Buffer, ExecError, Generated, Redrawn,
    Tensor, C128, C64, F8E4m3, F8E5m2, F8E8m0,
};
// Host tensors live in their own crate, shared with the GPU engine; the
// executor reaches them by the paths it always used.
use fusebench_host::tensor;

use fusebench_ir::Fusion;

/// Runs `f` on `inputs` (one per `f.inputs`, in order) and returns its
/// outputs in order. Outputs may be views (a permute or expand of another
/// value shares its storage); [`Tensor::to_contiguous`] makes them dense.
/// An output of dtype `Index` is reported as `Int32` when
/// `f.index_is_32bit()`, as nvFuser does.
pub fn run(f: &Fusion, inputs: &[Arg]) -> Result<Vec<Tensor>, ExecError> {
    exec::run(f, inputs)
}
