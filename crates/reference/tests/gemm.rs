//! `matmul` and `linear` against hand-computed products.

use fusebench_ir::{DType, FusionBuilder, Op};
use fusebench_reference::{run, Arg, Tensor};

fn arg(shape: &[usize], v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(DType::Float, shape, v).unwrap())
}

/// Runs one op over float inputs of the given shapes and values.
fn run_op(inputs: &[(&[usize], &[f64])], op: impl FnOnce(&[fusebench_ir::ValueId]) -> Op) -> Tensor {
    let mut fd = FusionBuilder::new();
    let ids: Vec<_> = inputs
        .iter()
        .map(|(s, _)| {
            let s: Vec<i64> = s.iter().map(|&e| e as i64).collect();
            fd.tensor(&s, DType::Float).unwrap()
        })
        .collect();
    let out = fd.op(op(&ids), &["out"]).unwrap()[0];
    fd.add_output(out).unwrap();
    let args: Vec<Arg> = inputs.iter().map(|(s, v)| arg(s, v)).collect();
    run(&fd.finish(), &args).unwrap().remove(0)
}

#[test]
fn matmul_of_matrices_vectors_and_batches() {
    let a: &[f64] = &[1., 2., 3., 4.];
    let b: &[f64] = &[5., 6., 7., 8.];
    let mm = |x: &[usize], y: &[usize], xv: &[f64], yv: &[f64]| {
        run_op(&[(x, xv), (y, yv)], |i| Op::Matmul { a: i[0], b: i[1] })
    };
    let t = mm(&[2, 2], &[2, 2], a, b);
    assert_eq!((t.shape().to_vec(), t.to_f64_vec()), (vec![2, 2], vec![19., 22., 43., 50.]));
    // A 1-D left operand is a row, a 1-D right operand a column, 1-D x 1-D a dot.
    let t = mm(&[2], &[2, 2], &[1., 2.], b);
    assert_eq!((t.shape().to_vec(), t.to_f64_vec()), (vec![2], vec![19., 22.]));
    let t = mm(&[2, 2], &[2], a, &[5., 7.]);
    assert_eq!((t.shape().to_vec(), t.to_f64_vec()), (vec![2], vec![19., 43.]));
    let t = mm(&[2], &[2], &[1., 2.], &[5., 7.]);
    assert_eq!((t.shape().to_vec(), t.to_f64_vec()), (vec![], vec![19.]));
    // Batch dims broadcast: [2,1,1,2] x [3,2,1] -> [2,3,1,1].
    let t = mm(&[2, 1, 1, 2], &[3, 2, 1], &[1., 2., 3., 4.], &[1., 1., 0., 1., 2., 0.]);
    assert_eq!(t.shape(), &[2, 3, 1, 1]);
    assert_eq!(t.to_f64_vec(), vec![3., 2., 2., 7., 4., 6.]);
}

#[test]
fn linear_transposes_the_weight_and_adds_the_bias() {
    // x [2,3], w [2,3] (out 2, in 3), bias [2].
    let x: &[f64] = &[1., 2., 3., 4., 5., 6.];
    let w: &[f64] = &[1., 0., -1., 0.5, 0.5, 0.5];
    let t = run_op(&[(&[2, 3], x), (&[2, 3], w), (&[2], &[10., 20.])], |i| Op::Linear {
        a: i[0],
        weight: i[1],
        bias: Some(i[2]),
    });
    assert_eq!(t.shape(), &[2, 2]);
    assert_eq!(t.to_f64_vec(), vec![8., 23., 8., 27.5]);
    // A batched weight [2,1,3] puts its batch first: out [2, 2, 1].
    let t = run_op(&[(&[2, 3], x), (&[2, 1, 3], w)], |i| Op::Linear {
        a: i[0],
        weight: i[1],
        bias: None,
    });
    assert_eq!(t.shape(), &[2, 2, 1]);
    assert_eq!(t.to_f64_vec(), vec![-2., -2., 3., 7.5]);
}

#[test]
fn bf16_products_round_once() {
    // bf16 steps by 2^-7 near 1: adding 2^-8 twice, rounding each time, stays
    // at 1 (each sum is a tie, to even); one rounding of the whole sum keeps 1 + 2^-7.
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[1, 3], DType::BFloat16).unwrap();
    let b = fd.tensor(&[3, 1], DType::BFloat16).unwrap();
    let o = fd.op(Op::Matmul { a, b }, &["o"]).unwrap()[0];
    fd.add_output(o).unwrap();
    let h = 2f64.powi(-8);
    let args = [
        Arg::Tensor(Tensor::from_f64s(DType::BFloat16, &[1, 3], &[1., h, h]).unwrap()),
        Arg::Tensor(Tensor::from_f64s(DType::BFloat16, &[3, 1], &[1., 1., 1.]).unwrap()),
    ];
    let t = run(&fd.finish(), &args).unwrap().remove(0);
    assert_eq!(t.dtype(), DType::BFloat16);
    assert_eq!(t.to_f64_vec(), vec![1. + 2. * h]);
}
