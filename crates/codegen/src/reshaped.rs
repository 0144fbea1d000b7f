//! Outputs that are a reshape of a value computed over a normalization's
//! rows: a group norm reshapes its [N, C, H, W] input to [N, G, C / G, H, W],
//! normalizes each group, and reshapes the result back. Planned as written,
//! the output's shape differs from the reduction's input, so the output is a
//! pointwise kernel of its own that reads the input again beside the row
//! kernel that found the statistics. A reshape of a dense row-major value is
//! the same buffer, so such an output is planned as the value before the
//! reshape (with the casts and unary ops after it moved before it): the row
//! kernel writes it, and the plan's output gets its logical shape back.

use crate::plan::Plan;
use fusebench_ir::{Fusion, FusionBuilder, Op, ValueId};

/// Per output, the value it reshapes and the elementwise ops (nodes, the
/// reshape's first) between the reshape and it, where the output is better
/// planned before its reshape: its layout is dense row-major (`orders`),
/// it is no alias, the reshaped value is computed elementwise and a
/// reduction it reads has its shape.
pub fn sources(f: &Fusion, orders: &[Option<Vec<usize>>]) -> Vec<Option<(ValueId, Vec<usize>)>> {
    (0..f.outputs.len())
        .map(|k| {
            let o = f.outputs[k];
            if orders.get(k).is_some_and(Option::is_some) || f.aliases.iter().any(|a| a.output == k) {
                return None;
            }
            let mut chain = Vec::new();
            let mut cur = o;
            loop {
                let node = node_of(f, cur)?;
                match &f.nodes[node].op {
                    Op::Cast { x, .. } | Op::Unary { x, .. } if f.value(*x).shape == f.value(cur).shape => {
                        chain.push(node);
                        cur = *x;
                    }
                    // With no op after it, a reshape of another output is a
                    // view of that output (no kernel): left as it is.
                    Op::Reshape { x, .. } if chain.is_empty() && f.outputs.contains(x) => return None,
                    Op::Reshape { x, .. } => {
                        chain.reverse();
                        return worth(f, *x).then_some((*x, chain));
                    }
                    _ => return None,
                }
            }
        })
        .collect()
}

fn node_of(f: &Fusion, v: ValueId) -> Option<usize> {
    match f.value(v).def {
        fusebench_ir::ValueDef::Node { node, .. } => Some(node),
        _ => None,
    }
}

/// Whether `v` is computed elementwise and reads a reduction over a value of
/// its own shape (the rows it would be written with).
fn worth(f: &Fusion, v: ValueId) -> bool {
    let elementwise = node_of(f, v).is_some_and(|n| {
        matches!(f.nodes[n].op, Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } | Op::Where { .. } | Op::Cast { .. })
    });
    let shape = &f.value(v).shape;
    let mut found = false;
    f.walk_up(std::iter::once(v), |w| {
        if let Some(n) = node_of(f, w) {
            if let Op::Reduce { x, .. } | Op::VarMean { x, .. } | Op::Welford { x, .. } = &f.nodes[n].op {
                found |= &f.value(*x).shape == shape;
            }
        }
        !found
    });
    elementwise && found
}

/// `f` with each output of `sources` replaced by its ops applied before the
/// reshape (new values and nodes at the end; nothing else changes).
pub fn unreshaped(f: &Fusion, sources: &[Option<(ValueId, Vec<usize>)>]) -> Fusion {
    let mut b = FusionBuilder::extend(f.clone());
    let mut moved = vec![];
    for (k, s) in sources.iter().enumerate() {
        let Some((v, chain)) = s else { continue };
        let mut cur = *v;
        for &node in chain {
            let op = match &f.nodes[node].op {
                Op::Cast { dtype, .. } => Op::Cast { x: cur, dtype: *dtype },
                Op::Unary { kind, .. } => Op::Unary { kind: *kind, x: cur },
                _ => unreachable!("sources keeps casts and unary ops only"),
            };
            let name = format!("{}_rows", f.value(f.nodes[node].outputs[0]).name);
            cur = b.op(op, &[&name]).expect("the same op over the reshape's operand, of the same extent")[0];
        }
        moved.push((k, cur));
    }
    let mut g = b.finish();
    for (k, id) in moved {
        g.outputs[k] = id;
    }
    g
}

/// Gives each output of `sources` in the plan (made from `unreshaped`) back
/// its logical shape: the same row-major buffer.
pub fn restore(f: &Fusion, sources: &[Option<(ValueId, Vec<usize>)>], p: &mut Plan) {
    for (k, s) in sources.iter().enumerate() {
        if s.is_some() && matches!(p.outputs[k].source, crate::plan::OutputSource::Written) {
            p.outputs[k].shape = f.value(f.outputs[k]).shape.clone().expect("a tensor");
        }
    }
}
