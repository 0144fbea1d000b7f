//! A backward norm's walking row kernel, planned from its estimated registers
//! (`walk.rs`): re-read from the next row's shared-memory copy where held rows
//! would leave fewer blocks resident than the grid plans (`Device::row_reread`),
//! or from one buffer where the next row's two do not fit
//! (`Device::reread_one_buffer`), and two Float row sums of a pass reduced
//! over the block together (`Device::block_pairs`).

use fusebench_codegen::{plan, Device, Fill, Plan};

mod common;

/// A backward LayerNorm of ROWS x COLS f16: two row sums, two column sums.
const LAYERNORM_BWD: &str = "    t0 = fd.define_tensor(shape=[ROWS, COLS], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)
    t1 = fd.define_tensor(shape=[ROWS, COLS], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)
    t2 = fd.define_tensor(shape=[ROWS, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)
    t3 = fd.define_tensor(shape=[ROWS, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)
    t4 = fd.define_tensor(shape=[COLS], contiguity=[True], dtype=DataType.Half, is_cpu=False)
    f0 = fd.ops.cast(t0, dtype=DataType.Float)
    f1 = fd.ops.cast(t1, dtype=DataType.Float)
    f4 = fd.ops.cast(t4, dtype=DataType.Float)
    mb = fd.ops.expand(t2, shape=[ROWS, COLS])
    rb = fd.ops.expand(t3, shape=[ROWS, COLS])
    d = fd.ops.sub(f0, mb)
    xh = fd.ops.mul(d, rb)
    gb = fd.ops.sum(f1, dims=[0])
    gxh = fd.ops.mul(f1, xh)
    gwt = fd.ops.sum(gxh, dims=[0])
    wb = fd.ops.broadcast_in_dim(f4, shape=[ROWS, COLS], broadcast_dims=[1])
    gw = fd.ops.mul(f1, wb)
    s1 = fd.ops.sum(gw, dims=[1], keepdim=True)
    p = fd.ops.mul(gw, xh)
    s2 = fd.ops.sum(p, dims=[1], keepdim=True)
    m1b = fd.ops.expand(s1, shape=[ROWS, COLS])
    m2b = fd.ops.expand(s2, shape=[ROWS, COLS])
    e1 = fd.ops.sub(gw, m1b)
    e2 = fd.ops.mul(xh, m2b)
    e = fd.ops.sub(e1, e2)
    gx = fd.ops.mul(e, rb)
    o0 = fd.ops.cast(gx, dtype=DataType.Half)
    o1 = fd.ops.cast(gwt, dtype=DataType.Half)
    o2 = fd.ops.cast(gb, dtype=DataType.Half)
    fd.add_output(o0)
    fd.add_output(o1)
    fd.add_output(o2)
";

fn planned(rows: usize, cols: usize, dev: Device) -> Plan {
    planned_as(rows, cols, "Half", dev)
}

/// The LayerNorm backward with `dtype` (a DataType name) for Half.
fn planned_as(rows: usize, cols: usize, dtype: &str, dev: Device) -> Plan {
    let f = layernorm_bwd(rows, cols, dtype);
    let layouts = vec![None; f.inputs.len()];
    plan(&f, &layouts, dev).unwrap()
}

fn layernorm_bwd(rows: usize, cols: usize, dtype: &str) -> fusebench_ir::Fusion {
    let text = LAYERNORM_BWD.replace("ROWS", &rows.to_string()).replace("COLS", &cols.to_string());
    common::script(&text.replace("DataType.Half", &format!("DataType.{dtype}")))
}

/// The walking kernel's summary and source.
fn walk(p: &Plan) -> (String, String) {
    let k = p.kernels.iter().find(|k| k.fill == Some(Fill::Walk)).expect("a walking kernel");
    (k.summary.clone(), p.source.clone())
}

#[test]
fn a_row_whose_held_registers_leave_one_block_of_two_is_re_read_and_asks_for_two() {
    // 6016 f16: 384 threads x 16 values; held, 120 registers estimated (ptxas
    // 125), one block resident of the two planned; re-read, 80, two.
    let (summary, cuda) = walk(&planned(10752, 6016, Device::default()));
    assert!(summary.contains("re-read each pass") && summary.contains("the next row's"), "{summary}");
    assert!(summary.contains("registers estimated 120 held, 80 re-read: 1 blocks of 2 resident held, 2 re-read"), "{summary}");
    assert!(cuda.contains("__launch_bounds__(384, 2)"), "the planned blocks asked for");
    // Off, or where two held blocks fit (2048 at 256 threads): held, no bound.
    let (off, cuda) = walk(&planned(10752, 6016, Device { row_reread: 0, ..Device::default() }));
    assert!(!off.contains("re-read each pass") && !cuda.contains("__launch_bounds__(384, 2)"), "{off}");
    let (fits, _) = walk(&planned(10752, 2048, Device::default()));
    assert!(!fits.contains("re-read each pass") && !fits.contains("resident held"), "{fits}");
}

#[test]
fn a_re_read_row_whose_next_row_is_not_copied_is_held() {
    // Without the copy a re-read row reads global memory again in each pass
    // (1.43x slower measured): held, and the summary says why.
    let (summary, _) = walk(&planned(10752, 6016, Device { next_row: 0, ..Device::default() }));
    assert!(!summary.contains("re-read each pass"), "{summary}");
    assert!(summary.contains("held: the next row does not fit shared memory"), "{summary}");
}

#[test]
fn a_re_read_row_whose_two_next_row_buffers_do_not_fit_re_reads_from_one() {
    // 6912 Float at 352 threads: 10 vectors a thread of two tensors, 56 KB a
    // buffer; two blocks of two buffers do not fit 228 KB, of one they do.
    let (summary, cuda) = walk(&planned_as(29696, 6912, "Float", Device::default()));
    assert!(summary.contains("re-read each pass") && summary.contains("as the row ends, one buffer"), "{summary}");
    assert!(!cuda.contains("(fb_nb ^ 1)") && !cuda.contains("fb_nb ^= 1"), "no second buffer");
    // The copies of the next row come after the row's last read of the buffer.
    let body = &cuda[cuda.find("fb_n0(").expect("the row kernel")..];
    let last_read = body.rfind("= fb_next[").expect("reads of the copy");
    let refill = body.rfind("fb_copy16(&fb_next[").expect("copies");
    assert!(refill > last_read, "the buffer is refilled after its last read");
    // Off: held, and the summary says why.
    let (held, _) = walk(&planned_as(29696, 6912, "Float", Device { reread_one_buffer: false, ..Device::default() }));
    assert!(!held.contains("re-read each pass") && held.contains("held: the next row does not fit"), "{held}");
    // The same rows of a sliced tensor (every other 6912 of 13824): 64-bit
    // indices, which the compiler spilled under the re-read's launch bound.
    let f = layernorm_bwd(29696, 6912, "Float");
    let mut layouts = vec![None; f.inputs.len()];
    layouts[0] = Some((vec![13824, 1], 0));
    layouts[1] = Some((vec![13824, 1], 0));
    let (sliced, _) = walk(&plan(&f, &layouts, Device::default()).unwrap());
    assert!(!sliced.contains("re-read each pass") && sliced.contains("Float rows with 64-bit indices"), "{sliced}");
    // Where two buffers fit (6016 f16), still two.
    let (two, cuda) = walk(&planned(10752, 6016, Device::default()));
    assert!(two.contains("as the row reduces") && cuda.contains("fb_nb ^= 1"), "{two}");
}

#[test]
fn two_row_sums_of_a_pass_share_one_block_reduction() {
    let (_, cuda) = walk(&planned(10752, 6016, Device::default()));
    let body = &cuda[cuda.find("fb_n0(").expect("the row kernel")..];
    assert_eq!(body.matches("fb_block_sum2_f(").count(), 1, "one paired reduction for s1 and s2");
    assert!(!body.contains("fb_block_sum_f("), "no single sums left");
    let (_, cuda) = walk(&planned(10752, 6016, Device { block_pairs: false, ..Device::default() }));
    let body = &cuda[cuda.find("fb_n0(").expect("the row kernel")..];
    assert_eq!(body.matches("fb_block_sum_f(").count(), 2);
    assert!(!body.contains("fb_block_sum2_f("));
}

#[test]
fn many_short_rows_are_walked_by_as_many_blocks_as_the_estimate_leaves_resident() {
    // 1344 f16 at 96 threads: 120 registers estimated, 128 with the margin,
    // 5 blocks resident; 26624 rows give each of 5 x 132 blocks 40 rows.
    let p = planned(26624, 1344, Device::default());
    let k = p.kernels.iter().find(|k| k.fill == Some(Fill::Walk)).unwrap();
    assert_eq!(k.grid[0], 5 * 132, "{}", k.summary);
    // 2048 rows: 16 rows a block allow fewer than the planned 2.
    let p = planned(2048, 1344, Device::default());
    assert_eq!(p.kernels.iter().find(|k| k.fill == Some(Fill::Walk)).unwrap().grid[0], 2 * 132);
}
