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

/// Real functions the complex formulas are written in.
#[derive(Clone, Copy, Debug)]
pub enum R1 {
    Neg,
    Abs,
    Sqrt,
    Exp,
    Log,
    Sin,
    Cos,
    Sinh,
    Cosh,
}

/// Real binary functions the complex formulas are written in.
#[derive(Clone, Copy, Debug)]
pub enum R2 {
    Add,
    Sub,
    Mul,
    Div,
    Atan2,
}

/// Tests on real values the complex formulas branch on.
#[derive(Clone, Copy, Debug)]
pub enum Test {
    Eq,
    Ne,
    Lt,
    Gt,
}

/// Classes of one real value.
#[derive(Clone, Copy, Debug)]
pub enum Class {
    IsNan,
    IsInf,
    IsFinite,
    SignNegative,
}

/// The real arithmetic a formula runs on. Written once against this, each
/// formula is evaluated in f64 by the reference ([`F64`]) and built as real
/// ops of a fusion by the fuzzer's bound program, which then bounds every
/// rounding inside the formula (cancellation included), not only its result.
/// Branches are `select`s: both sides are computed.
pub trait Parts {
    type V: Copy;
    type B: Copy;
    fn lit(&mut self, x: f64) -> Self::V;
    fn r1(&mut self, f: R1, a: Self::V) -> Self::V;
    fn r2(&mut self, f: R2, a: Self::V, b: Self::V) -> Self::V;
    fn test(&mut self, t: Test, a: Self::V, b: Self::V) -> Self::B;
    fn class(&mut self, c: Class, a: Self::V) -> Self::B;
    fn and(&mut self, a: Self::B, b: Self::B) -> Self::B;
    fn or(&mut self, a: Self::B, b: Self::B) -> Self::B;
    fn truth(&mut self, t: bool) -> Self::B;
    /// `a` where `c`, else `b`.
    fn select(&mut self, c: Self::B, a: Self::V, b: Self::V) -> Self::V;
    /// sqrt(a² + b²).
    fn hypot(&mut self, a: Self::V, b: Self::V) -> Self::V {
        let (aa, bb) = (self.r2(R2::Mul, a, a), self.r2(R2::Mul, b, b));
        let s = self.r2(R2::Add, aa, bb);
        self.r1(R1::Sqrt, s)
    }
    /// |a| with the sign of `b`.
    fn copysign(&mut self, a: Self::V, b: Self::V) -> Self::V {
        let m = self.r1(R1::Abs, a);
        let n = self.r1(R1::Neg, m);
        let neg = self.class(Class::SignNegative, b);
        self.select(neg, n, m)
    }
}

/// The formulas in f64, as the reference computes them.
pub struct F64;

impl Parts for F64 {
    type V = f64;
    type B = bool;
    fn lit(&mut self, x: f64) -> f64 {
        x
    }
    fn r1(&mut self, f: R1, a: f64) -> f64 {
        match f {
            R1::Neg => -a,
            R1::Abs => a.abs(),
            R1::Sqrt => a.sqrt(),
            R1::Exp => a.exp(),
            R1::Log => a.ln(),
            R1::Sin => a.sin(),
            R1::Cos => a.cos(),
            R1::Sinh => a.sinh(),
            R1::Cosh => a.cosh(),
        }
    }
    fn r2(&mut self, f: R2, a: f64, b: f64) -> f64 {
        match f {
            R2::Add => a + b,
            R2::Sub => a - b,
            R2::Mul => a * b,
            R2::Div => a / b,
            R2::Atan2 => a.atan2(b),
        }
    }
    fn test(&mut self, t: Test, a: f64, b: f64) -> bool {
        match t {
            Test::Eq => a == b,
            Test::Ne => a != b,
            Test::Lt => a < b,
            Test::Gt => a > b,
        }
    }
    fn class(&mut self, c: Class, a: f64) -> bool {
        match c {
            Class::IsNan => a.is_nan(),
            Class::IsInf => a.is_infinite(),
            Class::IsFinite => a.is_finite(),
            Class::SignNegative => a.is_sign_negative(),
        }
    }
    fn and(&mut self, a: bool, b: bool) -> bool {
        a && b
    }
    fn or(&mut self, a: bool, b: bool) -> bool {
        a || b
    }
    fn truth(&mut self, t: bool) -> bool {
        t
    }
    fn select(&mut self, c: bool, a: f64, b: f64) -> f64 {
        if c {
            a
        } else {
            b
        }
    }
    fn hypot(&mut self, a: f64, b: f64) -> f64 {
        a.hypot(b)
    }
    fn copysign(&mut self, a: f64, b: f64) -> f64 {
        a.copysign(b)
    }
}

