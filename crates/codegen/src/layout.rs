//! Outputs in a memory layout of their own: `fd.add_output(out,
//! stride_order=[...])`, outputs of `fd.ops.stride_order`, and outputs that
//! take their inputs' layout as nvFuser infers it (`ir::alloc_order`). nvFuser gives
//! such an output the allocation domain `strideOrderToAllocation` builds
//! (csrc/ir/utils.cpp: logical dim `i` at allocation position
//! `rank - 1 - stride_order[i]`, contiguous), so its buffer holds the dims
//! outermost first in that order.
//!
//! The schedules write outputs row-major. Writing `permute(out, alloc)` (the
//! dims in allocation order) row-major fills exactly that buffer, so the
//! fusion is planned with each such output replaced by that permute, and the
//! plan's output then says the buffer's strides for the logical shape.

use crate::plan::Plan;
use fusebench_ir::{infer, Fusion, FusionBuilder, Op, TensorDecl};

/// Per output, its stride order when it is not row-major (dims of extent 1
/// aside, which do not move any element).
pub fn orders(f: &Fusion) -> Vec<Option<Vec<usize>>> {
    (0..f.outputs.len())
        .map(|k| {
            let v = f.value(f.outputs[k]);
            let shape = v.shape.as_ref()?;
            let order = match fusebench_ir::alloc_order::output_order(f, k) {
                Some(o) => o,
                None => match &f.producer(f.outputs[k])?.op {
                    Op::StrideOrder { stride_order, .. } if !stride_order.is_empty() => {
                        infer::stride_permutation("stride_order", stride_order, shape.len()).ok()?
                    }
                    _ => return None,
                },
            };
            let want = strides(shape, &order);
            let row_major = strides(shape, &[]);
            let same = shape
                .iter()
                .zip(want.iter().zip(&row_major))
                .all(|(&e, (a, b))| e == 1 || a == b);
            (!same).then_some(order)
        })
        .collect()
}

/// Dense strides of `shape` laid out in `order` (rank of each dim from the
/// innermost; empty: row-major), as the CPU reference lays such an output.
pub fn strides(shape: &[usize], order: &[usize]) -> Vec<i64> {
    TensorDecl {
        contiguity: vec![Some(true); shape.len()],
        stride_order: order.to_vec(),
        is_cpu: false,
    }
    .dense_strides(shape)
}

/// Logical dims from outermost to innermost in memory.
fn allocation(order: &[usize]) -> Vec<usize> {
    let rank = order.len();
    let mut alloc = vec![0; rank];
    for (dim, &o) in order.iter().enumerate() {
        alloc[rank - 1 - o] = dim;
    }
    alloc
}

/// `f` with each output that has an order replaced by the permute of it into
/// allocation order (a new value and node at the end; nothing else changes).
pub fn permuted(f: &Fusion, orders: &[Option<Vec<usize>>]) -> Fusion {
    let mut g = f.clone();
    g.output_layouts.clear();
    let mut b = FusionBuilder::extend(g);
    let mut moved = vec![];
    for (k, order) in orders.iter().enumerate() {
        let Some(order) = order else { continue };
        let out = f.outputs[k];
        let dims = allocation(order).iter().map(|&d| d as i64).collect();
        let name = format!("{}_alloc", f.value(out).name);
        let id = b
            .op(Op::Permute { x: out, dims }, &[&name])
            .expect("an output's stride order is a permutation of its dims (checked at parse)");
        moved.push((k, id[0]));
    }
    let mut g = b.finish();
    for (k, id) in moved {
        g.outputs[k] = id;
    }
    g
}

/// Gives each ordered output of the plan (made from `permuted`) back its
/// logical shape, with the strides its buffer holds it in.
pub fn restore(f: &Fusion, orders: &[Option<Vec<usize>>], p: &mut Plan) {
    for (k, order) in orders.iter().enumerate() {
        let Some(order) = order else { continue };
        let shape = f.value(f.outputs[k]).shape.clone().expect("a tensor");
        p.outputs[k].strides = Some(strides(&shape, order));
        p.outputs[k].shape = shape;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_follows_nvfuser_stride_order() {
        // strideOrderToAllocation: dim i at position rank-1-order[i].
        assert_eq!(allocation(&[0, 2, 1]), vec![1, 2, 0]);
        assert_eq!(allocation(&[2, 1, 0]), vec![0, 1, 2]);
        assert_eq!(allocation(&[0, 1]), vec![1, 0]);
        // [3, 5, 7] with order [0, 2, 1]: dim 1 outermost, then dim 2, dim 0 innermost.
        assert_eq!(strides(&[3, 5, 7], &[0, 2, 1]), vec![1, 21, 3]);
        assert_eq!(strides(&[3, 5], &[0, 1]), vec![1, 3]);
    }
}
