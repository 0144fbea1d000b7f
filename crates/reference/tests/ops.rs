//! Each op against hand-computed values.

use fusebench_ir::{BinaryOp, DType, Fusion, FusionBuilder, Literal, ReduceOp, UnaryOp};
use fusebench_reference::{run, Arg, Buffer, ExecError, Tensor};
use std::sync::Arc;

fn t(dtype: DType, shape: &[usize], v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(dtype, shape, v).unwrap())
}

fn ti(dtype: DType, shape: &[usize], v: &[i64]) -> Arg {
    Arg::Tensor(Tensor::from_i64s(dtype, shape, v).unwrap())
}

fn shape_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&e| e as i64).collect()
}

/// Builds a one-input fusion with `body`, runs it, returns every output.
fn run1(
    dtype: DType,
    shape: &[usize],
    vals: &[f64],
    body: impl FnOnce(&mut FusionBuilder, fusebench_ir::ValueId),
) -> Vec<Tensor> {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&shape_i64(shape), dtype).unwrap();
    body(&mut fd, x);
    run(&fd.finish(), &[t(dtype, shape, vals)]).unwrap()
}

fn bits_eq(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[track_caller]
fn assert_vals(t: &Tensor, dtype: DType, shape: &[usize], want: &[f64]) {
    assert_eq!(t.dtype(), dtype);
    assert_eq!(t.shape(), shape);
    let got = t.to_f64_vec();
    assert!(bits_eq(&got, want), "got {got:?}, want {want:?}");
}

/// `kind` of two tensors of `n` elements of `dtype`, its result the output.
fn binary_fusion(kind: BinaryOp, n: i64, dtype: DType) -> Fusion {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[n], dtype).unwrap();
    let y = fd.tensor(&[n], dtype).unwrap();
    let z = fd.binary(kind, x, y).unwrap();
    fd.add_output(z).unwrap();
    fd.finish()
}
#[test]
fn unary_ops_f32() {
    let xs = [0.5, 2.0, 4.0, 0.25];
    type Case = (UnaryOp, fn(f64) -> f64);
    let cases: &[Case] = &[
        (UnaryOp::Neg, |x| -x),
        (UnaryOp::Abs, |x| x.abs()),
        (UnaryOp::Reciprocal, |x| 1.0 / x),
        (UnaryOp::Rsqrt, |x| 1.0 / x.sqrt()),
        (UnaryOp::Sqrt, |x| x.sqrt()),
        (UnaryOp::Exp, |x| x.exp()),
        (UnaryOp::Log, |x| x.ln()),
        (UnaryOp::Tanh, |x| x.tanh()),
        (UnaryOp::Erf, |x| {
            [
                0.5204998778130465,
                0.9953222650189527,
                0.9999999845827421,
                0.2763263901682369,
            ][[0.5, 2.0, 4.0, 0.25].iter().position(|&v| v == x).unwrap()]
        }),
        (UnaryOp::Sigmoid, |x| 1.0 / (1.0 + (-x).exp())),
    ];
    for &(kind, f) in cases {
        let out = run1(DType::Float, &[4], &xs, |fd, x| {
            let y = fd.unary(kind, x).unwrap();
            fd.add_output(y).unwrap();
        });
        let want: Vec<f64> = xs.iter().map(|&x| f(x) as f32 as f64).collect();
        assert_vals(&out[0], DType::Float, &[4], &want);
    }
    // Exact values by hand.
    let out = run1(DType::Float, &[3], &[4.0, 0.0, -2.0], |fd, x| {
        for k in [
            UnaryOp::Sqrt,
            UnaryOp::Rsqrt,
            UnaryOp::Reciprocal,
            UnaryOp::Abs,
            UnaryOp::Sigmoid,
        ] {
            let y = fd.unary(k, x).unwrap();
            fd.add_output(y).unwrap();
        }
    });
    assert_vals(&out[0], DType::Float, &[3], &[2.0, 0.0, f64::NAN]);
    assert_vals(&out[1], DType::Float, &[3], &[0.5, f64::INFINITY, f64::NAN]);
    assert_vals(&out[2], DType::Float, &[3], &[0.25, f64::INFINITY, -0.5]);
    assert_vals(&out[3], DType::Float, &[3], &[4.0, 0.0, 2.0]);
    assert_eq!(out[4].to_f64_vec()[1], 0.5);
}

#[test]
fn unary_ops_integer_paths() {
    // neg and abs stay integer; Int32 wraps like C.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[3], DType::Int32).unwrap();
    let n = fd.unary(UnaryOp::Neg, x).unwrap();
    let a = fd.unary(UnaryOp::Abs, x).unwrap();
    let e = fd.unary(UnaryOp::Exp, x).unwrap();
    for v in [n, a, e] {
        fd.add_output(v).unwrap();
    }
    let out = run(
        &fd.finish(),
        &[ti(DType::Int32, &[3], &[-5, 7, i32::MIN as i64])],
    )
    .unwrap();
    assert_eq!(out[0].dtype(), DType::Int32);
    assert_eq!(out[0].to_i64_vec(), vec![5, -7, i32::MIN as i64]);
    assert_eq!(out[1].to_i64_vec(), vec![5, 7, i32::MIN as i64]);
    // exp promotes integers to Float.
    assert_eq!(out[2].dtype(), DType::Float);
    assert_eq!(out[2].to_f64_vec()[0], (-5f64).exp() as f32 as f64);
}

