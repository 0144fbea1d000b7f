//! Totals over rows of per-row values (issue 14): a cross-entropy's mean over
//! rows of logsumexp(x) - x[row, target[row]] is planned as one row kernel,
//! which keeps the row max and the row sum of exp on chip, computes each
//! row's value with its gather and adds it to a per-block partial, and one
//! combine kernel that folds the partials and writes the scaled loss.

use fusebench_codegen::{plan, Device, Plan};

mod common;
use common::script;

/// bench/patterns.py's cross_entropy, rows x cols of `dtype`.
fn cross_entropy(rows: usize, cols: usize, dtype: &str) -> fusebench_ir::Fusion {
    let scale = 1.0 / rows as f64;
    script(&format!(
        "    t0 = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.{dtype}, is_cpu=False)
    t1 = fd.define_tensor(shape=[{rows}], contiguity=[True], dtype=DataType.Int, is_cpu=False)
    f0 = fd.ops.cast(t0, dtype=DataType.Float)
    m = fd.ops.max(f0, dims=[1], keepdim=True)
    mb = fd.ops.expand(m, shape=[{rows}, {cols}])
    d = fd.ops.sub(f0, mb)
    e = fd.ops.exp(d)
    s = fd.ops.sum(e, dims=[1], keepdim=True)
    ls = fd.ops.log(s)
    lse = fd.ops.add(ls, m)
    ib = fd.ops.broadcast_in_dim(t1, shape=[{rows}, 1], broadcast_dims=[0])
    picked = fd.ops.take_along_axis(f0, ib, dim=1)
    nll = fd.ops.sub(lse, picked)
    tot = fd.ops.sum(nll, dims=[0, 1])
    loss = fd.ops.mul(tot, {scale:?})
    fd.add_output(loss)
"
    ))
}

