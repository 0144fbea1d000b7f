//! Facts about a fusion's inputs that follow from how the ops use them.

use crate::op::Op;
use crate::{Fusion, ValueDef, ValueId};

/// An input whose values index another tensor: they must lie in [0, bound).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IndexUse {
    /// Position among the fusion's inputs.
    pub input: usize,
    pub bound: usize,
}

/// Inputs that reach an `index_select` index through ops that move values
/// without changing them (reshape, broadcast, expand, permute, squeeze, slice,
/// same-kind casts). The tightest bound wins when one input feeds several.
pub fn index_inputs(f: &Fusion) -> Vec<IndexUse> {
    let mut out: Vec<IndexUse> = Vec::new();
    for n in &f.nodes {
        let Op::IndexSelect { x, index, dim } = &n.op else {
            continue;
        };
        let xs = f
            .value(*x)
            .shape
            .as_ref()
            .expect("index_select input is a tensor");
        let d = crate::infer::norm_dim("index_select", *dim, xs.len()).expect("validated");
        if let Some(input) = source_input(f, *index) {
            let bound = xs[d];
            match out.iter_mut().find(|u| u.input == input) {
                Some(u) => u.bound = u.bound.min(bound),
                None => out.push(IndexUse { input, bound }),
            }
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
