//! The transpose schedule (transpose.rs): picked for a pointwise group with
//! an input read across the output's innermost dim, both tiled dims at least
//! 32; the pointwise schedule otherwise. Launch shapes worked out by hand.

use fusebench_codegen::{plan, Device, Plan, Schedule};

mod common;
use common::script;

fn define(name: &str, shape: &[usize], dtype: &str, order: Option<&str>) -> String {
    let c = vec!["True"; shape.len()].join(", ");
    let o = order.map(|o| format!(", stride_order={o}")).unwrap_or_default();
    format!("    {name} = fd.define_tensor(shape={shape:?}, contiguity=[{c}], dtype=DataType.{dtype}, is_cpu=False{o})\n")
}

/// Plans with the layouts the script's define_tensor stride orders give.
fn plan_of(body: &str) -> Plan {
    plan_on(body, Device::default())
}

/// The output is declared row-major: left to itself it would take its
/// input's layout (ir::alloc_order, as nvFuser infers it) and need no transpose.
fn neg(shape: &[usize], dtype: &str, order: Option<&str>) -> String {
    let row_major: Vec<usize> = (0..shape.len()).rev().collect();
    define("x0", shape, dtype, order)
        + &format!("    t0 = fd.ops.neg(x0)\n    fd.add_output(t0, stride_order={row_major:?})\n")
}

#[test]
fn a_column_major_input_is_staged_through_a_padded_tile() {
    let p = plan_of(&neg(&[33, 70], "Float", Some("[0, 1]")));
    let k = &p.kernels[0];
    assert_eq!(k.schedule, Schedule::Transpose, "{}", k.summary);
    // 70 < 64 * 2 on A would allow 64, but 33 < 64 on B: 32-wide tiles,
    // ceil(70 / 32) * ceil(33 / 32) = 3 * 2 blocks of 32 x 8 threads.
    assert_eq!((k.grid, k.block), ([6, 1, 1], [32, 8, 1]));
    assert!(p.source.contains("__shared__ float tile0[32][33];"), "{}", p.source);
    assert!(p.source.contains("__syncthreads();"));
    // Edge tiles are predicated on both dims.
    assert!(p.source.contains("if (d1 < 70 && d0 < 33)"), "{}", p.source);
}

#[test]
fn row_major_and_small_inputs_stay_pointwise() {
    for body in [
        neg(&[33, 70], "Float", None),
        neg(&[8, 70], "Float", Some("[0, 1]")),
        neg(&[70, 8], "Float", Some("[0, 1]")),
    ] {
        let p = plan_of(&body);
        assert_eq!(p.kernels[0].schedule, Schedule::Pointwise, "{body}");
        assert!(!p.source.contains("tile0["));
    }
}

#[test]
fn large_bf16_tiles_are_64_wide_and_keep_the_register_type() {
    let p = plan_of(&neg(&[8192, 1000], "BFloat16", Some("[0, 1]")));
    let k = &p.kernels[0];
    assert_eq!(k.schedule, Schedule::Transpose);
    // ceil(1000 / 64) * (8192 / 64) = 16 * 128 blocks of 64 x 4 threads.
    assert_eq!((k.grid, k.block), ([16 * 128, 1, 1], [64, 4, 1]));
    assert!(p.source.contains("__shared__ float tile0[64][65];"), "{}", p.source);
    // 8192 rows fill whole tiles: only the 1000 columns are predicated.
    assert!(p.source.contains("if (d1 < 1000) {"), "{}", p.source);
    assert!(p.source.contains("if (da < 1000) {"), "{}", p.source);
    assert!(!p.source.contains("d0 < 8192"));
    // Phase 1 loads 8 bf16 as one 16-byte word (`Device::transpose_bytes`),
    // 8 threads to a tile row; phase 2 stores 4 of the float output as one.
    assert!(
        p.source.contains("__ldg(reinterpret_cast<const uint4*>(&in0[(db + (d1 * 8192))]))"),
        "{}",
        p.source
    );
    assert!(p.source.contains("const int lb = tid % 8 * 8;"), "{}", p.source);
    assert!(p.source.contains("*reinterpret_cast<uint4*>(&out0[(da + (d0 * 1000))])"), "{}", p.source);
    assert!(k.summary.contains("8 elements per read, 4 per store"), "{}", k.summary);
}

