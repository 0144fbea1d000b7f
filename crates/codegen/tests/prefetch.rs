//! Which inputs a row kernel copies to shared memory as each block starts
//! (`Device::row_prefetch` 2, the default): the small ones its outputs
//! broadcast over the rows, unless a reduction reads them first (the copy is
//! waited for only after the reductions) or the rows read two tensors.

use fusebench_codegen::{plan, Device};

fn cuda(body: &str) -> String {
    let src = format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n{body}with FusionDefinition() as fd:\n    f(fd)\n"
    );
    let f = fusebench_frontend::parse_script("t.py", &src).unwrap_or_else(|e| panic!("{e}"));
    let layouts = vec![None; f.inputs.len()];
    plan(&f, &layouts, Device::default()).unwrap().source
}

const HEAD: &str = "    x = fd.define_tensor(shape=[256, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[4096], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    wf = fd.ops.cast(w, dtype=DataType.Float)
    wb = fd.ops.broadcast_in_dim(wf, shape=[256, 4096], broadcast_dims=[1])
";

#[test]
fn a_norms_weight_is_copied_and_read_from_shared_memory() {
    let body = format!(
        "{HEAD}    sq = fd.ops.mul(xf, xf)\n    ss = fd.ops.sum(sq, dims=[1], keepdim=True)\n    rs = fd.ops.rsqrt(ss)\n    n = fd.ops.mul(xf, rs)\n    y = fd.ops.mul(n, wb)\n    o = fd.ops.cast(y, dtype=DataType.BFloat16)\n    fd.add_output(o)\n"
    );
    let src = cuda(&body);
    assert!(src.contains("__shared__ __align__(16) fb_bf16 fb_pre0[4096];"), "{src}");
    assert!(src.contains("fb_copy16("), "{src}");
    // Waited for after the reduction, before the first read.
    let wait = src.find("fb_copy_wait();").expect("a wait");
    let sum = src.find("fb_block_sum_f(").expect("a block sum");
    let read = src.find("&fb_pre0[").expect("a read of the copy");
    assert!(sum < wait && wait < read, "{src}");
    assert!(!src.contains("__ldg(reinterpret_cast<const uint4*>(&in1["), "{src}");
}

#[test]
fn a_weight_the_reduction_reads_is_not_copied() {
    let body = format!(
        "{HEAD}    xw = fd.ops.mul(xf, wb)\n    ss = fd.ops.sum(xw, dims=[1], keepdim=True)\n    n = fd.ops.mul(xf, ss)\n    y = fd.ops.mul(n, wb)\n    o = fd.ops.cast(y, dtype=DataType.BFloat16)\n    fd.add_output(o)\n"
    );
    let src = cuda(&body);
    assert!(!src.contains("fb_pre0"), "{src}");
}

#[test]
fn rows_of_two_tensors_read_the_weight_where_used() {
    let body = format!(
        "{HEAD}    r = fd.define_tensor(shape=[256, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n    rf = fd.ops.cast(r, dtype=DataType.Float)\n    h = fd.ops.add(xf, rf)\n    sq = fd.ops.mul(h, h)\n    ss = fd.ops.sum(sq, dims=[1], keepdim=True)\n    rs = fd.ops.rsqrt(ss)\n    n = fd.ops.mul(h, rs)\n    y = fd.ops.mul(n, wb)\n    o = fd.ops.cast(y, dtype=DataType.BFloat16)\n    fd.add_output(o)\n"
    );
    let src = cuda(&body);
    assert!(!src.contains("fb_pre0"), "{src}");
}
