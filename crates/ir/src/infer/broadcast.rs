//! Which dims of a tensor are broadcast dims in nvFuser's sense: declared
//! broadcast by `define_tensor` (contiguity `None`), or made by
//! `broadcast`/`broadcast_in_dim`/`expand` from an extent-1 dim, and kept by
//! the elementwise ops whose tensor operands all broadcast there. `squeeze`
//! may remove such a dim even when it is expanded (extent > 1).

use super::Graph;
use crate::op::Op;
use crate::{ValueDef, ValueId};

/// Whether dim `d` of tensor `v` is a (possibly expanded) broadcast dim.
pub fn is_broadcast_dim(g: &Graph, v: ValueId, d: usize) -> bool {
    let Some(val) = g.values.get(v.index()) else {
        return false;
    };
    let Some(shape) = &val.shape else {
        return false;
    };
    if d >= shape.len() {
        return false;
    }
    let node = match &val.def {
        ValueDef::TensorInput(decl) => return decl.is_broadcast(d, shape.len()),
        ValueDef::Node { node, .. } => &g.nodes[*node].op,
        _ => return false,
    };
    let from = |x: &ValueId, dx: usize| {
        g.values[x.index()].shape.as_ref().is_some_and(|s| s.get(dx) == Some(&1))
            || is_broadcast_dim(g, *x, dx)
    };
    match node {
        Op::Expand { x, .. } | Op::Set { x, .. } | Op::Cast { x, .. } | Op::Unary { x, .. } => from(x, d),
        Op::Broadcast {
            x,
            is_broadcast_dim,
        } => {
            if is_broadcast_dim.get(d) != Some(&false) {
                return is_broadcast_dim.get(d).is_some();
            }
            let dx = is_broadcast_dim[..d].iter().filter(|b| !**b).count();
            from(x, dx)
        }
        Op::BroadcastInDim {
            x, broadcast_dims, ..
        } => {
            let rank = shape.len() as i64;
            match broadcast_dims
                .iter()
                .position(|&b| (if b < 0 { b + rank } else { b }) == d as i64)
            {
                None => true,
                Some(dx) => from(x, dx),
            }
        }
        Op::Binary { a, b, .. } | Op::Where { a, b, .. } => {
            let mut xs = vec![*a, *b];
            if let Op::Where { cond, .. } = node {
                xs.push(*cond);
            }
            let tensors: Vec<ValueId> = xs
                .into_iter()
                .filter(|x| g.values[x.index()].shape.as_ref().is_some_and(|s| s.len() == shape.len()))
                .collect();
            !tensors.is_empty() && tensors.iter().all(|x| from(x, d))
        }
        _ => false,
    }
}
