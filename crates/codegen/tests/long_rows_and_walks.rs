//! Three planner settings measured against the defaults: rows past
//! `Device::block_held` go to the loop schedule, which keeps them in shared
//! memory; a row kernel that holds its row may ask for more blocks per
//! multiprocessor (`Device::row_min_blocks`); a pointwise kernel walks a
//! short outermost dim that an input is broadcast over
//! (`Device::pointwise_walk`). The first two measured slower on the H200 and
//! are off by default; the walk is on, past 16 positions in chunks (and, at
//! 3, not yet the default, over the rows of a row broadcast by its layout).
//! 16-bit
//! rows may be held as loaded where a kernel writes only statistics of its
//! rows (`Device::row_packed`, on), few rows may spread over more threads to
//! fill the GPU (`Device::row_fill`, off), and a plain row sum takes few
//! vectors a thread (`Device::row_sum_vectors`, on).

use fusebench_codegen::{plan, Device, Plan, Schedule};

mod common;

/// Cross-entropy's statistics over 4096 rows of 14336 bf16 (a vocabulary).
const LOG_SUM_EXP: &str = "    x = fd.define_tensor(shape=[4096, 14336], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    f = fd.ops.cast(x, dtype=DataType.Float)
    m = fd.ops.max(f, dims=[1], keepdim=True)
    mb = fd.ops.expand(m, shape=[4096, 14336])
    d = fd.ops.sub(f, mb)
    e = fd.ops.exp(d)
    s = fd.ops.sum(e, dims=[1], keepdim=False)
    fd.add_output(s)
";

/// RoPE's rotation of 8 heads of 128 over 4096 tokens: cos and sin are
/// broadcast over the heads.
const ROTATE: &str = "    q = fd.define_tensor(shape=[8, 4096, 128], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    c = fd.define_tensor(shape=[4096, 128], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    s = fd.define_tensor(shape=[4096, 128], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    cb = fd.ops.broadcast_in_dim(c, shape=[8, 4096, 128], broadcast_dims=[1, 2])
    sb = fd.ops.broadcast_in_dim(s, shape=[8, 4096, 128], broadcast_dims=[1, 2])
    q1 = fd.ops.slice(q, start_indices=[0, 0, 0], end_indices=[8, 4096, 64])
    q2 = fd.ops.slice(q, start_indices=[0, 0, 64], end_indices=[8, 4096, 128])
    q2n = fd.ops.neg(q2)
    qr = fd.ops.cat([q2n, q1], dim=-1)
    a = fd.ops.mul(q, cb)
    b = fd.ops.mul(qr, sb)
    o = fd.ops.add(a, b)
    fd.add_output(o)
";

fn planned(body: &str, dev: Device) -> Plan {
    let f = common::script(body);
    plan(&f, &vec![None; f.inputs.len()], dev).unwrap()
}

#[test]
fn a_row_past_the_block_limit_goes_to_the_loop_schedule() {
    // Held as floats (16-bit rows held as loaded take half: below).
    let floats = Device { row_packed: false, ..Device::default() };
    let held = planned(LOG_SUM_EXP, floats);
    assert_eq!(held.kernels[0].block[0], 448, "{}", held.kernels[0].summary);
    assert!(held.kernels[0].summary.starts_with("row-wise"), "{}", held.kernels[0].summary);
    let looped = planned(LOG_SUM_EXP, Device { block_held: 8192, ..floats });
    let k = &looped.kernels[0];
    assert_eq!(k.schedule, Schedule::InnerPersistent);
    assert!(k.summary.starts_with("inner persistent"), "{}", k.summary);
    // The row re-read by the second pass is kept in shared memory.
    assert!(k.shared_bytes >= 14336 * 2, "{} bytes: {}", k.shared_bytes, k.summary);
}

#[test]
fn held_rows_may_ask_for_more_blocks_per_multiprocessor() {
    let code = |n| common::kernels(&planned(LOG_SUM_EXP, Device { row_min_blocks: n, row_packed: false, ..Device::default() })).to_string();
    assert!(code(0).contains("__launch_bounds__(448) "));
    assert!(code(3).contains("__launch_bounds__(448, 3) "));
}

