//! The complex column of the op table: what each elementwise op computes on
//! ComplexFloat/ComplexDouble values, as nvFuser's kernels do
//! (runtime/complex_number.cu and runtime/helpers.cu), on (re, im) pairs
//! of f64. The reference executor evaluates these functions and the CUDA
//! prelude defines `fb_c_NAME` with the same formulas in the part type.
//!
//! Three kinds of semantics, read from nvFuser's source:
//! - complex math (exp, log, sqrt, trig, pow, lerp...): libc++'s formulas;
//! - predicates (isnan, isinf, isfinite, isreal) defined on complex values;
//! - the rest of the ops nvFuser accepts on complex tensors have no complex
//!   overload in its runtime: its `std::complex` converts implicitly to bool
//!   (`operator bool`: re != 0 || im != 0), so C++ overload resolution runs
//!   the op's integer form on 0/1 (lt, maximum, fmod, relu, clamp, signbit,
//!   isneginf...). nvFuser records exactly that (e.g. maximum of two nonzero
//!   values is 1 + 0i), so fusebench computes the same: [`Complex::Bools`].

use crate::op::{BinaryOp, TernaryOp, UnaryOp};

/// A complex value as (re, im).
pub type C = (f64, f64);

/// What an op computes on complex operands.
#[derive(Clone, Copy)]
pub enum Complex {
    Unary(fn(C) -> C),
    Binary(fn(C, C) -> C),
    Ternary(fn(C, C, C) -> C),
    /// A predicate of a complex value (bool result).
    Pred(fn(C) -> bool),
    /// A comparison of two complex values (bool result).
    Compare(fn(C, C) -> bool),
    /// The op's integer form (the table's i64 column and CUDA integer
    /// template) on each operand converted to bool, as 0 or 1.
    Bools,
}

/// The complex semantics of a unary op; `None`: not computed on complex
/// (nvFuser fails to compile it: ceil, floor, erf, lgamma, silu...).
pub fn unary(kind: UnaryOp) -> Option<Complex> {
    use Complex::{Bools, Pred, Unary as U};
    use UnaryOp::*;
    Some(match kind {
        Neg => U(|z| (-z.0, -z.1)),
        // |z| is real: the output dtype is the part type (`dtype_ops::abs_dtype`).
        Abs => U(|z| (z.0.hypot(z.1), 0.0)),
        Reciprocal => U(|z| div((1.0, 0.0), z)),
        Rsqrt => U(|z| div((1.0, 0.0), sqrt(z))),
        Sqrt => U(sqrt),
        Exp => U(exp),
        Log => U(log),
        Log10 => U(|z| scale(log(z), std::f64::consts::LN_10)),
        Log2 => U(|z| scale(log(z), std::f64::consts::LN_2)),
        Sigmoid => U(|z| div((1.0, 0.0), add((1.0, 0.0), exp((-z.0, -z.1))))),
        Sin => U(|z| times_minus_i(sinh(times_i(z)))),
        Cos => U(|z| cosh(times_i(z))),
        Tan => U(|z| times_minus_i(tanh(times_i(z)))),
        Sinh => U(sinh),
        Cosh => U(cosh),
        Tanh => U(tanh),
        Asin => U(|z| times_minus_i(asinh(times_i(z)))),
        Acos => U(acos),
        Atan => U(|z| times_minus_i(atanh(times_i(z)))),
        Asinh => U(asinh),
        Acosh => U(acosh),
        Atanh => U(atanh),
        IsNan => Pred(|z| z.0.is_nan() || z.1.is_nan()),
        IsInf => Pred(|z| z.0.is_infinite() || z.1.is_infinite()),
        IsFinite => Pred(|z| z.0.is_finite() && z.1.is_finite()),
        IsReal => Pred(|z| z.1 == 0.0),
        // helpers.cu: `x > 0 && isinf(x)`, where `x > 0` compares bool(x) with 0.
        IsPosInf => Pred(|z| to_bool(z) && (z.0.is_infinite() || z.1.is_infinite())),
        // `x < 0` on bool(x) is never true.
        IsNegInf => Pred(|_| false),
        Relu | Signbit => Bools,
        _ => return None,
    })
}

/// The complex semantics of a binary op (see [`unary`]).
pub fn binary(kind: BinaryOp) -> Option<Complex> {
    use BinaryOp::*;
    use Complex::{Binary as B, Bools, Compare};
    Some(match kind {
        Add => B(add),
        Sub => B(|a, b| (a.0 - b.0, a.1 - b.1)),
        Mul => B(mul),
        Div | Truediv => B(div),
        Pow => B(|a, b| exp(mul(b, log(a)))),
        Eq => Compare(|a, b| a.0 == b.0 && a.1 == b.1),
        Ne => Compare(|a, b| a.0 != b.0 || a.1 != b.1),
        Lt | Le | Gt | Ge | Maximum | Minimum | Fmod | Mod | Remainder => Bools,
        _ => return None,
    })
}

