//! Norms over channels (bench/patterns.py --family channels), three settings
//! written without a GPU:
//! - `Device::reshaped_outputs`: a group norm normalizes [N, G, C / G, H, W]
//!   and reshapes the result back to [N, C, H, W]; its row kernel writes that
//!   output, the plan keeps the output's logical shape, and an output that is
//!   a view of another output stays one.
//! - `Device::rows_store`: an instance norm backward's row kernel stores the
//!   plane sums the weight's gradient sums again.
//! - `Device::stat_epilogue`: a batch norm's rsqrt(var + eps) and running
//!   statistics are written by the kernel that finishes the mean and variance.

use fusebench_codegen::plan::OutputSource;
use fusebench_codegen::{plan, Device, Plan};

mod common;
use common::script;

/// A group norm of [2, 8, 3, 5] in 4 groups, as bench/patterns.py writes it,
/// with `extra` appended.
fn groupnorm(extra: &str) -> fusebench_ir::Fusion {
    script(&format!(
        "    t0 = fd.define_tensor(shape=[2, 8, 3, 5], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    t1 = fd.define_tensor(shape=[8], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    f0 = fd.ops.cast(t0, dtype=DataType.Float)
    f1 = fd.ops.cast(t1, dtype=DataType.Float)
    x5 = fd.ops.reshape(f0, new_shape=[2, 4, 2, 3, 5])
    var, mean = fd.ops.var_mean(x5, dims=[2, 3, 4], correction=0, keepdim=False)
    ve = fd.ops.add(var, 1e-05)
    rs = fd.ops.rsqrt(ve)
    mb = fd.ops.broadcast_in_dim(mean, shape=[2, 4, 2, 3, 5], broadcast_dims=[0, 1])
    d = fd.ops.sub(x5, mb)
    rb = fd.ops.broadcast_in_dim(rs, shape=[2, 4, 2, 3, 5], broadcast_dims=[0, 1])
    xn = fd.ops.mul(d, rb)
    w2 = fd.ops.reshape(f1, new_shape=[4, 2])
    wb = fd.ops.broadcast_in_dim(w2, shape=[2, 4, 2, 3, 5], broadcast_dims=[1, 2])
    y5 = fd.ops.mul(xn, wb)
    y = fd.ops.reshape(y5, new_shape=[2, 8, 3, 5])
    o0 = fd.ops.cast(y, dtype=DataType.BFloat16)
    fd.add_output(o0)
{extra}"
    ))
}

