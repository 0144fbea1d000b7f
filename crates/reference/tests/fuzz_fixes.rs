//! CPU-side fixes for mismatches the GPU fuzzer found (docs/fuzzing.md):
//! float-to-integer conversion, accurate atanh/acosh, signbit of a NaN and
//! periodic functions of wide intervals in the bounds. Expected values are
//! worked out by hand (or with mpmath at 200 bits), not by running this code.

use fusebench_ir::{DType, FusionBuilder, UnaryOp};
use fusebench_reference::bounds::run_with_bounds;
use fusebench_reference::{run, Arg, Tensor};

fn arg(d: DType, v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(d, &[v.len()], v).unwrap())
}

fn unary(from: DType, op: UnaryOp, v: &[f64]) -> Vec<f64> {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[v.len() as i64], from).unwrap();
    let y = fd.unary(op, x).unwrap();
    fd.add_output(y).unwrap();
    run(&fd.finish(), &[arg(from, v)]).unwrap()[0].to_f64_vec()
}

#[test]
fn float_to_integer_truncates_saturates_and_sends_nan_to_zero() {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    let xs = [nan, inf, -inf, 3e9, -2.7, 1e20, -1e20];
    let cast = |to: DType| {
        let mut fd = FusionBuilder::new();
        let x = fd.tensor(&[xs.len() as i64], DType::Float).unwrap();
        let y = fd.cast(x, to).unwrap();
        fd.add_output(y).unwrap();
        run(&fd.finish(), &[arg(DType::Float, &xs)]).unwrap().remove(0)
    };
    let (max, min) = (i64::MAX, i64::MIN);
    assert_eq!(cast(DType::Int).to_i64_vec(), vec![0, max, min, 3_000_000_000, -2, max, min]);
    let (max, min) = (i32::MAX as i64, i32::MIN as i64);
    assert_eq!(cast(DType::Int32).to_i64_vec(), vec![0, max, min, max, -2, max, min]);
    // UInt64: negative values saturate at 0, like the others at their limits.
    let u = cast(DType::UInt64);
    let bits: Vec<u64> = u.to_i64_vec().iter().map(|&b| b as u64).collect();
    assert_eq!(bits, vec![0, u64::MAX, 0, 3_000_000_000, 0, u64::MAX, 0]);
}

#[test]
fn atanh_and_acosh_are_accurate_next_to_their_singularities() {
    // mpmath: atanh(-0.995) = -2.9944807084449314, acosh(1.0008) = 0.03999733381321688.
    // The formula 0.5 log1p(2x / (1 - x)) gives -2.9944807084449208, 24 ulps off.
    let a = unary(DType::Double, UnaryOp::Atanh, &[-0.995])[0];
    assert!((a - -2.9944807084449314f64).abs() <= 4.5e-16, "{a:e}");
    let c = unary(DType::Double, UnaryOp::Acosh, &[1.0008])[0];
    assert!((c - 0.03999733381321688f64).abs() <= 7e-18, "{c:e}");
}

#[test]
fn signbit_of_a_nan_is_not_checked() {
    // sqrt(-1) is NaN; the sign of a computed NaN differs between the GPU
    // (+) and x86 (-), so signbit there is uncertain; signbit(-4) is not.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let r = fd.unary(UnaryOp::Sqrt, x).unwrap();
    let s = fd.unary(UnaryOp::Signbit, r).unwrap();
    let n = fd.unary(UnaryOp::Signbit, x).unwrap();
    fd.add_output(s).unwrap();
    fd.add_output(n).unwrap();
    let (outs, bounds) = run_with_bounds(&fd.finish(), &[arg(DType::Float, &[-1.0, 4.0])]).unwrap();
    assert_eq!(outs[1].to_i64_vec(), vec![1, 0]);
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    assert_eq!(b[0], f64::INFINITY);
    assert!(b[1] < 1.0, "{b:?}");
    assert!(bounds[1].as_ref().is_none_or(|b| b.to_f64_vec() == vec![0.0, 0.0]));
}

#[test]
fn tan_of_a_value_known_only_to_a_quarter_turn_is_not_checked() {
    // 6000 * 6000 = 3.6e7 in Float: known to ±(1 ulp = 4), so tan of it is
    // anything; tan(1 * 1) is known to a few ulps.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let sq = fd.mul(x, x).unwrap();
    let t = fd.unary(UnaryOp::Tan, sq).unwrap();
    fd.add_output(t).unwrap();
    let (_, bounds) = run_with_bounds(&fd.finish(), &[arg(DType::Float, &[6000.0, 1.0])]).unwrap();
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    assert_eq!(b[0], f64::INFINITY);
    assert!(b[1] < 1e-5, "{b:?}");
}

#[test]
fn a_double_sum_into_float_is_bounded_with_float_accumulation() {
    // sum(x, dtype=Float) casts the Double terms to Float first and adds in
    // Float (seed 1 fusion 484): the one sum bound (sum_bound::accumulation_factor,
    // (ceil(log2 3) + 1) u_f sum|x|, u_f = 2^-24) + 2 eps_f |y| + the floor; with a
    // Double accumulator it would be some 1e-16 instead.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[3], DType::Double).unwrap();
    let s = fd.sum(x, &[0], false, Some(DType::Float)).unwrap();
    fd.add_output(s).unwrap();
    let (outs, bounds) = run_with_bounds(&fd.finish(), &[arg(DType::Double, &[0.1, -0.2, 0.4])]).unwrap();
    let y = outs[0].to_f64_vec()[0];
    let b = bounds[0].as_ref().unwrap().to_f64_vec()[0];
    let eps = f32::EPSILON as f64;
    let want = (3f64.log2().ceil() + 1.0) * 2f64.powi(-24) * 0.7 + 2.0 * eps * y.abs() + 2.0 * f32::MIN_POSITIVE as f64;
    assert!((b - want).abs() <= 1e-9 * want, "{b:e} vs {want:e}");
}