#[test]
fn a_short_outer_dim_broadcast_over_is_walked_in_each_thread() {
    // 4096 tokens give 512 blocks of 128 threads per head: enough for one
    // block per multiprocessor, not the default four.
    let base = Device { pointwise_blocks_per_sm: 1, ..Device::default() };
    let flat = planned(ROTATE, Device { pointwise_walk: 0, ..base });
    let walked = planned(ROTATE, base);
    let (a, b) = (&flat.kernels[0], &walked.kernels[0]);
    assert_eq!(b.grid[0] * 8, a.grid[0], "a thread per position of the 8 heads: {}", b.summary);
    assert!(b.summary.contains("all 8 positions of dim 0"), "{}", b.summary);
    let code = common::kernels(&walked).to_string();
    // cos and sin loaded once per thread, q at each head (and its rotated half).
    assert_eq!(code.matches("in1[").count(), 1, "{code}");
    assert_eq!(code.matches("in2[").count(), 1, "{code}");
    assert!(code.matches("in0[").count() >= 8, "{code}");
    // Each head's vector is stored at its own offset: head 7 at 7 x 4096 x 128.
    assert!(code.contains(&format!("+ {}", 7 * 4096 * 128)), "{code}");
}

#[test]
fn a_walk_needs_an_input_broadcast_over_the_dim() {
    // cos and sin as large as q, each element read once.
    let body = ROTATE
        .replace("shape=[4096, 128], contiguity=[True, True]", "shape=[8, 4096, 128], contiguity=[True, True, True]")
        .replace("broadcast_dims=[1, 2]", "broadcast_dims=[0, 1, 2]");
    let base = Device { pointwise_blocks_per_sm: 1, ..Device::default() };
    let on = planned(&body, base);
    let off = planned(&body, Device { pointwise_walk: 0, ..base });
    assert_eq!(on.kernels[0].grid, off.kernels[0].grid, "{}", on.kernels[0].summary);
}

#[test]
fn fp16_inputs_are_not_walked() {
    // Measured slower with the walk in fp16 (schedule/pointwise.rs).
    let body = ROTATE.replace("DataType.Float", "DataType.Half");
    let base = Device { pointwise_blocks_per_sm: 1, ..Device::default() };
    let on = planned(&body, base);
    let off = planned(&body, Device { pointwise_walk: 0, ..base });
    assert_eq!(on.kernels[0].grid, off.kernels[0].grid, "{}", on.kernels[0].summary);
    let bf16 = planned(&ROTATE.replace("DataType.Float", "DataType.BFloat16"), base);
    assert!(bf16.kernels[0].summary.contains("positions of dim 0"), "{}", bf16.kernels[0].summary);
}

#[test]
fn a_longer_dim_is_walked_in_chunks() {
    // 48 heads: past the 16 a thread walks whole, so three chunks of 16, cos
    // and sin loaded once per chunk (`pointwise_walk` 2, the default; at 1
    // not walked).
    let body = ROTATE.replace("[8, 4096, 128]", "[48, 4096, 128]").replace("[8, 4096, 64]", "[48, 4096, 64]");
    let base = Device { pointwise_blocks_per_sm: 1, ..Device::default() };
    let flat = planned(&body, Device { pointwise_walk: 1, ..base });
    assert!(!flat.kernels[0].summary.contains("dim 0"), "{}", flat.kernels[0].summary);
    let chunks = planned(&body, base);
    let k = &chunks.kernels[0];
    assert!(k.summary.contains("16 consecutive positions of dim 0 (3 chunks)"), "{}", k.summary);
    assert_eq!(k.grid[0] * 16, flat.kernels[0].grid[0], "{}", k.summary);
    let code = common::kernels(&chunks).to_string();
    assert_eq!(code.matches("in1[").count(), 1, "{code}");
    // Chunk q of head 16q + j: q's 16 heads of 4096 x 128 apart.
    assert!(code.contains(&format!("q * {}", 16 * 4096 * 128)), "{code}");
}

/// A plain sum over each of `rows` rows of `cols` floats.
fn row_sum(rows: usize, cols: usize) -> String {
    format!(
        "    x = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    s = fd.ops.sum(x, dims=[1], keepdim=False)
    fd.add_output(s)
"
    )
}

