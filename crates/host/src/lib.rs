//! Tensors in host memory, in every nvFuser dtype, and seeded inputs for a
//! fusion. The CPU reference and the GPU engine both hold their inputs and
//! outputs here; neither depends on the other.
//!
//! - A [`Tensor`] is a strided view of shared storage ([`Buffer`], one
//!   variant per dtype), so broadcast, expand, permute, squeeze, slice and
//!   most reshapes copy nothing, and strided or zero-stride inputs are read
//!   as given.
//! - [`generate_inputs`] makes a fusion's inputs from a seed (its script's
//!   recipe when it has one); [`facts`] summarizes an input (range, distinct
//!   values, fingerprint).

#[doc(hidden)]
pub mod elems;
pub mod facts;
mod gen;
pub mod memory;
pub mod tensor;

pub use gen::{generate_inputs, Generated, Redrawn};
pub use tensor::{contiguous_strides, view_strides, Buffer, Tensor, C128, C64, F8E4m3, F8E5m2, F8E8m0};

use fusebench_ir::{IrError, Literal};
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
    /// More memory than the system has available (checked before allocating).
    #[error("too large: {0}")]
    TooLarge(String),
    #[error("invalid fusion: {0}")]
    Ir(#[from] IrError),
}

