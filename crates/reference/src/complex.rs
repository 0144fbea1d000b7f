//! Complex values on the CPU: ops that read or make ComplexFloat or
//! ComplexDouble run here, one op at a time on stored tensors, in f64 pairs
//! rounded part by part to the result's part type (lanes of the pointwise
//! programs hold one real number, so complex values never enter them).

use crate::{C128, C64};
use crate::tensor::{Buffer, Tensor};
use crate::ExecError;
use fusebench_ir::dtype_ops::ComplexOp;
use fusebench_ir::infer::common_dtype;
use fusebench_ir::scalar::round_to;
use fusebench_ir::complex_math::{self as cm, Complex, C, F64};
use fusebench_ir::elementwise::{binary_i64, ternary_i64, unary_i64};
use fusebench_ir::{DType, Fusion, Literal, Op, Value};

/// An operand: a stored tensor or a real scalar of a dtype.
pub(crate) enum CArg {
    Tensor(Tensor),
    Scalar(Literal, DType),
}

/// Whether `op` reads or makes complex values (and so runs here).
pub(crate) fn involved(f: &Fusion, op: &Op, out: &Value) -> bool {
    out.shape.is_some()
        && (matches!(op, Op::Complex { .. })
            || (out.dtype.is_complex() && is_elementwise(op))
            || (is_elementwise(op) && op.operands().iter().any(|&v| f.value(v).dtype.is_complex())))
}

fn is_elementwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary { .. }
            | Op::Binary { .. }
            | Op::Ternary { .. }
            | Op::Where { .. }
            | Op::Cast { .. }
            | Op::Complex { .. }
    )
}

/// Every element of a tensor (broadcast to `shape`) as (re, im).
fn pairs(t: &Tensor, shape: &[usize]) -> Vec<(f64, f64)> {
    let t = t.broadcast_to(shape);
    match t.dtype() {
        DType::ComplexFloat => t
            .contiguous_vec::<C64>()
            .into_iter()
            .map(|c| (c.0[0] as f64, c.0[1] as f64))
            .collect(),
        DType::ComplexDouble => t
            .contiguous_vec::<C128>()
            .into_iter()
            .map(|c| (c.0[0], c.0[1]))
            .collect(),
        _ => {
            let exact_ints = t.dtype().is_integral() || t.dtype().is_bool();
            if exact_ints && t.dtype() != DType::UInt64 {
                t.to_i64_vec().into_iter().map(|x| (x as f64, 0.0)).collect()
            } else {
                t.to_f64_vec().into_iter().map(|x| (x, 0.0)).collect()
            }
        }
    }
}

fn arg_pairs(a: &CArg, shape: &[usize]) -> Vec<(f64, f64)> {
    match a {
        CArg::Tensor(t) => pairs(t, shape),
        CArg::Scalar(l, d) => {
            let x = fusebench_ir::dtype_ops::cast_literal(*l, *d, DType::Double).as_f64();
            vec![(x, 0.0); shape.iter().product()]
        }
    }
}

/// A value converted to `to` as a cast does: parts rounded to the part type
/// of a complex `to`; the real part cast to a real `to`.
fn convert(x: (f64, f64), to: DType) -> (f64, f64) {
    match to.complex_part() {
        Some(p) => (round_to(x.0, p), round_to(x.1, p)),
        // A complex value is true when either part is nonzero (PyTorch, and
        // nvFuser's `operator bool`).
        None if to == DType::Bool => (cm::to_bool(x) as i64 as f64, 0.0),
        None if to.is_float() => (round_to(x.0, to), 0.0),
        None => (Literal::Float(x.0).cast(to).as_f64(), 0.0),
    }
}

/// A tensor of `dtype` from (re, im) values already converted to it.
fn build(dtype: DType, shape: &[usize], v: &[(f64, f64)]) -> Result<Tensor, ExecError> {
    let buf = match dtype {
        DType::ComplexFloat => Buffer::C64(v.iter().map(|&(r, i)| C64([r as f32, i as f32])).collect()),
        DType::ComplexDouble => Buffer::C128(v.iter().map(|&(r, i)| C128([r, i])).collect()),
        DType::Bool => {
            let b: Vec<i64> = v.iter().map(|&(r, i)| (r != 0.0 || i != 0.0) as i64).collect();
            return Tensor::from_i64s(dtype, shape, &b);
        }
        _ => {
            let re: Vec<f64> = v.iter().map(|x| x.0).collect();
            return Tensor::from_f64s(dtype, shape, &re);
        }
    };
    Tensor::from_buffer(dtype, shape.to_vec(), buf)
}

/// `t` converted to `to` as a cast does (a real tensor into a complex cat).
pub(crate) fn cast(t: &Tensor, to: DType) -> Result<Tensor, ExecError> {
    let v: Vec<(f64, f64)> = pairs(t, t.shape()).into_iter().map(|x| convert(x, to)).collect();
    build(to, t.shape(), &v)
}

