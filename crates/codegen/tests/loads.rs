//! Which global loads a kernel issues: streaming (evict first) where a
//! reduction's partial kernel is the last to read its inputs, the read-only
//! path where a later kernel reads them again.

use fusebench_codegen::{plan, Device};

mod common;
use common::script;

#[test]
fn a_column_sum_read_once_streams_and_a_norm_read_again_does_not() {
    // A sum over the rows of a row-major matrix: the outer partials read x
    // for the only time.
    let f = script("    x = fd.define_tensor(shape=[2048, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n    a = fd.ops.cast(x, dtype=DataType.Float)\n    y = fd.ops.sum(a, dims=[0])\n    fd.add_output(y)\n");
    let p = plan(&f, &[None], Device::default()).unwrap();
    assert!(p.source.contains("__ldcs(") && !p.source.contains("__ldg("), "{}", p.source);
    // The same sum, plus x itself scaled: another kernel reads x again.
    let f = script("    x = fd.define_tensor(shape=[2048, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n    a = fd.ops.cast(x, dtype=DataType.Float)\n    y = fd.ops.sum(a, dims=[0])\n    z = fd.ops.mul(a, a)\n    fd.add_output(y)\n    fd.add_output(z)\n");
    let p = plan(&f, &[None], Device::default()).unwrap();
    assert!(!p.source.contains("__ldcs("), "{}", p.source);
    // An RMSNorm of a column-major matrix: the sum of squares is an outer
    // reduction whose input the normalizing kernel reads again.
    let f = script("    x = fd.define_tensor(shape=[2048, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0, 1])\n    a = fd.ops.cast(x, dtype=DataType.Float)\n    s = fd.ops.mul(a, a)\n    m = fd.ops.sum(s, dims=[1], keepdim=True)\n    r = fd.ops.rsqrt(m)\n    rb = fd.ops.expand(r, shape=[2048, 4096])\n    y = fd.ops.mul(a, rb)\n    o = fd.ops.cast(y, dtype=DataType.BFloat16)\n    fd.add_output(o)\n");
    let p = plan(&f, &[Some((vec![1, 2048], 0))], Device::default()).unwrap();
    assert!(p.kernels.len() > 1, "{:?}", p.kernels.iter().map(|k| &k.summary).collect::<Vec<_>>());
    assert!(!p.source.contains("__ldcs("), "{}", p.source);
}