fn planned(f: &fusebench_ir::Fusion, on: bool) -> Plan {
    plan(f, &[None, None], Device { reshaped_outputs: on, ..Device::default() }).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_group_norms_output_is_written_by_its_row_kernel() {
    let f = groupnorm("");
    let off = planned(&f, false);
    assert_eq!(off.kernels.len(), 2, "{:#?}", off.kernels);
    let on = planned(&f, true);
    assert_eq!(on.kernels.len(), 1, "{:#?}", on.kernels);
    assert_eq!(on.kernels[0].choice.as_ref().unwrap().schedule, "rowwise");
    // The same buffer as the output planned as written: [2, 8, 3, 5], dense.
    assert_eq!(on.outputs[0].shape, vec![2, 8, 3, 5]);
    assert_eq!(on.outputs[0].shape, off.outputs[0].shape);
    assert!(on.outputs[0].strides.is_none());
    assert!(matches!(on.outputs[0].source, OutputSource::Written));
}

#[test]
fn a_reshape_of_another_output_stays_a_view() {
    // y5 itself an output: y, its reshape with nothing after it, is a view of it.
    let f = groupnorm("    fd.add_output(y5)\n    fd.add_output(y)\n");
    let on = planned(&f, true);
    assert!(matches!(on.outputs[2].source, OutputSource::OutputView { output: 1, .. }), "{:#?}", on.outputs[2]);
    assert_eq!(on.outputs[2].shape, vec![2, 8, 3, 5]);
    // o0 (a cast after the reshape) is still written by the row kernel.
    assert_eq!(on.kernels.len(), 1, "{:#?}", on.kernels);
}

#[test]
fn a_reshape_with_no_normalization_of_its_shape_is_left() {
    // A pointwise value reshaped: no reduction reads a value of its shape.
    let f = script(
        "    t0 = fd.define_tensor(shape=[4, 6], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    e = fd.ops.exp(t0)
    y = fd.ops.reshape(e, new_shape=[24])
    o = fd.ops.neg(y)
    fd.add_output(o)
",
    );
    let off = plan(&f, &[None], Device::default()).unwrap();
    let on = plan(&f, &[None], Device { reshaped_outputs: true, ..Device::default() }).unwrap();
    assert_eq!(off.source, on.source);
    assert_eq!(off.kernels.len(), on.kernels.len());
}

/// An instance norm backward over [2, 3, 4, 5] (bench/patterns.py's
/// instancenorm_bwd): the two sums per plane feed the gradient on chip and,
/// summed again over the batch, the weight's and bias's gradients.
fn instancenorm_bwd() -> fusebench_ir::Fusion {
    script(
        "    t0 = fd.define_tensor(shape=[2, 3, 4, 5], contiguity=[True, True, True, True], dtype=DataType.Float, is_cpu=False)
    t1 = fd.define_tensor(shape=[2, 3, 4, 5], contiguity=[True, True, True, True], dtype=DataType.Float, is_cpu=False)
    t2 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    t3 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    t4 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    mb = fd.ops.broadcast_in_dim(t3, shape=[2, 3, 4, 5], broadcast_dims=[0, 1])
    rb = fd.ops.broadcast_in_dim(t4, shape=[2, 3, 4, 5], broadcast_dims=[0, 1])
    d = fd.ops.sub(t0, mb)
    xh = fd.ops.mul(d, rb)
    gs = fd.ops.sum(t1, dims=[2, 3], keepdim=False)
    gx = fd.ops.mul(t1, xh)
    gxs = fd.ops.sum(gx, dims=[2, 3], keepdim=False)
    m1 = fd.ops.mul(gs, 0.05)
    m2 = fd.ops.mul(gxs, 0.05)
    m1b = fd.ops.broadcast_in_dim(m1, shape=[2, 3, 4, 5], broadcast_dims=[0, 1])
    m2b = fd.ops.broadcast_in_dim(m2, shape=[2, 3, 4, 5], broadcast_dims=[0, 1])
    e1 = fd.ops.sub(t1, m1b)
    e2 = fd.ops.mul(xh, m2b)
    e = fd.ops.sub(e1, e2)
    wb = fd.ops.broadcast_in_dim(t2, shape=[2, 3, 4, 5], broadcast_dims=[1])
    sc = fd.ops.mul(wb, rb)
    gi = fd.ops.mul(e, sc)
    gw = fd.ops.sum(gxs, dims=[0], keepdim=False)
    gb = fd.ops.sum(gs, dims=[0], keepdim=False)
    fd.add_output(gi)
    fd.add_output(gw)
    fd.add_output(gb)
",
    )
}

/// `Device::rows_store`: the row kernel that keeps the plane sums on chip
/// stores them for the sums over the batch, instead of two kernels
/// computing them first from the inputs again.
#[test]
fn a_row_kernel_stores_the_sums_later_kernels_read() {
    let f = instancenorm_bwd();
    let layouts = vec![None; 5];
    let off = plan(&f, &layouts, Device::default()).unwrap();
    let on = plan(&f, &layouts, Device { rows_store: true, ..Device::default() }).unwrap();
    assert_eq!(off.kernels.len(), 4, "{:#?}", off.kernels);
    assert_eq!(on.kernels.len(), 2, "{:#?}", on.kernels);
    let stored: Vec<&str> = on.temps.iter().map(|t| t.what.as_str()).collect();
    assert_eq!(stored, ["gs (stored)", "gxs (stored)"]);
}

/// A batch norm forward over [4, 3, 5, 7] with its running statistics, as
/// bench/patterns.py writes it.
#[test]
fn a_batch_norms_per_channel_outputs_are_written_by_the_statistics_kernel() {
    let f = script(
        "    t0 = fd.define_tensor(shape=[4, 3, 5, 7], contiguity=[True, True, True, True], dtype=DataType.Float, is_cpu=False)
    t1 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    var, mean = fd.ops.var_mean(t0, dims=[0, 2, 3], correction=0, keepdim=False)
    ve = fd.ops.add(var, 1e-05)
    rs = fd.ops.rsqrt(ve)
    mb = fd.ops.broadcast_in_dim(mean, shape=[4, 3, 5, 7], broadcast_dims=[1])
    rb = fd.ops.broadcast_in_dim(rs, shape=[4, 3, 5, 7], broadcast_dims=[1])
    d = fd.ops.sub(t0, mb)
    y = fd.ops.mul(d, rb)
    rm0 = fd.ops.mul(t1, 0.9)
    rm1 = fd.ops.mul(mean, 0.1)
    rmn = fd.ops.add(rm0, rm1)
    fd.add_output(y)
    fd.add_output(mean)
    fd.add_output(rs)
    fd.add_output(rmn)
",
    );
    let layouts = vec![None; 2];
    let off = plan(&f, &layouts, Device::default()).unwrap();
    let on = plan(&f, &layouts, Device { stat_epilogue: true, ..Device::default() }).unwrap();
    assert_eq!(on.kernels.len() + 1, off.kernels.len(), "{:#?}", on.kernels);
    let last_stats = on.kernels.iter().rev().find(|k| k.summary.contains("variance")).unwrap();
    assert!(last_stats.summary.contains("writes [mean, rs, rmn]"), "{}", last_stats.summary);
}

/// `Device::grid_moments`: a batch norm's mean and variance over [N, H, W]
/// of a channels-first image (few results, many elements each: the grid
/// schedule) in one read, a partial kernel and a combine, where two rounds
/// took two of each.
#[test]
fn a_grid_mean_and_variance_takes_one_read() {
    let f = script(
        "    t0 = fd.define_tensor(shape=[8, 4, 96, 96], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    f0 = fd.ops.cast(t0, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(f0, dims=[0, 2, 3], correction=0, keepdim=False)
    fd.add_output(var)
    fd.add_output(mean)
",
    );
    let off = plan(&f, &[None], Device::default()).unwrap();
    let on = plan(&f, &[None], Device { grid_moments: true, ..Device::default() }).unwrap();
    let schedules = |p: &Plan| p.kernels.iter().map(|k| format!("{:?}", k.schedule)).collect::<Vec<_>>();
    // The outputs are written by a pointwise kernel after either (by the
    // combine with `Device::stat_epilogue`).
    assert_eq!(schedules(&off), ["GridPartial", "OuterCombine", "GridPartial", "OuterCombine", "Pointwise"], "{:#?}", off.kernels);
    assert_eq!(schedules(&on), ["GridPartial", "OuterCombine", "Pointwise"], "{:#?}", on.kernels);
    assert!(on.kernels[0].summary.contains("in one pass"), "{}", on.kernels[0].summary);
    // The partial kernel folds each thread's elements, then merges down
    // each warp and warp by warp; the combine merges the blocks in order.
    assert!(on.source.contains("__shfl_down_sync"));
    assert!(on.source.contains("fb_rcp_count(fb_n)"));
}

/// `Device::siblings`: a batch norm backward's two sums per channel (of the
/// gradient and of the gradient times the normalized input) over a
/// channels-first image are one grid kernel reading both once and one
/// combine that also writes the weight's and bias's gradients.
#[test]
fn two_sums_over_the_same_elements_share_their_kernels() {
    let f = script(
        "    t0 = fd.define_tensor(shape=[8, 4, 96, 96], contiguity=[True, True, True, True], dtype=DataType.Float, is_cpu=False)
    t1 = fd.define_tensor(shape=[8, 4, 96, 96], contiguity=[True, True, True, True], dtype=DataType.Float, is_cpu=False)
    gs = fd.ops.sum(t1, dims=[0, 2, 3], keepdim=False)
    gx = fd.ops.mul(t1, t0)
    gxs = fd.ops.sum(gx, dims=[0, 2, 3], keepdim=False)
    fd.add_output(gxs)
    fd.add_output(gs)
",
    );
    let off = plan(&f, &[None, None], Device::default()).unwrap();
    let on = plan(&f, &[None, None], Device { siblings: true, ..Device::default() }).unwrap();
    let schedules = |p: &Plan| p.kernels.iter().map(|k| format!("{:?}", k.schedule)).collect::<Vec<_>>();
    // Apart, the two outputs read two kernels' results: a pointwise kernel
    // writes them; together, their combine does.
    assert_eq!(schedules(&off), ["GridPartial", "OuterCombine", "GridPartial", "OuterCombine", "Pointwise"], "{:#?}", off.kernels);
    assert_eq!(schedules(&on), ["GridPartial", "OuterCombine"], "{:#?}", on.kernels);
    assert!(on.kernels[0].summary.contains("of t1 and of gx"), "{}", on.kernels[0].summary);
    assert!(on.kernels[1].summary.contains("gs, gxs"), "{}", on.kernels[1].summary);
}

/// The same two sums over a channels-last image (the outer schedule: a
/// thread per channel, the images' pixels split over blocks) share their
/// partial kernel and combine too.
#[test]
fn two_outer_sums_over_the_same_elements_share_their_kernels() {
    let f = script(
        "    t0 = fd.define_tensor(shape=[8, 64, 28, 28], contiguity=[True, True, True, True], dtype=DataType.Float, is_cpu=False, stride_order=[3, 0, 2, 1])
    t1 = fd.define_tensor(shape=[8, 64, 28, 28], contiguity=[True, True, True, True], dtype=DataType.Float, is_cpu=False, stride_order=[3, 0, 2, 1])
    gs = fd.ops.sum(t1, dims=[0, 2, 3], keepdim=False)
    gx = fd.ops.mul(t1, t0)
    gxs = fd.ops.sum(gx, dims=[0, 2, 3], keepdim=False)
    fd.add_output(gxs)
    fd.add_output(gs)
",
    );
    let layouts = vec![Some((vec![50176, 1, 1792, 64], 0)); 2];
    let off = plan(&f, &layouts, Device::default()).unwrap();
    let on = plan(&f, &layouts, Device { siblings: true, ..Device::default() }).unwrap();
    let schedules = |p: &Plan| p.kernels.iter().map(|k| format!("{:?}", k.schedule)).collect::<Vec<_>>();
    assert_eq!(schedules(&off), ["OuterPartial", "OuterCombine", "OuterPartial", "OuterCombine", "Pointwise"], "{:#?}", off.kernels);
    assert_eq!(schedules(&on), ["OuterPartial", "OuterCombine"], "{:#?}", on.kernels);
    assert!(on.kernels[0].summary.contains("of t1 and of gx"), "{}", on.kernels[0].summary);
}
