//! The meta ops and output forms on the CPU reference, against values
//! worked out by hand: set/segment_set copy, stride_order lays the copy out,
//! size is the extent, an alias output is the input's new value, and an
//! output with a stride order comes back in that layout.

use fusebench_ir::{DType, FusionBuilder, Op};
use fusebench_reference::{run, Arg, Tensor};

fn input(shape: &[usize], v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(DType::Float, shape, v).unwrap())
}

#[test]
fn set_and_segment_set_copy_a_transposed_input() {
    let mut b = FusionBuilder::new();
    let x = b
        .define_tensor(None, &[2, 3], vec![Some(true), Some(true)], DType::Float, &[0, 1], false)
        .unwrap();
    let s = b.op(Op::Set { x, segment: false }, &[]).unwrap()[0];
    let g = b.op(Op::Set { x: s, segment: true }, &[]).unwrap()[0];
    b.add_output(g).unwrap();
    // Column-major storage 0..6 of a [2, 3] tensor: logical rows (0, 2, 4), (1, 3, 5).
    let t = Tensor::from_f64s(DType::Float, &[3, 2], &[0., 1., 2., 3., 4., 5.])
        .unwrap()
        .permute(&[1, 0]);
    let out = run(&b.finish(), &[Arg::Tensor(t)]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![0., 2., 4., 1., 3., 5.]);
    // A copy: dense, row-major.
    assert_eq!(out[0].strides(), &[3, 1]);
}

#[test]
fn stride_order_op_lays_out_the_copy() {
    let mut b = FusionBuilder::new();
    let x = b.tensor(&[2, 3], DType::Float).unwrap();
    // stride_order [0, 1]: dim 0 innermost (column-major).
    let y = b
        .op(Op::StrideOrder { x, stride_order: vec![0, 1] }, &[])
        .unwrap()[0];
    b.add_output(y).unwrap();
    let out = run(&b.finish(), &[input(&[2, 3], &[0., 1., 2., 3., 4., 5.])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![0., 1., 2., 3., 4., 5.]);
    assert_eq!(out[0].strides(), &[1, 2]);
}

#[test]
fn output_stride_order_is_the_outputs_layout() {
    let mut b = FusionBuilder::new();
    let x = b.tensor(&[2, 3, 4], DType::Float).unwrap();
    let y = b.mul(x, x).unwrap();
    b.add_output_stride_order(y, &[0, 2, 1]).unwrap();
    let v: Vec<f64> = (0..24).map(|i| i as f64).collect();
    let out = run(&b.finish(), &[input(&[2, 3, 4], &v)]).unwrap();
    // Allocation order (outermost first): dim 1, dim 2, dim 0.
    assert_eq!(out[0].strides(), &[1, 8, 2]);
    let sq: Vec<f64> = v.iter().map(|x| x * x).collect();
    assert_eq!(out[0].to_f64_vec(), sq);
}

#[test]
fn size_is_the_extent_and_feeds_a_reshape() {
    let mut b = FusionBuilder::new();
    let x = b.tensor(&[2, 3], DType::Float).unwrap();
    let s0 = b.op(Op::Size { x, dim: 0 }, &[]).unwrap()[0];
    let s1 = b.op(Op::Size { x, dim: -1 }, &[]).unwrap()[0];
    let f = b.fusion();
    assert_eq!(f.value(s0).constant, Some(fusebench_ir::Literal::Int(2)));
    assert_eq!(f.value(s1).constant, Some(fusebench_ir::Literal::Int(3)));
    let n = b.mul(s0, s1).unwrap();
    assert_eq!(b.fusion().value(n).constant, Some(fusebench_ir::Literal::Int(6)));
    let r = b.op(Op::Reshape { x, new_shape: vec![6] }, &[]).unwrap()[0];
    b.add_output(r).unwrap();
    let out = run(&b.finish(), &[input(&[2, 3], &[1., 2., 3., 4., 5., 6.])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![1., 2., 3., 4., 5., 6.]);
}

#[test]
fn alias_output_is_the_inputs_new_value() {
    let mut b = FusionBuilder::new();
    let x = b.tensor(&[3], DType::Float).unwrap();
    let one = b.literal(fusebench_ir::Literal::Float(1.0));
    let y = b.add(x, one).unwrap();
    b.add_output_alias(y, x).unwrap();
    let f = b.finish();
    assert!(f.visible_outputs().is_empty());
    let out = run(&f, &[input(&[3], &[1., 2., 3.])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![2., 3., 4.]);
    // The JSON form keeps the alias.
    let g = fusebench_ir::Fusion::from_json(&f.to_json()).unwrap();
    assert_eq!(g.aliases, f.aliases);
}
