//! Outputs a reduction's last kernel can write as it stores the result: one
//! element per result, computed from that reduction's results and inputs
//! only (the cast of a sum to bf16, `rsqrt(mean + eps)`), in the order of the
//! results, so each thread reads only the result it has just computed. They
//! would otherwise take a pointwise kernel of their own (about a microsecond
//! each on an H200, more than many small reductions take).

use crate::reduction::Reduction;
use fusebench_ir::{Fusion, Op, ValueDef, ValueId};
use std::collections::HashSet;

/// Whether output `v` can be written by the kernel that finishes `r`, given
/// that no other reduction reaches it (the caller checks). For a mean and
/// variance (`var_mean`, `welford`) that kernel holds both (the last pass's
/// combine, or the one-pass combine, `moments.rs`), but not welford's count.
pub fn fits(f: &Fusion, r: &Reduction, v: ValueId) -> bool {
    let count = match r.kind {
        crate::reduction::Kind::Welford => r.outputs.get(2).copied(),
        _ => None,
    };
    let n = f.value(r.outputs[0]).numel();
    if f.value(v).numel() != n {
        return false;
    }
    // Values computed from the results, in definition order.
    let mut from: HashSet<ValueId> = r.outputs.iter().copied().collect();
    for node in &f.nodes {
        if node.op.operands().iter().any(|o| from.contains(o)) {
            from.extend(node.outputs.iter().copied());
        }
    }
    // Every such value on the way to `v` keeps one element per result in the
    // same order: elementwise ops and size-1 reshapes only.
    let mut stack = vec![v];
    let mut seen = HashSet::new();
    while let Some(w) = stack.pop() {
        if Some(w) == count {
            return false;
        }
        if !seen.insert(w) || r.outputs.contains(&w) || !from.contains(&w) {
            continue;
        }
        let ValueDef::Node { node, .. } = f.value(w).def else {
            continue;
        };
        let op = &f.nodes[node].op;
        let same = matches!(
            op,
            Op::Unary { .. }
                | Op::Binary { .. }
                | Op::Ternary { .. }
                | Op::Where { .. }
                | Op::Cast { .. }
                | Op::Reshape { .. }
                | Op::Squeeze { .. }
                | Op::Broadcast { .. }
                | Op::BroadcastInDim { .. }
                | Op::Expand { .. }
        );
        if !same || f.value(w).numel() != n {
            return false;
        }
        stack.extend(op.operands());
    }
    true
}