fn planned(f: &fusebench_ir::Fusion, layouts: &[Option<(Vec<i64>, i64)>]) -> Plan {
    plan(f, layouts, Device::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// (kernel name, schedule chosen) per kernel.
fn chosen(p: &Plan) -> Vec<(String, String)> {
    p.kernels
        .iter()
        .map(|k| (k.name.clone(), k.choice.as_ref().unwrap().schedule.clone()))
        .collect()
}

/// Two kernels: the row kernel (m, s and the partials of tot) and the
/// combine that writes the loss; nothing of m or s stored.
fn assert_row_kernel_and_combine(p: &Plan, schedule: &str) {
    let names: Vec<(String, String)> = chosen(p);
    assert_eq!(
        names,
        [
            ("fb_t11".to_string(), schedule.to_string()),
            ("fb_t11_t".to_string(), schedule.to_string())
        ],
        "{:#?}",
        p.kernels
    );
    let row = &p.kernels[0].summary;
    assert!(row.contains("m, s, tot"), "{row}");
    assert!(p.kernels[1].summary.contains("writes [loss]"), "{}", p.kernels[1].summary);
    assert!(
        p.temps.iter().all(|t| !t.what.contains("(stored)")),
        "{:?}",
        p.temps.iter().map(|t| &t.what).collect::<Vec<_>>()
    );
}

#[test]
fn cross_entropy_rows_that_fit_the_registers_take_a_rowwise_kernel_and_a_combine() {
    for (rows, cols, dtype) in [
        (2048, 1000, "BFloat16"),
        (2048, 4096, "Float"),
        (32768, 4096, "BFloat16"),
        (256, 16384, "Half"),
    ] {
        let f = cross_entropy(rows, cols, dtype);
        assert_row_kernel_and_combine(&planned(&f, &[None, None]), "rowwise");
    }
}

#[test]
fn cross_entropy_of_a_sliced_input_is_planned_the_same() {
    let f = cross_entropy(2048, 1000, "BFloat16");
    let p = planned(&f, &[Some((vec![2000, 1], 0)), None]);
    assert_row_kernel_and_combine(&p, "rowwise");
}

#[test]
fn cross_entropy_rows_past_the_registers_take_the_loop_kernel_and_a_combine() {
    // (16-bit rows of 32064 are held as loaded: `Device::row_packed`.)
    for (cols, dtype) in [(32064, "Float"), (128256, "BFloat16")] {
        let f = cross_entropy(2048, cols, dtype);
        let p = planned(&f, &[None, None]);
        assert_row_kernel_and_combine(&p, "persistent");
        // The loop kernel's partials are the rows' values.
        assert_eq!(p.kernels[0].grid[0], 2048);
        assert!(p.kernels[1].summary.contains("2048 partials"), "{}", p.kernels[1].summary);
    }
}

#[test]
fn cross_entropy_of_a_few_rows_has_its_small_total_in_the_row_kernel() {
    // A sum over 8 rows would otherwise be computed inline by a pointwise
    // kernel reading stored m and s.
    let f = cross_entropy(8, 4096, "BFloat16");
    assert_row_kernel_and_combine(&planned(&f, &[None, None]), "rowwise");
}

/// One kernel, one block: it writes the total's result and the loss itself,
/// no partials and no combine.
fn assert_finished_in_the_row_kernel(p: &Plan, schedule: &str) {
    assert_eq!(chosen(p), [("fb_t11".to_string(), schedule.to_string())], "{:#?}", p.kernels);
    let k = &p.kernels[0];
    assert_eq!(k.grid, [1, 1, 1]);
    assert!(k.summary.contains("tot (") && k.summary.contains("finished here"), "{}", k.summary);
    let temps: Vec<&String> = p.temps.iter().map(|t| &t.what).collect();
    assert_eq!(temps, ["result of tot"], "{temps:?}");
    let src = &p.source;
    assert!(src.contains("tmp0[0] = ") && src.contains("out0[0] = "), "{src}");
}

#[test]
fn cross_entropy_of_one_row_finishes_its_total_in_the_row_kernel() {
    // A combine of one partial cost a launch (1.3 of 3.6 us on the H200).
    for (cols, dtype, schedule) in [
        (4096, "BFloat16", "rowwise"),
        (1000, "BFloat16", "rowwise"),
        // One row leaves the GPU's threads idle: held as floats, past the
        // registers (`Device::row_packed` holds rows as loaded only where
        // they are many).
        (32064, "BFloat16", "persistent"),
    ] {
        let f = cross_entropy(1, cols, dtype);
        assert_finished_in_the_row_kernel(&planned(&f, &[None, None]), schedule);
    }
}

#[test]
fn a_total_of_per_row_values_joins_the_normalization_that_writes_the_rows() {
    // An RMSNorm that also returns the mean over rows of each row's inverse
    // RMS: the normalization kernel accumulates it; the combine writes it.
    let f = script(
        "    x0 = fd.define_tensor(shape=[512, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    f0 = fd.ops.cast(x0, dtype=DataType.Float)
    q = fd.ops.mul(f0, f0)
    ss = fd.ops.sum(q, dims=[1], keepdim=True)
    rs = fd.ops.rsqrt(ss)
    rb = fd.ops.expand(rs, shape=[512, 4096])
    n = fd.ops.mul(f0, rb)
    o0 = fd.ops.cast(n, dtype=DataType.BFloat16)
    t = fd.ops.sum(rs, dims=[0, 1])
    mt = fd.ops.mul(t, 0.001953125)
    fd.add_output(o0)
    fd.add_output(mt)
",
    );
    let p = planned(&f, &[None]);
    assert_eq!(
        chosen(&p),
        [
            ("fb_n0".to_string(), "rowwise".to_string()),
            ("fb_n0_t".to_string(), "rowwise".to_string())
        ]
    );
    assert!(p.kernels[1].summary.contains("writes [mt]"), "{}", p.kernels[1].summary);
}

#[test]
fn a_total_read_by_a_stored_reduction_falls_back_to_stored_row_reductions() {
    // r = sum over each row of x * tot: its kernel runs before any row kernel,
    // so tot cannot be a total there; the plan stores m and s as before.
    let f = script(
        "    t0 = fd.define_tensor(shape=[256, 1000], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    t1 = fd.define_tensor(shape=[256], contiguity=[True], dtype=DataType.Int, is_cpu=False)
    m = fd.ops.max(t0, dims=[1], keepdim=True)
    mb = fd.ops.expand(m, shape=[256, 1000])
    d = fd.ops.sub(t0, mb)
    e = fd.ops.exp(d)
    s = fd.ops.sum(e, dims=[1], keepdim=True)
    ls = fd.ops.log(s)
    lse = fd.ops.add(ls, m)
    ib = fd.ops.broadcast_in_dim(t1, shape=[256, 1], broadcast_dims=[0])
    picked = fd.ops.take_along_axis(t0, ib, dim=1)
    nll = fd.ops.sub(lse, picked)
    tot = fd.ops.sum(nll, dims=[0, 1])
    tb = fd.ops.broadcast_in_dim(tot, shape=[256, 1000], broadcast_dims=[])
    y = fd.ops.mul(t0, tb)
    r = fd.ops.sum(y, dims=[1])
    fd.add_output(r)
    fd.add_output(tot)
",
    );
    let p = planned(&f, &[None, None]);
    assert!(p.temps.iter().any(|t| t.what == "m (stored)"), "{:#?}", p.kernels);
}

/// A logsumexp over rows of `cols` floats, its one value per row the only
/// output.
fn logsumexp(cols: usize) -> fusebench_ir::Fusion {
    script(&format!(
        "    t0 = fd.define_tensor(shape=[512, {cols}], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    m = fd.ops.max(t0, dims=[1], keepdim=True)
    mb = fd.ops.expand(m, shape=[512, {cols}])
    d = fd.ops.sub(t0, mb)
    e = fd.ops.exp(d)
    s = fd.ops.sum(e, dims=[1], keepdim=True)
    ls = fd.ops.log(s)
    lse = fd.ops.add(ls, m)
    o = fd.ops.reshape(lse, new_shape=[512])
    fd.add_output(o)
"
    ))
}

#[test]
fn a_logsumexp_alone_is_one_row_kernel() {
    // Its reductions were stored one kernel each, the row read twice, and
    // the output written by a third kernel.
    for (cols, schedule) in [(1000, "rowwise"), (40000, "persistent")] {
        let p = planned(&logsumexp(cols), &[None]);
        assert_eq!(chosen(&p), [("fb_n0".to_string(), schedule.to_string())], "{:#?}", p.kernels);
        assert!(p.kernels[0].summary.contains("m, s"), "{}", p.kernels[0].summary);
        assert!(p.temps.is_empty(), "{:?}", p.temps.iter().map(|t| &t.what).collect::<Vec<_>>());
    }
}

#[test]
fn one_reduction_per_row_stays_a_stored_reduction() {
    // A plain row sum keeps its own schedule (the sweep's sum_inner).
    let f = script(
        "    t0 = fd.define_tensor(shape=[512, 1000], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    s = fd.ops.sum(t0, dims=[1], keepdim=False)
    fd.add_output(s)
",
    );
    let p = planned(&f, &[None]);
    assert_eq!(p.kernels.len(), 1, "{:#?}", p.kernels);
    assert!(!p.kernels[0].name.starts_with("fb_n"), "{:#?}", p.kernels);
}