#[test]
fn binary_ops_f32() {
    let a = [1.5, -2.0, 3.0, f64::NAN];
    let b = [0.5, 4.0, 3.0, 1.0];
    let cases: &[(BinaryOp, [f64; 4])] = &[
        (BinaryOp::Add, [2.0, 2.0, 6.0, f64::NAN]),
        (BinaryOp::Sub, [1.0, -6.0, 0.0, f64::NAN]),
        (BinaryOp::Mul, [0.75, -8.0, 9.0, f64::NAN]),
        (BinaryOp::Div, [3.0, -0.5, 1.0, f64::NAN]),
        (
            BinaryOp::Pow,
            [1.5f64.sqrt() as f32 as f64, 16.0, 27.0, f64::NAN],
        ),
        (BinaryOp::Maximum, [1.5, 4.0, 3.0, f64::NAN]),
        (BinaryOp::Minimum, [0.5, -2.0, 3.0, f64::NAN]),
    ];
    for (kind, want) in cases {
        let out = run(
            &binary_fusion(*kind, 4, DType::Float),
            &[t(DType::Float, &[4], &a), t(DType::Float, &[4], &b)],
        )
        .unwrap();
        assert_vals(&out[0], DType::Float, &[4], want);
    }
}

#[test]
fn comparisons() {
    let a = [1.0, 2.0, 3.0, f64::NAN];
    let b = [2.0, 2.0, 2.0, f64::NAN];
    let cases: &[(BinaryOp, [i64; 4])] = &[
        (BinaryOp::Eq, [0, 1, 0, 0]),
        (BinaryOp::Ne, [1, 0, 1, 1]),
        (BinaryOp::Lt, [1, 0, 0, 0]),
        (BinaryOp::Le, [1, 1, 0, 0]),
        (BinaryOp::Gt, [0, 0, 1, 0]),
        (BinaryOp::Ge, [0, 1, 1, 0]),
    ];
    for (kind, want) in cases {
        let out = run(
            &binary_fusion(*kind, 4, DType::Float),
            &[t(DType::Float, &[4], &a), t(DType::Float, &[4], &b)],
        )
        .unwrap();
        assert_eq!(out[0].dtype(), DType::Bool);
        assert_eq!(out[0].to_i64_vec(), want.to_vec(), "{kind:?}");
    }
    // A comparison of a Float tensor with a Double scalar compares in Float:
    // 0.1 as f32 equals the tensor's 0.1f32.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Float).unwrap();
    let c = fd.literal(Literal::Float(0.1));
    let z = fd.binary(BinaryOp::Eq, x, c).unwrap();
    fd.add_output(z).unwrap();
    let out = run(&fd.finish(), &[t(DType::Float, &[2], &[0.1, 0.2])]).unwrap();
    assert_eq!(out[0].to_i64_vec(), vec![1, 0]);
    // Integer comparisons are exact beyond 2^53.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[1], DType::Int).unwrap();
    let y = fd.tensor(&[1], DType::Int).unwrap();
    let z = fd.binary(BinaryOp::Lt, x, y).unwrap();
    fd.add_output(z).unwrap();
    let big = 1i64 << 60;
    let out = run(
        &fd.finish(),
        &[
            ti(DType::Int, &[1], &[big]),
            ti(DType::Int, &[1], &[big + 1]),
        ],
    )
    .unwrap();
    assert_eq!(out[0].to_i64_vec(), vec![1]);
}

#[test]
fn integer_binary_ops() {
    let a = [7, -7, 5, 3];
    let b = [2, 2, 0, 4];
    let cases: &[(BinaryOp, [i64; 4])] = &[
        (BinaryOp::Add, [9, -5, 5, 7]),
        (BinaryOp::Sub, [5, -9, 5, -1]),
        (BinaryOp::Mul, [14, -14, 0, 12]),
        // C division truncates; dividing by zero gives 0.
        (BinaryOp::Div, [3, -3, 0, 0]),
        (BinaryOp::Pow, [49, 49, 1, 81]),
        (BinaryOp::Maximum, [7, 2, 5, 4]),
        (BinaryOp::Minimum, [2, -7, 0, 3]),
    ];
    for (kind, want) in cases {
        let out = run(
            &binary_fusion(*kind, 4, DType::Int),
            &[ti(DType::Int, &[4], &a), ti(DType::Int, &[4], &b)],
        )
        .unwrap();
        assert_eq!(out[0].dtype(), DType::Int);
        assert_eq!(out[0].to_i64_vec(), want.to_vec(), "{kind:?}");
    }
    // Int32 + Int32 wraps at 32 bits.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[1], DType::Int32).unwrap();
    let z = fd.add(x, x).unwrap();
    fd.add_output(z).unwrap();
    let out = run(&fd.finish(), &[ti(DType::Int32, &[1], &[i32::MAX as i64])]).unwrap();
    assert_eq!(out[0].to_i64_vec(), vec![-2]);
    // An Int tensor times a Double scalar computes in Double.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Int).unwrap();
    let c = fd.literal(Literal::Float(0.5));
    let z = fd.mul(x, c).unwrap();
    fd.add_output(z).unwrap();
    let out = run(&fd.finish(), &[ti(DType::Int, &[2], &[3, -1])]).unwrap();
    assert_vals(&out[0], DType::Double, &[2], &[1.5, -0.5]);
}

