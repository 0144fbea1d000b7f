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
mod elems;
mod exec;
mod expr;
pub mod facts;
mod attention;
mod gemm;
mod gen;
mod index;
pub mod golden;
mod ops;
mod reduce;
pub mod rng;
mod scan;
pub mod sum_bound;
mod stats;
mod tensor;

pub use gen::{generate_inputs, Generated, Redrawn};
pub use stats::{stats, OutputStats};
pub use tensor::{contiguous_strides, view_strides, Buffer, Tensor, C128, C64, F8E4m3, F8E5m2, F8E8m0};

use fusebench_ir::{Fusion, IrError, Literal};
use thiserror::Error;

/// An input of a fusion run.
#[derive(Clone, Debug)]
pub enum Arg {
    Tensor(Tensor),
    Scalar(Literal),
}

/// Why a fusion could not run.
#[derive(Error, Debug, Clone, PartialEq)]
pub enum ExecError {
    #[error("the fusion takes {expected} inputs, {got} were given")]
    InputCount { expected: usize, got: usize },
    #[error("input {index} ({name}): {message}")]
    Input {
        index: usize,
        name: String,
        message: String,
    },
    /// An op that cannot compute its result from the values given
    /// (an index out of range).
    #[error("fd.ops.{op} ({value}): {message}")]
    Op {
        op: String,
        value: String,
        message: String,
    },
    /// A script's input recipe that does not fit its fusion.
    #[error("inputs: {0}")]
    Recipe(String),
    #[error("tensor: {0}")]
    Tensor(String),
    #[error("invalid fusion: {0}")]
    Ir(#[from] IrError),
}

/// Runs `f` on `inputs` (one per `f.inputs`, in order) and returns its
/// outputs in order. Outputs may be views (a permute or expand of another
/// value shares its storage); [`Tensor::to_contiguous`] makes them dense.
/// An output of dtype `Index` is reported as `Int32` when
/// `f.index_is_32bit()`, as nvFuser does.
pub fn run(f: &Fusion, inputs: &[Arg]) -> Result<Vec<Tensor>, ExecError> {
    exec::run(f, inputs)
}
