//! Outer reductions with too few results to fill the GPU narrow their blocks
//! of partial sums (`outer::Geometry`): fewer threads across the results,
//! more down the reduced elements, so more blocks read at once.

use fusebench_codegen::{plan, Device, FitWaves, Kernel, Schedule};

mod common;

fn partials(body: &str, dev: Device) -> Vec<Kernel> {
    let f = common::script(body);
    let layouts = vec![None; f.inputs.len()];
    let p = plan(&f, &layouts, dev).unwrap();
    p.kernels.into_iter().filter(|k| k.schedule == Schedule::OuterPartial).collect()
}

fn column_sum(rows: usize, cols: usize) -> String {
    format!(
        "    x = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    s = fd.ops.sum(x, dims=[0], keepdim=False)
    fd.add_output(s)
"
    )
}

fn column_stats(rows: usize, cols: usize) -> String {
    format!(
        "    x = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    v, m = fd.ops.var_mean(x, dims=[0], correction=1, keepdim=False)
    fd.add_output(v)
    fd.add_output(m)
"
    )
}

#[test]
fn few_results_narrow_the_blocks() {
    // 2304 results of 8 lanes: 9 blocks of 32 threads across, 8 splits of
    // 512 rows, 72 blocks for 132 SMs; 16 across and 16 down doubles them
    // (8 across would not: each row of threads needs a batch of loads).
    let split = Device { outer_alone: false, ..Device::default() };
    let k = partials(&column_sum(512, 2304), split);
    assert_eq!((k[0].block, k[0].grid), ([16, 16, 1], [18, 8, 1]), "{k:#?}");
    let k = partials(&column_sum(512, 2304), Device { outer_narrow: false, ..split });
    assert_eq!((k[0].block, k[0].grid), ([32, 8, 1], [9, 8, 1]), "{k:#?}");
    // Down to 64-byte rows of threads: 8 across x 8 bf16 lanes.
    let k = partials(&column_sum(5120, 256), Device::default());
    assert_eq!(k[0].block, [8, 32, 1], "{k:#?}");
}

#[test]
fn enough_blocks_keep_the_wide_shape() {
    let k = partials(&column_sum(2048, 16384), Device::default());
    assert_eq!(k[0].block, [32, 8, 1], "{k:#?}");
}

#[test]
fn the_mean_and_variance_stay_at_most_16_deep() {
    // Row 0 of the threads merges the others' statistics one by one.
    let k = partials(&column_stats(5120, 256), Device::default());
    assert_eq!(k[0].block, [16, 16, 1], "{k:#?}");
}

#[test]
fn few_rows_fold_in_one_block_with_no_combine() {
    // 512 rows: 4 bf16 lanes by 8 threads across (64 bytes) and 32 down give
    // 72 blocks, each folding all 512 rows and writing the results.
    let alone = Device { outer_alone: true, ..Device::default() };
    let f = common::script(&column_sum(512, 2304));
    let p = plan(&f, &vec![None; f.inputs.len()], alone).unwrap();
    assert_eq!(p.kernels.len(), 1, "{:#?}", p.kernels);
    assert_eq!((p.kernels[0].block, p.kernels[0].grid), ([8, 32, 1], [72, 1, 1]), "{:#?}", p.kernels);
    // Over more than 512 rows, or too few blocks (768 columns: 24), the
    // rows are split over blocks and combined.
    for (rows, cols) in [(1024, 2304), (512, 768)] {
        let f = common::script(&column_sum(rows, cols));
        let p = plan(&f, &vec![None; f.inputs.len()], alone).unwrap();
        assert!(p.kernels.iter().any(|k| k.schedule == Schedule::OuterCombine), "{rows}x{cols}: {:#?}", p.kernels);
    }
}

#[test]
fn partials_past_one_wave_are_planned_again_for_what_is_resident() {
    // 16384 rows of 8192 bf16 summed over rows: partial blocks of 256
    // threads sized for 8 per multiprocessor.
    let f = common::script(&column_sum(16384, 8192));
    let layouts = vec![None; f.inputs.len()];
    let fit = Device { fit_waves: FitWaves::Outer, ..Device::default() };
    let p = plan(&f, &layouts, fit).unwrap();
    let compiled = |regs: u32| p.kernels.iter().map(|_| (regs, 0)).collect::<Vec<_>>();
    let blocks = |p: &fusebench_codegen::Plan| -> u64 {
        p.kernels.iter().filter(|k| k.schedule == Schedule::OuterPartial).map(|k| k.grid.iter().map(|&g| g as u64).product::<u64>()).sum()
    };
    assert!(blocks(&p) <= 8 * 132, "{}", blocks(&p));
    // At 40 registers six are resident: planned again for six, in one wave.
    let again = fusebench_codegen::launch::refit(&fit, &p, &compiled(40)).expect("a refit");
    assert_eq!(again.outer_blocks_per_sm, 6);
    let p6 = plan(&f, &layouts, again).unwrap();
    assert!(blocks(&p6) <= 6 * 132 && blocks(&p6) < blocks(&p), "{} then {}", blocks(&p), blocks(&p6));
    // At 32 registers all eight are: nothing to do; nor with the setting off.
    assert!(fusebench_codegen::launch::refit(&fit, &p, &compiled(32)).is_none());
    let off = Device { fit_waves: FitWaves::Off, ..Device::default() };
    assert!(fusebench_codegen::launch::refit(&off, &p, &compiled(40)).is_none());
}