#[test]
fn bool_arithmetic() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[4], DType::Bool).unwrap();
    let y = fd.tensor(&[4], DType::Bool).unwrap();
    let z = fd.add(x, y).unwrap();
    let s = fd.sum(x, &[0], false, None).unwrap();
    fd.add_output(z).unwrap();
    fd.add_output(s).unwrap();
    let out = run(
        &fd.finish(),
        &[
            ti(DType::Bool, &[4], &[0, 1, 0, 1]),
            ti(DType::Bool, &[4], &[0, 0, 1, 1]),
        ],
    )
    .unwrap();
    assert_eq!(out[0].dtype(), DType::Bool);
    assert_eq!(out[0].to_i64_vec(), vec![0, 1, 1, 1]);
    assert_eq!(out[1].dtype(), DType::Int);
    assert_eq!(out[1].to_i64_vec(), vec![2]);
}

#[test]
fn casts_round_to_nearest_even() {
    let p = |e: i32| 2f64.powi(e);
    // Exact ties, from f32: 1+2^-8 is halfway between 1 and 1+2^-7.
    let xs = [
        1.0 + p(-8),
        1.0 + 3.0 * p(-8),
        -(1.0 + p(-8)),
        3.5,
        -2.7,
        0.0,
    ];
    let out = run1(DType::Float, &[6], &xs, |fd, x| {
        for d in [
            DType::BFloat16,
            DType::Half,
            DType::Int,
            DType::Int32,
            DType::Bool,
            DType::Double,
        ] {
            let y = fd.cast(x, d).unwrap();
            fd.add_output(y).unwrap();
        }
    });
    assert_vals(
        &out[0],
        DType::BFloat16,
        &[6],
        &[1.0, 1.0 + p(-6), -1.0, 3.5, -2.703125, 0.0],
    );
    assert_vals(
        &out[1],
        DType::Half,
        &[6],
        &[
            1.0 + p(-8),
            1.0 + 3.0 * p(-8),
            -(1.0 + p(-8)),
            3.5,
            -2.69921875,
            0.0,
        ],
    );
    assert_eq!(out[2].to_i64_vec(), vec![1, 1, -1, 3, -2, 0]);
    assert_eq!(out[3].to_i64_vec(), vec![1, 1, -1, 3, -2, 0]);
    assert_eq!(out[4].to_i64_vec(), vec![1, 1, 1, 1, 1, 0]);
    assert_eq!(out[5].dtype(), DType::Double);
    // From f64, a value just above a bf16 tie that f32 cannot hold rounds up
    // (a naive f64 -> f32 -> bf16 conversion would give 1.0).
    let out = run1(
        DType::Double,
        &[2],
        &[1.0 + p(-8) + p(-40), 1.0 + p(-11) + p(-50)],
        |fd, x| {
            let y = fd.cast(x, DType::BFloat16).unwrap();
            let h = fd.cast(x, DType::Half).unwrap();
            fd.add_output(y).unwrap();
            fd.add_output(h).unwrap();
        },
    );
    assert_vals(&out[0], DType::BFloat16, &[2], &[1.0 + p(-7), 1.0]);
    assert_vals(&out[1], DType::Half, &[2], &[1.0 + p(-8), 1.0 + p(-10)]);
    // Stored as bf16 bits.
    match out[0].buffer() {
        Buffer::BF16(v) => assert_eq!(v[0].to_bits(), 0x3F81),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bf16_add_gives_float() {
    // bf16 + bf16 computes and returns Float: 1 + 2^-9 is kept.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::BFloat16).unwrap();
    let y = fd.tensor(&[2], DType::BFloat16).unwrap();
    let z = fd.add(x, y).unwrap();
    let zb = fd.cast(z, DType::BFloat16).unwrap();
    fd.add_output(z).unwrap();
    fd.add_output(zb).unwrap();
    let p = 2f64.powi(-9);
    let out = run(
        &fd.finish(),
        &[
            t(DType::BFloat16, &[2], &[1.0, 256.0]),
            t(DType::BFloat16, &[2], &[p, 1.0]),
        ],
    )
    .unwrap();
    assert_vals(&out[0], DType::Float, &[2], &[1.0 + p, 257.0]);
    // 257 is a tie between 256 and 258 in bf16: rounds to even (256).
    assert_vals(&out[1], DType::BFloat16, &[2], &[1.0, 256.0]);
}

#[test]
fn double_literal_times_float_tensor_rounds_literal_first() {
    // nvFuser computes (float)literal * x in f32; find an x where that differs
    // from rounding the f64 product.
    let lit = 0.1f64;
    let x = (1..10000)
        .map(|i| 1.0 + i as f64 / 8192.0)
        .map(|x| x as f32 as f64)
        .find(|&x| ((lit as f32 as f64) * x) as f32 != (lit * x) as f32)
        .expect("some x tells the two apart");
    let out = run1(DType::Float, &[1], &[x], |fd, v| {
        let c = fd.literal(Literal::Float(lit));
        let y = fd.mul(v, c).unwrap();
        fd.add_output(y).unwrap();
    });
    assert_vals(
        &out[0],
        DType::Float,
        &[1],
        &[((lit as f32) * (x as f32)) as f64],
    );
}

#[test]
fn broadcasting_and_views() {
    // [3,1] + [4] -> [3,4]
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[3, 1], DType::Float).unwrap();
    let b = fd.tensor(&[4], DType::Float).unwrap();
    let c = fd.add(a, b).unwrap();
    let bb = fd.broadcast_in_dim(b, &[2, 3, 4], &[2]).unwrap();
    let ab = fd.broadcast(a, &[true, false, false]).unwrap();
    let ae = fd.expand(ab, &[2, -1, 4]).unwrap();
    let d = fd.mul(bb, ae).unwrap();
    fd.add_output(c).unwrap();
    fd.add_output(d).unwrap();
    fd.add_output(ae).unwrap();
    let out = run(
        &fd.finish(),
        &[
            t(DType::Float, &[3, 1], &[10.0, 20.0, 30.0]),
            t(DType::Float, &[4], &[1.0, 2.0, 3.0, 4.0]),
        ],
    )
    .unwrap();
    assert_vals(
        &out[0],
        DType::Float,
        &[3, 4],
        &[11., 12., 13., 14., 21., 22., 23., 24., 31., 32., 33., 34.],
    );
    let want: Vec<f64> = (0..2)
        .flat_map(|_| {
            [10., 20., 30.]
                .into_iter()
                .flat_map(|a| [1., 2., 3., 4.].map(|b| a * b))
        })
        .collect();
    assert_vals(&out[1], DType::Float, &[2, 3, 4], &want);
    // An expand output is a view: stride 0, no copy.
    assert_eq!(out[2].strides(), &[0, 1, 0]);
    assert_eq!(out[2].get_f64(&[1, 2, 3]), 30.0);
}

#[test]
fn reductions_inner_outer_multi_keepdim() {
    // x[i, j, k] = i*100 + j*10 + k over [2, 3, 4]
    let shape = [2usize, 3, 4];
    let vals: Vec<f64> = (0..2)
        .flat_map(|i| (0..3).flat_map(move |j| (0..4).map(move |k| (i * 100 + j * 10 + k) as f64)))
        .collect();
    let out = run1(DType::Float, &shape, &vals, |fd, x| {
        let s2 = fd.sum(x, &[2], false, None).unwrap();
        let s0 = fd.sum(x, &[0], false, None).unwrap();
        let s1k = fd.sum(x, &[1], true, None).unwrap();
        let s02 = fd.sum(x, &[0, -1], false, None).unwrap();
        let all = fd.sum(x, &[0, 1, 2], false, None).unwrap();
        let mx = fd.reduce(ReduceOp::Max, x, &[1], false).unwrap();
        let mn = fd.reduce(ReduceOp::Min, x, &[0, 2], true).unwrap();
        for v in [s2, s0, s1k, s02, all, mx, mn] {
            fd.add_output(v).unwrap();
        }
    });
    let x = |i: usize, j: usize, k: usize| vals[i * 12 + j * 4 + k];
    let s2: Vec<f64> = (0..2)
        .flat_map(|i| (0..3).map(move |j| (0..4).map(|k| x(i, j, k)).sum()))
        .collect();
    assert_vals(&out[0], DType::Float, &[2, 3], &s2);
    let s0: Vec<f64> = (0..3)
        .flat_map(|j| (0..4).map(move |k| (0..2).map(|i| x(i, j, k)).sum()))
        .collect();
    assert_vals(&out[1], DType::Float, &[3, 4], &s0);
    let s1: Vec<f64> = (0..2)
        .flat_map(|i| (0..4).map(move |k| (0..3).map(|j| x(i, j, k)).sum()))
        .collect();
    assert_vals(&out[2], DType::Float, &[2, 1, 4], &s1);
    let s02: Vec<f64> = (0..3)
        .map(|j| (0..2).flat_map(|i| (0..4).map(move |k| x(i, j, k))).sum())
        .collect();
    assert_vals(&out[3], DType::Float, &[3], &s02);
    assert_vals(&out[4], DType::Float, &[], &[vals.iter().sum()]);
    let mx: Vec<f64> = (0..2)
        .flat_map(|i| (0..4).map(move |k| x(i, 2, k)))
        .collect();
    assert_vals(&out[5], DType::Float, &[2, 4], &mx);
    assert_vals(&out[6], DType::Float, &[1, 3, 1], &[0.0, 10.0, 20.0]);
}

#[test]
fn reductions_nan_int_and_dtype() {
    let out = run1(
        DType::Float,
        &[2, 3],
        &[1.0, f64::NAN, 3.0, -1.0, -2.0, -3.0],
        |fd, x| {
            let mx = fd.reduce(ReduceOp::Max, x, &[1], false).unwrap();
            let mn = fd.reduce(ReduceOp::Min, x, &[0], false).unwrap();
            fd.add_output(mx).unwrap();
            fd.add_output(mn).unwrap();
        },
    );
    assert_vals(&out[0], DType::Float, &[2], &[f64::NAN, -1.0]);
    assert_vals(&out[1], DType::Float, &[3], &[-1.0, f64::NAN, -3.0]);
    // Integer sum accumulates in i64 (Int output); max keeps Int32.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2, 2], DType::Int32).unwrap();
    let s = fd.sum(x, &[0, 1], false, None).unwrap();
    let m = fd.reduce(ReduceOp::Max, x, &[1], false).unwrap();
    fd.add_output(s).unwrap();
    fd.add_output(m).unwrap();
    let big = i32::MAX as i64;
    let out = run(
        &fd.finish(),
        &[ti(DType::Int32, &[2, 2], &[big, big, -3, 5])],
    )
    .unwrap();
    assert_eq!(out[0].dtype(), DType::Int);
    assert_eq!(out[0].to_i64_vec(), vec![2 * big + 2]);
    assert_eq!(out[1].dtype(), DType::Int32);
    assert_eq!(out[1].to_i64_vec(), vec![big, 5]);
    // sum of bf16 with dtype=Float: each element cast to f32 (exact), summed
    // in f64, rounded once: 256 + 1 + 1 stays 258 (bf16 accumulation would lose the ones).
    let out = run1(DType::BFloat16, &[3], &[256.0, 1.0, 1.0], |fd, x| {
        let s = fd.sum(x, &[0], false, Some(DType::Float)).unwrap();
        let sb = fd.sum(x, &[0], false, None).unwrap();
        fd.add_output(s).unwrap();
        fd.add_output(sb).unwrap();
    });
    assert_vals(&out[0], DType::Float, &[], &[258.0]);
    assert_vals(&out[1], DType::BFloat16, &[], &[258.0]);
    // Summing f32 values in f64 and rounding once: 2^24 + 1 + 1 = 2^24 + 2.
    let out = run1(DType::Float, &[3], &[16777216.0, 1.0, 1.0], |fd, x| {
        let s = fd.sum(x, &[0], false, None).unwrap();
        fd.add_output(s).unwrap();
    });
    assert_vals(&out[0], DType::Float, &[], &[16777218.0]);
}

#[test]
fn welford_and_var_mean() {
    let vals = [1.0, 2.0, 3.0, 4.0, 10.0, 10.0, 10.0, 14.0];
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2, 4], DType::BFloat16).unwrap();
    let (mean, m2, n) = fd.welford(x, &[1]).unwrap();
    let (var, vmean) = fd.var_mean(x, &[1], 1, false).unwrap();
    let (var0, _) = fd.var_mean(x, &[0], 0, true).unwrap();
    for v in [mean, m2, n, var, vmean, var0] {
        fd.add_output(v).unwrap();
    }
    let out = run(&fd.finish(), &[t(DType::BFloat16, &[2, 4], &vals)]).unwrap();
    assert_vals(&out[0], DType::Float, &[2], &[2.5, 11.0]);
    assert_vals(&out[1], DType::Float, &[2], &[5.0, 12.0]);
    // Every tensor is small: the count reports Int32.
    assert_eq!(out[2].dtype(), DType::Int32);
    assert_eq!(out[2].to_i64_vec(), vec![4, 4]);
    assert_vals(
        &out[3],
        DType::Float,
        &[2],
        &[5.0 / 3.0f64, 4.0].map(|v| v as f32 as f64),
    );
    assert_vals(&out[4], DType::Float, &[2], &[2.5, 11.0]);
    // Population variance over dim 0 with keepdim.
    assert_vals(&out[5], DType::Float, &[1, 4], &[20.25, 16.0, 12.25, 25.0]);
}

