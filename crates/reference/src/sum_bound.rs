//! How far a correctly computed floating-point sum may be from the exact one:
//! the one bound of a float sum, used by `check` ([`sum_bounds`]) and by the
//! fuzzer's per-element bounds ([`crate::bounds`]).
//!
//! A GPU sums in its accumulator's precision (f32 for f32/bf16/f16 inputs) in
//! some tree order; the reference sums exactly and rounds once. Their
//! difference is bounded by the rounding of each addition, which scales with
//! the magnitudes added, not with the result: summing n terms in a tree of
//! depth log2(n) errs by at most about log2(n) * u * sum|x| (u the unit
//! roundoff of the accumulator, half its epsilon). For a sum that cancels
//! (8M random normals sum to ~3e3 while sum|x| is ~7e6) a tolerance relative
//! to the result is too tight, and one relative to max|x| is unfounded.
//! The rounding of the result to its own dtype is not included: callers add
//! it (the dtype's tolerance in `check`, one ulp of the output in `bounds`).
//!
//! Flash attention (`sdpfa_fwd`) has a rounding of its own that `check`
//! allows for ([`attention_bound`]): it rounds the softmax weights P to the
//! operands' 16-bit type before P.V, as PyTorch's and nvFuser's kernels and
//! fusebench's do, which moves an output element by up to u * sum_j p_ij |v_j|.

use crate::{Arg, Tensor};
use fusebench_ir::{BinaryOp, DType, Fusion, FusionBuilder, GemmOp, Op, ReduceOp, UnaryOp, ValueDef, ValueId};

/// Per fusion output: for a float `sum`, the absolute error a correct
/// accumulation may add, element by element, and for flash attention's
/// output (or a view, cast or sum with it of it) the error of its weights'
/// rounding ([`attention_bound`]); `None` for other outputs (or if the bound
/// cannot be computed, which leaves the dtype's tolerance alone).
pub fn sum_bounds(f: &Fusion, inputs: &[Arg]) -> Vec<Option<Tensor>> {
    let mut b = FusionBuilder::extend(f.clone());
    let mut extra: Vec<(usize, f64)> = Vec::new();
    for (pos, &v) in f.outputs.iter().enumerate() {
        let val = f.value(v);
        if let Some(factor) = attention_bound(f, &mut b, v) {
            extra.push((pos, factor));
            continue;
        }
        let ValueDef::Node { node, .. } = val.def else { continue };
        let Op::Reduce { kind: ReduceOp::Sum, x, dims, keepdim, .. } = &f.nodes[node].op else {
            continue;
        };
        if !val.dtype.is_float() {
            continue;
        }
        let Some(xs) = f.value(*x).shape.clone() else { continue };
        let Ok(rd) = fusebench_ir::infer::norm_dims("sum", dims, xs.len()) else { continue };
        let n: usize = rd.iter().map(|&d| xs[d]).product();
        let gamma = accumulation_factor(n, f.value(*x).dtype, val.dtype);
        let added = (|| {
            let xd = b.cast(*x, DType::Double).ok()?;
            let a = b.unary(UnaryOp::Abs, xd).ok()?;
            let s = b.reduce(ReduceOp::Sum, a, dims, *keepdim).ok()?;
            b.add_output(s).ok()
        })();
        if added.is_some() {
            extra.push((pos, gamma));
        }
    }
    let mut out = vec![None; f.outputs.len()];
    if extra.is_empty() {
        return out;
    }
    let g = b.finish();
    let Ok(res) = crate::run(&g, inputs) else { return out };
    for (k, (pos, gamma)) in extra.into_iter().enumerate() {
        let t = &res[f.outputs.len() + k];
        let v: Vec<f64> = t.to_f64_vec().iter().map(|s| s * gamma).collect();
        out[pos] = Tensor::from_f64s(DType::Double, t.shape(), &v).ok();
    }
    out
}

/// Unit roundoff of the accumulator a sum of `x` into `y` uses: Double when
/// the sum is into Double (or into an integer from Double), else Float.
pub fn accumulator_roundoff(x: DType, y: DType) -> f64 {
    // A sum into a float dtype casts its terms to that dtype first (nvFuser's
    // `sum(x, dtype=...)`): a Double sum into Float accumulates in Float.
    if y == DType::Double || (!y.is_float() && x == DType::Double) {
        2f64.powi(-53)
    } else {
        2f64.powi(-24)
    }
}

