//! Per-element error bounds (`fusebench_reference::bounds`): values worked
//! out by hand from the rule in the module's documentation.

use fusebench_ir::{BinaryOp, DType, FusionBuilder, Literal, UnaryOp};
use fusebench_reference::bounds::{compare_bounded, run_with_bounds};
use fusebench_reference::{Arg, Tensor};

const EPS_F: f64 = f32::EPSILON as f64;
const TINY_F: f64 = f32::MIN_POSITIVE as f64;

fn floats(v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(DType::Float, &[v.len()], v).unwrap())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1e-300)
}

#[test]
fn an_op_on_exact_inputs_is_bounded_by_its_accuracy_and_its_rounding() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let y = fd.unary(UnaryOp::Exp, x).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(x).unwrap();
    let f = fd.finish();
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[0.0, 1.0])]).unwrap();
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    // exp: 8 ulps of Float computing it, 1 ulp of the Float output, the flush-to-zero floor.
    let e = outs[0].to_f64_vec()[1];
    assert!(close(b[0], 9.0 * EPS_F + 2.0 * TINY_F), "{b:?}");
    assert!(close(b[1], 9.0 * EPS_F * e + 2.0 * TINY_F), "{b:?}");
    // An input is exact.
    assert!(bounds[1].is_none());
}

#[test]
fn a_sum_is_bounded_by_log2_n_unit_roundoffs_times_the_sum_of_its_terms_magnitudes() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[4], DType::Float).unwrap();
    let s = fd.sum(x, &[0], false, None).unwrap();
    fd.add_output(s).unwrap();
    let f = fd.finish();
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[1.0, -2.0, 3.0, -4.0])]).unwrap();
    assert_eq!(outs[0].to_f64_vec(), vec![-2.0]);
    let b = bounds[0].as_ref().unwrap().to_f64_vec()[0];
    // (ceil(log2 4) + 1) u sum|x| = 3 * (eps / 2) * 10 = 15 eps, plus rounding
    // 2 eps |-2|, plus the floor.
    assert!(close(b, 19.0 * EPS_F + 2.0 * TINY_F), "{b}");
}

#[test]
fn a_comparison_of_values_within_their_bounds_is_not_checked() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let three = fd.literal(Literal::Float(3.0));
    let y = fd.mul(x, three).unwrap();
    let three = fd.literal(Literal::Float(3.0));
    let gt = fd.binary(BinaryOp::Gt, y, three).unwrap();
    fd.add_output(gt).unwrap();
    let f = fd.finish();
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[1.0, 5.0])]).unwrap();
    assert_eq!(outs[0].to_i64_vec(), vec![0, 1]);
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    // 3 * 1 may come out a hair above 3 on the GPU: uncertain. 15 > 3 is certain.
    assert_eq!(b, vec![f64::INFINITY, 0.0]);
}

#[test]
fn bounds_move_with_the_values_and_padding_is_exact() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let y = fd.unary(UnaryOp::Exp, x).unwrap();
    let p = fd.pad(y, &[1, 0], Some(Literal::Float(0.0))).unwrap();
    fd.add_output(p).unwrap();
    let f = fd.finish();
    let (_, bounds) = run_with_bounds(&f, &[floats(&[0.0, 0.0])]).unwrap();
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    assert_eq!(b[0], 0.0);
    assert!(
        close(b[1], 9.0 * EPS_F + 2.0 * TINY_F) && b[1] == b[2],
        "{b:?}"
    );
}

#[test]
fn an_input_error_propagates_by_the_ops_derivative() {
    // y = exp(x) has bound e_y; z = y * y has about 2 |y| e_y from y, doubled for curvature.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[1], DType::Float).unwrap();
    let y = fd.unary(UnaryOp::Exp, x).unwrap();
    let z = fd.mul(y, y).unwrap();
    fd.add_output(z).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish();
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[1.0])]).unwrap();
    let yv = outs[1].to_f64_vec()[0];
    let ey = bounds[1].as_ref().unwrap().to_f64_vec()[0];
    let ez = bounds[0].as_ref().unwrap().to_f64_vec()[0];
    let zv = outs[0].to_f64_vec()[0];
    let want = 2.0 * ((yv + ey) * (yv + ey) - yv * yv) + 2.0 * EPS_F * zv + 2.0 * TINY_F;
    assert!((ez - want).abs() <= 1e-9 * want, "{ez} vs {want}");
}

