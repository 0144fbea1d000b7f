//! Outputs in a layout of their own (`add_output(out, stride_order=)`,
//! `fd.ops.stride_order`) are planned with the strides nvFuser allocates
//! (csrc/ir/utils.cpp strideOrderToAllocation: dim i at allocation position
//! rank-1-order[i], contiguous), and an aliased strided input is updated by
//! a kernel writing through its strides. Strides worked out by hand.

use fusebench_codegen::{plan, Device, OutputSource, Schedule};

mod common;
use common::script;

const NEG: &str = "    tv0 = fd.define_tensor(shape=[3, 5, 7], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.neg(tv0)\n    fd.add_output(tv1, stride_order=[0, 2, 1])\n";

#[test]
fn add_output_stride_order_allocates_the_permuted_strides() {
    let p = plan(&script(NEG), &[None], Device::default()).unwrap();
    let o = &p.outputs[0];
    assert!(matches!(o.source, OutputSource::Written));
    assert_eq!(o.shape, vec![3, 5, 7]);
    // Order [0, 2, 1]: dim 1 outermost, then dim 2, dim 0 innermost.
    assert_eq!(o.strides, Some(vec![1, 21, 3]));
    // The kernel writes the permute [1, 2, 0] row-major: a [5, 7, 3] group.
    assert!(p.source.contains("out0"), "{}", p.source);
}

#[test]
fn row_major_orders_keep_the_dense_plan() {
    let f = script(&NEG.replace("[0, 2, 1]", "[2, 1, 0]"));
    assert_eq!(
        plan(&f, &[None], Device::default()).unwrap().outputs[0].strides,
        None
    );
    // [1, 5, 7] with order [1, 2, 0]: only the extent-1 dim moves.
    let f = script(
        &NEG.replace("[3, 5, 7]", "[1, 5, 7]")
            .replace("[0, 2, 1]", "[1, 2, 0]"),
    );
    assert_eq!(
        plan(&f, &[None], Device::default()).unwrap().outputs[0].strides,
        None
    );
}

#[test]
fn stride_order_op_output_and_reduction_output_get_their_layout() {
    let f = script("    tv0 = fd.define_tensor(shape=[4, 6, 3], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)\n    tv1 = fd.ops.sum(tv0, dims=[2])\n    tv2 = fd.ops.stride_order(tv0, stride_order=[0, 1, 2])\n    fd.add_output(tv1, stride_order=[0, 1])\n    fd.add_output(tv2)\n");
    let p = plan(&f, &[None], Device::default()).unwrap();
    // sum -> [4, 6], column-major.
    assert_eq!(p.outputs[0].shape, vec![4, 6]);
    assert_eq!(p.outputs[0].strides, Some(vec![1, 4]));
    // [4, 6, 3] with order [0, 1, 2]: fully reversed.
    assert_eq!(p.outputs[1].strides, Some(vec![1, 4, 24]));
    assert!(matches!(p.outputs[1].source, OutputSource::Written));
}

#[test]
fn an_ordered_input_output_is_copied_not_a_view() {
    let f = script("    tv0 = fd.define_tensor(shape=[3, 5], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.permute(tv0, dims=[1, 0])\n    fd.add_output(tv0, stride_order=[0, 1])\n    fd.add_output(tv1)\n");
    let p = plan(&f, &[None], Device::default()).unwrap();
    assert!(matches!(p.outputs[0].source, OutputSource::Written));
    assert_eq!(p.outputs[0].strides, Some(vec![1, 3]));
    // The plain permute stays a view of the input.
    assert!(matches!(
        p.outputs[1].source,
        OutputSource::InputView { .. }
    ));
}