/// The complex semantics of a ternary op (see [`unary`]).
pub fn ternary(kind: TernaryOp) -> Option<Complex> {
    Some(match kind {
        // complex_number.cu's lerp: the branch on |weight| < 0.5.
        TernaryOp::Lerp => Complex::Ternary(|s, e, w| {
            if w.0.hypot(w.1) < 0.5 {
                add(s, mul(w, sub(e, s)))
            } else {
                sub(e, mul(sub(e, s), sub((1.0, 0.0), w)))
            }
        }),
        TernaryOp::Clamp | TernaryOp::Threshold => Complex::Bools,
    })
}

/// `operator bool` of nvFuser's complex: either part nonzero (NaN is nonzero).
pub fn to_bool(z: C) -> bool {
    z.0 != 0.0 || z.1 != 0.0
}

pub fn add(a: C, b: C) -> C {
    (a.0 + b.0, a.1 + b.1)
}
fn sub(a: C, b: C) -> C {
    (a.0 - b.0, a.1 - b.1)
}
pub fn mul(a: C, b: C) -> C {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}
pub fn div(a: C, b: C) -> C {
    let d = b.0 * b.0 + b.1 * b.1;
    ((a.0 * b.0 + a.1 * b.1) / d, (a.1 * b.0 - a.0 * b.1) / d)
}
/// A complex value divided by a real one, part by part.
fn scale(a: C, s: f64) -> C {
    (a.0 / s, a.1 / s)
}
/// i z and -i z: the trig functions are the hyperbolic ones rotated.
fn times_i(z: C) -> C {
    (-z.1, z.0)
}
fn times_minus_i(z: C) -> C {
    (z.1, -z.0)
}
fn sqr(z: C) -> C {
    ((z.0 - z.1) * (z.0 + z.1), 2.0 * z.0 * z.1)
}
pub fn exp(z: C) -> C {
    if z.1 == 0.0 {
        return (z.0.exp(), z.1);
    }
    let e = z.0.exp();
    (e * z.1.cos(), e * z.1.sin())
}
pub fn log(z: C) -> C {
    (z.0.hypot(z.1).ln(), z.1.atan2(z.0))
}
/// The principal root: sqrt(|z|) at half the argument.
pub fn sqrt(z: C) -> C {
    if z.1.is_infinite() {
        return (f64::INFINITY, z.1);
    }
    let r = z.0.hypot(z.1).sqrt();
    let t = z.1.atan2(z.0) / 2.0;
    (r * t.cos(), r * t.sin())
}
fn sinh(z: C) -> C {
    (z.0.sinh() * z.1.cos(), z.0.cosh() * z.1.sin())
}
fn cosh(z: C) -> C {
    if z.0 == 0.0 && z.1 == 0.0 {
        return (1.0, z.1);
    }
    (z.0.cosh() * z.1.cos(), z.0.sinh() * z.1.sin())
}
fn tanh(z: C) -> C {
    if z.0.is_infinite() {
        return (1f64.copysign(z.0), 0f64.copysign((2.0 * z.1).sin()));
    }
    let (r2, i2) = (2.0 * z.0, 2.0 * z.1);
    let d = r2.cosh() + i2.cos();
    let s = r2.sinh();
    if s.is_infinite() && d.is_infinite() {
        return (if s > 0.0 { 1.0 } else { -1.0 }, if i2 > 0.0 { 0.0 } else { -0.0 });
    }
    (s / d, i2.sin() / d)
}
/// log(z + sqrt(z^2 + 1)), signs of z's parts kept (libc++'s asinh).
fn asinh(z: C) -> C {
    let w = log(add(z, sqrt(add(sqr(z), (1.0, 0.0)))));
    (w.0.copysign(z.0), w.1.copysign(z.1))
}
fn acosh(z: C) -> C {
    let w = log(add(z, sqrt(sub(sqr(z), (1.0, 0.0)))));
    (w.0.abs(), w.1.copysign(z.1))
}
fn acos(z: C) -> C {
    if z.0 == 0.0 && (z.1 == 0.0 || z.1.is_nan()) {
        return (std::f64::consts::FRAC_PI_2, -z.1);
    }
    let w = log(add(z, sqrt(sub(sqr(z), (1.0, 0.0)))));
    if z.1.is_sign_negative() {
        (w.1.abs(), w.0.abs())
    } else {
        (w.1.abs(), -w.0.abs())
    }
}
/// log((1 + z) / (1 - z)) / 2, signs of z's parts kept.
fn atanh(z: C) -> C {
    if z.0.abs() == 1.0 && z.1 == 0.0 {
        return (f64::INFINITY.copysign(z.0), 0f64.copysign(z.1));
    }
    let w = scale(log(div(add((1.0, 0.0), z), sub((1.0, 0.0), z))), 2.0);
    (w.0.copysign(z.0), w.1.copysign(z.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: C, b: C) -> bool {
        (a.0 - b.0).abs() < 1e-12 && (a.1 - b.1).abs() < 1e-12
    }

    #[test]
    fn values_by_hand() {
        let f = |k| match unary(k) {
            Some(Complex::Unary(f)) => f,
            _ => panic!("not complex math"),
        };
        // exp(i pi) = -1; log(-1) = i pi; sqrt(-4) = 2i; sqrt(3 + 4i) = 2 + i.
        assert!(close(f(UnaryOp::Exp)((0.0, std::f64::consts::PI)), (-1.0, 0.0)));
        assert!(close(f(UnaryOp::Log)((-1.0, 0.0)), (0.0, std::f64::consts::PI)));
        assert!(close(f(UnaryOp::Sqrt)((-4.0, 0.0)), (0.0, 2.0)));
        assert!(close(f(UnaryOp::Sqrt)((3.0, 4.0)), (2.0, 1.0)));
        // 1 / (3 + 4i) = (3 - 4i) / 25; rsqrt(-4) = 1 / 2i = -i / 2.
        assert!(close(f(UnaryOp::Reciprocal)((3.0, 4.0)), (0.12, -0.16)));
        assert!(close(f(UnaryOp::Rsqrt)((-4.0, 0.0)), (0.0, -0.5)));
        // sin(i) = i sinh(1); cos(i) = cosh(1); tanh(i pi / 4) = i.
        assert!(close(f(UnaryOp::Sin)((0.0, 1.0)), (0.0, 1f64.sinh())));
        assert!(close(f(UnaryOp::Cos)((0.0, 1.0)), (1f64.cosh(), 0.0)));
        assert!(close(f(UnaryOp::Tanh)((0.0, std::f64::consts::FRAC_PI_4)), (0.0, 1.0)));
        // The inverses undo the functions (principal branches).
        let z = (0.3, -0.7);
        for (inv, fun) in [
            (UnaryOp::Asin, UnaryOp::Sin),
            (UnaryOp::Acos, UnaryOp::Cos),
            (UnaryOp::Atan, UnaryOp::Tan),
            (UnaryOp::Asinh, UnaryOp::Sinh),
            (UnaryOp::Acosh, UnaryOp::Cosh),
            (UnaryOp::Atanh, UnaryOp::Tanh),
        ] {
            let back = f(fun)(f(inv)(z));
            assert!(close(back, z), "{inv:?}: {back:?}");
        }
        // acos(0) = pi/2; acosh(-1) = i pi; asin(2) = pi/2 - i ln(2 + sqrt 3) (on the lower lip).
        assert!(close(f(UnaryOp::Acos)((0.0, 0.0)), (std::f64::consts::FRAC_PI_2, 0.0)));
        assert!(close(f(UnaryOp::Acosh)((-1.0, 0.0)), (0.0, std::f64::consts::PI)));
        // log10(100 i) = 2 + i pi / (2 ln 10).
        let l = f(UnaryOp::Log10)((0.0, 100.0));
        assert!(close(l, (2.0, std::f64::consts::FRAC_PI_2 / std::f64::consts::LN_10)));
    }

    #[test]
    fn pow_lerp_and_bools() {
        let Some(Complex::Binary(pow)) = binary(BinaryOp::Pow) else { panic!() };
        // i^2 = -1; (1 + i)^2 = 2i.
        assert!(close(pow((0.0, 1.0), (2.0, 0.0)), (-1.0, 0.0)));
        assert!(close(pow((1.0, 1.0), (2.0, 0.0)), (0.0, 2.0)));
        let Some(Complex::Ternary(lerp)) = ternary(TernaryOp::Lerp) else { panic!() };
        // |w| < 0.5: s + w (e - s); else e - (e - s)(1 - w): both give s + w (e - s).
        assert!(close(lerp((0.0, 0.0), (2.0, 2.0), (0.25, 0.0)), (0.5, 0.5)));
        assert!(close(lerp((0.0, 0.0), (2.0, 2.0), (0.0, 1.0)), (-2.0, 2.0)));
        assert!(matches!(binary(BinaryOp::Lt), Some(Complex::Bools)));
        assert!(binary(BinaryOp::Atan2).is_none() && unary(UnaryOp::Ceil).is_none());
        assert!(to_bool((0.0, -1.0)) && !to_bool((0.0, -0.0)) && to_bool((f64::NAN, 0.0)));
    }
}
