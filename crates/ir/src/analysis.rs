//! Facts about a fusion's inputs that follow from how the ops use them.

use crate::op::Op;
use crate::{Fusion, ValueDef, ValueId};

/// An input whose values index another tensor: they must lie in [0, bound).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IndexUse {
    /// Position among the fusion's inputs.
    pub input: usize,
    pub bound: usize,
    /// The op whose index it is (the one with the tightest bound).
    pub op: &'static str,
}

/// The index operand of a gather- or scatter-like op and the extent its
/// values must lie below.
pub fn index_operand(f: &Fusion, op: &Op) -> Option<(ValueId, usize)> {
    use crate::op_index::IndexOp as I;
    let shape = |v: &ValueId| f.value(*v).shape.clone().unwrap_or_default();
    let along = |x: &ValueId, dim: i64| {
        let xs = shape(x);
        let d = crate::infer::norm_dim(op.name(), dim, xs.len()).ok()?;
        Some(xs[d])
    };
    match op {
        Op::IndexSelect { x, index, dim }
        | Op::Index(I::TakeAlongAxis { x, index, dim })
        | Op::Index(I::Gather { x, index, dim })
        | Op::Index(I::Scatter { x, index, dim, .. }) => Some((*index, along(x, *dim)?)),
        Op::Index(I::IndexPutAccumulate { acc, index, .. }) => Some((*index, *shape(acc).first()?)),
        Op::Index(I::EmbeddingFwd { input, weight, .. }) => Some((*input, *shape(weight).first()?)),
        Op::Index(I::Select { x, index, dim }) => Some((*index, along(x, *dim)?)),
        _ => None,
    }
}

/// Inputs that reach the index of a gather- or scatter-like op (see
/// [`index_operand`]) through ops that move values without changing them
/// (reshape, broadcast, expand, permute, squeeze, slice, same-kind casts).
/// The tightest bound wins when one input feeds several.
pub fn index_inputs(f: &Fusion) -> Vec<IndexUse> {
    let mut out: Vec<IndexUse> = Vec::new();
    for n in &f.nodes {
        let Some((index, bound)) = index_operand(f, &n.op) else {
            continue;
        };
        let op = n.op.name();
        let scalar_input = matches!(f.value(index).def, ValueDef::ScalarInput)
            .then(|| f.inputs.iter().position(|&i| i == index))
            .flatten();
        if let Some(input) = source_input(f, index).or(scalar_input) {
            match out.iter_mut().find(|u| u.input == input) {
                Some(u) if bound < u.bound => {
                    u.bound = bound;
                    u.op = op;
                }
                Some(_) => {}
                None => out.push(IndexUse { input, bound, op }),
            }
        }
    }
    out
}

/// Inputs that are the offsets of a `grouped_mm` (1-D, Int32, read as they
/// are), each with the extent its groups cut: valid offsets are
/// nondecreasing group ends from 0 to that extent, ending at it.
pub fn group_offset_inputs(f: &Fusion) -> Vec<(usize, usize)> {
    let mut out = vec![];
    for n in &f.nodes {
        let Op::Gemm(crate::GemmOp::GroupedMm { mat1, mat2, offsets }) = n.op else { continue };
        let ValueDef::TensorInput(_) = f.value(offsets).def else { continue };
        let Some(input) = f.inputs.iter().position(|&i| i == offsets) else { continue };
        let (a, b) = (f.value(mat1).shape.clone().unwrap_or_default(), f.value(mat2).shape.clone().unwrap_or_default());
        if a.len() < 2 || b.len() < 2 {
            continue;
        }
        let (cut, m, n, k) = crate::op_gemm::grouped_mm_dims(&a, &b);
        let extent = [m, n, k][cut];
        if !out.iter().any(|&(i, _)| i == input) {
            out.push((input, extent));
        }
    }
    out
}

/// The input `v` is, moved by ops that do not change values (`None` when it
/// is computed).
pub(crate) fn source_input(f: &Fusion, mut v: ValueId) -> Option<usize> {
    loop {
        match f.value(v).def {
            ValueDef::TensorInput(_) => return f.inputs.iter().position(|&i| i == v),
            ValueDef::Node { node, .. } => match &f.nodes[node].op {
                Op::Reshape { x, .. }
                | Op::Broadcast { x, .. }
                | Op::BroadcastInDim { x, .. }
                | Op::Expand { x, .. }
                | Op::Permute { x, .. }
                | Op::Squeeze { x, .. }
                | Op::Slice { x, .. } => v = *x,
                Op::Cast { x, dtype } if dtype.is_integral() && f.value(*x).dtype.is_integral() => {
                    v = *x
                }
                _ => return None,
            },
            _ => return None,
        }
    }
}
