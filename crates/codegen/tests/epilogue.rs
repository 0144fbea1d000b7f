//! Outputs computed from one reduction's results alone are written by the
//! kernel that finishes that reduction, not by a pointwise kernel of their
//! own; one that reads the results in another order keeps its own kernel.

use fusebench_codegen::{plan, Device, Schedule};

mod common;
use common::script;

fn schedules(body: &str) -> Vec<Schedule> {
    let p = plan(&script(body), &[None], Device::default()).unwrap();
    p.kernels.iter().map(|k| k.schedule).collect()
}

const SUM: &str = "    x = fd.define_tensor(shape=[SHAPE], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n    f0 = fd.ops.cast(x, dtype=DataType.Float)\n    y = fd.ops.sum(f0, dims=[DIMS])\n    o = fd.ops.cast(y, dtype=DataType.BFloat16)\n    fd.add_output(o)\n";

fn sum(shape: &str, dims: &str) -> String {
    SUM.replace("SHAPE", shape).replace("DIMS", dims)
}

#[test]
fn the_cast_of_a_row_sum_is_written_by_the_row_kernel() {
    assert_eq!(schedules(&sum("64, 1000", "1")), [Schedule::InnerPersistent]);
}

fn last_block() -> Device {
    Device {
        last_block_combine: true,
        ..Device::default()
    }
}

#[test]
fn the_cast_of_a_column_sum_is_written_by_the_last_block_or_the_combine_kernel() {
    let f = script(&sum("2048, 1000", "0"));
    let p = plan(&f, &[None], last_block()).unwrap();
    let s: Vec<Schedule> = p.kernels.iter().map(|k| k.schedule).collect();
    assert_eq!(s, [Schedule::OuterPartial]);
    // The last block of a column reads the partials from L2 and writes the cast.
    let last = &p.source[p.source.find("if (fb_last)").expect("a last-block combine")..];
    assert!(last.contains("__ldcg(&tmp0[") && last.contains("out0[o] = "), "{}", p.source);
    let p = plan(&f, &[None], Device::default()).unwrap();
    let s: Vec<Schedule> = p.kernels.iter().map(|k| k.schedule).collect();
    assert_eq!(s, [Schedule::OuterPartial, Schedule::OuterCombine]);
}

#[test]
fn the_cast_of_a_sum_of_everything_is_written_by_the_last_block_or_the_combine_kernel() {
    let f = script(&sum("2048, 1000", "0, 1"));
    let p = plan(&f, &[None], last_block()).unwrap();
    let s: Vec<Schedule> = p.kernels.iter().map(|k| k.schedule).collect();
    assert_eq!(s, [Schedule::GridPartial]);
    // The counters start zeroed and the last block leaves them so.
    assert!(p.temps.iter().any(|t| t.zeroed && t.what.starts_with("counters of")), "{:?}", p.temps);
    let last = &p.source[p.source.find("if (fb_last)").expect("a last-block combine")..];
    assert!(last.contains("fb_block_sum_f") && last.contains("out0[o] = ") && last.contains("tmp1[o] = 0;"), "{}", p.source);
    let p = plan(&f, &[None], Device::default()).unwrap();
    let s: Vec<Schedule> = p.kernels.iter().map(|k| k.schedule).collect();
    assert_eq!(s, [Schedule::GridPartial, Schedule::OuterCombine]);
    // One result: the combine gives it a block, not one thread.
    assert_eq!(p.kernels[1].grid, [1, 1, 1]);
    assert!(p.source.contains("fb_block_sum_f"), "{}", p.source);
}

#[test]
fn results_read_in_another_order_keep_a_kernel_of_their_own() {
    // [8, 6, 40] summed over its last dim, then transposed: element (i, j)
    // of the output reads result (j, i), another thread's.
    let body = "    x = fd.define_tensor(shape=[8, 6, 40], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)\n    y = fd.ops.sum(x, dims=[2])\n    z = fd.ops.permute(y, dims=[1, 0])\n    w = fd.ops.exp(z)\n    fd.add_output(w)\n";
    assert_eq!(
        schedules(body),
        [Schedule::InnerPersistent, Schedule::Pointwise]
    );
}
