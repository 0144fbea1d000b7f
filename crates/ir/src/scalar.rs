//! Arithmetic on single values with nvFuser's semantics, computed in f64 or
//! i64 and rounded to the result dtype. Used to fold constant scalars and by
//! the reference executor for every element.

use crate::op::{BinaryOp, UnaryOp};
use crate::{DType, Literal};

/// Rounds an f64 result to what `dtype` can store.
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

// Inlined across crates: the reference executor calls these per element.
#[inline]
pub fn unary_f64(kind: UnaryOp, x: f64) -> f64 {
    match kind {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
    }
}

// Inlined across crates: the reference executor calls these per element.
#[inline]
pub fn unary_i64(kind: UnaryOp, x: i64) -> i64 {
    match kind {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs => x.wrapping_abs(),
        // Other unary ops promote integers to float before they get here.
        _ => unreachable!("integer {kind:?} is promoted to float by type inference"),
    }
}

// Inlined across crates: the reference executor calls these per element.
#[inline]
pub fn binary_f64(kind: BinaryOp, a: f64, b: f64) -> f64 {
    match kind {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        // NaN propagates, as in PyTorch's maximum/minimum.
        BinaryOp::Maximum => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }
        BinaryOp::Minimum => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.min(b)
            }
        }
        BinaryOp::Eq => (a == b) as i64 as f64,
        BinaryOp::Ne => (a != b) as i64 as f64,
        BinaryOp::Lt => (a < b) as i64 as f64,
        BinaryOp::Le => (a <= b) as i64 as f64,
        BinaryOp::Gt => (a > b) as i64 as f64,
        BinaryOp::Ge => (a >= b) as i64 as f64,
    }
}

// Inlined across crates: the reference executor calls these per element.
#[inline]
pub fn binary_i64(kind: BinaryOp, a: i64, b: i64) -> i64 {
    match kind {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        // C semantics; division by zero gives 0 rather than trapping.
        BinaryOp::Div => a.checked_div(b).unwrap_or(0),
        BinaryOp::Pow => {
            if b < 0 {
                0
            } else {
                a.wrapping_pow(b.min(u32::MAX as i64) as u32)
            }
        }
        BinaryOp::Maximum => a.max(b),
        BinaryOp::Minimum => a.min(b),
        BinaryOp::Eq => (a == b) as i64,
        BinaryOp::Ne => (a != b) as i64,
        BinaryOp::Lt => (a < b) as i64,
        BinaryOp::Le => (a <= b) as i64,
        BinaryOp::Gt => (a > b) as i64,
        BinaryOp::Ge => (a >= b) as i64,
    }
}

/// Whether values of `dtype` are computed on the integer path.
pub fn computes_as_int(dtype: DType) -> bool {
    dtype.is_integral() || dtype.is_bool()
}

/// A unary op on a constant: operand cast to `compute`, result in `out`.
pub fn fold_unary(kind: UnaryOp, x: Literal, compute: DType, out: DType) -> Literal {
    let x = x.cast(compute);
    if computes_as_int(compute) {
        let v = x.as_i64().unwrap_or(0);
        let keep = compute == DType::UInt64 && kind == UnaryOp::Abs;
        Literal::Int(if keep { v } else { unary_i64(kind, v) }).cast(out)
    } else {
        Literal::Float(round_to(unary_f64(kind, x.as_f64()), compute)).cast(out)
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
            binary_i64(kind, x, y)
        };
        if out.is_bool() {
            Literal::Bool(r != 0)
        } else {
            Literal::Int(r).cast(out)
        }
    } else {
        let r = binary_f64(kind, a.as_f64(), b.as_f64());
        if out.is_bool() {
            Literal::Bool(r != 0.0)
        } else {
            Literal::Float(round_to(r, compute)).cast(out)
        }
    }
}