/// A complex value of a [`Parts`] arithmetic.
pub type Z<P> = (<P as Parts>::V, <P as Parts>::V);

/// A ternary op's complex form.
pub type TernaryFn<P> = fn(&mut P, Z<P>, Z<P>, Z<P>) -> Z<P>;

/// What an op computes on complex operands.
pub enum Complex<P: Parts = F64> {
    Unary(fn(&mut P, Z<P>) -> Z<P>),
    Binary(fn(&mut P, Z<P>, Z<P>) -> Z<P>),
    Ternary(TernaryFn<P>),
    /// A predicate of a complex value (bool result).
    Pred(fn(&mut P, Z<P>) -> P::B),
    /// A comparison of two complex values (bool result).
    Compare(fn(&mut P, Z<P>, Z<P>) -> P::B),
    /// The op's integer form (the table's i64 column and CUDA integer
    /// template) on each operand converted to bool, as 0 or 1.
    Bools,
}

impl<P: Parts> Clone for Complex<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: Parts> Copy for Complex<P> {}

/// The complex semantics of a unary op; `None`: not computed on complex
/// (nvFuser fails to compile it: ceil, floor, erf, lgamma, silu...).
pub fn unary<P: Parts>(kind: UnaryOp) -> Option<Complex<P>> {
    use Complex::{Bools, Pred, Unary as U};
    use UnaryOp::*;
    Some(match kind {
        Neg => U(|p, z| (p.r1(R1::Neg, z.0), p.r1(R1::Neg, z.1))),
        // |z| is real: the output dtype is the part type (`dtype_ops::abs_dtype`).
        Abs => U(|p, z| (p.hypot(z.0, z.1), p.lit(0.0))),
        Reciprocal => U(|p, z| {
            let one = one(p);
            div(p, one, z)
        }),
        Rsqrt => U(|p, z| {
            let (one, r) = (one(p), sqrt(p, z));
            div(p, one, r)
        }),
        Sqrt => U(sqrt),
        Exp => U(exp),
        Log => U(log),
        Log10 => U(|p, z| {
            let l = log(p, z);
            scale(p, l, std::f64::consts::LN_10)
        }),
        Log2 => U(|p, z| {
            let l = log(p, z);
            scale(p, l, std::f64::consts::LN_2)
        }),
        Sigmoid => U(|p, z| {
            let m = (p.r1(R1::Neg, z.0), p.r1(R1::Neg, z.1));
            let (one, e) = (one(p), exp(p, m));
            let d = add(p, one, e);
            div(p, one, d)
        }),
        Sin => U(|p, z| {
            let s = { let w = times_i(p, z); sinh(p, w) };
            times_minus_i(p, s)
        }),
        Cos => U(|p, z| { let w = times_i(p, z); cosh(p, w) }),
        Tan => U(|p, z| {
            let t = { let w = times_i(p, z); tanh(p, w) };
            times_minus_i(p, t)
        }),
        Sinh => U(sinh),
        Cosh => U(cosh),
        Tanh => U(tanh),
        Asin => U(|p, z| {
            let a = { let w = times_i(p, z); asinh(p, w) };
            times_minus_i(p, a)
        }),
        Acos => U(acos),
        Atan => U(|p, z| {
            let a = { let w = times_i(p, z); atanh(p, w) };
            times_minus_i(p, a)
        }),
        Asinh => U(asinh),
        Acosh => U(acosh),
        Atanh => U(atanh),
        IsNan => Pred(|p, z| either(p, Class::IsNan, z)),
        IsInf => Pred(|p, z| either(p, Class::IsInf, z)),
        IsFinite => Pred(|p, z| {
            let (a, b) = (p.class(Class::IsFinite, z.0), p.class(Class::IsFinite, z.1));
            p.and(a, b)
        }),
        IsReal => Pred(|p, z| {
            let zero = p.lit(0.0);
            p.test(Test::Eq, z.1, zero)
        }),
        // helpers.cu: `x > 0 && isinf(x)`, where `x > 0` compares bool(x) with 0.
        IsPosInf => Pred(|p, z| {
            let (t, i) = (truth(p, z), either(p, Class::IsInf, z));
            p.and(t, i)
        }),
        // `x < 0` on bool(x) is never true.
        IsNegInf => Pred(|p, _| p.truth(false)),
        Relu | Signbit => Bools,
        _ => return None,
    })
}

