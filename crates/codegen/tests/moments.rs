//! A mean and variance over dims that are not fastest in memory, in one read
//! of the input (`moments.rs`): a sum for the mean, Welford's update on the
//! values shifted by each result's first element for M2.

use fusebench_codegen::{plan, Device, Schedule};

mod common;

fn planned(body: &str, dev: Device) -> fusebench_codegen::Plan {
    let f = common::script(body);
    let layouts = vec![None; f.inputs.len()];
    plan(&f, &layouts, dev).unwrap()
}

const COLUMN_STATS: &str = "    x = fd.define_tensor(shape=[4099, 96], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    v, m = fd.ops.var_mean(x, dims=[0], correction=1, keepdim=False)
    fd.add_output(v)
    fd.add_output(m)
";

#[test]
fn a_column_var_mean_reads_its_input_once() {
    let p = planned(COLUMN_STATS, Device::default());
    let partials: Vec<_> = p.kernels.iter().filter(|k| k.schedule == Schedule::OuterPartial).collect();
    assert_eq!(partials.len(), 1, "{:#?}", p.kernels);
    assert!(partials[0].summary.contains("in one pass"), "{}", partials[0].summary);
    // The shift loaded at reduced index 0 (a constant, not the loop's `r`),
    // then the sum and Welford's update on the shifted values in the loop,
    // one branch-free reciprocal per vector.
    assert!(p.source.contains("if (!isfinite(k0)) k0 = 0;"), "{}", p.source);
    assert!(p.source.contains("a0 += x; const float y = x - k0; const float d = y - m0; m0 += d * rn; q0 += d * (y - m0); }"), "{}", p.source);
    assert!(p.source.contains("const float rn = fb_rcp_count(n);"), "{}", p.source);
    let loop_at = p.source.find("for (; fb_at").expect("the strided loop");
    let shift_at = p.source.find("float k0 = ").expect("the shift");
    assert!(shift_at < loop_at, "{}", p.source);
    // The combine: 64 blocks of 65 elements, the last of 4 (4099 = 63 x 65
    // + 4); the shifted mean weighs each block by its count over 4099 and
    // M2 adds each block's by its count, terms independent of one another;
    // mean = a / n.
    assert!(p.source.contains("* (s == 63 ? 9.7584777e-4f : 1.5857527e-2f);"), "{}", p.source);
    assert!(p.source.contains("+ (s == 63 ? 4e0f : 6.5e1f) * d * d;"), "{}", p.source);
    assert!(p.source.contains("a / 4.099e3f"), "{}", p.source);
    // The variance divides by n - correction.
    assert!(p.source.contains("q / 4.098e3f"), "{}", p.source);
}

#[test]
fn the_last_block_combine_keeps_two_passes() {
    let dev = Device { last_block_combine: true, ..Device::default() };
    let p = planned(COLUMN_STATS, dev);
    let partials = p.kernels.iter().filter(|k| k.schedule == Schedule::OuterPartial).count();
    assert_eq!(partials, 2, "{:#?}", p.kernels);
}

#[test]
fn few_partials_are_merged_in_order() {
    // 600 rows in 9 blocks of 67 (the last 64): below GROUPED_FROM, a thread
    // per result merges them in order with constant weights (block 1 joins
    // block 0 half and half).
    let p = planned(&COLUMN_STATS.replace("4099, 96", "600, 96"), Device::default());
    assert!(p.source.contains("m += d * 5e-1f; q += "), "{}", p.source);
    assert!(!p.source.contains("fb_ca["), "{}", p.source);
    let combine = p.kernels.iter().find(|k| k.schedule == Schedule::OuterCombine).unwrap();
    assert_eq!(combine.block, [128, 1, 1]);
}

#[test]
fn many_partials_are_combined_by_groups_of_threads() {
    let p = planned(COLUMN_STATS, Device::default());
    let combine = p.kernels.iter().find(|k| k.schedule == Schedule::OuterCombine).unwrap();
    assert_eq!(combine.block, [32, 8, 1]);
    assert!(p.source.contains("for (int y = 1; y < 8; ++y) q += fb_ca[y][threadIdx.x];"), "{}", p.source);
}
