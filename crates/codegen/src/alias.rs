//! Outputs that are views of an input or of another output need no kernel:
//! nvFuser returns them as aliases, and so does fusebench.

use crate::view::reshape_groups;
use fusebench_ir::{infer, recipe::row_major_strides, Fusion, Op, ValueDef, ValueId};

/// Strides and offset of the output of view op `op` given its input's.
pub fn apply(f: &Fusion, node: usize, strides: &[i64], offset: i64) -> Option<(Vec<i64>, i64)> {
    let op = &f.nodes[node].op;
    let out_shape = f.value(f.nodes[node].outputs[0]).shape.clone()?;
    let x = op.operands()[0];
    let xs = f.value(x).shape.as_deref()?;
    Some(match op {
        Op::Permute { dims, .. } => {
            let n = xs.len();
            (
                dims.iter()
                    .map(|&d| infer::norm_dim("permute", d, n).ok().map(|d| strides[d]))
                    .collect::<Option<Vec<_>>>()?,
                offset,
            )
        }
        Op::Squeeze { dims, .. } => {
            let sq = infer::norm_dims("squeeze", dims, xs.len()).ok()?;
            (
                (0..xs.len())
                    .filter(|d| !sq.contains(d))
                    .map(|d| strides[d])
                    .collect(),
                offset,
            )
        }
        Op::Broadcast {
            is_broadcast_dim, ..
        } => {
            let mut it = strides.iter();
            (
                is_broadcast_dim
                    .iter()
                    .map(|&b| if b { 0 } else { *it.next().unwrap() })
                    .collect(),
                offset,
            )
        }
        Op::BroadcastInDim {
            shape,
            broadcast_dims,
            ..
        } => {
            let mut out = vec![0i64; shape.len()];
            for (i, &bd) in broadcast_dims.iter().enumerate() {
                let od = infer::norm_dim("broadcast_in_dim", bd, shape.len()).ok()?;
                out[od] = if xs[i] == 1 { 0 } else { strides[i] };
            }
            (out, offset)
        }
        // A slice starts further in and steps over its strides: nvFuser and
        // torch return it as a view too (the V part of a fused qkv).
        Op::Slice {
            start,
            end,
            strides: steps,
            manual_normalization,
            ..
        } => {
            let (_, starts, steps) =
                infer::slice_bounds("slice", xs, start, end, steps, *manual_normalization).ok()?;
            let shifted = starts
                .iter()
                .zip(strides)
                .map(|(&b, &s)| b as i64 * s)
                .sum::<i64>();
            (
                strides.iter().zip(&steps).map(|(&s, &k)| s * k as i64).collect(),
                offset + shifted,
            )
        }
        // A cast to the dtype a value already has moves nothing.
        Op::Cast { x, dtype } if f.value(*x).dtype == *dtype => (strides.to_vec(), offset),
        Op::Expand { shape, .. } => (
            xs.iter()
                .zip(shape)
                .zip(strides)
                .map(|((&e, &w), &s)| if e == 1 && w != 1 { 0 } else { s })
                .collect(),
            offset,
        ),
        Op::Reshape { .. } => {
            let mut out = vec![0i64; out_shape.len()];
            for (ga, gb) in reshape_groups(xs, &out_shape) {
                for w in ga.windows(2) {
                    if strides[w[0]] != strides[w[1]] * xs[w[1]] as i64 {
                        return None;
                    }
                }
                let mut s = strides[*ga.last().unwrap()];
                for &d in gb.iter().rev() {
                    out[d] = s;
                    s *= out_shape[d] as i64;
                }
            }
            (out, offset)
        }
        _ => return None,
    })
}

/// Walks view ops up from `v`: the chain of view nodes and the value it ends at.
pub fn view_chain(f: &Fusion, v: ValueId, stop: impl Fn(ValueId) -> bool) -> (Vec<usize>, ValueId) {
    let mut chain = Vec::new();
    let mut cur = v;
    loop {
        if cur != v && stop(cur) {
            return (chain, cur);
        }
        let ValueDef::Node { node, .. } = f.value(cur).def else {
            return (chain, cur);
        };
        match &f.nodes[node].op {
            Op::Permute { x, .. }
            | Op::Squeeze { x, .. }
            | Op::Broadcast { x, .. }
            | Op::BroadcastInDim { x, .. }
            | Op::Expand { x, .. }
            | Op::Slice { x, .. }
            | Op::Reshape { x, .. } => {
                chain.push(node);
                cur = *x;
            }
            Op::Cast { x, dtype } if f.value(*x).dtype == *dtype => {
                chain.push(node);
                cur = *x;
            }
            _ => return (chain, cur),
        }
    }
}

/// Strides of `v` seen through `chain` (innermost view first) from a base layout.
pub fn through(
    f: &Fusion,
    chain: &[usize],
    strides: Vec<i64>,
    offset: i64,
) -> Option<(Vec<i64>, i64)> {
    let mut cur = (strides, offset);
    for &node in chain.iter().rev() {
        cur = apply(f, node, &cur.0, cur.1)?;
    }
    Some(cur)
}

pub fn dense(shape: &[usize]) -> Vec<i64> {
    row_major_strides(shape)
}
