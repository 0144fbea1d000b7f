//! Indexing and ordering ops (`iota`, `triu`, `gather`, `take_along_axis`,
//! `select`, `scatter`, `index_put_accumulate`, `topk`, `argsort`,
//! `embedding_fwd`): one sub-enum so each shared `match` over [`crate::Op`]
//! needs one arm for the whole family.

use crate::{DType, ValueId};
use serde::{Deserialize, Serialize};

/// Operands are values of the fusion; `dim`s are literals as the script wrote
/// them (negative allowed). Scalars such as `k`, `length` or `max_norm` are
/// values (constants or scalar inputs).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(tag = "index_op", rename_all = "snake_case")]
pub enum IndexOp {
    /// `start + i * step` for i in [0, length); `length` must be a constant.
    Iota {
        length: ValueId,
        start: Option<ValueId>,
        step: Option<ValueId>,
        dtype: DType,
    },
    /// Keeps elements with `col - row >= diagonal` in the last two dims, zero elsewhere.
    Triu { x: ValueId, diagonal: i64 },
    /// `torch.take_along_dim`: index broadcasts against x outside `dim`.
    TakeAlongAxis {
        x: ValueId,
        index: ValueId,
        dim: i64,
    },
    /// `torch.gather`: output has the index's shape (each extent at most x's outside `dim`).
    Gather {
        x: ValueId,
        index: ValueId,
        dim: i64,
    },
    /// `x.select(dim, index)` with a scalar index: drops `dim`.
    Select {
        x: ValueId,
        index: ValueId,
        dim: i64,
    },
    /// `torch.scatter(x, dim, index, src)`; `src` is a tensor or a scalar.
    /// Duplicate targets: the last write in row-major order of `index` wins
    /// (as PyTorch's CPU kernel), on the CPU and the GPU alike.
    Scatter {
        x: ValueId,
        index: ValueId,
        src: ValueId,
        dim: i64,
    },
    /// `torch.index_put(acc, [index], value, accumulate=True)` with a 1-D index over dim 0.
    IndexPutAccumulate {
        acc: ValueId,
        index: ValueId,
        value: ValueId,
    },
    /// Outputs: values, indices (Int). `k` must be a constant.
    Topk {
        x: ValueId,
        k: ValueId,
        dim: i64,
        largest: bool,
        sorted: bool,
    },
    /// Output: indices (Int).
    Argsort {
        x: ValueId,
        dim: i64,
        descending: bool,
        stable: bool,
    },
    /// `torch.nn.functional.embedding`: rows of `weight` picked by `input`.
    EmbeddingFwd {
        input: ValueId,
        weight: ValueId,
        padding_idx: Option<ValueId>,
        max_norm: Option<ValueId>,
        norm_type: Option<ValueId>,
        scale_grad_by_freq: Option<ValueId>,
        sparse: Option<ValueId>,
    },
}

impl IndexOp {
    pub const NAMES: &'static [&'static str] = &[
        "iota",
        "triu",
        "take_along_axis",
        "gather",
        "select",
        "scatter",
        "index_put_accumulate",
        "topk",
        "argsort",
        "embedding_fwd",
    ];

    pub fn name(&self) -> &'static str {
        match self {
            IndexOp::Iota { .. } => "iota",
            IndexOp::Triu { .. } => "triu",
            IndexOp::TakeAlongAxis { .. } => "take_along_axis",
            IndexOp::Gather { .. } => "gather",
            IndexOp::Select { .. } => "select",
            IndexOp::Scatter { .. } => "scatter",
            IndexOp::IndexPutAccumulate { .. } => "index_put_accumulate",
            IndexOp::Topk { .. } => "topk",
            IndexOp::Argsort { .. } => "argsort",
            IndexOp::EmbeddingFwd { .. } => "embedding_fwd",
        }
    }

    /// Operands in argument order.
    pub fn operands_mut(&mut self) -> Vec<&mut ValueId> {
        match self {
            IndexOp::Iota {
                length,
                start,
                step,
                ..
            } => {
                let mut v = vec![length];
                v.extend(start.iter_mut());
                v.extend(step.iter_mut());
                v
            }
            IndexOp::Triu { x, .. } | IndexOp::Argsort { x, .. } => vec![x],
            IndexOp::TakeAlongAxis { x, index, .. }
            | IndexOp::Gather { x, index, .. }
            | IndexOp::Select { x, index, .. } => vec![x, index],
            IndexOp::Scatter { x, index, src, .. } => vec![x, index, src],
            IndexOp::IndexPutAccumulate { acc, index, value } => vec![acc, index, value],
            IndexOp::Topk { x, k, .. } => vec![x, k],
            IndexOp::EmbeddingFwd {
                input,
                weight,
                padding_idx,
                max_norm,
                norm_type,
                scale_grad_by_freq,
                sparse,
            } => {
                let mut v = vec![input, weight];
                for o in [padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse] {
                    v.extend(o.iter_mut());
                }
                v
            }
        }
    }

    pub fn num_outputs(&self) -> usize {
        match self {
            IndexOp::Topk { .. } => 2,
            _ => 1,
        }
    }
}
