//! A stored sum over rows (a bias gradient) goes to the outer schedule,
//! unless elementwise outputs over the same rows (the gradient it sums) would
//! join a row kernel: then one kernel reads the inputs once and writes both
//! (`Device::column_sums`, `FUSEBENCH_COLUMN_SUMS`).

use fusebench_codegen::{plan, ColumnSums, Device, Schedule};

mod common;

fn planned(body: &str, column_sums: ColumnSums) -> fusebench_codegen::Plan {
    let f = common::script(body);
    let layouts = vec![None; f.inputs.len()];
    plan(&f, &layouts, Device { column_sums, ..Device::default() }).unwrap()
}

/// A GELU backward (the tanh form's derivative, shortened) and its bias
/// gradient: the sum over rows of the gradient it writes.
const GRAD_AND_BIAS: &str = "    t0 = fd.define_tensor(shape=[512, 1536], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    t1 = fd.define_tensor(shape=[512, 1536], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    x = fd.ops.cast(t0, dtype=DataType.Float)
    g = fd.ops.cast(t1, dtype=DataType.Float)
    th = fd.ops.tanh(x)
    t2 = fd.ops.mul(th, th)
    d = fd.ops.sub(1.0, t2)
    gx = fd.ops.mul(g, d)
    gb = fd.ops.sum(gx, dims=[0])
    o0 = fd.ops.cast(gx, dtype=DataType.BFloat16)
    o1 = fd.ops.cast(gb, dtype=DataType.BFloat16)
    fd.add_output(o0)
    fd.add_output(o1)
";

const SUM_ONLY: &str = "    t0 = fd.define_tensor(shape=[512, 1536], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    x = fd.ops.cast(t0, dtype=DataType.Float)
    gb = fd.ops.sum(x, dims=[0])
    o1 = fd.ops.cast(gb, dtype=DataType.BFloat16)
    fd.add_output(o1)
";

fn outer_partials(p: &fusebench_codegen::Plan) -> usize {
    p.kernels.iter().filter(|k| k.schedule == Schedule::OuterPartial).count()
}

#[test]
fn a_bias_gradient_is_summed_by_the_kernel_that_writes_the_gradient() {
    let p = planned(GRAD_AND_BIAS, ColumnSums::Joined);
    // The row kernel (writing o0 and the column partials) and its combine.
    assert_eq!(p.kernels.len(), 2, "{:#?}", p.kernels);
    assert_eq!(outer_partials(&p), 0, "{:#?}", p.kernels);
    assert!(p.kernels[0].name.starts_with("fb_w"), "{:#?}", p.kernels);
    // The outer schedule instead: its partials, their combine, and a
    // pointwise kernel that reads the inputs and computes the gradient again.
    let p = planned(GRAD_AND_BIAS, ColumnSums::Outer);
    assert_eq!((p.kernels.len(), outer_partials(&p)), (3, 1), "{:#?}", p.kernels);
}

#[test]
fn a_sum_alone_keeps_the_outer_schedule() {
    let p = planned(SUM_ONLY, ColumnSums::Joined);
    assert_eq!(outer_partials(&p), 1, "{:#?}", p.kernels);
    let why = p.kernels[0].choice.as_ref().map(|c| format!("{c:?}")).unwrap_or_default();
    assert!(why.contains("no elementwise output over the same rows"), "{why}");
    let p = planned(SUM_ONLY, ColumnSums::Rowwise);
    assert_eq!(outer_partials(&p), 0, "{:#?}", p.kernels);
}

/// The input minus its column sums: the elementwise outputs read the sum,
/// which is whole only after every row was read, so they cannot join the
/// kernel that sums (once refused: "reduction result ... is neither computed
/// in this kernel nor stored by an earlier one"). The sum is stored, then an
/// elementwise kernel reads it.
#[test]
fn outputs_that_read_the_column_sums_run_after_them() {
    let body = "    t0 = fd.define_tensor(shape=[4200, 17], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    s = fd.ops.sum(t0, dims=[0], keepdim=True)
    o = fd.ops.sub(t0, s)
    fd.add_output(o)
";
    for column_sums in [ColumnSums::Joined, ColumnSums::Outer] {
        let p = planned(body, column_sums);
        let last = p.kernels.last().unwrap();
        assert_eq!(last.schedule, Schedule::Pointwise, "{:#?}", p.kernels);
        assert!(p.kernels.len() >= 2, "{:#?}", p.kernels);
    }
}

#[test]
fn outputs_that_read_a_second_sum_over_the_same_rows_run_after_it() {
    // The minimum and the sum over rows join one row kernel; x / sum is
    // written after it, not beside the minimum (seed 7, fusion 35525).
    let body = "    t0 = fd.define_tensor(shape=[129, 8, 3], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    x = fd.ops.sum(t0, dims=[1], keepdim=True)
    lo = fd.ops.min(x, dims=[0], keepdim=True)
    s = fd.ops.sum(x, dims=[0], keepdim=False)
    o = fd.ops.div(x, s)
    fd.add_output(lo)
    fd.add_output(o)
";
    for column_sums in [ColumnSums::Joined, ColumnSums::Outer] {
        let p = planned(body, column_sums);
        let last = p.kernels.last().unwrap();
        assert_eq!(last.schedule, Schedule::Pointwise, "{:#?}", p.kernels);
    }
}
