//! Expanded broadcasts (stride 0, extent above 1) are computed once, as
//! nvFuser computes them: an output broadcast along a dim is written for one
//! index there and returned as a view with stride 0, and a sum over such a
//! dim is one element times the extent. Everything else plans as before.

use fusebench_codegen::{plan, Device, OutputSource, Schedule};

mod common;
use common::script;

const ROW: &str = "    t0 = fd.define_tensor(shape=[2048, 1000], contiguity=[None, True], dtype=DataType.BFloat16, is_cpu=False)\n    f0 = fd.ops.cast(t0, dtype=DataType.Float)\n";

/// The layout of a row expanded over 2048 rows.
fn expanded() -> Vec<Option<(Vec<i64>, i64)>> {
    vec![Some((vec![0, 1], 0))]
}

#[test]
fn pointwise_of_an_expanded_row_writes_one_row() {
    let f = script(&format!(
        "{ROW}    y = fd.ops.tanh(f0)\n    o = fd.ops.cast(y, dtype=DataType.BFloat16)\n    fd.add_output(o)\n"
    ));
    let p = plan(&f, &expanded(), Device::default()).unwrap();
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.hidden_outputs, 1);
    assert_eq!(p.outputs.len(), 2);
    assert_eq!(p.outputs[1].shape, vec![1, 1000]);
    assert!(matches!(p.outputs[1].source, OutputSource::Written));
    match &p.outputs[0].source {
        OutputSource::OutputView { output: 1, strides, offset: 0 } => assert_eq!(strides, &vec![0, 1]),
        s => panic!("output 0 should be a view of the row computed once, is {s:?}"),
    }
    assert_eq!(p.outputs[0].shape, vec![2048, 1000]);
    // The same fusion on a dense input computes every row.
    let dense = plan(&f, &[None], Device::default()).unwrap();
    assert_eq!(dense.hidden_outputs, 0);
    assert!(matches!(dense.outputs[0].source, OutputSource::Written));
}

#[test]
fn sum_over_the_repeated_dim_is_one_element_times_the_extent() {
    let f = script(&format!(
        "{ROW}    s = fd.ops.sum(f0, dims=[0])\n    fd.add_output(s)\n"
    ));
    let p = plan(&f, &expanded(), Device::default()).unwrap();
    assert_eq!(p.hidden_outputs, 0);
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.kernels[0].schedule, Schedule::Pointwise);
    assert!(p.source.contains("2.048e3"), "the extent multiplies the element: {}", p.source);
    assert_eq!(p.outputs[0].shape, vec![1000]);
}

#[test]
fn an_operand_read_at_every_row_keeps_the_output_full() {
    // x (expanded) times g (dense): the product differs from row to row.
    let f = script(&format!(
        "{ROW}    t1 = fd.define_tensor(shape=[2048, 1000], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n    f1 = fd.ops.cast(t1, dtype=DataType.Float)\n    y = fd.ops.mul(f0, f1)\n    fd.add_output(y)\n"
    ));
    let mut layouts = expanded();
    layouts.push(None);
    let p = plan(&f, &layouts, Device::default()).unwrap();
    assert_eq!(p.hidden_outputs, 0);
    assert!(matches!(p.outputs[0].source, OutputSource::Written));
    assert_eq!(p.outputs[0].shape, vec![2048, 1000]);
}

#[test]
fn broadcast_in_dim_to_a_larger_shape_is_a_broadcast_too() {
    // A bias broadcast over rows plus an expanded row: both repeat over rows.
    let f = script(&format!(
        "{ROW}    t1 = fd.define_tensor(shape=[1000], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n    b = fd.ops.broadcast_in_dim(t1, shape=[2048, 1000], broadcast_dims=[1])\n    y = fd.ops.add(f0, b)\n    r = fd.ops.sum(y, dims=[1])\n    fd.add_output(y)\n    fd.add_output(r)\n"
    ));
    let mut layouts = expanded();
    layouts.push(None);
    let p = plan(&f, &layouts, Device::default()).unwrap();
    assert_eq!(p.hidden_outputs, 2);
    assert_eq!(p.outputs[2].shape, vec![1, 1000]);
    assert_eq!(p.outputs[3].shape, vec![1]);
    assert!(matches!(p.outputs[0].source, OutputSource::OutputView { output: 2, .. }));
    assert!(matches!(p.outputs[1].source, OutputSource::OutputView { output: 3, .. }));
}
