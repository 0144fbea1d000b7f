//! Bounds of scans, indexing/ordering ops and random ops
//! (`fusebench_reference::bounds`): values worked out by hand from the rules
//! in the module's documentation.

use fusebench_ir::{DType, FusionBuilder, IndexOp, Literal, Op, RngDist, ScanOp, ValueId};
use fusebench_reference::bounds::run_with_bounds;
use fusebench_reference::{Arg, Tensor};

const EPS_F: f64 = f32::EPSILON as f64;
const EPS_D: f64 = f64::EPSILON;
const TINY_F: f64 = f32::MIN_POSITIVE as f64;
const INF: f64 = f64::INFINITY;

fn floats(v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(DType::Float, &[v.len()], v).unwrap())
}

fn ints(v: &[i64]) -> Arg {
    Arg::Tensor(Tensor::from_i64s(DType::Int, &[v.len()], v).unwrap())
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * b.abs().max(1e-300)
}

fn all_close(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(&a, &b)| close(a, b))
}

fn op1(fd: &mut FusionBuilder, o: Op) -> ValueId {
    fd.op(o, &[]).unwrap()[0]
}

/// x * 3: a value whose bound is 2 eps |y| + 2 tiny (mul: 1 ulp, plus the
/// Float output's ulp and the flush-to-zero floor).
fn times3(fd: &mut FusionBuilder, x: ValueId) -> ValueId {
    let three = fd.literal(Literal::Float(3.0));
    fd.mul(x, three).unwrap()
}

fn mul_bound(y: f64) -> f64 {
    2.0 * EPS_F * y.abs() + 2.0 * TINY_F
}

#[test]
fn cumsum_of_exact_values_is_bounded_by_its_double_accumulation_and_its_rounding() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[3], DType::Float).unwrap();
    let y = op1(&mut fd, Op::Scan { kind: ScanOp::Cumsum, x, dim: 0, init: None });
    fd.add_output(y).unwrap();
    let f = fd.finish();
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[1.0, -2.0, 3.0])]).unwrap();
    assert_eq!(outs[0].to_f64_vec(), vec![1.0, -1.0, 2.0]);
    // n eps_D * cumsum|x| (n = 3: 1, 3, 6) + eps_F |y| + 2 tiny.
    let want = [
        3.0 * EPS_D * 1.0 + EPS_F * 1.0 + 2.0 * TINY_F,
        3.0 * EPS_D * 3.0 + EPS_F * 1.0 + 2.0 * TINY_F,
        3.0 * EPS_D * 6.0 + EPS_F * 2.0 + 2.0 * TINY_F,
    ];
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    assert!(all_close(&b, &want), "{b:?}");
}

#[test]
fn cummax_carries_the_running_largest_bound_and_cumprod_of_inexact_values_is_unchecked() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[3], DType::Float).unwrap();
    let y = times3(&mut fd, x);
    let m = op1(&mut fd, Op::Scan { kind: ScanOp::Cummin, x: y, dim: -1, init: None });
    let p = op1(&mut fd, Op::Scan { kind: ScanOp::Cumprod, x: y, dim: 0, init: None });
    fd.add_output(m).unwrap();
    fd.add_output(p).unwrap();
    let f = fd.finish();
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[2.0, 5.0, 1.0])]).unwrap();
    assert_eq!(outs[0].to_f64_vec(), vec![6.0, 6.0, 3.0]);
    // y = 6, 15, 3: bounds of y, then their running max.
    let want = [mul_bound(6.0), mul_bound(15.0), mul_bound(15.0)];
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    assert!(all_close(&b, &want), "{b:?}");
    assert_eq!(bounds[1].as_ref().unwrap().to_f64_vec(), vec![INF; 3]);
}

#[test]
fn ordering_of_exact_values_is_exact_even_with_ties() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[4], DType::Float).unwrap();
    let a = op1(
        &mut fd,
        Op::Index(IndexOp::Argsort { x, dim: 0, descending: false, stable: false }),
    );
    fd.add_output(a).unwrap();
    let f = fd.finish();
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[2.0, 1.0, 2.0, 0.5])]).unwrap();
    // Equal values by position (a stable sort), on both executors.
    assert_eq!(outs[0].to_i64_vec(), vec![3, 1, 0, 2]);
    assert!(bounds[0].is_none());
}