#[test]
fn lgamma_is_not_checked_where_cuda_states_no_accuracy() {
    // CUDA's lgamma: 4 ulps outside (-23.0001, -2.2637), "larger inside".
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Double).unwrap();
    let y = fd.unary(UnaryOp::Lgamma, x).unwrap();
    fd.add_output(y).unwrap();
    let (_, bounds) = run_with_bounds(&fd.finish(), &[arg(DType::Double, &[-2.5, 3.0])]).unwrap();
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    assert_eq!(b[0], f64::INFINITY);
    // lgamma(3) = ln 2: 8 ulps of Double + 1 of the output, plus the floor.
    assert!(b[1] < 1e-14 && b[1] > 0.0, "{b:?}");
}

#[test]
fn a_real_tensor_cat_into_complex_keeps_its_fraction() {
    // cat([Float, ComplexFloat]) is ComplexFloat: the Float part converts as a
    // cast does, 5.25 -> 5.25 + 0i (it was truncated to 5 + 0i, so exp gave
    // 148 for 191: seed 1 fusions 127, 2069, 5832, 7797). -0.25 stays nonzero,
    // so it is true as a bool, as on the GPU.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let z = fd.tensor(&[1], DType::ComplexFloat).unwrap();
    let c = fd.cat(&[x, z], 0, false).unwrap();
    let e = fd.cat(&[z, x], 0, false).unwrap();
    fd.add_output(c).unwrap();
    fd.add_output(e).unwrap();
    let zb = [1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat();
    let zt = Tensor::from_le_bytes(DType::ComplexFloat, &[1], &zb).unwrap();
    let ins = [arg(DType::Float, &[5.25, -0.25]), Arg::Tensor(zt)];
    let outs = run(&fd.finish(), &ins).unwrap();
    let f32s = |t: &Tensor| -> Vec<f32> {
        let b = t.to_le_bytes();
        b.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    assert_eq!(outs[0].dtype(), DType::ComplexFloat);
    assert_eq!(f32s(&outs[0]), vec![5.25, 0.0, -0.25, 0.0, 1.5, -2.0]);
    assert_eq!(f32s(&outs[1]), vec![1.5, -2.0, 5.25, 0.0, -0.25, 0.0]);
}

#[test]
fn complex_outputs_are_compared_in_both_parts() {
    // The bound program is real-only; a complex output must still be compared
    // part by part: 1.5-2i against 1.5+2i (imaginary part only) is a mismatch,
    // 5.25+0i against 5.0+0i (a fraction lost) too, equal values match.
    let c64 = |v: &[f32]| {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        Tensor::from_le_bytes(DType::ComplexFloat, &[v.len() / 2], &bytes).unwrap()
    };
    let want = c64(&[1.5, -2.0, 5.25, 0.0]);
    let (c, _) = fusebench_reference::bounds::compare_bounded(&c64(&[1.5, 2.0, 5.25, 0.0]), &want, None);
    assert!(!c.ok);
    let (c, _) = fusebench_reference::bounds::compare_bounded(&c64(&[1.5, -2.0, 5.0, 0.0]), &want, None);
    assert!(!c.ok);
    let (c, _) = fusebench_reference::bounds::compare_bounded(&want, &want, None);
    assert!(c.ok, "{c:?}");
}

#[test]
fn a_function_near_the_smallest_normal_may_lose_its_result() {
    // silu(-90) = -90 / (1 + e^90) = -7.5e-38 (a normal Float), but in Float
    // e^90 overflows and the GPU gives -0 (seed 1 fusion 362): the bound of a
    // function's result covers the loss of values that small.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[1], DType::Float).unwrap();
    let y = fd.unary(UnaryOp::Silu, x).unwrap();
    fd.add_output(y).unwrap();
    let (outs, bounds) = run_with_bounds(&fd.finish(), &[arg(DType::Float, &[-90.0])]).unwrap();
    let y = outs[0].to_f64_vec()[0];
    assert!(y < -7e-38 && y > -8e-38, "{y:e}");
    let b = bounds[0].as_ref().expect("a bound").to_f64_vec()[0];
    assert!(b >= y.abs() && b < 1e-35, "{b:e}");
}

#[test]
fn a_remainder_by_an_inexact_tiny_divisor_is_not_checked() {
    // fmod(1, e^-40): the divisor (4.2e-18, from exp: known to a few Float
    // ulps) goes into 1 about 2.4e17 times, so its error moves the result by
    // far more than the divisor: any value in [0, divisor) is possible (seed 1
    // fusions 3824 and 9654). fmod(5.5, e^0) is known: 5.5 = 5 * 1 + 0.5.
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[2], DType::Float).unwrap();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let b = fd.unary(UnaryOp::Exp, x).unwrap();
    let y = fd.binary(fusebench_ir::BinaryOp::Fmod, a, b).unwrap();
    fd.add_output(y).unwrap();
    let args = [arg(DType::Float, &[1.0, 5.5]), arg(DType::Float, &[-40.0, 0.0])];
    let (outs, bounds) = run_with_bounds(&fd.finish(), &args).unwrap();
    assert_eq!(outs[0].to_f64_vec()[1], 0.5);
    let b = bounds[0].as_ref().expect("a bound").to_f64_vec();
    assert_eq!(b[0], f64::INFINITY, "{b:?}");
    assert!(b[1] < 1e-4, "{b:?}");
}