#[test]
fn welford_is_stable_with_large_mean() {
    // Values 1e6 + {0.5, 1.5, ...}: a one-pass sum of squares in f32 would fail.
    let n = 5000;
    let vals: Vec<f64> = (0..n).map(|i| 1e6 + (i % 4) as f64 + 0.5).collect();
    let out = run1(DType::Float, &[n], &vals, |fd, x| {
        let (mean, m2, _) = fd.welford(x, &[0]).unwrap();
        fd.add_output(mean).unwrap();
        fd.add_output(m2).unwrap();
    });
    assert_vals(&out[0], DType::Float, &[], &[1e6 + 2.0]);
    assert_vals(
        &out[1],
        DType::Float,
        &[],
        &[(n / 4) as f64 * (2.25 + 0.25 + 0.25 + 2.25)],
    );
}

#[test]
fn pad_positive_and_negative() {
    // [2, 3] -> pad last dim (1, -1), first dim (0, 2) with 7.
    let out = run1(DType::Float, &[2, 3], &[1., 2., 3., 4., 5., 6.], |fd, x| {
        let p = fd
            .pad(x, &[1, -1, 0, 2], Some(Literal::Float(7.0)))
            .unwrap();
        let q = fd.pad(x, &[-1, 2], None).unwrap();
        fd.add_output(p).unwrap();
        fd.add_output(q).unwrap();
    });
    assert_vals(
        &out[0],
        DType::Float,
        &[4, 3],
        &[7., 1., 2., 7., 4., 5., 7., 7., 7., 7., 7., 7.],
    );
    assert_vals(
        &out[1],
        DType::Float,
        &[2, 4],
        &[2., 3., 0., 0., 5., 6., 0., 0.],
    );
    // An integer tensor padded with a float value: the value is cast (truncates).
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[2], DType::Int).unwrap();
    let p = fd.pad(x, &[1, 0], Some(Literal::Float(2.9))).unwrap();
    fd.add_output(p).unwrap();
    let out = run(&fd.finish(), &[ti(DType::Int, &[2], &[5, 6])]).unwrap();
    assert_eq!(out[0].to_i64_vec(), vec![2, 5, 6]);
}