#[test]
fn ordering_of_inexact_values_is_unchecked_only_where_neighbours_are_within_the_bounds() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[4], DType::Float).unwrap();
    let y = times3(&mut fd, x);
    let a = op1(
        &mut fd,
        Op::Index(IndexOp::Argsort { x: y, dim: 0, descending: false, stable: true }),
    );
    let k = fd.literal(Literal::Int(2));
    let t = fd
        .op(
            Op::Index(IndexOp::Topk { x: y, k, dim: 0, largest: true, sorted: true }),
            &[],
        )
        .unwrap();
    fd.add_output(a).unwrap();
    fd.add_output(t[0]).unwrap();
    fd.add_output(t[1]).unwrap();
    let f = fd.finish();
    // y = 3, 6, 6, 15.
    let (outs, bounds) = run_with_bounds(&f, &[floats(&[1.0, 2.0, 2.0, 5.0])]).unwrap();
    assert_eq!(outs[0].to_i64_vec(), vec![0, 1, 2, 3]);
    assert_eq!(outs[1].to_f64_vec(), vec![15.0, 6.0]);
    assert_eq!(outs[2].to_i64_vec(), vec![3, 1]);
    // Sorted gaps 3, 0, 0 / 9 against twice the row's largest bound (that of 15).
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    assert_eq!(b, vec![0.0, INF, INF, 0.0]);
    // Values: the same topk of y - e and y + e: 15 +- e(15), 6 +- e(6).
    let b = bounds[1].as_ref().unwrap().to_f64_vec();
    assert!(all_close(&b, &[mul_bound(15.0), mul_bound(6.0)]), "{b:?}");
    let b = bounds[2].as_ref().unwrap().to_f64_vec();
    assert_eq!(b, vec![0.0, INF]);
}

#[test]
fn gathers_move_the_bounds_and_accumulation_adds_the_rounding_of_each_addition() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[3], DType::Float).unwrap();
    let i = fd.tensor(&[3], DType::Int).unwrap();
    let v = fd.tensor(&[3], DType::Float).unwrap();
    let y = times3(&mut fd, x);
    let g = op1(&mut fd, Op::Index(IndexOp::Gather { x: y, index: i, dim: 0 }));
    let acc = fd.tensor(&[2], DType::Float).unwrap();
    let p = op1(
        &mut fd,
        Op::Index(IndexOp::IndexPutAccumulate { acc, index: i, value: v }),
    );
    fd.add_output(g).unwrap();
    fd.add_output(p).unwrap();
    let f = fd.finish();
    let args = [
        floats(&[1.0, 2.0, 4.0]),
        ints(&[1, 1, 0]),
        floats(&[1.0, 2.0, 4.0]),
        floats(&[1.0, 2.0]),
    ];
    let (outs, bounds) = run_with_bounds(&f, &args).unwrap();
    assert_eq!(outs[0].to_f64_vec(), vec![6.0, 6.0, 3.0]);
    let b = bounds[0].as_ref().unwrap().to_f64_vec();
    assert!(all_close(&b, &[mul_bound(6.0), mul_bound(6.0), mul_bound(3.0)]), "{b:?}");
    // Row 0: 1 + 4 = 5 (one addition, magnitude 5); row 1: 2 + 1 + 2 = 5 (two, 5).
    assert_eq!(outs[1].to_f64_vec(), vec![5.0, 5.0]);
    let want = [
        EPS_F * 5.0 + EPS_F * 5.0 + 2.0 * TINY_F,
        2.0 * EPS_F * 5.0 + EPS_F * 5.0 + 2.0 * TINY_F,
    ];
    let b = bounds[1].as_ref().unwrap().to_f64_vec();
    assert!(all_close(&b, &want), "{b:?}");
}

#[test]
fn uniform_is_bit_exact_and_normal_is_bounded_by_its_transcendentals() {
    let mut fd = FusionBuilder::new();
    let draw = |fd: &mut FusionBuilder, dist, a: f64, b: f64| {
        let (a, b) = (fd.literal(Literal::Float(a)), fd.literal(Literal::Float(b)));
        let (s, o) = (fd.literal(Literal::Int(42)), fd.literal(Literal::Int(4)));
        op1(
            fd,
            Op::Rng {
                dist,
                a,
                b,
                shape: vec![5],
                seed: Some(s),
                offset: Some(o),
                dtype: DType::Float,
            },
        )
    };
    let u = draw(&mut fd, RngDist::Uniform, -2.0, 3.0);
    let n = draw(&mut fd, RngDist::Normal, 1.5, 0.25);
    fd.add_output(u).unwrap();
    fd.add_output(n).unwrap();
    let f = fd.finish();
    let (outs, bounds) = run_with_bounds(&f, &[]).unwrap();
    assert!(bounds[0].is_none());
    let y = outs[1].to_f64_vec();
    let want: Vec<f64> = y
        .iter()
        .map(|&v| 8.0 * EPS_F * (v.abs() + 1.5) + EPS_F * v.abs() + 2.0 * TINY_F)
        .collect();
    let b = bounds[1].as_ref().unwrap().to_f64_vec();
    assert!(all_close(&b, &want), "{b:?} {want:?}");
}