/// Plans under `dev` with the script's stride orders.
fn plan_on(body: &str, dev: Device) -> Plan {
    let f = script(body);
    plan(&f, &common::declared_layouts(&f), dev).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn accesses_narrow_to_what_the_extents_divide() {
    // f32: 4 elements make 16 bytes. B = 8192 takes them; A = 1000 = 8 x 125
    // takes 4 too. A = 66 = 2 x 33 takes 2 (8 bytes); B = 65 takes 1.
    let wide = plan_of(&neg(&[8192, 1000], "Float", Some("[0, 1]")));
    assert!(wide.kernels[0].summary.contains("4 elements per read, 4 per store"), "{}", wide.kernels[0].summary);
    let narrow = plan_of(&neg(&[65, 66], "Float", Some("[0, 1]")));
    assert!(narrow.kernels[0].summary.contains("1 elements per read, 2 per store"), "{}", narrow.kernels[0].summary);
    assert!(narrow.source.contains("*reinterpret_cast<uint2*>(&out0["), "{}", narrow.source);
}

#[test]
fn transpose_bytes_0_pairs_2_byte_reads_and_stores_elements() {
    let dev = Device { transpose_bytes: 0, ..Device::default() };
    let p = plan_on(&neg(&[8192, 1000], "BFloat16", Some("[0, 1]")), dev);
    assert!(
        p.source.contains("__ldg(reinterpret_cast<const unsigned int*>(&in0[(db + (d1 * 8192))]))"),
        "{}",
        p.source
    );
    assert!(p.source.contains("out0[(d1 + (d0 * 1000))] = "), "{}", p.source);
    assert!(!p.kernels[0].summary.contains("per store"));
}

#[test]
fn more_threads_than_a_tile_row_of_vectors_narrow_the_vectors() {
    // 32-wide tiles of bf16 at 512 threads: 8 elements each would need 128
    // tile rows per pass, more than the tile's 32; 2 each fill it exactly.
    let dev = Device { transpose_tile: 32, transpose_threads: 512, ..Device::default() };
    let p = plan_on(&neg(&[8192, 1024], "BFloat16", Some("[0, 1]")), dev);
    let k = &p.kernels[0];
    assert_eq!(k.block, [32, 16, 1]);
    assert!(k.summary.contains("2 elements per read, 2 per store"), "{}", k.summary);
}

#[test]
fn small_grids_take_32_wide_tiles() {
    // 256 x 1000 in 64-wide tiles is 64 blocks, under two per multiprocessor.
    let p = plan_of(&neg(&[256, 1000], "BFloat16", Some("[0, 1]")));
    let k = &p.kernels[0];
    assert_eq!((k.grid, k.block), ([32 * 8, 1, 1], [32, 8, 1]));
}

#[test]
fn an_output_with_a_stride_order_reads_its_row_major_input_through_a_tile() {
    let p = plan_of(
        &(define("x0", &[45, 66], "BFloat16", None)
            + "    t0 = fd.ops.neg(x0)\n    t1 = fd.ops.abs(x0)\n    fd.add_output(t0, stride_order=[0, 1])\n    fd.add_output(t1)\n"),
    );
    let s: Vec<Schedule> = p.kernels.iter().map(|k| k.schedule).collect();
    // The column-major output is the [66, 45] permute written row-major;
    // the row-major output is plain pointwise.
    assert!(s.contains(&Schedule::Transpose) && s.contains(&Schedule::Pointwise), "{s:?}");
    assert_eq!(p.outputs[0].strides, Some(vec![1, 45]));
}

#[test]
fn one_input_read_both_ways_gets_a_tile_per_read() {
    let p = plan_of(
        &(define("x0", &[65, 65], "Float", None)
            + "    t0 = fd.ops.permute(x0, dims=[1, 0])\n    t1 = fd.ops.add(x0, t0)\n    fd.add_output(t1)\n"),
    );
    assert_eq!(p.kernels[0].schedule, Schedule::Transpose);
    assert!(p.source.contains("tile0[la][lb]") && p.source.contains("tile1[la][lb]"));
    // Each tile is filled walking threadIdx.x along its own consecutive dim.
    assert!(p.source.contains("const int lb = threadIdx.x;"));
    assert!(p.source.contains("const int la = threadIdx.x;"));
}

#[test]
fn three_dims_put_the_untiled_dim_on_blocks() {
    // [70, 3, 40] permuted [2, 1, 0]: A = dim 2 (70), B = dim 0 (40), dim 1
    // indexes blocks: ceil(70 / 64) * ceil(40 / 32)... 40 < 64, so 32-wide:
    // 3 * 2 * 3 blocks.
    let p = plan_of(
        &(define("x0", &[70, 3, 40], "Float", None)
            + "    t0 = fd.ops.permute(x0, dims=[2, 1, 0])\n    t1 = fd.ops.exp(t0)\n    fd.add_output(t1, stride_order=[2, 1, 0])\n"),
    );
    let k = &p.kernels[0];
    assert_eq!(k.schedule, Schedule::Transpose, "{}", k.summary);
    assert_eq!(k.grid, [18, 1, 1]);
    assert!(p.source.contains("const int d1 = tile_r;"), "{}", p.source);
}

#[test]
fn a_transposed_input_read_in_a_pad_branch_stays_pointwise() {
    // The tile would be filled unconditionally; a read inside the pad's
    // branch may lie outside the input, so the input is never tiled.
    let p = plan_of(
        &(define("x0", &[40, 40], "Float", Some("[0, 1]"))
            + "    t0 = fd.ops.pad(x0, [1, 1, 0, 0])\n    t1 = fd.ops.slice(t0, start_indices=[0, 1], end_indices=[40, 41], strides=[1, 1])\n    t2 = fd.ops.add(t1, x0)\n    fd.add_output(t2, stride_order=[1, 0])\n"),
    );
    assert_eq!(p.kernels[0].schedule, Schedule::Pointwise);
}