#[test]
fn slice_with_steps() {
    let vals: Vec<f64> = (0..20).map(|v| v as f64).collect();
    let out = run1(DType::Float, &[4, 5], &vals, |fd, x| {
        let s = fd.op1_slice(x, &[1, 0], &[4, 5], &[2, 2]).unwrap();
        let n = fd.slice(x, &[-2, -3], &[100, -1]).unwrap();
        fd.add_output(s).unwrap();
        fd.add_output(n).unwrap();
    });
    assert_vals(&out[0], DType::Float, &[2, 3], &[5., 7., 9., 15., 17., 19.]);
    assert_vals(&out[1], DType::Float, &[2, 2], &[12., 13., 17., 18.]);
}

trait SliceExt {
    fn op1_slice(
        &mut self,
        x: fusebench_ir::ValueId,
        start: &[i64],
        end: &[i64],
        strides: &[i64],
    ) -> Result<fusebench_ir::ValueId, fusebench_ir::IrError>;
}
impl SliceExt for FusionBuilder {
    fn op1_slice(
        &mut self,
        x: fusebench_ir::ValueId,
        start: &[i64],
        end: &[i64],
        strides: &[i64],
    ) -> Result<fusebench_ir::ValueId, fusebench_ir::IrError> {
        Ok(self.op(
            fusebench_ir::Op::Slice {
                x,
                start: start.to_vec(),
                end: end.to_vec(),
                strides: strides.to_vec(),
                manual_normalization: true,
            },
            &[],
        )?[0])
    }
}