/// Threads per row and rows per block of the first kernel of `body` on `dev`.
fn row_threads(body: &str, dev: Device) -> (u32, u32, String) {
    let p = planned(body, dev);
    let k = &p.kernels[0];
    let rows = summary_rows_per_block(&k.summary);
    (k.block[0] / rows, rows, k.summary.clone())
}

#[test]
fn fewer_vectors_per_thread_spread_a_row_over_more_threads() {
    // 2560 floats = 640 vectors of 4: 96 threads x 7 where the registers
    // alone decide (the fewest warps), 160 x 4 with at most 4 per thread.
    let body = row_sum(4096, 2560);
    let off = Device { row_sum_vectors: 0, ..Device::default() };
    let (default, _, s) = row_threads(&body, Device { row_vectors: 32, ..off });
    assert_eq!(default, 96, "{s}");
    let (four, _, s) = row_threads(&body, Device { row_vectors: 4, ..off });
    assert_eq!(four, 160, "{s}");
}

#[test]
fn plain_row_sums_take_three_vectors_a_thread_one_row_each() {
    // The default (`row_sum_vectors` 3): 214 of 224 threads x 3 vectors, one
    // row per block, where it was 96 x 7 and two rows per block.
    let (threads, rows, s) = row_threads(&row_sum(4096, 2560), Device::default());
    assert_eq!((threads, rows), (224, 1), "{s}");
    assert!(s.contains("x 3 vectors per row") && s.contains("1 rows at a time"), "{s}");
    // Few rows too (768 rows of 2816: 96 x 8 before, two rows per block).
    let (threads, rows, s) = row_threads(&row_sum(768, 2816), Device::default());
    assert_eq!((threads, rows), (256, 1), "{s}");
    // 14336 floats at 3 vectors would need 1195 threads, more than
    // `SUM_THREADS`: no such bound.
    let wide = row_sum(4096, 14336);
    let off = Device { row_sum_vectors: 0, ..Device::default() };
    assert_eq!(planned(&wide, Device::default()).kernels[0].summary, planned(&wide, off).kernels[0].summary);
    // A kernel that also writes over its rows (a softmax) is left alone.
    let softmax = "    x = fd.define_tensor(shape=[4096, 2560], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    m = fd.ops.max(x, dims=[1], keepdim=True)
    mb = fd.ops.expand(m, shape=[4096, 2560])
    d = fd.ops.sub(x, mb)
    e = fd.ops.exp(d)
    s = fd.ops.sum(e, dims=[1], keepdim=True)
    sb = fd.ops.expand(s, shape=[4096, 2560])
    y = fd.ops.div(e, sb)
    fd.add_output(y)
";
    assert_eq!(planned(softmax, Device::default()).kernels[0].summary, planned(softmax, off).kernels[0].summary);
}

