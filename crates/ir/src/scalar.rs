//! Arithmetic on single values with nvFuser's semantics, computed in f64 or
//! i64 and rounded to the result dtype. Used to fold constant scalars and by
//! the reference executor for every element.

use crate::op::{BinaryOp, TernaryOp, UnaryOp};
use crate::{DType, Literal};

/// Rounds an f64 result to what `dtype` can store. To an integer dtype: toward
/// zero, saturating at its limits, NaN to 0 (Rust's `as`; the GPU's prelude
/// `fb_f2i*` does the same).
// Inlined across crates: the reference executor calls these per element.
#[inline]
pub fn round_to(x: f64, dtype: DType) -> f64 {
    match dtype {
        DType::Double => x,
        DType::Float => x as f32 as f64,
        DType::BFloat16 => crate::round::to_bf16(x),
        DType::Half => crate::round::to_f16(x),
        DType::Bool => (x != 0.0) as i64 as f64,
        DType::Int32 => x as i32 as f64,
        DType::Int | DType::Index => x as i64 as f64,
        DType::Float8E4m3fn => crate::round::to_f8e4m3(x),
        DType::Float8E5m2 => crate::round::to_f8e5m2(x),
        DType::Float8E8m0fnu => crate::round::to_f8e8m0(x),
        DType::UInt64 => x as u64 as f64,
        DType::ComplexFloat => x as f32 as f64,
        DType::ComplexDouble => x,
    }
}

pub use crate::elementwise::{
    binary_f64, binary_i64, int_bits, ternary_f64, ternary_i64, unary_f64, unary_i64,
};

/// Whether values of `dtype` are computed on the integer path.
pub fn computes_as_int(dtype: DType) -> bool {
    dtype.is_integral() || dtype.is_bool()
}

/// A unary op on a constant: operand cast to `compute`, result in `out`.
pub fn fold_unary(kind: UnaryOp, x: Literal, compute: DType, out: DType) -> Literal {
    let x = x.cast(compute);
    if computes_as_int(compute) {
        let v = x.as_i64().unwrap_or(0);
        // |x| of an unsigned value is itself (the i64 lanes hold its bits).
        let keep = compute == DType::UInt64 && kind == UnaryOp::Abs;
        let r = if keep { v } else { unary_i64(kind, v, compute) };
        if out.is_bool() {
            Literal::Bool(r != 0)
        } else {
            Literal::Int(r).cast(out)
        }
    } else {
        let r = unary_f64(kind, x.as_f64());
        if out.is_bool() {
            Literal::Bool(r != 0.0)
        } else {
            Literal::Float(round_to(r, compute)).cast(out)
        }
    }
}

/// A binary op on constants: operands cast to `compute`, result in `out`.
pub fn fold_binary(kind: BinaryOp, a: Literal, b: Literal, compute: DType, out: DType) -> Literal {
    let (a, b) = (a.cast(compute), b.cast(compute));
    if computes_as_int(compute) {
        let (x, y) = (a.as_i64().unwrap_or(0), b.as_i64().unwrap_or(0));
        let r = if compute == DType::UInt64 {
            crate::dtype_ops::binary_u64(kind, x, y)
        } else {
            binary_i64(kind, x, y, compute)
        };
        if out.is_bool() {
            Literal::Bool(r != 0)
        } else {
            Literal::Int(r).cast(out)
        }
    } else {
        let r = binary_f64(kind, a.as_f64(), b.as_f64(), compute);
        if out.is_bool() {
            Literal::Bool(r != 0.0)
        } else {
            Literal::Float(round_to(r, compute)).cast(out)
        }
    }
}

/// A ternary op on constants: each operand cast to its entry of `cast`, the
/// op computed on float lanes when `compute` is a float dtype, result in `out`.
pub fn fold_ternary(kind: TernaryOp, args: [Literal; 3], cast: [DType; 3], compute: DType, out: DType) -> Literal {
    let v: Vec<Literal> = args.iter().zip(cast).map(|(l, d)| l.cast(d)).collect();
    if computes_as_int(compute) {
        let i = |l: Literal| l.as_i64().unwrap_or(0);
        Literal::Int(ternary_i64(kind, i(v[0]), i(v[1]), i(v[2]))).cast(out)
    } else {
        let r = ternary_f64(kind, v[0].as_f64(), v[1].as_f64(), v[2].as_f64());
        Literal::Float(round_to(r, compute)).cast(out)
    }
}