#[test]
fn comparisons_are_per_element_nan_only_matches_nan_and_dtypes_must_be_equal() {
    let want =
        Tensor::from_f64s(DType::Float, &[4], &[1.0, f64::NAN, f64::INFINITY, 1e-3]).unwrap();
    let bound = Tensor::from_f64s(DType::Double, &[4], &[1e-6, 0.0, 0.0, 1e-9]).unwrap();
    let same = compare_bounded(&want, &want, Some(&bound)).0;
    assert!(same.ok);
    // The small element is held to its own bound, not to the largest element's.
    let off =
        Tensor::from_f64s(DType::Float, &[4], &[1.0, f64::NAN, f64::INFINITY, 1.1e-3]).unwrap();
    let c = compare_bounded(&off, &want, Some(&bound)).0;
    assert!(!c.ok && c.first_mismatch.unwrap().0 == vec![3]);
    let nan = Tensor::from_f64s(
        DType::Float,
        &[4],
        &[f64::NAN, f64::NAN, f64::INFINITY, 1e-3],
    )
    .unwrap();
    assert!(!compare_bounded(&nan, &want, Some(&bound)).0.ok);
    let not_nan = Tensor::from_f64s(DType::Float, &[4], &[1.0, 0.0, f64::INFINITY, 1e-3]).unwrap();
    assert!(!compare_bounded(&not_nan, &want, Some(&bound)).0.ok);
    // An unbounded element is not checked, and counted.
    let open = Tensor::from_f64s(DType::Double, &[4], &[f64::INFINITY, 0.0, 0.0, 1e-9]).unwrap();
    let wild =
        Tensor::from_f64s(DType::Float, &[4], &[7.0, f64::NAN, f64::INFINITY, 1e-3]).unwrap();
    let (c, unchecked) = compare_bounded(&wild, &want, Some(&open));
    assert!(c.ok && unchecked == 1);
    // Int32 against Int64 is a mismatch even with equal values.
    let i32s = Tensor::from_i64s(DType::Int32, &[1], &[3]).unwrap();
    let i64s = Tensor::from_i64s(DType::Int, &[1], &[3]).unwrap();
    assert!(compare_bounded(&i32s, &i64s, None).0.problem.is_some());
    assert!(compare_bounded(&i64s, &i64s, None).0.ok);
}

fn tensor(shape: &[usize], v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(DType::Float, shape, v).unwrap())
}

const U_F: f64 = EPS_F / 2.0;
const U_D: f64 = f64::EPSILON / 2.0;

#[test]
fn a_product_is_bounded_by_k_unit_roundoffs_of_any_order_times_its_terms_magnitudes() {
    use fusebench_ir::Op;
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[1, 2], DType::Float).unwrap();
    let b = fd.tensor(&[2, 1], DType::Float).unwrap();
    let y = fd.op(Op::Matmul { a, b }, &[]).unwrap()[0];
    fd.add_output(y).unwrap();
    let f = fd.finish();
    let args = [tensor(&[1, 2], &[1.0, -2.0]), tensor(&[2, 1], &[3.0, 4.0])];
    let (outs, bounds) = run_with_bounds(&f, &args).unwrap();
    assert_eq!(outs[0].to_f64_vec(), vec![-5.0]);
    let got = bounds[0].as_ref().unwrap().to_f64_vec()[0];
    // k = 2 terms of magnitude 3 + 8, the output's rounding of |-5|, the floor.
    let want = 2.0 * (U_F + U_D) * 11.0 + EPS_F * 5.0 + 2.0 * TINY_F;
    assert!(close(got, want), "{got} vs {want}");
}

#[test]
fn a_linears_operand_and_bias_bounds_are_carried_through_it() {
    use fusebench_ir::Op;
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[1, 2], DType::Float).unwrap();
    let w = fd.tensor(&[1, 2], DType::Float).unwrap();
    let c = fd.tensor(&[1], DType::Float).unwrap();
    // x * 3: one ulp computing it, one rounding it, the floor.
    let three = fd.literal(Literal::Float(3.0));
    let a = fd.mul(x, three).unwrap();
    let three = fd.literal(Literal::Float(3.0));
    let bias = fd.mul(c, three).unwrap();
    let y = fd.op(Op::Linear { a, weight: w, bias: Some(bias) }, &[]).unwrap()[0];
    fd.add_output(y).unwrap();
    let f = fd.finish();
    let args = [tensor(&[1, 2], &[1.0, -2.0]), tensor(&[1, 2], &[5.0, 7.0]), tensor(&[1], &[0.5])];
    let (outs, bounds) = run_with_bounds(&f, &args).unwrap();
    // a = [3, -6], bias 1.5: 15 - 42 + 1.5.
    assert_eq!(outs[0].to_f64_vec(), vec![-25.5]);
    let got = bounds[0].as_ref().unwrap().to_f64_vec()[0];
    let e = |v: f64| 2.0 * EPS_F * v + 2.0 * TINY_F;
    // 3 terms (two products and the bias), magnitudes 15 + 42 + 1.5;
    // a's bounds through |w|, the bias's bound, the output's rounding.
    let want = 3.0 * (U_F + U_D) * 58.5 + (e(3.0) * 5.0 + e(6.0) * 7.0) + e(1.5) + EPS_F * 25.5 + 2.0 * TINY_F;
    assert!(close(got, want), "{got} vs {want}");
}