/// Runs one op that `involved` accepted; `vals` are the op's operand values.
pub(crate) fn exec(op: &Op, vals: &[&Value], out: &Value, args: &[CArg]) -> Result<Tensor, ExecError> {
    let shape = out.shape.clone().unwrap_or_default();
    let n: usize = shape.iter().product();
    let d = out.dtype;
    let refuse = |what: &str| {
        ExecError::Tensor(format!("{} on complex values is not supported ({what})", op.name()))
    };
    let res: Vec<(f64, f64)> = match op {
        Op::Complex { kind, .. } => {
            let x = arg_pairs(&args[0], &shape);
            match kind {
                ComplexOp::Complex => {
                    let y = arg_pairs(&args[1], &shape);
                    x.iter().zip(&y).map(|(r, i)| (r.0, i.0)).collect()
                }
                ComplexOp::Real => x.iter().map(|c| (c.0, 0.0)).collect(),
                ComplexOp::Imag => x.iter().map(|c| (c.1, 0.0)).collect(),
            }
        }
        Op::Cast { .. } => arg_pairs(&args[0], &shape),
        Op::Unary { kind, .. } => {
            let sem = cm::unary(*kind).ok_or_else(|| refuse("unary"))?;
            let from = vals[0].dtype;
            let x: Vec<C> = arg_pairs(&args[0], &shape).into_iter().map(|c| convert(c, from)).collect();
            let ints = |f: &dyn Fn(i64) -> i64| x.iter().map(|&c| (f(cm::to_bool(c) as i64) as f64, 0.0)).collect();
            match sem {
                Complex::Unary(f) => x.into_iter().map(|z| f(&mut F64, z)).collect(),
                Complex::Pred(p) => x.into_iter().map(|c| (p(&mut F64, c) as i64 as f64, 0.0)).collect(),
                Complex::Bools => ints(&|b| unary_i64(*kind, b, DType::Int)),
                _ => return Err(refuse("unary")),
            }
        }
        Op::Binary { kind, .. } => {
            let c = common_dtype(&[vals[0], vals[1]], false, true);
            let sem = cm::binary(*kind).ok_or_else(|| refuse("binary"))?;
            let a = arg_pairs(&args[0], &shape);
            let b = arg_pairs(&args[1], &shape);
            let ab = a.iter().zip(&b).map(|(&x, &y)| (convert(x, c), convert(y, c)));
            match sem {
                Complex::Binary(f) => ab.map(|(x, y)| f(&mut F64, x, y)).collect(),
                Complex::Compare(p) => ab.map(|(x, y)| (p(&mut F64, x, y) as i64 as f64, 0.0)).collect(),
                Complex::Bools => ab
                    .map(|(x, y)| {
                        let r = binary_i64(*kind, cm::to_bool(x) as i64, cm::to_bool(y) as i64, DType::Int);
                        (r as f64, 0.0)
                    })
                    .collect(),
                _ => return Err(refuse("binary")),
            }
        }
        Op::Ternary { kind, .. } => {
            let sem = cm::ternary(*kind).ok_or_else(|| refuse("ternary"))?;
            let t = fusebench_ir::elementwise::typing(kind.name(), kind.rule(), vals)
                .map_err(|e| ExecError::Tensor(e.to_string()))?;
            let xs: Vec<Vec<C>> = (0..3)
                .map(|k| arg_pairs(&args[k], &shape).into_iter().map(|c| convert(c, t.casts[k])).collect())
                .collect();
            match sem {
                Complex::Ternary(f) => (0..n).map(|i| f(&mut F64, xs[0][i], xs[1][i], xs[2][i])).collect(),
                Complex::Bools => (0..n)
                    .map(|i| {
                        let b = |k: usize| cm::to_bool(xs[k][i]) as i64;
                        (ternary_i64(*kind, b(0), b(1), b(2)) as f64, 0.0)
                    })
                    .collect(),
                _ => return Err(refuse("ternary")),
            }
        }
        Op::Where { .. } => {
            let cnd = arg_pairs(&args[0], &shape);
            let a = arg_pairs(&args[1], &shape);
            let b = arg_pairs(&args[2], &shape);
            (0..n).map(|k| if cnd[k].0 != 0.0 { a[k] } else { b[k] }).collect()
        }
        _ => return Err(refuse("op")),
    };
    let res: Vec<(f64, f64)> = res.into_iter().map(|c| convert(c, d)).collect();
    build(d, &shape, &res)
}

