//! The fuzzer's bounds of complex values hold for a model of the GPU: every
//! complex formula evaluated in Float arithmetic (each real op rounded to
//! f32, as the GPU computes ComplexFloat) stays within the bound the shadow
//! program gives each part, on values drawn as the fuzzer draws them
//! (parts in [-9, 9], where several formulas cancel), and the bounds are
//! finite almost everywhere.

use fusebench_ir::complex_math::{self as cm, Class, Complex, Parts, Test, R1, R2};
use fusebench_ir::{BinaryOp, DType, FusionBuilder, UnaryOp};
use fusebench_reference::bounds::run_with_bounds;
use fusebench_reference::{Arg, Tensor};

/// The formulas in f32: each real op rounded to Float.
struct F32;

fn r(x: f64) -> f64 {
    x as f32 as f64
}

impl Parts for F32 {
    type V = f64;
    type B = bool;
    fn lit(&mut self, x: f64) -> f64 {
        r(x)
    }
    fn r1(&mut self, f: R1, a: f64) -> f64 {
        let a = a as f32;
        (match f {
            R1::Neg => -a,
            R1::Abs => a.abs(),
            R1::Sqrt => a.sqrt(),
            R1::Exp => a.exp(),
            R1::Log => a.ln(),
            R1::Sin => a.sin(),
            R1::Cos => a.cos(),
            R1::Sinh => a.sinh(),
            R1::Cosh => a.cosh(),
        }) as f64
    }
    fn r2(&mut self, f: R2, a: f64, b: f64) -> f64 {
        let (a, b) = (a as f32, b as f32);
        (match f {
            R2::Add => a + b,
            R2::Sub => a - b,
            R2::Mul => a * b,
            R2::Div => a / b,
            R2::Atan2 => a.atan2(b),
        }) as f64
    }
    fn test(&mut self, t: Test, a: f64, b: f64) -> bool {
        cm::F64.test(t, a, b)
    }
    fn class(&mut self, c: Class, a: f64) -> bool {
        cm::F64.class(c, a)
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
}

/// Deterministic values in [-9, 9], rounded to f32.
fn draws(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            r(((s >> 11) as f64 / (1u64 << 53) as f64) * 18.0 - 9.0)
        })
        .collect()
}

fn c64(parts: &[f64]) -> Tensor {
    let bytes: Vec<u8> = parts.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
    Tensor::from_le_bytes(DType::ComplexFloat, &[parts.len() / 2], &bytes).unwrap()
}

/// Checks `model` against the reference within the bound of each element;
/// returns how many elements were left unchecked (bound +inf or NaN).
fn check(name: &str, ys: &Tensor, bound: Option<&Tensor>, model: &[(f64, f64)]) -> usize {
    let v = ys.to_le_bytes();
    let b = bound.map(|b| b.to_f64_vec());
    let mut unchecked = 0;
    for (i, m) in model.iter().enumerate() {
        let re = f32::from_le_bytes(v[8 * i..8 * i + 4].try_into().unwrap()) as f64;
        let im = f32::from_le_bytes(v[8 * i + 4..8 * i + 8].try_into().unwrap()) as f64;
        let bi = b.as_ref().map_or(0.0, |b| b[i]);
        if !bi.is_finite() {
            unchecked += 1;
            continue;
        }
        let off = |g: f64, w: f64| !(g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= bi);
        assert!(
            !off(m.0, re) && !off(m.1, im),
            "{name} element {i}: Float formula {m:?}, reference ({re}, {im}), bound {bi:e}"
        );
    }
    unchecked
}