#[test]
fn cat_plain_and_manual_padding() {
    // Plain cat along dims 0 and 1, with dtype promotion.
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[2, 2], DType::Float).unwrap();
    let b = fd.tensor(&[2, 1], DType::BFloat16).unwrap();
    let c1 = fd.cat(&[a, b], 1, false).unwrap();
    let c0 = fd.cat(&[a, a], 0, false).unwrap();
    fd.add_output(c1).unwrap();
    fd.add_output(c0).unwrap();
    let out = run(
        &fd.finish(),
        &[
            t(DType::Float, &[2, 2], &[1., 2., 3., 4.]),
            t(DType::BFloat16, &[2, 1], &[5., 6.]),
        ],
    )
    .unwrap();
    assert_vals(&out[0], DType::Float, &[2, 3], &[1., 2., 5., 3., 4., 6.]);
    assert_vals(
        &out[1],
        DType::Float,
        &[4, 2],
        &[1., 2., 3., 4., 1., 2., 3., 4.],
    );

    // Rotary form as nvFuser prints it: cat([-x[..., 2:], x[..., :2]]) as
    // two slices each padded to full extent, then cat(manual_padding=True).
    let vals: Vec<f64> = (1..=8).map(|v| v as f64).collect();
    let out = run1(DType::Float, &[2, 4], &vals, |fd, x| {
        let hi = fd.op1_slice(x, &[0, 2], &[2, 4], &[1, 1]).unwrap();
        let nhi = fd.unary(UnaryOp::Neg, hi).unwrap();
        let zero = fd.define_scalar(Some("c0"), Some(Literal::Float(0.0)), DType::Float);
        let two = {
            let a = fd.literal(Literal::Int(0));
            let b = fd.literal(Literal::Int(2));
            fd.add(a, b).unwrap()
        };
        let z = fd.literal(Literal::Int(0));
        let p1 = fd
            .op(
                fusebench_ir::Op::Pad {
                    x: nhi,
                    widths: vec![z, two, z, z],
                    value: Some(zero),
                },
                &[],
            )
            .unwrap()[0];
        let lo = fd.op1_slice(x, &[0, 0], &[2, 2], &[1, 1]).unwrap();
        let p2 = fd
            .op(
                fusebench_ir::Op::Pad {
                    x: lo,
                    widths: vec![two, z, z, z],
                    value: Some(zero),
                },
                &[],
            )
            .unwrap()[0];
        let c = fd.cat(&[p1, p2], 1, true).unwrap();
        fd.add_output(c).unwrap();
    });
    assert_vals(
        &out[0],
        DType::Float,
        &[2, 4],
        &[-3., -4., 1., 2., -7., -8., 5., 6.],
    );

    // Manual cat along an outer dim, with a position no range covers (taken from the first input).
    let out = run1(DType::Float, &[3, 2], &[1., 2., 3., 4., 5., 6.], |fd, x| {
        let a = fd.op1_slice(x, &[0, 0], &[1, 2], &[1, 1]).unwrap();
        let pa = fd
            .pad(a, &[0, 0, 0, 3], Some(Literal::Float(-1.0)))
            .unwrap();
        let b = fd.op1_slice(x, &[2, 0], &[3, 2], &[1, 1]).unwrap();
        let pb = fd
            .pad(b, &[0, 0, 3, 0], Some(Literal::Float(-2.0)))
            .unwrap();
        let c = fd.cat(&[pa, pb], 0, true).unwrap();
        fd.add_output(c).unwrap();
    });
    assert_vals(
        &out[0],
        DType::Float,
        &[4, 2],
        &[1., 2., -1., -1., -1., -1., 5., 6.],
    );
}