/// `sum` or `prod` of a complex tensor over `dims` (normalized), accumulated
/// in f64 pairs in row-major order and rounded once to `out`'s part type.
pub(crate) fn reduce(
    x: &Tensor,
    dims: &[usize],
    kind: fusebench_ir::ReduceOp,
    out: DType,
    out_shape: &[usize],
) -> Result<Tensor, ExecError> {
    use fusebench_ir::ReduceOp;
    let rank = x.shape().len();
    let mut perm: Vec<usize> = (0..rank).filter(|d| !dims.contains(d)).collect();
    perm.extend(dims.iter().copied());
    let t = x.permute(&perm);
    let inner: usize = dims.iter().map(|&d| x.shape()[d]).product();
    let v = pairs(&t, t.shape());
    let n_out: usize = out_shape.iter().product();
    let mut res = Vec::with_capacity(n_out);
    for k in 0..n_out {
        let chunk = &v[k * inner..(k + 1) * inner];
        res.push(match kind {
            ReduceOp::Sum => chunk.iter().fold((0.0, 0.0), |a, &b| cm::add(&mut F64, a, b)),
            ReduceOp::Prod => chunk.iter().fold((1.0, 0.0), |a, &b| cm::mul(&mut F64, a, b)),
            _ => return Err(ExecError::Tensor(format!("{} on complex values is not supported", kind.name()))),
        });
    }
    let res: Vec<C> = res.into_iter().map(|c| convert(c, out)).collect();
    build(out, out_shape, &res)
}

/// The real and imaginary parts of a complex tensor, as tensors of its part type.
pub(crate) fn parts(t: &Tensor) -> Result<(Tensor, Tensor), ExecError> {
    let p = t.dtype().complex_part().unwrap_or(t.dtype());
    let v = pairs(t, t.shape());
    let re: Vec<f64> = v.iter().map(|c| c.0).collect();
    let im: Vec<f64> = v.iter().map(|c| c.1).collect();
    Ok((
        Tensor::from_f64s(p, t.shape(), &re)?,
        Tensor::from_f64s(p, t.shape(), &im)?,
    ))
}

/// Compares two complex tensors part by part (both within `tol`, which is
/// their part type's); the first mismatch reported is the real part's if any.
pub(crate) fn compare_parts(
    got: &Tensor,
    want: &Tensor,
    tol: crate::compare::Tolerance,
    dtypes: crate::compare::Dtypes,
) -> crate::compare::Comparison {
    use crate::compare::compare_within;
    let (Ok((gr, gi)), Ok((wr, wi))) = (parts(got), parts(want)) else {
        let mut c = compare_within(got, got, tol, dtypes);
        c.ok = false;
        c.problem = Some("complex values could not be split into parts".into());
        return c;
    };
    let mut re = compare_within(&gr, &wr, tol, dtypes);
    let im = compare_within(&gi, &wi, tol, dtypes);
    re.ok &= im.ok;
    re.mismatches += im.mismatches;
    re.max_abs_err = re.max_abs_err.max(im.max_abs_err);
    re.max_rel_err = re.max_rel_err.max(im.max_rel_err);
    re.ref_abs_max = re.ref_abs_max.max(im.ref_abs_max);
    if re.first_mismatch.is_none() {
        re.first_mismatch = im.first_mismatch;
    }
    re.problem = re.problem.or(im.problem);
    re
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_by_hand() {
        // (1 + 2i)(3 - i) = 3 - i + 6i - 2i^2 = 5 + 5i.
        assert_eq!(cm::mul(&mut F64, (1.0, 2.0), (3.0, -1.0)), (5.0, 5.0));
        // (5 + 5i) / (3 - i) = 1 + 2i.
        assert_eq!(cm::div(&mut F64, (5.0, 5.0), (3.0, -1.0)), (1.0, 2.0));
        // Rounding each part to float: 0.1 in f32.
        assert_eq!(convert((0.1, -0.1), DType::ComplexFloat), (0.1f32 as f64, -0.1f32 as f64));
        // Casting complex to a real type keeps the real part.
        assert_eq!(convert((2.7, 5.0), DType::Int), (2.0, 0.0));
        assert_eq!(convert((0.0, 5.0), DType::Bool), (1.0, 0.0));
        assert_eq!(convert((0.0, -0.0), DType::Bool), (0.0, 0.0));
        assert_eq!(convert((2.7, 5.0), DType::Half), (2.69921875, 0.0));
    }

    #[test]
    fn tensors_round_trip_through_pairs() {
        let v = [(1.5, -2.0), (0.0, 3.25)];
        let t = build(DType::ComplexFloat, &[2], &v).unwrap();
        assert_eq!(pairs(&t, &[2]), v.to_vec());
        let bytes = t.to_le_bytes();
        assert_eq!(bytes.len(), 16);
        assert_eq!(&bytes[0..4], &1.5f32.to_le_bytes());
        assert_eq!(&bytes[4..8], &(-2.0f32).to_le_bytes());
        let back = Tensor::from_le_bytes(DType::ComplexFloat, &[2], &bytes).unwrap();
        assert_eq!(pairs(&back, &[2]), v.to_vec());
    }
}