/// The complex semantics of a binary op (see [`unary`]).
pub fn binary<P: Parts>(kind: BinaryOp) -> Option<Complex<P>> {
    use BinaryOp::*;
    use Complex::{Binary as B, Bools, Compare};
    Some(match kind {
        Add => B(add),
        Sub => B(sub),
        Mul => B(mul),
        Div | Truediv => B(div),
        Pow => B(|p, a, b| {
            let l = log(p, a);
            let m = mul(p, b, l);
            exp(p, m)
        }),
        Eq => Compare(|p, a, b| {
            let (r, i) = (p.test(Test::Eq, a.0, b.0), p.test(Test::Eq, a.1, b.1));
            p.and(r, i)
        }),
        Ne => Compare(|p, a, b| {
            let (r, i) = (p.test(Test::Ne, a.0, b.0), p.test(Test::Ne, a.1, b.1));
            p.or(r, i)
        }),
        Lt | Le | Gt | Ge | Maximum | Minimum | Fmod | Mod | Remainder => Bools,
        _ => return None,
    })
}

/// The complex semantics of a ternary op (see [`unary`]).
pub fn ternary<P: Parts>(kind: TernaryOp) -> Option<Complex<P>> {
    Some(match kind {
        // complex_number.cu's lerp: the branch on |weight| < 0.5.
        TernaryOp::Lerp => Complex::Ternary(|p, s, e, w| {
            let (m, half) = (p.hypot(w.0, w.1), p.lit(0.5));
            let near = p.test(Test::Lt, m, half);
            let d = sub(p, e, s);
            let t = mul(p, w, d);
            let lo = add(p, s, t);
            let one = one(p);
            let u = sub(p, one, w);
            let t = mul(p, d, u);
            let hi = sub(p, e, t);
            pick(p, near, lo, hi)
        }),
        TernaryOp::Clamp | TernaryOp::Threshold => Complex::Bools,
    })
}

/// `operator bool` of nvFuser's complex: either part nonzero (NaN is nonzero).
pub fn to_bool(z: C) -> bool {
    truth(&mut F64, z)
}

/// [`to_bool`] in any [`Parts`] arithmetic.
pub fn truth<P: Parts>(p: &mut P, z: Z<P>) -> P::B {
    let zero = p.lit(0.0);
    let (a, b) = (p.test(Test::Ne, z.0, zero), p.test(Test::Ne, z.1, zero));
    p.or(a, b)
}

fn either<P: Parts>(p: &mut P, c: Class, z: Z<P>) -> P::B {
    let (a, b) = (p.class(c, z.0), p.class(c, z.1));
    p.or(a, b)
}

fn one<P: Parts>(p: &mut P) -> Z<P> {
    (p.lit(1.0), p.lit(0.0))
}

fn pick<P: Parts>(p: &mut P, c: P::B, a: Z<P>, b: Z<P>) -> Z<P> {
    (p.select(c, a.0, b.0), p.select(c, a.1, b.1))
}