#[test]
fn a_grouped_products_bound_is_its_groups_own() {
    use fusebench_ir::{GemmOp, Op};
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[1, 2], DType::Float).unwrap();
    let b = fd.tensor(&[2, 1], DType::Float).unwrap();
    let offsets = fd.tensor(&[2], DType::Int32).unwrap();
    let y = fd.op(Op::Gemm(GemmOp::GroupedMm { mat1: a, mat2: b, offsets }), &[]).unwrap()[0];
    fd.add_output(y).unwrap();
    let f = fd.finish();
    // Groups cut k: [0, 1) and [1, 2).
    let offs = Arg::Tensor(Tensor::from_i64s(DType::Int32, &[2], &[1, 2]).unwrap());
    let args = [tensor(&[1, 2], &[1.0, -2.0]), tensor(&[2, 1], &[3.0, 4.0]), offs];
    let (outs, bounds) = run_with_bounds(&f, &args).unwrap();
    assert_eq!(outs[0].to_f64_vec(), vec![3.0, -8.0]);
    let got = bounds[0].as_ref().unwrap().to_f64_vec();
    // Each group's one term of magnitude |y|, bounded as k = 2 terms (the whole k).
    for (g, y) in [3.0f64, 8.0].iter().enumerate() {
        let want = 2.0 * (U_F + U_D) * y + EPS_F * y + 2.0 * TINY_F;
        assert!(close(got[g], want), "group {g}: {} vs {want}", got[g]);
    }
}

#[test]
fn a_scaled_fp8_products_bound_allows_fourteen_bit_accumulation() {
    use fusebench_ir::{GemmOp, Op};
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[1, 2], DType::Float8E4m3fn).unwrap();
    let b = fd.tensor(&[2, 1], DType::Float8E4m3fn).unwrap();
    let s = fd.tensor(&[], DType::Float).unwrap();
    let t = fd.tensor(&[], DType::Float).unwrap();
    let op = Op::Gemm(GemmOp::ScaledMm { mat1: a, mat2: b, scale1: s, scale2: t, dtype: DType::Float });
    let y = fd.op(op, &[]).unwrap()[0];
    fd.add_output(y).unwrap();
    let f = fd.finish();
    let fp8 = |shape: &[usize], v: &[f64]| Arg::Tensor(Tensor::from_f64s(DType::Float8E4m3fn, shape, v).unwrap());
    let scalar = |v: f64| Arg::Tensor(Tensor::from_f64s(DType::Float, &[], &[v]).unwrap());
    let args = [fp8(&[1, 2], &[1.0, -2.0]), fp8(&[2, 1], &[3.0, 4.0]), scalar(0.5), scalar(2.0)];
    let (outs, bounds) = run_with_bounds(&f, &args).unwrap();
    assert_eq!(outs[0].to_f64_vec(), vec![-5.0]);
    let got = bounds[0].as_ref().unwrap().to_f64_vec()[0];
    // (ceil(log2 2) + 1) 2^-13 of the magnitudes 3 + 8 times |0.5 x 2|, the output's rounding, the floor.
    let want = 2.0 * 2f64.powi(-13) * 11.0 + EPS_F * 5.0 + 2.0 * TINY_F;
    assert!(close(got, want), "{got} vs {want}");
}

