//! Normalizations and row reductions at row lengths that are not a whole
//! number of warps of vectors (issue 14): which schedule each gets and its
//! launch shape. The CUDA itself is checked on the GPU (`fusebench check
//! --device gpu` over bench/patterns.py's rmsnorm, layernorm, softmax and
//! sum_inner).

use fusebench_codegen::{plan, Device, Plan};

fn script(dtype: &str, rows: usize, cols: usize, body: &str, outs: &[&str]) -> String {
    let mut s = format!(
        "from nvfuser_direct import FusionDefinition, DataType\n\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n    x0 = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.{dtype}, is_cpu=False)\n    f0 = fd.ops.cast(x0, dtype=DataType.Float)\n"
    );
    for l in body.lines() {
        s.push_str(&format!("    {}\n", l.replace("R", &rows.to_string()).replace("C", &cols.to_string())));
    }
    for o in outs {
        s.push_str(&format!("    fd.add_output({o})\n"));
    }
    s + "\nwith FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n"
}

fn plan_of(text: &str) -> Plan {
    let f = fusebench_frontend::parse_script("t.py", text).unwrap();
    let layouts = vec![None; f.inputs.len()];
    plan(&f, &layouts, Device::default()).unwrap()
}

const SOFTMAX: &str = "m = fd.ops.max(f0, dims=[1], keepdim=True)
mb = fd.ops.expand(m, shape=[R, C])
d = fd.ops.sub(f0, mb)
e = fd.ops.exp(d)
s = fd.ops.sum(e, dims=[1], keepdim=True)
sb = fd.ops.expand(s, shape=[R, C])
y = fd.ops.div(e, sb)";

const LAYERNORM: &str = "var, mean = fd.ops.var_mean(f0, dims=[1], correction=0, keepdim=True)
mb = fd.ops.expand(mean, shape=[R, C])
d = fd.ops.sub(f0, mb)
ve = fd.ops.add(var, 1e-05)
rs = fd.ops.rsqrt(ve)
rb = fd.ops.expand(rs, shape=[R, C])
y = fd.ops.mul(d, rb)";

/// (kernels, block threads of the first, grid of the first, summary of the first)
fn launch(p: &Plan) -> (usize, u32, u32, String) {
    let k = &p.kernels[0];
    (p.kernels.len(), k.block[0], k.grid[0], k.summary.clone())
}

#[test]
fn rows_of_1000_share_blocks_with_idle_lanes() {
    // bf16: 125 vectors of 8 per row -> one warp x 4 vectors, the last
    // vector of 3 lanes empty; four rows per block (512 blocks stay >= 2 per SM).
    let p = plan_of(&script("BFloat16", 2048, 1000, LAYERNORM, &["y", "mean", "rs"]));
    let (n, block, grid, summary) = launch(&p);
    assert_eq!((n, block, grid), (1, 128, 512), "{summary}");
    assert!(summary.contains("4 rows per block, 32 of 32 threads x 4 vectors"), "{summary}");
    // A row's warp reduces alone (no shared memory).
    assert!(p.source.contains(", fb_sf, 1);"), "{}", p.source);
    assert!(p.source.contains("const bool ok3 = (int)tr + 96 < 125;"), "{}", p.source);
}

#[test]
fn long_rows_hold_several_vectors_per_thread() {
    // 11008 bf16: 1376 vectors -> 344 threads (11 warps, 8 lanes idle) x 4.
    let p = plan_of(&script("BFloat16", 2048, 11008, SOFTMAX, &["y"]));
    let (n, block, _, summary) = launch(&p);
    assert_eq!((n, block), (1, 352), "{summary}");
    assert!(summary.contains("344 of 352 threads x 4 vectors"), "{summary}");
    assert!(p.source.contains("const bool ok0 = (int)threadIdx.x < 344;"), "{}", p.source);
    // 14336 f32: 3584 vectors -> 448 threads x 8, none idle.
    let p = plan_of(&script("Float", 2048, 14336, SOFTMAX, &["y"]));
    let (_, block, _, summary) = launch(&p);
    assert_eq!(block, 448, "{summary}");
    assert!(summary.contains("448 of 448 threads x 8 vectors"), "{summary}");
}

#[test]
fn rows_past_the_registers_keep_the_loop_schedule() {
    let p = plan_of(&script("BFloat16", 2048, 32768, SOFTMAX, &["y"]));
    let (_, block, grid, summary) = launch(&p);
    assert!(summary.starts_with("inner persistent"), "{summary}");
    assert_eq!((block, grid), (512, 2048));
}

#[test]
fn row_counts_that_do_not_divide_clamp_the_last_rows() {
    // 1001 rows, two per block: the last block's second row is clamped and writes nothing.
    let p = plan_of(&script("BFloat16", 1001, 1000, LAYERNORM, &["y", "mean", "rs"]));
    let (_, block, grid, summary) = launch(&p);
    assert_eq!((block, grid), (64, 501), "{summary}");
    assert!(p.source.contains("const bool rok0 = row + 0 + gr < 1001;"), "{}", p.source);
}

#[test]
fn a_row_sum_alone_is_row_wise() {
    let p = plan_of(&script("BFloat16", 2048, 3200, "y = fd.ops.sum(f0, dims=[1])", &["y"]));
    let (n, block, _, summary) = launch(&p);
    // One kernel: it writes the sums itself, no copy from the stored ones.
    // A plain row sum: a thread takes at most 3 vectors and one row
    // (`Device::row_sum_vectors`).
    assert_eq!((n, block), (1, 160), "{summary}");
    assert!(p.source.contains("out0[row0] = "), "{}", p.source);
    // Also a value computed from the sum alone (its cast back to bf16).
    let cast = "y = fd.ops.sum(f0, dims=[1])\no0 = fd.ops.cast(y, dtype=DataType.BFloat16)";
    let p = plan_of(&script("BFloat16", 2048, 1000, cast, &["o0"]));
    assert_eq!(p.kernels.len(), 1, "{}", launch(&p).3);
    assert!(summary.starts_with("row-wise") && summary.contains("134 of 160 threads x 3 vectors"), "{summary}");
}