/// The factor `g` with |computed - exact| <= g * sum|x| for a sum of `n`
/// terms of `x` into `y`: (ceil(log2 n) + 1) unit roundoffs, one per level
/// of a balanced tree of n leaves plus one because the GPU's tree is not
/// balanced (each thread first adds its own terms in a loop, then warps and
/// blocks combine). That loop makes the true worst case longer; its
/// roundings have random signs on real data and grow like the square root
/// of its length, which the measured GPU runs (fixtures, goldens, fuzzing)
/// stay well within.
pub fn accumulation_factor(n: usize, x: DType, y: DType) -> f64 {
    ((n.max(2) as f64).log2().ceil() + 1.0) * accumulator_roundoff(x, y)
}

/// For an output that is flash attention's result `o` seen through views,
/// casts, `set`, and additions or subtractions of values that do not depend
/// on any attention: adds to `b` the attention of the same queries and keys
/// over |v| (sum_j p_ij |v_jc|), seen through the same views, and returns
/// the factor that makes it a bound: the unit roundoff u of the operands'
/// type, to which P is rounded, plus the f32 accumulation of P.V; and where
/// the output is not `o` itself, one ulp (2u) of `o` more, since `o` is
/// rounded before what follows and that rounding may then go the other way
/// (|o| <= sum_j p_ij |v_jc|), which an addition that cancels exposes.
fn attention_bound(f: &Fusion, b: &mut FusionBuilder, out: ValueId) -> Option<f64> {
    // Whether each value depends on an attention.
    let mut tainted = vec![false; f.values.len()];
    for n in &f.nodes {
        let t = matches!(n.op, Op::Gemm(GemmOp::SdpfaFwd { .. })) || n.op.operands().iter().any(|v| tainted[v.index()]);
        for o in &n.outputs {
            tainted[o.index()] = t;
        }
    }
    // The chain from the output back to the attention, output first.
    let mut chain = vec![];
    let mut cur = out;
    let attention = loop {
        let ValueDef::Node { node, index } = f.value(cur).def else { return None };
        let op = &f.nodes[node].op;
        cur = match op {
            Op::Gemm(GemmOp::SdpfaFwd { .. }) if index == 0 => break node,
            o if o.is_view() || matches!(o, Op::Set { .. } | Op::Cast { .. }) => o.operands()[0],
            Op::Binary { kind: BinaryOp::Add | BinaryOp::Sub, a, b } if tainted[a.index()] != tainted[b.index()] => {
                if tainted[a.index()] {
                    *a
                } else {
                    *b
                }
            }
            _ => return None,
        };
        chain.push(node);
    };
    let Op::Gemm(GemmOp::SdpfaFwd { query, key, value, dropout_p, is_causal, scale }) = f.nodes[attention].op else {
        return None;
    };
    let u = match f.value(query).dtype {
        DType::BFloat16 => 2f64.powi(-8),
        DType::Half => 2f64.powi(-11),
        _ => return None,
    };
    let keys = f.value(key).shape.as_ref().and_then(|s| s.iter().rev().nth(1).copied())?;
    let built = (|| {
        let abs_v = b.unary(UnaryOp::Abs, value).ok()?;
        let op = Op::Gemm(GemmOp::SdpfaFwd { query, key, value: abs_v, dropout_p, is_causal, scale });
        let outs = b.op(op, &["bound_o", "bound_lse", "bound_seed", "bound_offset"]).ok()?;
        let mut v = b.cast(outs[0], DType::Double).ok()?;
        for &node in chain.iter().rev() {
            let op = &f.nodes[node].op;
            if op.is_view() {
                let mut op = op.clone();
                *op.operands_mut()[0] = v;
                v = b.op(op, &["bound_view"]).ok()?[0];
            }
        }
        b.add_output(v).ok()
    })();
    let rounded_before = if chain.is_empty() { 0.0 } else { 2.0 * u };
    built.map(|_| u + rounded_before + accumulation_factor(keys, DType::Float, DType::Float))
}
