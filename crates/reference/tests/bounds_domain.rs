//! Bounds at the edges of an op's domain, where the value switches between
//! NaN and finite inside an operand's interval: worked out by hand.

use fusebench_ir::{BinaryOp, DType, FusionBuilder, Literal, UnaryOp};
use fusebench_reference::bounds::run_with_bounds;
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
fn an_uncertain_nan_stays_uncertain_through_the_next_op() {
    // Seed 1 fusion 6652 in small: w = fmod(1, acosh(x * x)).
    // x = 1 - 2^-24: u = x*x rounds to 1 - 2^-23 with bound 2 eps |u| (mul: 1 ulp
    // + 1 ulp of Float), so u + e_u > 1: acosh is NaN at the center and finite
    // at a corner, v is uncertain, and so is w (the GPU gave a finite w).
    // x = 3: u = 9, v = acosh(9) = 2.887..., w = fmod(1, v) = 1 at both corners:
    // only fmod's own error, 8 ulps + 1 ulp of Float of |w| = 1, and the floor.
    // x = 0.5: u = 0.25 is far from 1: v is NaN at every corner (bound: the
    // floor), and w = fmod(1, NaN) is a certain NaN, still checked.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[3], DType::Float).unwrap();
    let u = fd.mul(x, x).unwrap();
    let v = fd.unary(UnaryOp::Acosh, u).unwrap();
    let one = fd.literal(Literal::Float(1.0));
    let w = fd.binary(BinaryOp::Fmod, one, v).unwrap();
    fd.add_output(w).unwrap();
    fd.add_output(v).unwrap();
    let f = fd.finish();
    let x0 = 1.0 - f64::powi(2.0, -24);
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[x0, 3.0, 0.5])]).unwrap();
    let wv = outs[0].to_f64_vec();
    assert!(wv[0].is_nan() && wv[1] == 1.0 && wv[2].is_nan(), "{wv:?}");
    let bv = bounds[1].as_ref().unwrap().to_f64_vec();
    assert!(bv[0].is_nan() || bv[0] == f64::INFINITY, "{bv:?}");
    let bw = bounds[0].as_ref().unwrap().to_f64_vec();
    assert_eq!(bw[0], f64::INFINITY, "{bw:?}");
    assert!(close(bw[1], 9.0 * EPS_F + 2.0 * TINY_F), "{bw:?}");
    assert!(close(bw[2], 2.0 * TINY_F), "{bw:?}");
}

#[test]
fn a_wide_interval_holding_all_of_a_bounded_domain_is_uncertain() {
    // t = x*x - z. x = 2896: u = 8386816 (exact, below 2^23), e_u = 2 eps u
    // = 1.99957...; z = 8386813.5: t = 2.5, e_t = 2 e_u (doubled for curvature)
    // + 2 eps 2.5 + floor = 3.999... So t's interval [-1.5, 6.5] holds all of
    // [-1, 1]: asin(t) is NaN at the center and at both corners, yet could be
    // finite: +inf. x = 2, z = -0.5: t = 4.5 known to about 1e-6, asin(t) a
    // certain NaN: only the floor.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let z = fd.tensor(&[2], DType::Float).unwrap();
    let u = fd.mul(x, x).unwrap();
    let t = fd.binary(BinaryOp::Sub, u, z).unwrap();
    let y = fd.unary(UnaryOp::Asin, t).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(t).unwrap();
    let f = fd.finish();
    let args = [floats(&[2896.0, 2.0]), floats(&[8386813.5, -0.5])];
    let (outs, bounds) = run_with_bounds(&f, &args).unwrap();
    assert_eq!(outs[1].to_f64_vec(), vec![2.5, 4.5]);
    let et = bounds[1].as_ref().unwrap().to_f64_vec();
    let eu = 2.0 * EPS_F * 8386816.0 + 2.0 * TINY_F;
    assert!(close(et[0], 2.0 * eu + 2.0 * EPS_F * 2.5 + 2.0 * TINY_F), "{et:?}");
    let by = bounds[0].as_ref().unwrap().to_f64_vec();
    assert_eq!(by[0], f64::INFINITY, "{by:?}");
    // The floor of a function scales with its operand: 2 tiny (1 + |4.5|).
    assert!(close(by[1], 2.0 * TINY_F * 5.5), "{by:?}");
}
