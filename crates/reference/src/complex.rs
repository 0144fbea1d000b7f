//! Complex values on the CPU: ops that read or make ComplexFloat or
//! ComplexDouble run here, one op at a time on stored tensors, in f64 pairs
//! rounded part by part to the result's part type (lanes of the pointwise
//! programs hold one real number, so complex values never enter them).

use crate::elems::{C128, C64};
use crate::tensor::{Buffer, Tensor};
use crate::ExecError;
use fusebench_ir::dtype_ops::ComplexOp;
use fusebench_ir::infer::common_dtype;
use fusebench_ir::scalar::round_to;
use fusebench_ir::{BinaryOp, DType, Fusion, Literal, Op, UnaryOp, Value};

/// An operand: a stored tensor or a real scalar of a dtype.
pub(crate) enum CArg {
    Tensor(Tensor),
    Scalar(Literal, DType),
}

/// Whether `op` reads or makes complex values (and so runs here).
pub(crate) fn involved(f: &Fusion, op: &Op, out: &Value) -> bool {
    matches!(op, Op::Complex { .. })
        || (out.dtype.is_complex() && is_elementwise(op))
        || (is_elementwise(op) && op.operands().iter().any(|&v| f.value(v).dtype.is_complex()))
}

fn is_elementwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary { .. } | Op::Binary { .. } | Op::Where { .. } | Op::Cast { .. } | Op::Complex { .. }
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

fn mul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

fn div(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let d = b.0 * b.0 + b.1 * b.1;
    ((a.0 * b.0 + a.1 * b.1) / d, (a.1 * b.0 - a.0 * b.1) / d)
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
            let x = arg_pairs(&args[0], &shape);
            match kind {
                UnaryOp::Neg => x.iter().map(|&c| convert(c, d)).map(|c| (-c.0, -c.1)).collect(),
                UnaryOp::Abs => {
                    let from = vals[0].dtype;
                    x.iter().map(|&c| convert(c, from)).map(|c| (c.0.hypot(c.1), 0.0)).collect()
                }
                _ => return Err(refuse("unary")),
            }
        }
        Op::Binary { kind, .. } => {
            let c = common_dtype(&[vals[0], vals[1]], false, true);
            let a = arg_pairs(&args[0], &shape);
            let b = arg_pairs(&args[1], &shape);
            let one = |x: (f64, f64), y: (f64, f64)| -> Result<(f64, f64), ExecError> {
                let (x, y) = (convert(x, c), convert(y, c));
                Ok(match kind {
                    BinaryOp::Add => (x.0 + y.0, x.1 + y.1),
                    BinaryOp::Sub => (x.0 - y.0, x.1 - y.1),
                    BinaryOp::Mul => mul(x, y),
                    BinaryOp::Div => div(x, y),
                    BinaryOp::Eq => (((x.0 == y.0) && (x.1 == y.1)) as i64 as f64, 0.0),
                    BinaryOp::Ne => (((x.0 != y.0) || (x.1 != y.1)) as i64 as f64, 0.0),
                    _ => return Err(refuse("binary")),
                })
            };
            a.iter().zip(&b).map(|(&x, &y)| one(x, y)).collect::<Result<_, _>>()?
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_by_hand() {
        // (1 + 2i)(3 - i) = 3 - i + 6i - 2i^2 = 5 + 5i.
        assert_eq!(mul((1.0, 2.0), (3.0, -1.0)), (5.0, 5.0));
        // (5 + 5i) / (3 - i) = 1 + 2i.
        assert_eq!(div((5.0, 5.0), (3.0, -1.0)), (1.0, 2.0));
        // Rounding each part to float: 0.1 in f32.
        assert_eq!(convert((0.1, -0.1), DType::ComplexFloat), (0.1f32 as f64, -0.1f32 as f64));
        // Casting complex to a real type keeps the real part.
        assert_eq!(convert((2.7, 5.0), DType::Int), (2.0, 0.0));
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
