//! Reductions over elements contiguous in memory (a column sum of a
//! column-major matrix) get a group of lanes per result sized to the work,
//! and strided loops issue several iterations' loads under one bound check.

use fusebench_codegen::{plan, Device, Plan, Schedule};

mod common;
use common::script;

/// A sum over dim 0 of a [rows, cols] f32 matrix stored column-major.
fn column_sum(rows: usize, cols: usize, dev: Device) -> Plan {
    let f = script(&format!(
        "    x = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])\n    y = fd.ops.sum(x, dims=[0])\n    fd.add_output(y)\n"
    ));
    plan(&f, &[Some((vec![1, rows as i64], 0))], dev).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_group_of_lanes_follows_the_work() {
    // 2048 f32 per result = 512 vectors of 4; 1536 results leave room for
    // 128 lanes each, folded across warps in shared memory.
    let p = column_sum(2048, 1536, Device::default());
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.kernels[0].schedule, Schedule::Contiguous);
    assert!(p.kernels[0].summary.contains("128 lanes each, 2 per block"), "{}", p.kernels[0].summary);
    assert!(p.source.contains("fb_gw"), "{}", p.source);
    // 20 elements per result (five vectors; 16 or fewer are summed where
    // read): two lanes each.
    let p = column_sum(20, 1000, Device::default());
    assert!(p.kernels[0].summary.contains("2 lanes each, 128 per block"), "{}", p.kernels[0].summary);
    assert!(p.source.contains("for (int m = 1; m > 0; m >>= 1)"), "{}", p.source);
    // 17 elements: odd, so read one at a time, 17 "vectors" over 8 lanes.
    let p = column_sum(17, 1000, Device::default());
    assert!(p.kernels[0].summary.contains("8 lanes each, 32 per block, 1 per load"), "{}", p.kernels[0].summary);
    // Fewer results than four per SM: the grid schedule splits each.
    let p = column_sum(100_000, 300, Device::default());
    assert_ne!(p.kernels[0].schedule, Schedule::Contiguous);
}

#[test]
fn the_lane_groups_widen_with_the_threads_they_fill() {
    // 7168 results of 4096 floats: 1024 threads per SM over them give a warp
    // each, 8 per block (`Device::contiguous_fill`); 8192 a block of 256 each.
    let k = |fill| column_sum(4096, 7168, Device { contiguous_fill: fill, ..Device::default() }).kernels[0].clone();
    let (narrow, wide) = (k(1024), k(8192));
    assert!(narrow.summary.contains("32 lanes each, 8 per block"), "{}", narrow.summary);
    assert_eq!(narrow.grid[0], 896);
    assert!(wide.summary.contains("256 lanes each, 1 per block"), "{}", wide.summary);
    assert_eq!(wide.grid[0], 7168);
}

#[test]
fn strided_loops_issue_a_batch_of_loads_then_the_rest() {
    let f = script("    x = fd.define_tensor(shape=[1048576], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n    y = fd.ops.sum(x, dims=[0])\n    fd.add_output(y)\n");
    let p = plan(&f, &[None], Device::default()).unwrap();
    let g = &p.source[p.source.find("fb_r0_g0(").unwrap()..];
    // Four copies of the body under one check, then the rest as one more
    // batch of three, the last two folding only where their flag holds.
    assert!(g.contains("+ (int)(3) * (") && g.contains("+= (int)(4) * ("), "{g}");
    assert_eq!(g.matches("const bool fb_ok").count(), 2, "{g}");
    assert_eq!(g.matches("if (fb_ok").count(), 2 * 4, "{g}");
    // The partials read the input for the last time: streaming loads.
    assert_eq!(g.matches("__ldcs(").count(), 7, "{g}");
    assert!(!g.contains("__ldg("), "{g}");
    let one = Device {
        loads_in_flight: 1,
        ..Device::default()
    };
    let p = plan(&f, &[None], one).unwrap();
    let g = &p.source[p.source.find("fb_r0_g0(").unwrap()..p.source.find("fb_r0_c0(").unwrap()];
    assert!(!g.contains("fb_at") && g.matches("__ldcs(").count() == 1, "{g}");
    // FUSEBENCH_LOADS=nc puts every kernel back on the read-only path.
    let nc = Device {
        load_hint: Some(fusebench_codegen::LoadHint::ReadOnly),
        ..Device::default()
    };
    let p = plan(&f, &[None], nc).unwrap();
    let g = &p.source[p.source.find("fb_r0_g0(").unwrap()..];
    assert!(g.contains("__ldg(") && !g.contains("__ldcs("), "{g}");
}