#[test]
fn permute_and_reshape_of_noncontiguous_inputs() {
    // A transposed input: logical [3, 2] over storage [[0,1,2],[3,4,5]].
    let buf = Arc::new(Buffer::F32(vec![0., 1., 2., 3., 4., 5.]));
    let xt = Tensor::new(DType::Float, vec![3, 2], vec![1, 3], 0, buf).unwrap();
    let mut fd = FusionBuilder::new();
    let x = fd
        .define_tensor(
            None,
            &[3, 2],
            vec![Some(true), Some(true)],
            DType::Float,
            &[0, 1],
            false,
        )
        .unwrap();
    let r = fd.reshape(x, &[6]).unwrap();
    let p = fd.permute(x, &[1, 0]).unwrap();
    let pr = fd.reshape(p, &[3, 2]).unwrap();
    // A dead op is skipped.
    fd.unary(UnaryOp::Exp, x).unwrap();
    fd.add_output(r).unwrap();
    fd.add_output(p).unwrap();
    fd.add_output(pr).unwrap();
    let out = run(&fd.finish(), &[Arg::Tensor(xt)]).unwrap();
    assert_vals(&out[0], DType::Float, &[6], &[0., 3., 1., 4., 2., 5.]);
    assert_vals(&out[1], DType::Float, &[2, 3], &[0., 1., 2., 3., 4., 5.]);
    // The permute of a transposed view is contiguous again: reshaping it is a view.
    assert_vals(&out[2], DType::Float, &[3, 2], &[0., 1., 2., 3., 4., 5.]);

    // A stride-0 input (expanded broadcast): [3, 2] whose rows all equal [7, 8].
    let buf = Arc::new(Buffer::F32(vec![7., 8.]));
    let xb = Tensor::new(DType::Float, vec![3, 2], vec![0, 1], 0, buf).unwrap();
    let mut fd = FusionBuilder::new();
    let x = fd
        .define_tensor(
            None,
            &[3, 2],
            vec![None, Some(true)],
            DType::Float,
            &[],
            false,
        )
        .unwrap();
    let r = fd.reshape(x, &[2, 3]).unwrap();
    let p = fd.permute(x, &[1, 0]).unwrap();
    let s = fd.sum(p, &[1], false, None).unwrap();
    fd.add_output(r).unwrap();
    fd.add_output(s).unwrap();
    let out = run(&fd.finish(), &[Arg::Tensor(xb)]).unwrap();
    assert_vals(&out[0], DType::Float, &[2, 3], &[7., 8., 7., 8., 7., 8.]);
    assert_vals(&out[1], DType::Float, &[2], &[21., 24.]);
}

#[test]
fn squeeze_and_full() {
    let out = run1(
        DType::Float,
        &[2, 1, 3],
        &[1., 2., 3., 4., 5., 6.],
        |fd, x| {
            let s = fd.squeeze(x, &[1]).unwrap();
            let f = fd
                .full(&[2, 3], Literal::Float(2.5), DType::BFloat16)
                .unwrap();
            let m = fd.mul(s, f).unwrap();
            let fi = fd.full(&[2], Literal::Float(3.7), DType::Int).unwrap();
            fd.add_output(s).unwrap();
            fd.add_output(m).unwrap();
            fd.add_output(f).unwrap();
            fd.add_output(fi).unwrap();
        },
    );
    assert_vals(&out[0], DType::Float, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    assert_vals(
        &out[1],
        DType::Float,
        &[2, 3],
        &[2.5, 5., 7.5, 10., 12.5, 15.],
    );
    assert_vals(&out[2], DType::BFloat16, &[2, 3], &[2.5; 6]);
    assert_eq!(out[3].to_i64_vec(), vec![3, 3]);
}

#[test]
fn index_select_1d_broadcast_and_out_of_range() {
    let table: Vec<f64> = (0..12).map(|v| v as f64).collect();
    // 1-D index along dim 0.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[4, 3], DType::BFloat16).unwrap();
    let i = fd.tensor(&[3], DType::Int).unwrap();
    let g = fd.index_select(x, i, 0).unwrap();
    let g1 = fd.index_select(x, i, 1).unwrap();
    fd.add_output(g).unwrap();
    fd.add_output(g1).unwrap();
    let f = fd.finish();
    let out = run(
        &f,
        &[
            t(DType::BFloat16, &[4, 3], &table),
            ti(DType::Int, &[3], &[2, 0, 2]),
        ],
    )
    .unwrap();
    assert_vals(
        &out[0],
        DType::BFloat16,
        &[3, 3],
        &[6., 7., 8., 0., 1., 2., 6., 7., 8.],
    );
    assert_vals(
        &out[1],
        DType::BFloat16,
        &[4, 3],
        &[2., 0., 2., 5., 3., 5., 8., 6., 8., 11., 9., 11.],
    );
    // Out of range: an error naming the op, the position and the value.
    let err = run(
        &f,
        &[
            t(DType::BFloat16, &[4, 3], &table),
            ti(DType::Int, &[3], &[1, -1, 0]),
        ],
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ExecError::Op { .. }), "{msg}");
    assert!(
        msg.contains("index_select") && msg.contains("holds -1 at position 1"),
        "{msg}"
    );
    let err = run(
        &f,
        &[
            t(DType::BFloat16, &[4, 3], &table),
            ti(DType::Int, &[3], &[1, 2, 3]),
        ],
    )
    .unwrap_err();
    assert!(err.to_string().contains("holds 3 at position 2"), "{err}");

    // Broadcast-shaped index (as the corpus gathers embeddings): reshape then broadcast.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[4, 3], DType::Float).unwrap();
    let i = fd.tensor(&[1, 2], DType::Int).unwrap();
    let r = fd.reshape(i, &[2]).unwrap();
    let b = fd.broadcast(r, &[false, true]).unwrap();
    let g = fd.index_select(x, b, 0).unwrap();
    fd.add_output(g).unwrap();
    let out = run(
        &fd.finish(),
        &[
            t(DType::Float, &[4, 3], &table),
            ti(DType::Int, &[1, 2], &[3, 1]),
        ],
    )
    .unwrap();
    assert_vals(&out[0], DType::Float, &[2, 3], &[9., 10., 11., 3., 4., 5.]);
}

