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

use crate::{Arg, Tensor};
use fusebench_ir::{DType, Fusion, FusionBuilder, Op, ReduceOp, UnaryOp, ValueDef};

/// Per fusion output: for a float `sum`, the absolute error a correct
/// accumulation may add, element by element; `None` for other outputs (or if
/// the bound cannot be computed, which leaves the dtype's tolerance alone).
pub fn sum_bounds(f: &Fusion, inputs: &[Arg]) -> Vec<Option<Tensor>> {
    let mut b = FusionBuilder::extend(f.clone());
    let mut extra: Vec<(usize, f64)> = Vec::new();
    for (pos, &v) in f.outputs.iter().enumerate() {
        let val = f.value(v);
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