/// A column-major backward RMSNorm (as `bench/patterns.py` writes it): the
/// weight gradient sums over dim 0, which is fastest in memory; the input
/// gradient reads the per-row sum `ps` (over dim 1, stored first) at every
/// element. `extra` appends ops before the outputs.
fn column_major_rmsnorm_backward(dev: Device, extra: &str) -> Plan {
    let f = script(&format!(
        "    t0 = fd.define_tensor(shape=[1024, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0, 1])
    t1 = fd.define_tensor(shape=[1024, 2048], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0, 1])
    t2 = fd.define_tensor(shape=[1024, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)
    t3 = fd.define_tensor(shape=[2048], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    f0 = fd.ops.cast(t0, dtype=DataType.Float)
    f1 = fd.ops.cast(t1, dtype=DataType.Float)
    f3 = fd.ops.cast(t3, dtype=DataType.Float)
    rb = fd.ops.expand(t2, shape=[1024, 2048])
    xh = fd.ops.mul(f0, rb)
    gxh = fd.ops.mul(f1, xh)
    gwt = fd.ops.sum(gxh, dims=[0])
    wb = fd.ops.broadcast_in_dim(f3, shape=[1024, 2048], broadcast_dims=[1])
    gw = fd.ops.mul(f1, wb)
    p = fd.ops.mul(gw, xh)
    ps = fd.ops.sum(p, dims=[1], keepdim=True)
    pmb = fd.ops.expand(ps, shape=[1024, 2048])
    t = fd.ops.mul(xh, pmb)
    d = fd.ops.sub(gw, t)
    gx = fd.ops.mul(d, rb)
{extra}    o0 = fd.ops.cast(gx, dtype=DataType.BFloat16)
    o1 = fd.ops.cast(gwt, dtype=DataType.BFloat16)
    fd.add_output(o0)
    fd.add_output(o1)
"
    ));
    let layouts = common::declared_layouts(&f);
    plan(&f, &layouts, dev).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_elementwise_gradient_joins_the_contiguous_weight_gradient() {
    // Off: the weight gradient, the row sum (partials and a combine) and the
    // gradient each read the two row-sized inputs.
    let apart = column_major_rmsnorm_backward(Device { contiguous_join: false, ..Device::default() }, "");
    assert_eq!(apart.kernels.len(), 4, "{:?}", apart.kernels.iter().map(|k| &k.summary).collect::<Vec<_>>());
    // Joined (the default): the row sum first, then one contiguous kernel sums the weight
    // gradient and writes the gradient (its permute into memory order) from
    // the same loads, a 16-byte store per vector.
    let joined = column_major_rmsnorm_backward(Device::default(), "");
    let names: Vec<_> = joined.kernels.iter().map(|k| k.schedule).collect();
    assert_eq!(names, [Schedule::OuterPartial, Schedule::OuterCombine, Schedule::Contiguous]);
    let k = &joined.kernels[2];
    assert!(k.summary.contains("writes [o1, o0_alloc]"), "{}", k.summary);
    let code = common::kernels(&joined);
    let body = &code[code.find(&format!(" {}(", k.name)).unwrap()..];
    // The batch's first copy: each input loaded once for both.
    let copy = &body[..body.find("const int r = fb_at1 + (int)(1)").unwrap()];
    assert_eq!(copy.matches("&in0[").count(), 1, "{copy}");
    assert_eq!(copy.matches("&in1[").count(), 1, "{copy}");
    assert!(copy.contains("*reinterpret_cast<uint4*>(&out0[((o * 1024) + r)])"), "{copy}");
}

#[test]
fn an_output_that_reads_the_contiguous_sum_stays_apart() {
    // gx shifted by the weight gradient it sits beside: it cannot be written
    // before that sum is done, so no join.
    let extra = "    gwb = fd.ops.broadcast_in_dim(gwt, shape=[1024, 2048], broadcast_dims=[1])\n    gx = fd.ops.add(gx, gwb)\n";
    let p = column_major_rmsnorm_backward(Device::default(), extra);
    assert!(p.kernels.iter().all(|k| !k.summary.contains("o0_alloc]") || k.schedule != Schedule::Contiguous));
    assert_eq!(p.kernels.len(), 4, "{:?}", p.kernels.iter().map(|k| &k.summary).collect::<Vec<_>>());
}
