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
//! Flash attention has roundings of its own that `check` allows for: the
//! forward (`sdpfa_fwd`, `attention_bound`) rounds the softmax weights P to
//! the operands' 16-bit type before P.V, as PyTorch's and nvFuser's kernels
//! and fusebench's do, which moves an output element by up to u * sum_j p_ij
//! |v_j|; the backward (`sdpfa_bwd`, `backward_bounds`) rounds P and dS
//! before they multiply (`attention::bwd_bounds` in the reference's own
//! attention module).

use crate::{Arg, Tensor};
use fusebench_ir::{BinaryOp, DType, Fusion, FusionBuilder, GemmOp, Op, ReduceOp, UnaryOp, ValueDef, ValueId};

/// Per fusion output: for a float `sum`, the absolute error a correct
/// accumulation may add, element by element, and for flash attention's
/// outputs and gradients (seen through views, casts, and sums with values
/// that depend on no attention) what its roundings may add
/// (`attention_bound`, `backward_bounds`); `None` for other outputs (or
/// if the bound cannot be computed, which leaves the dtype's tolerance alone).
pub fn sum_bounds(f: &Fusion, inputs: &[Arg]) -> Vec<Option<Tensor>> {
    let mut b = FusionBuilder::extend(f.clone());
    let mut extra: Vec<(usize, f64)> = Vec::new();
    for (pos, &v) in f.outputs.iter().enumerate() {
        let val = f.value(v);
        if let Some(factor) = attention_bound(f, &mut b, v).or_else(|| fp8_product_bound(f, &mut b, v)) {
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
    backward_bounds(f, inputs, &mut out);
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

fn is_attention(op: &Op) -> bool {
    matches!(op, Op::Gemm(GemmOp::SdpfaFwd { .. } | GemmOp::SdpfaBwd { .. }))
}

/// The attention node an output is computed from, which of its outputs,
/// and the nodes between (output first): views, casts, `set`, and additions
/// or subtractions of values that depend on no attention.
fn attention_chain(f: &Fusion, out: ValueId) -> Option<(usize, usize, Vec<usize>)> {
    chain_to(f, out, is_attention)
}

/// The node `root` picks that an output is computed from, which of its
/// outputs, and the nodes between (output first): views, casts, `set`, ops
/// that move no value further from another (relu, neg, abs), and additions or
/// subtractions of values that depend on no such node.
fn chain_to(f: &Fusion, out: ValueId, root: impl Fn(&Op) -> bool) -> Option<(usize, usize, Vec<usize>)> {
    let mut tainted = vec![false; f.values.len()];
    for n in &f.nodes {
        let t = root(&n.op) || n.op.operands().iter().any(|v| tainted[v.index()]);
        for o in &n.outputs {
            tainted[o.index()] = t;
        }
    }
    let mut chain = vec![];
    let mut cur = out;
    loop {
        let ValueDef::Node { node, index } = f.value(cur).def else { return None };
        let op = &f.nodes[node].op;
        cur = match op {
            o if root(o) => return Some((node, index, chain)),
            o if o.is_view() || matches!(o, Op::Set { .. } | Op::Cast { .. }) => o.operands()[0],
            Op::Unary { kind: UnaryOp::Relu | UnaryOp::Neg | UnaryOp::Abs, x } => *x,
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
    }
}

/// Unit roundoff of flash attention's 16-bit operand types.
fn flash_roundoff(d: DType) -> Option<f64> {
    matches!(d, DType::BFloat16 | DType::Half).then(|| crate::bounds::eps(d) / 2.0)
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
    let (attention, index, chain) = attention_chain(f, out)?;
    let Op::Gemm(GemmOp::SdpfaFwd { query, key, value, dropout_p, is_causal, scale }) = f.nodes[attention].op else {
        return None;
    };
    if index != 0 {
        return None;
    }
    let u = flash_roundoff(f.value(query).dtype)?;
    let keys = f.value(key).shape.as_ref().and_then(|s| s.iter().rev().nth(1).copied())?;
    let built = (|| {
        let abs_v = b.unary(UnaryOp::Abs, value).ok()?;
        let op = Op::Gemm(GemmOp::SdpfaFwd { query, key, value: abs_v, dropout_p, is_causal, scale });
        let outs = b.op(op, &["bound_o", "bound_lse", "bound_seed", "bound_offset"]).ok()?;
        let v = b.cast(outs[0], DType::Double).ok()?;
        let v = through_views(f, b, &chain, v)?;
        b.add_output(v).ok()
    })();
    let rounded_before = if chain.is_empty() { 0.0 } else { 2.0 * u };
    built.map(|_| u + rounded_before + accumulation_factor(keys, DType::Float, DType::Float))
}

/// `v` seen through the views of `chain` (output first), as the output
/// sees the value the chain starts from.
fn through_views(f: &Fusion, b: &mut FusionBuilder, chain: &[usize], mut v: ValueId) -> Option<ValueId> {
    for &node in chain.iter().rev() {
        let op = &f.nodes[node].op;
        if op.is_view() {
            let mut op = op.clone();
            *op.operands_mut()[0] = v;
            v = b.op(op, &["bound_view"]).ok()?[0];
        }
    }
    Some(v)
}

/// For an output that is `scaled_mm`'s result seen through views, casts,
/// `set`, relu/neg/abs, and additions or subtractions of values that do not
/// depend on it: adds to `b` the same product of |mat1|, |mat2| and the
/// scales' magnitudes (sum_k |a_ik b_kj| |s1 s2|), seen through the same
/// views, and returns the factor that makes it a bound. Hopper's FP8 tensor
/// cores accumulate with about 14 significant bits between the library's
/// promotions to f32 (DeepSeek-V3's report measured this on H800), so each
/// level of the sum may lose 2^-13 of the magnitudes added, not Float's
/// 2^-24: (ceil(log2 k) + 1) of them; one ulp (2u) of the product's dtype more
/// where something follows it, as for attention.
fn fp8_product_bound(f: &Fusion, b: &mut FusionBuilder, out: ValueId) -> Option<f64> {
    let (node, _, chain) = chain_to(f, out, |op| matches!(op, Op::Gemm(GemmOp::ScaledMm { .. })))?;
    let Op::Gemm(GemmOp::ScaledMm { mat1, mat2, scale1, scale2, dtype }) = f.nodes[node].op else {
        return None;
    };
    let k = f.value(mat1).shape.as_ref()?.last().copied()?;
    let built = (|| {
        let abs = |b: &mut FusionBuilder, v: ValueId| b.unary(UnaryOp::Abs, v).ok();
        let (a, m, s, t) = (abs(b, mat1)?, abs(b, mat2)?, abs(b, scale1)?, abs(b, scale2)?);
        let op = Op::Gemm(GemmOp::ScaledMm { mat1: a, mat2: m, scale1: s, scale2: t, dtype: DType::Float });
        let p = b.op(op, &["bound_product"]).ok()?[0];
        let v = b.cast(p, DType::Double).ok()?;
        let v = through_views(f, b, &chain, v)?;
        b.add_output(v).ok()
    })();
    let rounded_before = if chain.is_empty() { 0.0 } else { crate::bounds::eps(dtype) };
    built.map(|_| ((k.max(2) as f64).log2().ceil() + 1.0) * 2f64.powi(-13) + rounded_before)
}

/// For outputs that are gradients of flash attention's backward, returned
/// as they are or through casts, `set`, and additions or subtractions of
/// values that depend on no attention (not views: the bounds are computed
/// on the host, outside the fusion): the bound of the rounding flash kernels
/// do, P and dS rounded to the operands' type before they multiply
/// (`attention::bwd_bounds`).
fn backward_bounds(f: &Fusion, inputs: &[Arg], out: &mut [Option<Tensor>]) {
    // (output, node, which gradient, whether the gradient is rounded before more work)
    let mut wanted: Vec<(usize, usize, usize, bool)> = vec![];
    for (pos, &v) in f.outputs.iter().enumerate() {
        if let Some((node, index, chain)) = attention_chain(f, v) {
            let views = chain.iter().any(|&n| f.nodes[n].op.is_view());
            if matches!(f.nodes[node].op, Op::Gemm(GemmOp::SdpfaBwd { .. })) && !views {
                wanted.push((pos, node, index, !chain.is_empty()));
            }
        }
    }
    let mut nodes: Vec<usize> = wanted.iter().map(|w| w.1).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.is_empty() {
        return;
    }
    let mut b = FusionBuilder::extend(f.clone());
    for &node in &nodes {
        let Op::Gemm(GemmOp::SdpfaBwd { grad_output, query, key, value, output, logsumexp, .. }) = f.nodes[node].op else {
            continue;
        };
        for v in [grad_output, query, key, value, output, logsumexp] {
            if b.add_output(v).is_err() {
                return;
            }
        }
    }
    let g = b.finish();
    let Ok(res) = crate::run(&g, inputs) else { return };
    let scalar = |v: ValueId| {
        f.value(v).constant.or_else(|| {
            let i = f.inputs.iter().position(|&i| i == v)?;
            match &inputs[i] {
                Arg::Scalar(l) => Some(*l),
                Arg::Tensor(_) => None,
            }
        })
    };
    for (k, &node) in nodes.iter().enumerate() {
        let t: Vec<&Tensor> = (0..6).map(|i| &res[f.outputs.len() + 6 * k + i]).collect();
        let Op::Gemm(GemmOp::SdpfaBwd { query, output, logsumexp, is_causal, scale, .. }) = f.nodes[node].op else {
            continue;
        };
        let Some(u) = flash_roundoff(f.value(query).dtype) else { continue };
        let causal = is_causal.and_then(scalar).is_some_and(|l| l.as_bool());
        let scale = scale.and_then(scalar).map(|l| l.as_f64());
        let computed = [output, logsumexp].iter().any(|&v| matches!(f.value(v).def, ValueDef::Node { .. }));
        let Ok((bounds, exact)) = crate::attention::bwd_bounds([t[0], t[1], t[2], t[3], t[4], t[5]], causal, scale, u, computed)
        else {
            continue;
        };
        for &(pos, _, index, rounded) in wanted.iter().filter(|w| w.1 == node) {
            let mut b = bounds[index].to_f64_vec();
            if rounded {
                // The gradient is rounded to its type before what follows,
                // and another executor's rounding may go the other way.
                for (x, y) in b.iter_mut().zip(&exact[index]) {
                    *x += 2.0 * u * (y.abs() + *x);
                }
            }
            out[pos] = Tensor::from_f64s(DType::Double, bounds[index].shape(), &b).ok();
        }
    }
}
