//! A pointwise kernel loads every input it reads elementwise before any
//! arithmetic (a load written after an exp or a division was issued after
//! it), also where the output is computed in its inputs' stride order
//! through a permute (a column-major SiLU-mul); and a pad of an empty source
//! is all padding, with no branch. Also how many vectors a thread takes.

use fusebench_codegen::{plan, Device};

/// The plan's CUDA with every input in `layout` (strides, offset; None:
/// row-major).
fn cuda_in(body: &str, layout: Option<(Vec<i64>, i64)>) -> String {
    let src = format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n{body}with FusionDefinition() as fd:\n    f(fd)\n"
    );
    let f = fusebench_frontend::parse_script("t.py", &src).unwrap_or_else(|e| panic!("{e}"));
    let layouts = vec![layout; f.inputs.len()];
    plan(&f, &layouts, Device::default()).unwrap().source
}

fn cuda(body: &str) -> String {
    cuda_in(body, None)
}

/// SiLU(x) * y over [2048, 4096] bf16, the inputs in `stride_order` and
/// `layout`.
fn silu_mul(stride_order: &str, layout: Option<(Vec<i64>, i64)>) -> String {
    cuda_in(&format!(
        "    x = fd.define_tensor(shape=[2048, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False{stride_order})
    y = fd.define_tensor(shape=[2048, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False{stride_order})
    xf = fd.ops.cast(x, dtype=DataType.Float)
    yf = fd.ops.cast(y, dtype=DataType.Float)
    s = fd.ops.silu(xf)
    m = fd.ops.mul(s, yf)
    o = fd.ops.cast(m, dtype=DataType.BFloat16)
    fd.add_output(o)
"
    ), layout)
}

fn assert_loads_first(src: &str) {
    let kernel = &src[src.find("__global__ void __launch_bounds__").expect("a kernel")..];
    let first_math = kernel.find("fb_sigmoidf(").expect("a sigmoid");
    for input in ["&in0[", "&in1["] {
        let load = kernel.find(input).unwrap_or_else(|| panic!("no load of {input}\n{kernel}"));
        assert!(load < first_math, "{input} loaded after the first sigmoid:\n{kernel}");
    }
}

#[test]
fn row_major_inputs_are_loaded_before_the_arithmetic() {
    assert_loads_first(&silu_mul("", None));
}

#[test]
fn column_major_inputs_are_loaded_before_the_arithmetic_through_the_permute() {
    let src = silu_mul(", stride_order=[0, 1]", Some((vec![1, 2048], 0)));
    // Computed in the inputs' order, so still one wide load per input.
    assert!(src.contains("uint4"), "{src}");
    assert_loads_first(&src);
}

#[test]
fn a_pad_of_an_empty_source_is_all_padding() {
    let src = cuda(
        "    x = fd.define_tensor(shape=[256, 128], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    e = fd.ops.full(shape=[256, 0], fill_value=1.0, dtype=DataType.BFloat16)
    p = fd.ops.pad(e, pad_widths=[0, 128, 0, 0], value=0.0)
    s = fd.ops.add(x, p)
    fd.add_output(s)
",
    );
    let kernel = &src[src.find("__global__ void __launch_bounds__").expect("a kernel")..];
    assert!(!kernel.contains("< 0)"), "a branch that cannot run:\n{kernel}");
}

/// Blocks of SiLU(x) * y over [4096, 4096] of `dtype`.
fn silu_mul_blocks(dtype: &str) -> u32 {
    let src = format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :
    x = fd.define_tensor(shape=[4096, 4096], contiguity=[True, True], dtype=DataType.{dtype}, is_cpu=False)
    y = fd.define_tensor(shape=[4096, 4096], contiguity=[True, True], dtype=DataType.{dtype}, is_cpu=False)
    s = fd.ops.silu(x)
    m = fd.ops.mul(s, y)
    fd.add_output(m)
with FusionDefinition() as fd:\n    f(fd)\n"
    );
    let f = fusebench_frontend::parse_script("t.py", &src).unwrap_or_else(|e| panic!("{e}"));
    let p = plan(&f, &[None, None], Device::default()).unwrap();
    assert_eq!(p.kernels.len(), 1);
    p.kernels[0].grid[0]
}

#[test]
fn two_vectors_per_thread_at_16m_elements_for_16_bit_inputs_only() {
    // 16M elements: bf16 vectors of 8, two per thread of 128; f32 vectors of
    // 4, one per thread (0.5-2.7% faster on the H200, round X).
    assert_eq!(silu_mul_blocks("BFloat16"), 4096 * 4096 / 8 / 128 / 2);
    assert_eq!(silu_mul_blocks("Float"), 4096 * 4096 / 4 / 128);
}

/// The vectors each thread of the one kernel writing `out` rows of `cols`
/// `dtype` gathered by `op` ("embedding" or "index_select DIM") takes.
fn gathered_vectors(op: &str, out: usize, cols: usize, dtype: &str) -> u32 {
    let (table, gather) = match op {
        "embedding" => ([4096, cols], "y = fd.ops.embedding_fwd(i, t)".to_string()),
        "index_select 0" => ([4096, cols], "y = fd.ops.index_select(t, i, 0)".to_string()),
        _ => ([cols, 4096], "y = fd.ops.index_select(t, i, 1)".to_string()),
    };
    let src = format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :
    i = fd.define_tensor(shape=[{out}], contiguity=[True], dtype=DataType.Int, is_cpu=False)
    t = fd.define_tensor(shape={table:?}, contiguity=[True, True], dtype=DataType.{dtype}, is_cpu=False)
    {gather}
    fd.add_output(y)
with FusionDefinition() as fd:\n    f(fd)\n"
    );
    let f = fusebench_frontend::parse_script("t.py", &src).unwrap_or_else(|e| panic!("{e}"));
    let p = plan(&f, &[None, None], Device::default()).unwrap();
    assert_eq!(p.kernels.len(), 1);
    let per_vector = 16 / if dtype == "Float" { 4 } else { 2 };
    let vectors = (out * cols / per_vector) as u32;
    let k = &p.kernels[0];
    vectors.div_ceil(k.grid[0] * k.block[0])
}

#[test]
fn gathered_rows_take_two_vectors_per_thread_from_32_mib_written() {
    // Each thread's value load waits for its index load: two in flight
    // (H200: 0.93-0.96 of one vector from 40 MB written, 0.98-1.06 below).
    assert_eq!(gathered_vectors("embedding", 8192, 4096, "Float"), 2, "128 MiB");
    assert_eq!(gathered_vectors("embedding", 4096, 4096, "BFloat16"), 2, "32 MiB");
    assert_eq!(gathered_vectors("embedding", 2048, 4096, "BFloat16"), 1, "16 MiB");
    assert_eq!(gathered_vectors("index_select 0", 8192, 4096, "Float"), 2);
    // Along the inner dim each element has its own index: not a row gather.
    assert_eq!(gathered_vectors("index_select 1", 8192, 4096, "Float"), 1);
}