#[test]
fn attentions_bound_is_the_weights_rounding_and_the_scores_float_error() {
    use fusebench_ir::{GemmOp, Op};
    let bf16 = |shape: &[usize], v: &[f64]| Arg::Tensor(Tensor::from_f64s(DType::BFloat16, shape, v).unwrap());
    let build = |query_exact: bool| {
        let mut fd = FusionBuilder::new();
        let q = fd.tensor(&[1, 1, 1, 8], DType::BFloat16).unwrap();
        let k = fd.tensor(&[1, 1, 2, 8], DType::BFloat16).unwrap();
        let v = fd.tensor(&[1, 1, 2, 8], DType::BFloat16).unwrap();
        // A query with a bound of its own: exp(q), rounded to BFloat16.
        let q = if query_exact {
            q
        } else {
            let e = fd.unary(UnaryOp::Exp, q).unwrap();
            fd.cast(e, DType::BFloat16).unwrap()
        };
        let scale = Some(fd.literal(Literal::Float(1.0)));
        let op = Op::Gemm(GemmOp::SdpfaFwd { query: q, key: k, value: v, dropout_p: None, is_causal: None, scale });
        let outs = fd.op(op, &[]).unwrap();
        fd.add_output(outs[0]).unwrap();
        fd.add_output(outs[1]).unwrap();
        fd.finish()
    };
    let mut q = vec![0.0; 8];
    q[0] = 1.0;
    let mut k = vec![0.0; 16];
    k[0] = 1.0;
    let v: Vec<f64> = (0..16).map(|i| if i < 8 { 2.0 } else { -4.0 }).collect();
    let args = [bf16(&[1, 1, 1, 8], &q), bf16(&[1, 1, 2, 8], &k), bf16(&[1, 1, 2, 8], &v)];
    let (outs, bounds) = run_with_bounds(&build(true), &args).unwrap();
    // Scores [1, 0]: max |q|.|k| = 1, ds = (8 + 4) 2^-23; M = 4 in every column; S = 2.
    let ds = 12.0 * 2f64.powi(-23);
    let (o, lse) = (outs[0].to_f64_vec()[0], outs[1].to_f64_vec()[0]);
    let e1 = std::f64::consts::E;
    assert!((o - (2.0 * e1 - 4.0) / (e1 + 1.0)).abs() < 2e-3, "{o}");
    let rel = 4.0 * ds + 2f64.powi(-8) + 4.0 * 2f64.powi(-24) + 2f64.powi(-20);
    let want = rel * 4.0 + 2f64.powi(-7) * o.abs() + 2.0 * TINY_F;
    let got = bounds[0].as_ref().unwrap().to_f64_vec();
    assert!(got.iter().all(|&g| close(g, want)), "{got:?} vs {want}");
    let want = 2.0 * ds + 2f64.powi(-20) + 2f64.powi(-20) * lse.abs() + 6.0 * 2f64.powi(-23) + 2f64.powi(-20)
        + EPS_F * lse.abs() + 2.0 * TINY_F;
    let got = bounds[1].as_ref().unwrap().to_f64_vec()[0];
    assert!(close(got, want), "{got} vs {want}");
    // A query with a bound moves the weights themselves: not bounded.
    let (_, bounds) = run_with_bounds(&build(false), &args).unwrap();
    assert!(bounds[0].as_ref().unwrap().to_f64_vec().iter().all(|g| g.is_infinite()));
    assert!(bounds[1].as_ref().unwrap().to_f64_vec()[0].is_infinite());
}

#[test]
fn a_quotient_whose_divisors_interval_holds_zero_is_uncertain() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    // sin(0) = 0 with a bound of the flush-to-zero floor: the interval holds 0.
    let b = fd.unary(UnaryOp::Sin, x).unwrap();
    let y = fd.binary(BinaryOp::Div, b, b).unwrap();
    fd.add_output(y).unwrap();
    let (outs, bounds) = run_with_bounds(&fd.finish(), &[floats(&[0.0, 1.0])]).unwrap();
    assert!(outs[0].to_f64_vec()[0].is_nan());
    let got = bounds[0].as_ref().unwrap().to_f64_vec();
    assert!(got[0].is_infinite(), "{got:?}");
    assert!(got[1].is_finite() && got[1] < 1e-5, "{got:?}");
}

#[test]
fn attention_over_a_value_column_holding_an_infinity_is_uncertain_there() {
    use fusebench_ir::{GemmOp, Op};
    let bf16 = |shape: &[usize], v: &[f64]| Arg::Tensor(Tensor::from_f64s(DType::BFloat16, shape, v).unwrap());
    let mut fd = FusionBuilder::new();
    let q = fd.tensor(&[1, 1, 1, 8], DType::BFloat16).unwrap();
    let k = fd.tensor(&[1, 1, 2, 8], DType::BFloat16).unwrap();
    let v = fd.tensor(&[1, 1, 2, 8], DType::BFloat16).unwrap();
    let op = Op::Gemm(GemmOp::SdpfaFwd { query: q, key: k, value: v, dropout_p: None, is_causal: None, scale: None });
    let outs = fd.op(op, &[]).unwrap();
    fd.add_output(outs[0]).unwrap();
    let mut vv = vec![1.0; 16];
    vv[8 + 3] = f64::INFINITY;
    let args = [bf16(&[1, 1, 1, 8], &[0.5; 8]), bf16(&[1, 1, 2, 8], &[0.25; 16]), bf16(&[1, 1, 2, 8], &vv)];
    let (_, bounds) = run_with_bounds(&fd.finish(), &args).unwrap();
    let got = bounds[0].as_ref().unwrap().to_f64_vec();
    for (c, g) in got.iter().enumerate() {
        assert_eq!(g.is_infinite(), c == 3, "column {c}: {got:?}");
    }
}