#[test]
fn where_with_scalars_and_tensors() {
    let mut fd = FusionBuilder::new();
    let c = fd.tensor(&[4], DType::Bool).unwrap();
    let x = fd.tensor(&[4], DType::BFloat16).unwrap();
    let one = fd.literal(Literal::Float(1.5));
    let zero = fd.literal(Literal::Int(0));
    let w1 = fd.where_(c, one, zero).unwrap();
    let w2 = fd.where_(c, x, one).unwrap();
    let w3 = fd.where_(c, zero, x).unwrap();
    for v in [w1, w2, w3] {
        fd.add_output(v).unwrap();
    }
    let f = fd.finish();
    let out = run(
        &f,
        &[
            ti(DType::Bool, &[4], &[1, 0, 1, 0]),
            t(DType::BFloat16, &[4], &[2., 3., 4., 5.]),
        ],
    )
    .unwrap();
    // Double and Int scalars: Double.
    assert_vals(&out[0], DType::Double, &[4], &[1.5, 0., 1.5, 0.]);
    // where keeps bf16 (no promotion of reduced floats).
    assert_vals(&out[1], DType::BFloat16, &[4], &[2., 1.5, 4., 1.5]);
    assert_vals(&out[2], DType::BFloat16, &[4], &[0., 3., 0., 5.]);
}

#[test]
fn scalar_inputs() {
    // y = x * s + (s * 2), s a Double scalar input; also an Int scalar input.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[3], DType::Float).unwrap();
    let s = fd.define_scalar(Some("s"), None, DType::Double);
    let k = fd.define_scalar(Some("k"), None, DType::Int);
    let two = fd.literal(Literal::Int(2));
    let s2 = fd.mul(s, two).unwrap();
    let xs = fd.mul(x, s).unwrap();
    let y = fd.add(xs, s2).unwrap();
    let z = fd.add(x, k).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(z).unwrap();
    let f = fd.finish();
    let out = run(
        &f,
        &[
            t(DType::Float, &[3], &[1., 2., 3.]),
            Arg::Scalar(Literal::Float(0.5)),
            Arg::Scalar(Literal::Int(10)),
        ],
    )
    .unwrap();
    assert_vals(&out[0], DType::Float, &[3], &[1.5, 2.0, 2.5]);
    assert_vals(&out[1], DType::Float, &[3], &[11., 12., 13.]);
    // Wrong inputs are errors, not panics.
    assert!(matches!(
        run(&f, &[t(DType::Float, &[3], &[1., 2., 3.])]),
        Err(ExecError::InputCount { .. })
    ));
    let e = run(
        &f,
        &[
            t(DType::Float, &[4], &[1., 2., 3., 4.]),
            Arg::Scalar(Literal::Float(0.5)),
            Arg::Scalar(Literal::Int(1)),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("shape"), "{e}");
    let e = run(
        &f,
        &[
            t(DType::Double, &[3], &[1., 2., 3.]),
            Arg::Scalar(Literal::Float(0.5)),
            Arg::Scalar(Literal::Int(1)),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("dtype"), "{e}");
    let e = run(
        &f,
        &[
            t(DType::Float, &[3], &[1., 2., 3.]),
            Arg::Scalar(Literal::Float(0.5)),
            Arg::Scalar(Literal::Float(1.5)),
        ],
    )
    .unwrap_err();
    assert!(matches!(e, ExecError::Input { index: 2, .. }), "{e}");
}

#[test]
fn outputs_that_alias_and_repeat() {
    let out = run1(DType::Float, &[2, 2], &[1., 2., 3., 4.], |fd, x| {
        let p = fd.permute(x, &[1, 0]).unwrap();
        fd.add_output(x).unwrap();
        fd.add_output(p).unwrap();
        fd.add_output(p).unwrap();
    });
    assert_vals(&out[0], DType::Float, &[2, 2], &[1., 2., 3., 4.]);
    assert_vals(&out[1], DType::Float, &[2, 2], &[1., 3., 2., 4.]);
    assert_vals(&out[2], DType::Float, &[2, 2], &[1., 3., 2., 4.]);
    let c = out[1].to_contiguous();
    assert!(c.is_contiguous());
    assert_eq!(c.to_le_bytes().len(), 16);
}