#[test]
fn an_alias_into_a_strided_input_gets_a_kernel_through_its_strides() {
    let f = script("    tv0 = fd.define_tensor(shape=[3, 5], contiguity=[False, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.add(tv0, tv0)\n    fd.add_output(tv1, alias_input=tv0)\n");
    // A [3, 5] slice at column 2 of a [3, 8] tensor.
    let p = plan(&f, &[Some((vec![8, 1], 2))], Device::default()).unwrap();
    assert_eq!(p.alias_writes, vec![0]);
    let k = p.kernels.last().unwrap();
    assert_eq!(k.schedule, Schedule::Pointwise);
    assert!(
        p.source.contains("long long r = e, at = 2LL;"),
        "{}",
        p.source
    );
    assert!(p.source.contains("at += (r % 3LL) * 8LL;"), "{}", p.source);
    // Dense row-major: the engine's copy, no kernel.
    let p = plan(&f, &[Some((vec![5, 1], 0))], Device::default()).unwrap();
    assert!(p.alias_writes.is_empty());
    // Overlapping elements are refused with the names.
    let e = plan(&f, &[Some((vec![0, 1], 0))], Device::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tv1") && e.contains("tv0") && e.contains("overlap"),
        "{e}"
    );
}

#[test]
fn the_golden_stride_order_case_gets_the_strides_nvfuser_returned() {
    // nvFuser 0.2.36 on an H200 returned this output with strides [1, 3, 15]
    // (crates/reference/tests/fixtures/golden-ops/manifest.json, "stride_order_f32").
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../reference/tests/fixtures/golden-ops/stride_order_f32.py"
    );
    let f = fusebench_frontend::parse_file(std::path::Path::new(path)).unwrap();
    let p = plan(&f, &[None], Device::default()).unwrap();
    assert_eq!(p.outputs[0].shape, vec![3, 5, 7]);
    assert_eq!(p.outputs[0].strides, Some(vec![1, 3, 15]));
}

#[test]
fn a_slice_reshape_permute_of_an_input_is_a_view_with_no_kernel() {
    // The V part of a fused qkv [2, 5, 3*2*4]: slice the last 8 columns,
    // split them into 2 heads of 4, move heads before tokens.
    let f = script("    tv0 = fd.define_tensor(shape=[2, 5, 24], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)\n    tv1 = fd.ops.slice(tv0, start_indices=[0, 0, 16], end_indices=[2, 5, 24], strides=[1, 1, 1])\n    tv2 = fd.ops.reshape(tv1, new_shape=[2, 5, 2, 4])\n    tv3 = fd.ops.permute(tv2, dims=[0, 2, 1, 3])\n    tv4 = fd.ops.slice(tv0, start_indices=[0, 1, 0], end_indices=[2, 5, 24], strides=[1, 2, 3])\n    fd.add_output(tv3)\n    fd.add_output(tv4)\n");
    let p = plan(&f, &[None], Device::default()).unwrap();
    assert!(p.kernels.is_empty(), "{}", p.source);
    // Strides by hand: [120, 24, 1] -> slice at 16 -> split 8 into 2 x 4
    // -> [120, 24, 4, 1] -> permute -> [120, 4, 24, 1].
    match &p.outputs[0].source {
        OutputSource::InputView {
            input,
            strides,
            offset,
        } => assert_eq!((*input, strides.clone(), *offset), (0, vec![120, 4, 24, 1], 16)),
        s => panic!("{s:?}"),
    }
    // Steps 2 and 3 from row 1: offset 24, strides [120, 48, 3].
    match &p.outputs[1].source {
        OutputSource::InputView { strides, offset, .. } => {
            assert_eq!((strides.clone(), *offset), (vec![120, 48, 3], 24))
        }
        s => panic!("{s:?}"),
    }
    // Through a strided input (a slice at column 2 of rows of 30), the offsets add.
    let p = plan(&f, &[Some((vec![150, 30, 1], 2))], Device::default()).unwrap();
    match &p.outputs[0].source {
        OutputSource::InputView { strides, offset, .. } => {
            assert_eq!((strides.clone(), *offset), (vec![150, 4, 30, 1], 18))
        }
        s => panic!("{s:?}"),
    }
}