/// "N rows per block" of a row kernel's summary.
fn summary_rows_per_block(summary: &str) -> u32 {
    let at = summary.find(" rows per block").unwrap_or_else(|| panic!("{summary}"));
    summary[..at].rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn packed_rows_hold_twice_the_elements_and_convert_again_in_each_pass() {
    // 14336 bf16 = 1792 vectors of 8: 448 threads x 4 as floats, 224 x 8
    // held as loaded, each later pass converting the loaded halves again.
    let floats = planned(LOG_SUM_EXP, Device { row_packed: false, ..Device::default() });
    let packed = planned(LOG_SUM_EXP, Device::default());
    assert_eq!(floats.kernels[0].block[0], 448, "{}", floats.kernels[0].summary);
    assert_eq!(packed.kernels[0].block[0], 224, "{}", packed.kernels[0].summary);
    assert!(packed.kernels[0].summary.contains("224 of 224 threads x 8 vectors"), "{}", packed.kernels[0].summary);
    let code = common::kernels(&packed).to_string();
    // Marked before the second pass (the sum of exponentials): its 8 vectors.
    assert_eq!(code.matches("fb_keep(").count(), 8, "{code}");
    assert!(!common::kernels(&floats).to_string().contains("fb_keep("));
    // The second pass converts the loaded halves again: 14336 / 224 = 64
    // conversions per pass, not 64 in all.
    assert_eq!(code.matches("fb_bf2f(w").count(), 128, "{code}");
    // A row of floats is held the same either way.
    let f32_body = LOG_SUM_EXP.replace("dtype=DataType.BFloat16", "dtype=DataType.Float");
    let a = common::kernels(&planned(&f32_body, Device::default())).to_string();
    let b = common::kernels(&planned(&f32_body, Device { row_packed: false, ..Device::default() })).to_string();
    assert_eq!(a, b);
    // 512 rows of 14336 give the 132 x 2048 threads fewer than four vectors
    // each: held as floats, twice the threads.
    let few = LOG_SUM_EXP.replace("4096", "512");
    let a = common::kernels(&planned(&few, Device::default())).to_string();
    let b = common::kernels(&planned(&few, Device { row_packed: false, ..Device::default() })).to_string();
    assert_eq!(a, b);
    // A softmax's output reads the exponentials its sum computed: its rows
    // stay held as floats (`rowwise::writes`).
    let softmax = LOG_SUM_EXP.replace("keepdim=False)\n    fd.add_output(s)", "keepdim=True)\n    sb = fd.ops.expand(s, shape=[4096, 14336])\n    y = fd.ops.div(e, sb)\n    fd.add_output(y)");
    assert!(softmax.contains("fd.ops.div"), "{softmax}");
    let a = common::kernels(&planned(&softmax, Device::default())).to_string();
    let b = common::kernels(&planned(&softmax, Device { row_packed: false, ..Device::default() })).to_string();
    assert_eq!(a, b);
    assert!(!a.contains("fb_keep("));
}

#[test]
fn few_rows_fill_the_gpu_with_more_threads_each() {
    // 512 rows of 2560 f16 = 320 vectors of 8 each: 96 threads x 4 by
    // default; 132 x 2048 threads to fill leave one vector per thread, and
    // no thread doubles up rows.
    let body = "    x = fd.define_tensor(shape=[512, 2560], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)
    f = fd.ops.cast(x, dtype=DataType.Float)
    q = fd.ops.mul(f, f)
    s = fd.ops.sum(q, dims=[1], keepdim=False)
    fd.add_output(s)
";
    // A plain row sum: as other row kernels here (`row_sum_vectors` 0); the
    // registers' share alone (with `row_slack`, 64 threads x 5).
    let base = Device { row_sum_vectors: 0, row_slack: false, ..Device::default() };
    let k = |fill| planned(body, Device { row_fill: fill, ..base }).kernels[0].clone();
    let (held, filled) = (k(0), k(2048));
    assert_eq!(held.block[0], 96, "{}", held.summary);
    assert_eq!(filled.block[0], 320, "{}", filled.summary);
    assert_eq!(filled.grid[0], 512, "{}", filled.summary);
    // 4096 rows fill it anyway: unchanged.
    let many = body.replace("512", "4096");
    let a = planned(&many, base).kernels[0].block[0];
    assert_eq!(planned(&many, Device { row_fill: 2048, ..base }).kernels[0].block[0], a);
}

/// A SiLU-mul whose first input is one row of 4096 given broadcast over 3072
/// rows by its layout (stride 0 over the rows: contiguity None), planned
/// with the layouts the script's contiguity gives.
fn silu_of_a_broadcast_row(dev: Device) -> Plan {
    let f = common::script(
        "    g = fd.define_tensor(shape=[3072, 4096], contiguity=[None, True], dtype=DataType.BFloat16, is_cpu=False)
    u = fd.define_tensor(shape=[3072, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    gf = fd.ops.cast(g, dtype=DataType.Float)
    uf = fd.ops.cast(u, dtype=DataType.Float)
    s = fd.ops.silu(gf)
    y = fd.ops.mul(s, uf)
    o = fd.ops.cast(y, dtype=DataType.BFloat16)
    fd.add_output(o)
",
    );
    let layouts = common::declared_layouts(&f);
    assert_eq!(layouts[0].as_ref().unwrap().0, vec![0, 1]);
    plan(&f, &layouts, dev).unwrap()
}

#[test]
fn rows_of_a_row_broadcast_by_its_layout_are_walked_at_3_and_its_silu_computed_once() {
    // At 2 a thread per vector: the SiLU once per element.
    let flat = silu_of_a_broadcast_row(Device { pointwise_walk: 2, ..Device::default() });
    let code = common::kernels(&flat).to_string();
    assert!(!flat.kernels[0].summary.contains("dim 0"), "{}", flat.kernels[0].summary);
    assert_eq!(code.matches("fb_sigmoidf(").count(), 8, "{code}");
    // At 3 (the default; bf16): 16 rows a thread (3072 / 16 = 192 chunks x
    // 512 vectors of 8 = 768 blocks of 128, at least 4 per SM), the row's
    // vector loaded and its SiLU computed once per chunk, the other input
    // read and the output written for each of the 16 rows.
    let walked = silu_of_a_broadcast_row(Device::default());
    let k = &walked.kernels[0];
    assert!(k.summary.contains("8 elements per thread, each thread at 16 consecutive positions of dim 0 (192 chunks)"), "{}", k.summary);
    assert_eq!(k.grid[0], 768);
    let code = common::kernels(&walked).to_string();
    assert_eq!(code.matches("fb_sigmoidf(").count(), 8, "{code}");
    assert_eq!(code.matches("&in0[").count(), 1, "{code}");
    assert_eq!(code.matches("&in1[").count(), 16, "{code}");
    assert_eq!(code.matches("&out0[").count(), 16, "{code}");
    // Every row's loads come before the first row's math
    // (`walk_loads_first`, the default); row by row without it.
    let last_load = code.rfind("&in1[").unwrap();
    assert!(last_load < code.find("fb_sigmoidf(").unwrap(), "{code}");
    let rows = silu_of_a_broadcast_row(Device { walk_loads_first: false, ..Device::default() });
    let code = common::kernels(&rows).to_string();
    assert!(code.rfind("&in1[").unwrap() > code.find("fb_sigmoidf(").unwrap(), "{code}");
    assert_eq!(code.matches("&in1[").count(), 16, "{code}");
}

#[test]
fn a_broadcast_in_dim_over_the_rows_is_computed_once_per_chunk_too() {
    // GELU backward's z = x + bias: x a row broadcast by its layout, the
    // bias broadcast by the op; the tanh of z reads neither row-wise.
    let f = common::script(
        "    x = fd.define_tensor(shape=[2048, 4096], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)
    dy = fd.define_tensor(shape=[2048, 4096], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    b = fd.define_tensor(shape=[4096], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    bb = fd.ops.broadcast_in_dim(b, shape=[2048, 4096], broadcast_dims=[1])
    z = fd.ops.add(x, bb)
    t = fd.ops.tanh(z)
    y = fd.ops.mul(t, dy)
    fd.add_output(y)
",
    );
    let layouts = vec![Some((vec![0, 1], 0)), Some((vec![4096, 1], 0)), Some((vec![1], 0))];
    // f32 inputs: at 3 (the default) not walked, as measured slower; at 4
    // walked whatever the dtypes.
    let flat = plan(&f, &layouts, Device::default()).unwrap();
    assert!(!flat.kernels[0].summary.contains("dim 0"), "{}", flat.kernels[0].summary);
    let p = plan(&f, &layouts, Device { pointwise_walk: 4, ..Device::default() }).unwrap();
    let code = common::kernels(&p).to_string();
    assert!(p.kernels[0].summary.contains("consecutive positions of dim 0"), "{}", p.kernels[0].summary);
    // f32: 4 lanes, the tanh once per lane for the whole chunk.
    assert_eq!(code.matches("tanhf(").count(), 4, "{code}");
}

#[test]
fn a_row_kernel_with_a_block_per_row_has_no_loop_over_rows() {
    // 4096 rows of 14336: one block per row, so `row_once` (the default)
    // drops the loop; without it the loop stays.
    let once = planned(LOG_SUM_EXP, Device::default());
    let code = common::kernels(&once);
    assert!(code.contains("{ const int row = (int)blockIdx.x * 1;"), "{code}");
    assert!(!code.contains("row += "), "{code}");
    let looped = planned(LOG_SUM_EXP, Device { row_once: false, ..Device::default() });
    let looped = common::kernels(&looped);
    assert!(looped.contains("row += (int)gridDim.x"), "{looped}");
}

/// A LayerNorm over 26624 rows of 12544 bf16, writing its mean and rsqrt too.
const LAYER_NORM: &str = "    t0 = fd.define_tensor(shape=[26624, 12544], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    t1 = fd.define_tensor(shape=[12544], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    f0 = fd.ops.cast(t0, dtype=DataType.Float)
    f1 = fd.ops.cast(t1, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(f0, dims=[1], correction=0, keepdim=True)
    ve = fd.ops.add(var, 1e-05)
    rs = fd.ops.rsqrt(ve)
    mb = fd.ops.expand(mean, shape=[26624, 12544])
    d = fd.ops.sub(f0, mb)
    rb = fd.ops.expand(rs, shape=[26624, 12544])
    n = fd.ops.mul(d, rb)
    wb = fd.ops.broadcast_in_dim(f1, shape=[26624, 12544], broadcast_dims=[1])
    y = fd.ops.mul(n, wb)
    o0 = fd.ops.cast(y, dtype=DataType.BFloat16)
    fd.add_output(o0)
    fd.add_output(mean)
    fd.add_output(rs)
";

#[test]
fn a_norms_rows_held_as_loaded_are_converted_again_for_its_outputs() {
    // 12544 bf16 = 1568 vectors of 8: 320 threads x 5 as floats; held as
    // loaded (`row_packed_norms`) 224 x 7, nvFuser's shape for it.
    // The default holds rows of 6144 or more as loaded; every row here, none with 0.
    let on = Device { row_packed_norms: 1, ..Device::default() };
    let off = Device { row_packed_norms: 0, ..Device::default() };
    let floats = planned(LAYER_NORM, off);
    let packed = planned(LAYER_NORM, Device::default());
    assert_eq!(common::kernels(&packed).to_string(), common::kernels(&planned(LAYER_NORM, on)).to_string());
    assert_eq!(floats.kernels[0].block[0], 320, "{}", floats.kernels[0].summary);
    assert_eq!(packed.kernels[0].block[0], 224, "{}", packed.kernels[0].summary);
    let code = common::kernels(&packed).to_string();
    // Marked before the variance's pass and again before the outputs: 7 vectors each time.
    assert_eq!(code.matches("fb_keep(").count(), 14, "{code}");
    // Each of the three walks over the row (mean, variance, outputs)
    // converts the loaded halves, 3 x 56, and the outputs the weight's, 56.
    assert_eq!(code.matches("fb_bf2f(w").count(), 4 * 56, "{code}");
    assert_eq!(common::kernels(&floats).to_string().matches("fb_bf2f(w").count(), 2 * 40, "as floats: the row once, the weight once");
    // A softmax's exponentials would be computed again: held as floats.
    let softmax = LAYER_NORM
        .replace("n = fd.ops.mul(d, rb)", "n0 = fd.ops.mul(d, rb)\n    n = fd.ops.exp(n0)");
    assert!(softmax.contains("fd.ops.exp"));
    assert_eq!(
        common::kernels(&planned(&softmax, on)).to_string(),
        common::kernels(&planned(&softmax, off)).to_string()
    );
    // A square one (4096 x 4096): its row reductions are not sums over rows.
    let square = LAYER_NORM.replace("26624", "4096").replace("12544", "4096");
    assert!(common::kernels(&planned(&square, on)).to_string().contains("fb_keep("));
    // A weight gradient beside it (a sum over the rows) joins the row kernel
    // after its schedule is chosen: held as floats.
    let with_sum = LAYER_NORM.replace(
        "    fd.add_output(o0)\n",
        "    fd.add_output(o0)\n    g = fd.ops.sum(n, dims=[0], keepdim=False)\n    fd.add_output(g)\n",
    );
    assert_eq!(
        common::kernels(&planned(&with_sum, on)).to_string(),
        common::kernels(&planned(&with_sum, Device::default())).to_string()
    );
}