#[test]
fn a_bias_gradient_beside_its_gradient_is_refit_as_sums_over_rows() {
    // The gradient (elementwise) and its sum over rows in one row kernel on a
    // fixed grid of `column_sum_blocks_per_sm`: marked so, and refit to what
    // is resident like the outer partials.
    let f = common::script(
        "    dy = fd.define_tensor(shape=[16384, 6400], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    d = fd.ops.cast(dy, dtype=DataType.Float)
    g = fd.ops.mul(d, 2.0)
    gb = fd.ops.sum(d, dims=[0], keepdim=False)
    o0 = fd.ops.cast(g, dtype=DataType.BFloat16)
    o1 = fd.ops.cast(gb, dtype=DataType.BFloat16)
    fd.add_output(o0)
    fd.add_output(o1)
",
    );
    let layouts = vec![None; f.inputs.len()];
    let fit = Device { fit_waves: FitWaves::All, ..Device::default() };
    let p = plan(&f, &layouts, fit).unwrap();
    let marked: Vec<_> = p.kernels.iter().filter(|k| k.fill == Some(fusebench_codegen::Fill::ColumnSums)).collect();
    assert_eq!(marked.len(), 1, "{:?}", p.kernels.iter().map(|k| (&k.name, &k.summary)).collect::<Vec<_>>());
    // 80 registers at its block: fewer than 8 resident, so planned again.
    let compiled: Vec<(u32, u32)> = p.kernels.iter().map(|_| (80, 0)).collect();
    let again = fusebench_codegen::launch::refit(&fit, &p, &compiled).expect("a refit");
    assert!(again.column_sum_blocks_per_sm < 8, "{}", again.column_sum_blocks_per_sm);
    assert_eq!(again.outer_blocks_per_sm, fit.outer_blocks_per_sm);
    // `outer` refits only outer partials; off, nothing.
    let outer = Device { fit_waves: FitWaves::Outer, ..Device::default() };
    assert!(fusebench_codegen::launch::refit(&outer, &p, &compiled).is_none());
    assert!(fusebench_codegen::launch::refit(&Device::default(), &p, &compiled).is_none());
}

#[test]
fn a_walked_grid_takes_the_blocks_its_estimated_registers_leave_resident() {
    // A backward RMSNorm of 26624 rows of 1664 f32: its row kernel walks the
    // rows on a fixed grid, planned at 2 blocks of 96 threads per
    // multiprocessor, carrying the weight gradient's column sums.
    let f = common::script(
        "    t0 = fd.define_tensor(shape=[26624, 1664], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    t1 = fd.define_tensor(shape=[26624, 1664], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    t2 = fd.define_tensor(shape=[26624, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)
    t3 = fd.define_tensor(shape=[1664], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    rb = fd.ops.expand(t2, shape=[26624, 1664])
    xh = fd.ops.mul(t0, rb)
    gxh = fd.ops.mul(t1, xh)
    gwt = fd.ops.sum(gxh, dims=[0])
    wb = fd.ops.broadcast_in_dim(t3, shape=[26624, 1664], broadcast_dims=[1])
    gw = fd.ops.mul(t1, wb)
    p = fd.ops.mul(gw, xh)
    ps = fd.ops.sum(p, dims=[1], keepdim=True)
    pm = fd.ops.mul(ps, 0.0006009615384615385)
    pmb = fd.ops.expand(pm, shape=[26624, 1664])
    t = fd.ops.mul(xh, pmb)
    d = fd.ops.sub(gw, t)
    gx = fd.ops.mul(d, rb)
    fd.add_output(gx)
    fd.add_output(gwt)
",
    );
    let layouts = vec![None; f.inputs.len()];
    let blocks = |dev: Device| -> (u64, String) {
        let p = plan(&f, &layouts, dev).unwrap();
        let walk: Vec<_> = p.kernels.iter().filter(|k| k.fill == Some(fusebench_codegen::Fill::Walk)).collect();
        assert_eq!(walk.len(), 1, "{:?}", p.kernels.iter().map(|k| (&k.name, &k.summary)).collect::<Vec<_>>());
        (walk[0].grid.iter().map(|&g| g as u64).product(), walk[0].summary.clone())
    };
    // 96 threads x 20 values: 2 x 20 held + 20 sums + 40 + 8 = 108 registers
    // estimated (ptxas, NVRTC 12.9: 120), 5 blocks resident at 116; each of
    // 5 x 132 blocks walks 40 rows, past the 16 asked for.
    let (n, summary) = blocks(Device::default());
    assert_eq!(n, 5 * 132, "{summary}");
    assert!(summary.contains("registers estimated 108 held") && summary.contains("5 blocks per multiprocessor walk"), "{summary}");
    // Each block walking at least 64 rows: 3 per multiprocessor; off: the planned 2.
    assert_eq!(blocks(Device { walk_fill: 64, ..Device::default() }).0, 3 * 132);
    assert_eq!(blocks(Device { walk_fill: 0, ..Device::default() }).0, 2 * 132);
    // Compiled registers no longer plan it again.
    let p = plan(&f, &layouts, Device::default()).unwrap();
    let compiled: Vec<(u32, u32)> = p.kernels.iter().map(|_| (120, 0)).collect();
    assert!(fusebench_codegen::launch::refit(&Device::default(), &p, &compiled).is_none());
}
