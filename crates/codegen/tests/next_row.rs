//! The next row copied to shared memory while the current one reduces
//! (`next_row.rs`, `Device::next_row`): in row kernels whose fixed grid walks
//! two row iterations or more per block (the backward norms' column sums).

use fusebench_codegen::{plan, Device};

mod common;

fn cuda(body: &str, rows: usize, dev: Device) -> String {
    planned(body, rows, dev).source
}

fn planned(body: &str, rows: usize, dev: Device) -> fusebench_codegen::Plan {
    let f = common::script(&body.replace("ROWS", &rows.to_string()));
    let layouts = vec![None; f.inputs.len()];
    plan(&f, &layouts, dev).unwrap()
}

/// A backward RMSNorm: x, dy, the saved reciprocal per row and the weight.
const RMSNORM_BWD: &str = "    x = fd.define_tensor(shape=[ROWS, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    dy = fd.define_tensor(shape=[ROWS, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    r = fd.define_tensor(shape=[ROWS, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)
    w = fd.define_tensor(shape=[4096], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    gf = fd.ops.cast(dy, dtype=DataType.Float)
    wf = fd.ops.cast(w, dtype=DataType.Float)
    rb = fd.ops.expand(r, shape=[ROWS, 4096])
    xh = fd.ops.mul(xf, rb)
    gxh = fd.ops.mul(gf, xh)
    gw = fd.ops.sum(gxh, dims=[0])
    wb = fd.ops.broadcast_in_dim(wf, shape=[ROWS, 4096], broadcast_dims=[1])
    g = fd.ops.mul(gf, wb)
    p = fd.ops.mul(g, xh)
    ps = fd.ops.sum(p, dims=[1], keepdim=True)
    pb = fd.ops.expand(ps, shape=[ROWS, 4096])
    t = fd.ops.mul(xh, pb)
    d = fd.ops.sub(g, t)
    gx = fd.ops.mul(d, rb)
    o0 = fd.ops.cast(gx, dtype=DataType.BFloat16)
    o1 = fd.ops.cast(gw, dtype=DataType.BFloat16)
    fd.add_output(o0)
    fd.add_output(o1)
";

/// An RMSNorm with a column sum: one row-sized tensor read.
const ONE_TENSOR: &str = "    x = fd.define_tensor(shape=[ROWS, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[4096], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    wf = fd.ops.cast(w, dtype=DataType.Float)
    wb = fd.ops.broadcast_in_dim(wf, shape=[ROWS, 4096], broadcast_dims=[1])
    cs = fd.ops.sum(xf, dims=[0])
    sq = fd.ops.mul(xf, xf)
    ss = fd.ops.sum(sq, dims=[1], keepdim=True)
    rs = fd.ops.rsqrt(ss)
    n = fd.ops.mul(xf, rs)
    y = fd.ops.mul(n, wb)
    o0 = fd.ops.cast(y, dtype=DataType.BFloat16)
    o1 = fd.ops.cast(cs, dtype=DataType.BFloat16)
    fd.add_output(o0)
    fd.add_output(o1)
";

fn row_kernel(src: &str) -> &str {
    let at = src.find("void __launch_bounds__").expect("a kernel");
    let end = src[at..].find("\n}\n").map_or(src.len(), |e| at + e);
    &src[at..end]
}

#[test]
fn rows_a_block_walks_read_the_copy_of_the_row_issued_one_iteration_before() {
    let p = planned(RMSNORM_BWD, 8192, Device::default());
    let k = row_kernel(&p.source);
    // Launched with its two buffers as dynamic shared memory.
    assert_eq!(p.kernels[0].shared_bytes, 2 * 256 * (4 * 16 + 4));
    // Two buffers of 256 threads x 4 vectors (x and dy, two vectors each)
    // and of the reciprocal per row.
    assert!(k.contains("extern __shared__ __align__(16) uint4 fb_next[];"), "{k}");
    assert!(k.contains("unsigned* const fb_next4 = reinterpret_cast<unsigned*>(fb_next + 2048);"), "{k}");
    // The first row before the loop; each iteration waits for its own, then
    // issues the next one's into the other buffer, then reads its buffer.
    let first = k.find("fb_copy16(&fb_next[(0 * 4 + 0)").expect("the first row's copy");
    let lp = k.find("for (int row =").expect("the row loop");
    let wait = k[lp..].find("fb_copy_wait();").map(|i| lp + i).expect("a wait in the loop");
    let next = k.find("fb_copy16(&fb_next[((fb_nb ^ 1) * 4 + 0)").expect("the next row's copy");
    let read = k.find("= fb_next[(fb_nb * 4 + 0) * 256 + threadIdx.x];").expect("a read of the copy");
    assert!(first < lp && lp < wait && wait < next && next < read, "{k}");
    assert!(k.contains("fb_copy4(&fb_next4[((fb_nb ^ 1) * 1 + 0) * 256 + threadIdx.x], &in2[nrow0]);"), "{k}");
    assert!(k.contains("fb_nb ^= 1;"), "{k}");
    // No row is read from global memory in the body.
    assert!(!k.contains("__ldg(reinterpret_cast<const uint4*>(&in0["), "{k}");
    assert!(!k.contains("__ldg(&in2["), "{k}");
    // The weight, the same for every row, is not copied.
    assert!(k.contains("__ldg(reinterpret_cast<const uint4*>(&in3["), "{k}");
}

#[test]
fn level_one_copies_the_vectors_only_and_zero_nothing() {
    let one = cuda(RMSNORM_BWD, 8192, Device { next_row: 1, ..Device::default() });
    assert!(one.contains("fb_next[") && !one.contains("fb_next4"), "{one}");
    assert!(one.contains("__ldg(&in2[row0])"), "{one}");
    let zero = cuda(RMSNORM_BWD, 8192, Device { next_row: 0, ..Device::default() });
    assert!(!zero.contains("fb_next"), "{zero}");
}

#[test]
fn a_block_of_one_row_iteration_copies_nothing() {
    // 264 row blocks (two per multiprocessor) over 300 rows: most walk one.
    let src = cuda(RMSNORM_BWD, 300, Device::default());
    assert!(!src.contains("fb_next"), "{src}");
}

#[test]
fn a_copied_weight_is_waited_for_before_the_loop() {
    // One row-sized tensor read: the weight is copied as the block starts
    // (prefetch.rs), and its wait moves before the loop, where it cannot
    // wait for a next row's copies too.
    let src = cuda(ONE_TENSOR, 8192, Device::default());
    let k = row_kernel(&src);
    assert!(k.contains("fb_pre0") && k.contains("fb_next["), "{k}");
    let lp = k.find("for (int row =").expect("the row loop");
    assert_eq!(k.matches("fb_copy_wait();").count(), 2, "{k}");
    assert!(k[..lp].contains("fb_copy_wait();\n    __syncthreads();"), "{k}");
}

#[test]
fn rows_that_do_not_divide_copy_a_clamped_row_and_stop_at_the_end() {
    // Rows of 400 of one tensor (25 threads x 2 vectors) are two to a block
    // iteration; 8193 rows leave the last iteration half a row.
    let src = cuda(&ONE_TENSOR.replace("4096", "400"), 8193, Device::default());
    let k = row_kernel(&src);
    assert!(k.contains("const int row1 = rok1 ? row + 1 : 8192;"), "{k}");
    assert!(k.contains("if (nrow < 8193) {"), "{k}");
    assert!(k.contains("const int nrow1 = min(nrow + 1, 8192);"), "{k}");
}

#[test]
fn a_row_re_read_in_each_pass_reads_every_pass_from_the_copy() {
    // 11008 columns: re-read in each pass by 688 of 704 threads, one block
    // per multiprocessor; two buffers of both tensors are 88 KB, dynamic.
    let p = planned(&RMSNORM_BWD.replace("4096", "11008"), 2048, Device::default());
    let k = row_kernel(&p.source);
    assert!(p.kernels[0].summary.contains("re-read each pass"), "{}", p.kernels[0].summary);
    assert_eq!(p.kernels[0].shared_bytes as usize, 2 * 704 * (4 * 16 + 4));
    assert!(!k.contains("__ldg(reinterpret_cast<const uint4*>(&in0["), "{k}");
    // Both passes (the row sum, then the outputs) read the copy of x.
    assert!(k.matches("= fb_next[(fb_nb * 4 + 1) * 704 + threadIdx.x];").count() >= 2, "{k}");
}

#[test]
fn a_fixed_grid_of_two_blocks_per_multiprocessor_asks_for_two_when_told() {
    // 8192 rows walked by 264 blocks of 256 threads: two per multiprocessor
    // of the default device's 132. `row_fit_grid` declares it.
    let fit = cuda(RMSNORM_BWD, 8192, Device { row_fit_grid: true, ..Device::default() });
    assert!(fit.contains("__launch_bounds__(256, 2) fb_n0("), "{}", row_kernel(&fit));
    let plain = cuda(RMSNORM_BWD, 8192, Device::default());
    assert!(plain.contains("__launch_bounds__(256) fb_n0("), "{}", row_kernel(&plain));
    // A row kernel without column sums gives each block its rows: no bound.
    let held = cuda(ONE_TENSOR.replace("    cs = fd.ops.sum(xf, dims=[0])\n", "").replace("    o1 = fd.ops.cast(cs, dtype=DataType.BFloat16)\n", "").replace("    fd.add_output(o1)\n", "").as_str(), 8192, Device { row_fit_grid: true, ..Device::default() });
    assert!(!held.contains(", 2) fb_n0("), "{}", row_kernel(&held));
}