fn strides_of(body: &str) -> Vec<Option<Vec<i64>>> {
    let f = script(body);
    plan(&f, &vec![None; f.inputs.len()], Device::default())
        .unwrap()
        .outputs
        .iter()
        .map(|o| o.strides.clone())
        .collect()
}

const COLMAJOR: &str = "    x = fd.define_tensor(shape=[6, 40], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])\n";

#[test]
fn outputs_take_the_layout_of_their_widest_input_as_nvfuser_infers_it() {
    // csrc/preseg_passes/allocation_order_inference.cpp: a GELU-like chain
    // of a column-major matrix is column-major, also beside a broadcast bias.
    let body = format!("{COLMAJOR}    b = fd.define_tensor(shape=[40], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n    y = fd.ops.tanh(x)\n    bb = fd.ops.broadcast_in_dim(b, shape=[6, 40], broadcast_dims=[1])\n    z = fd.ops.add(y, bb)\n    fd.add_output(z)\n");
    assert_eq!(strides_of(&body), [Some(vec![1, 6])]);
    // A row-major input of the same rank makes it ambiguous: row-major.
    let body = format!("{COLMAJOR}    w = fd.define_tensor(shape=[6, 40], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    z = fd.ops.add(x, w)\n    fd.add_output(z)\n");
    assert_eq!(strides_of(&body), [None]);
    // Through a permute, the dims follow: the output [40, 6] is row-major in
    // memory order, so dense.
    let body = format!("{COLMAJOR}    y = fd.ops.exp(x)\n    z = fd.ops.permute(y, dims=[1, 0])\n    fd.add_output(z)\n");
    assert_eq!(strides_of(&body), [None]);
    // A 3-d input with stride order [0, 2, 1]: dim 1 outermost, then 2, then
    // 0. A keepdim sum of it stays row-major, as nvFuser 0.2.36 returned
    // the golden case sum_dim1_keep_f32; the elementwise output follows.
    let body = "    x = fd.define_tensor(shape=[4, 5, 6], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 2, 1])\n    y = fd.ops.sum(x, dims=[2], keepdim=True)\n    z = fd.ops.neg(x)\n    fd.add_output(y)\n    fd.add_output(z)\n";
    let s = strides_of(body);
    assert_eq!(s[0], None);
    assert_eq!(s[1], Some(vec![1, 24, 4]));
    // Views of the input stay views; explicit orders win.
    let body = format!("{COLMAJOR}    z = fd.ops.permute(x, dims=[1, 0])\n    y = fd.ops.neg(x)\n    fd.add_output(z)\n    fd.add_output(y, stride_order=[1, 0])\n");
    let f = script(&body);
    let p = plan(&f, &[None], Device::default()).unwrap();
    assert!(matches!(p.outputs[0].source, OutputSource::InputView { .. }));
    assert_eq!(p.outputs[1].strides, None);
}

#[test]
fn a_sum_of_everything_walks_a_column_major_input_in_memory_order() {
    // [600, 200] column-major: element (i, j) at i + 600 j. Consecutive
    // threads must take consecutive i, so the walk index splits by 600 first.
    let body = "    x = fd.define_tensor(shape=[600, 200], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])\n    y = fd.ops.sum(x, dims=[0, 1])\n    fd.add_output(y)\n";
    let f = script(body);
    let p = plan(&f, &[Some((vec![1, 600], 0))], Device::default()).unwrap();
    assert_eq!(p.kernels[0].schedule, Schedule::GridPartial, "{}", p.source);
    // Walked a vector of 4 at a time: r = q * 600 + jj, jj a multiple of 4.
    assert!(p.source.contains("in0[(jj + (q * 600))]"), "{}", p.source);
    // Row-major: the logical order is the memory order.
    let p = plan(&f, &[Some((vec![200, 1], 0))], Device::default()).unwrap();
    assert!(p.source.contains("in0[((q * 200) + jj)]"), "{}", p.source);
}