pub fn add<P: Parts>(p: &mut P, a: Z<P>, b: Z<P>) -> Z<P> {
    (p.r2(R2::Add, a.0, b.0), p.r2(R2::Add, a.1, b.1))
}
fn sub<P: Parts>(p: &mut P, a: Z<P>, b: Z<P>) -> Z<P> {
    (p.r2(R2::Sub, a.0, b.0), p.r2(R2::Sub, a.1, b.1))
}
pub fn mul<P: Parts>(p: &mut P, a: Z<P>, b: Z<P>) -> Z<P> {
    let (rr, ii) = (p.r2(R2::Mul, a.0, b.0), p.r2(R2::Mul, a.1, b.1));
    let (ri, ir) = (p.r2(R2::Mul, a.0, b.1), p.r2(R2::Mul, a.1, b.0));
    (p.r2(R2::Sub, rr, ii), p.r2(R2::Add, ri, ir))
}
pub fn div<P: Parts>(p: &mut P, a: Z<P>, b: Z<P>) -> Z<P> {
    let (b00, b11) = (p.r2(R2::Mul, b.0, b.0), p.r2(R2::Mul, b.1, b.1));
    let d = p.r2(R2::Add, b00, b11);
    let (rr, ii) = (p.r2(R2::Mul, a.0, b.0), p.r2(R2::Mul, a.1, b.1));
    let (ir, ri) = (p.r2(R2::Mul, a.1, b.0), p.r2(R2::Mul, a.0, b.1));
    let (re, im) = (p.r2(R2::Add, rr, ii), p.r2(R2::Sub, ir, ri));
    (p.r2(R2::Div, re, d), p.r2(R2::Div, im, d))
}
/// A complex value divided by a real constant, part by part.
fn scale<P: Parts>(p: &mut P, a: Z<P>, s: f64) -> Z<P> {
    let s = p.lit(s);
    (p.r2(R2::Div, a.0, s), p.r2(R2::Div, a.1, s))
}
/// i z and -i z: the trig functions are the hyperbolic ones rotated.
fn times_i<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    (p.r1(R1::Neg, z.1), z.0)
}
fn times_minus_i<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    (z.1, p.r1(R1::Neg, z.0))
}
fn sqr<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let (d, s) = (p.r2(R2::Sub, z.0, z.1), p.r2(R2::Add, z.0, z.1));
    let two = p.lit(2.0);
    let t = p.r2(R2::Mul, two, z.0);
    (p.r2(R2::Mul, d, s), p.r2(R2::Mul, t, z.1))
}
pub fn exp<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let zero = p.lit(0.0);
    let real = p.test(Test::Eq, z.1, zero);
    let e = p.r1(R1::Exp, z.0);
    let (c, s) = (p.r1(R1::Cos, z.1), p.r1(R1::Sin, z.1));
    let (re, im) = (p.r2(R2::Mul, e, c), p.r2(R2::Mul, e, s));
    (p.select(real, e, re), p.select(real, z.1, im))
}
pub fn log<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let h = p.hypot(z.0, z.1);
    (p.r1(R1::Log, h), p.r2(R2::Atan2, z.1, z.0))
}
/// The principal root: sqrt(|z|) at half the argument.
pub fn sqrt<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let inf_im = p.class(Class::IsInf, z.1);
    let h = p.hypot(z.0, z.1);
    let r = p.r1(R1::Sqrt, h);
    let a = p.r2(R2::Atan2, z.1, z.0);
    let two = p.lit(2.0);
    let t = p.r2(R2::Div, a, two);
    let (c, s) = (p.r1(R1::Cos, t), p.r1(R1::Sin, t));
    let (re, im) = (p.r2(R2::Mul, r, c), p.r2(R2::Mul, r, s));
    let inf = p.lit(f64::INFINITY);
    (p.select(inf_im, inf, re), p.select(inf_im, z.1, im))
}
fn sinh<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let (sh, ch) = (p.r1(R1::Sinh, z.0), p.r1(R1::Cosh, z.0));
    let (c, s) = (p.r1(R1::Cos, z.1), p.r1(R1::Sin, z.1));
    (p.r2(R2::Mul, sh, c), p.r2(R2::Mul, ch, s))
}
fn cosh<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let zero = p.lit(0.0);
    let (r0, i0) = (p.test(Test::Eq, z.0, zero), p.test(Test::Eq, z.1, zero));
    let origin = p.and(r0, i0);
    let (sh, ch) = (p.r1(R1::Sinh, z.0), p.r1(R1::Cosh, z.0));
    let (c, s) = (p.r1(R1::Cos, z.1), p.r1(R1::Sin, z.1));
    let (re, im) = (p.r2(R2::Mul, ch, c), p.r2(R2::Mul, sh, s));
    let one = p.lit(1.0);
    (p.select(origin, one, re), p.select(origin, z.1, im))
}
fn tanh<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let (one, zero, two) = (p.lit(1.0), p.lit(0.0), p.lit(2.0));
    let (r2, i2) = (p.r2(R2::Mul, two, z.0), p.r2(R2::Mul, two, z.1));
    let (ch, c) = (p.r1(R1::Cosh, r2), p.r1(R1::Cos, i2));
    let d = p.r2(R2::Add, ch, c);
    let s = p.r1(R1::Sinh, r2);
    let si = p.r1(R1::Sin, i2);
    let (re, im) = (p.r2(R2::Div, s, d), p.r2(R2::Div, si, d));
    // Both infinite: the limit, the sign of sinh and of the doubled imaginary part.
    let (s_inf, d_inf) = (p.class(Class::IsInf, s), p.class(Class::IsInf, d));
    let both = p.and(s_inf, d_inf);
    let (s_pos, i_pos) = (p.test(Test::Gt, s, zero), p.test(Test::Gt, i2, zero));
    let m1 = p.lit(-1.0);
    let nz = p.lit(-0.0);
    let (lre, lim) = (p.select(s_pos, one, m1), p.select(i_pos, zero, nz));
    let (re, im) = (p.select(both, lre, re), p.select(both, lim, im));
    // An infinite real part: ±1 and a zero signed as sin(2 im).
    let r_inf = p.class(Class::IsInf, z.0);
    let (ire, iim) = (p.copysign(one, z.0), p.copysign(zero, si));
    (p.select(r_inf, ire, re), p.select(r_inf, iim, im))
}
/// log(z + sqrt(z² ± 1)) up to the signs of its parts: the common core of
/// the inverse functions, whose callers keep only the parts' magnitudes and
/// set the signs themselves (the sign of a zero imaginary part decides the
/// branch, so − 1 is a subtraction). libc++'s formula as it stands cancels:
/// where z and the root r point opposite ways (the root is the principal one,
/// so for large |z| left of the imaginary axis r is about −z) z + r loses
/// every digit, and a log of 0 or of rounding noise came out (the fuzzer's
/// seed 2, fusion 768: acosh(−5.4e9 − 1.0e10i) was inf on the CPU and 13.2 on
/// the GPU, for 23.7). So: for plus, z is taken in the first quadrant (asinh
/// is odd and symmetric under conjugation), where z and r never cancel; for
/// minus, (z + r)(z − r) = 1, so the logs of the two differ only in sign and
/// the one where z and r do not cancel (z·r ≥ 0) is used. Past 2^27 the ±1
/// is below Double's rounding and r is ±z: log(2z) = log z + ln 2, without
/// forming z² (which overflows).
fn log_root<P: Parts>(p: &mut P, z: Z<P>, plus: bool) -> Z<P> {
    let (ar, ai) = (p.r1(R1::Abs, z.0), p.r1(R1::Abs, z.1));
    let z = if plus { (ar, ai) } else { z };
    let q = sqr(p, z);
    let one = one(p);
    let q = if plus { add(p, q, one) } else { sub(p, q, one) };
    let r = sqrt(p, q);
    let sum = add(p, z, r);
    let w = if plus {
        sum
    } else {
        let diff = sub(p, z, r);
        let (a, b) = (p.r2(R2::Mul, z.0, r.0), p.r2(R2::Mul, z.1, r.1));
        let dot = p.r2(R2::Add, a, b);
        let zero = p.lit(0.0);
        let cancels = p.test(Test::Lt, dot, zero);
        pick(p, cancels, diff, sum)
    };
    let near = log(p, w);
    let lim = p.lit(FAR);
    let (br, bi) = (p.test(Test::Gt, ar, lim), p.test(Test::Gt, ai, lim));
    let big = p.or(br, bi);
    let lz = log(p, z);
    let ln2 = p.lit(std::f64::consts::LN_2);
    let far = (p.r2(R2::Add, lz.0, ln2), lz.1);
    pick(p, big, far, near)
}
/// Where `log_root` drops the ±1: 2^27, past which 1 / (4 z²) is below
/// Double's unit roundoff.
const FAR: f64 = 134_217_728.0;
/// log(z + sqrt(z^2 + 1)), signs of z's parts kept (libc++'s asinh).
fn asinh<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let w = log_root(p, z, true);
    (p.copysign(w.0, z.0), p.copysign(w.1, z.1))
}
fn acosh<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let w = log_root(p, z, false);
    (p.r1(R1::Abs, w.0), p.copysign(w.1, z.1))
}
fn acos<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let zero = p.lit(0.0);
    let (r0, i0, inan) = (p.test(Test::Eq, z.0, zero), p.test(Test::Eq, z.1, zero), p.class(Class::IsNan, z.1));
    let i0 = p.or(i0, inan);
    let axis = p.and(r0, i0);
    let w = log_root(p, z, false);
    let (a1, a0) = (p.r1(R1::Abs, w.1), p.r1(R1::Abs, w.0));
    let neg = p.class(Class::SignNegative, z.1);
    let n0 = p.r1(R1::Neg, a0);
    let im = p.select(neg, a0, n0);
    let (half_pi, mi) = (p.lit(std::f64::consts::FRAC_PI_2), p.r1(R1::Neg, z.1));
    (p.select(axis, half_pi, a1), p.select(axis, mi, im))
}
/// log((1 + z) / (1 - z)) / 2, signs of z's parts kept.
fn atanh<P: Parts>(p: &mut P, z: Z<P>) -> Z<P> {
    let (one, zero) = (p.lit(1.0), p.lit(0.0));
    let ar = p.r1(R1::Abs, z.0);
    let (r1, i0) = (p.test(Test::Eq, ar, one), p.test(Test::Eq, z.1, zero));
    let pole = p.and(r1, i0);
    let o = (one, zero);
    let (n, d) = (add(p, o, z), sub(p, o, z));
    let q = div(p, n, d);
    let l = log(p, q);
    let w = scale(p, l, 2.0);
    let (re, im) = (p.copysign(w.0, z.0), p.copysign(w.1, z.1));
    let inf = p.lit(f64::INFINITY);
    let (pre, pim) = (p.copysign(inf, z.0), p.copysign(zero, z.1));
    (p.select(pole, pre, re), p.select(pole, pim, im))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: C, b: C) -> bool {
        (a.0 - b.0).abs() < 1e-12 && (a.1 - b.1).abs() < 1e-12
    }

    #[test]
    fn values_by_hand() {
        let f = |k| match unary::<F64>(k) {
            Some(Complex::Unary(f)) => move |z| f(&mut F64, z),
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
        // Left of the imaginary axis and far from 0, z and the root cancel in
        // libc++'s formula: acosh(-5.4e9 - 1.0e10i) was inf (seed 2, fusion
        // 768). Its real part is ln(2|z|) to Double's rounding there, and the
        // inverses undo the functions to it, from moderate to past 2^27.
        let z = (-5.418018304e9, -1.0436656128e10);
        let a = f(UnaryOp::Acosh)(z);
        let want = (2.0 * z.0.hypot(z.1)).ln();
        assert!((a.0 - want).abs() < 1e-14 * want && a.1 < -2.0, "{a:?}");
        for z in [(-3.0e4, 2.0e4), (-3.0e4, -2.0e4), (-7.0e5, 1.0), (2.0e4, -5.0e3), (-4.0e10, 3.0e9)] {
            for (inv, fun) in [(UnaryOp::Acosh, UnaryOp::Cosh), (UnaryOp::Asinh, UnaryOp::Sinh), (UnaryOp::Acos, UnaryOp::Cos)] {
                let back = f(fun)(f(inv)(z));
                let err = (back.0 - z.0).hypot(back.1 - z.1) / z.0.hypot(z.1);
                assert!(err < 1e-12, "{inv:?} {z:?}: {back:?}");
            }
        }
        // log10(100 i) = 2 + i pi / (2 ln 10).
        let l = f(UnaryOp::Log10)((0.0, 100.0));
        assert!(close(l, (2.0, std::f64::consts::FRAC_PI_2 / std::f64::consts::LN_10)));
    }

    #[test]
    fn pow_lerp_and_bools() {
        let Some(Complex::Binary(pow)) = binary::<F64>(BinaryOp::Pow) else { panic!() };
        let pow = |a, b| pow(&mut F64, a, b);
        // i^2 = -1; (1 + i)^2 = 2i.
        assert!(close(pow((0.0, 1.0), (2.0, 0.0)), (-1.0, 0.0)));
        assert!(close(pow((1.0, 1.0), (2.0, 0.0)), (0.0, 2.0)));
        let Some(Complex::Ternary(lerp)) = ternary::<F64>(TernaryOp::Lerp) else { panic!() };
        let lerp = |s, e, w| lerp(&mut F64, s, e, w);
        // |w| < 0.5: s + w (e - s); else e - (e - s)(1 - w): both give s + w (e - s).
        assert!(close(lerp((0.0, 0.0), (2.0, 2.0), (0.25, 0.0)), (0.5, 0.5)));
        assert!(close(lerp((0.0, 0.0), (2.0, 2.0), (0.0, 1.0)), (-2.0, 2.0)));
        assert!(matches!(binary::<F64>(BinaryOp::Lt), Some(Complex::Bools)));
        assert!(binary::<F64>(BinaryOp::Atan2).is_none() && unary::<F64>(UnaryOp::Ceil).is_none());
        assert!(to_bool((0.0, -1.0)) && !to_bool((0.0, -0.0)) && to_bool((f64::NAN, 0.0)));
    }
}