#[test]
fn complex_math_in_float_stays_within_its_bounds() {
    let n = 400;
    let x = draws(2 * n, 7);
    let w = draws(2 * n, 11);
    let pairs = |v: &[f64]| -> Vec<(f64, f64)> { v.chunks(2).map(|c| (c[0], c[1])).collect() };
    let (xp, wp) = (pairs(&x), pairs(&w));
    for kind in UnaryOp::ALL.iter().copied() {
        let Some(Complex::Unary(f)) = cm::unary::<F32>(kind) else { continue };
        let mut fd = FusionBuilder::new();
        let a = fd.tensor(&[n as i64], DType::ComplexFloat).unwrap();
        let y = fd.unary(kind, a).unwrap();
        fd.add_output(y).unwrap();
        let (outs, bounds) = run_with_bounds(&fd.finish(), &[Arg::Tensor(c64(&x))]).unwrap();
        if kind == UnaryOp::Abs {
            continue; // a real output; its formula is hypot, checked by the real rules
        }
        let model: Vec<(f64, f64)> = xp.iter().map(|&z| f(&mut F32, z)).collect();
        let u = check(kind.name(), &outs[0], bounds[0].as_ref(), &model);
        assert!(u * 20 <= n, "{}: {u} of {n} elements unchecked", kind.name());
    }
    for kind in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow] {
        let Some(Complex::Binary(f)) = cm::binary::<F32>(kind) else { panic!("{kind:?}") };
        let mut fd = FusionBuilder::new();
        let a = fd.tensor(&[n as i64], DType::ComplexFloat).unwrap();
        let b = fd.tensor(&[n as i64], DType::ComplexFloat).unwrap();
        let y = fd.binary(kind, a, b).unwrap();
        fd.add_output(y).unwrap();
        let args = [Arg::Tensor(c64(&x)), Arg::Tensor(c64(&w))];
        let (outs, bounds) = run_with_bounds(&fd.finish(), &args).unwrap();
        let model: Vec<(f64, f64)> = xp.iter().zip(&wp).map(|(&p, &q)| f(&mut F32, p, q)).collect();
        let u = check(kind.name(), &outs[0], bounds[0].as_ref(), &model);
        assert!(u * 20 <= n, "{}: {u} of {n} elements unchecked", kind.name());
    }
}

#[test]
fn a_float_result_cast_to_complex_double_keeps_its_float_bound() {
    // silu of a Float is only known to a few Float ulps; cast to ComplexDouble
    // it must not be compared to Double precision (seed 1 fusion 362).
    let v = [-0.7, 0.3, 2.5];
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[3], DType::Float).unwrap();
    let s = fd.unary(UnaryOp::Silu, x).unwrap();
    let y = fd.cast(s, DType::ComplexDouble).unwrap();
    fd.add_output(y).unwrap();
    let arg = Arg::Tensor(Tensor::from_f64s(DType::Float, &[3], &v).unwrap());
    let (outs, bounds) = run_with_bounds(&fd.finish(), &[arg]).unwrap();
    let b = bounds[0].as_ref().expect("a bound").to_f64_vec();
    let y = outs[0].to_le_bytes();
    for i in 0..3 {
        let re = f64::from_le_bytes(y[16 * i..16 * i + 8].try_into().unwrap());
        assert!(b[i] >= f32::EPSILON as f64 * re.abs(), "element {i}: bound {:e} for {re}", b[i]);
        assert!(b[i] <= 64.0 * f32::EPSILON as f64 * re.abs(), "element {i}: bound {:e} for {re}", b[i]);
    }
}

#[test]
fn a_complex_sum_to_float_is_bounded_as_a_float_sum() {
    // sum(z, dtype=Float) of ComplexDouble values: each real part converted to
    // Float, then summed in Float on the GPU: its bound is Float-sized, not
    // Double-sized (seed 1 fusion 5225).
    let n = 4;
    let x = draws(2 * n, 5);
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let z = Tensor::from_le_bytes(DType::ComplexDouble, &[n], &bytes).unwrap();
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[n as i64], DType::ComplexDouble).unwrap();
    let y = fd.sum(a, &[0], false, Some(DType::Float)).unwrap();
    fd.add_output(y).unwrap();
    let (outs, bounds) = run_with_bounds(&fd.finish(), &[Arg::Tensor(z)]).unwrap();
    let y = outs[0].to_f64_vec()[0];
    let b = bounds[0].as_ref().expect("a bound").to_f64_vec()[0];
    let terms: f64 = x.iter().step_by(2).map(|v| v.abs()).sum();
    assert!(b >= f32::EPSILON as f64 / 2.0 * terms.max(y.abs()), "bound {b:e} for {y} (sum |x| {terms})");
}
