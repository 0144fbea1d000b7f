//! Pointwise expressions and their evaluation in tiles.
//!
//! Chains of elementwise ops (unary, binary, where, cast) whose intermediate
//! results are used only by other elementwise ops of the same shape (or by a
//! reduction) are not stored: they stay a [`LazyNode`] DAG, and a consumer
//! that needs values compiles the DAG into a [`Program`] that computes
//! `TILE` elements at a time through every op, in registers of f64 (float
//! dtypes) or i64 (integer and bool dtypes). Each op rounds its result to its
//! own dtype exactly as if it were stored, so fusing changes no value.
//! `compile.rs` turns a DAG into a program, `run.rs` runs it a tile at a time
//! through the per-op loops of `kernels.rs`, rounding as `rounding.rs` does.

use crate::tensor::{unravel, with_buffer, with_dtype, Buffer, Elem, Tensor};
use fusebench_ir::op::{BinaryOp, TernaryOp, UnaryOp};
use fusebench_ir::scalar::{fold_binary, fold_ternary, fold_unary, unary_i64};
use fusebench_ir::{round, DType, Literal};
use rayon::prelude::*;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

#[macro_use]
mod rounding;
mod compile;
mod kernels;
mod run;

// The parts see one another's items through this module.
use compile::*;
use kernels::*;
use rounding::*;

pub(crate) use compile::Program;
pub(crate) use rounding::wrap_int;
pub(crate) use run::{Scratch, TileRef};

/// Elements computed per step of a program.
pub(crate) const TILE: usize = 1024;

/// An operand of a pointwise op.
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    /// An elementwise result not stored, of the consumer's shape.
    Lazy(Arc<LazyNode>),
    /// Stored values; broadcast to the consumer's shape when read.
    Tensor(Tensor),
    /// A scalar value of the given dtype.
    Scalar(Literal, DType),
}

impl Operand {
    pub fn dtype(&self) -> DType {
        match self {
            Operand::Lazy(n) => n.dtype,
            Operand::Tensor(t) => t.dtype(),
            Operand::Scalar(_, d) => *d,
        }
    }
}

/// An elementwise op.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PwOp {
    /// With the dtype operands are converted to and computed in (the op table's typing).
    Unary(UnaryOp, DType),
    Binary(BinaryOp, DType),
    /// With the dtype each operand is converted to, and the compute dtype.
    Ternary(TernaryOp, [DType; 3], DType),
    Where,
    Cast,
}

/// One elementwise op whose result is not stored.
#[derive(Debug)]
pub(crate) struct LazyNode {
    pub op: PwOp,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub args: Vec<Operand>,
}
