//! `sdpfa_fwd`, `sdpfa_bwd`, `grouped_mm`, `scaled_mm` in both syntaxes,
//! printed back to the same fusion; and the nvFuser ops fusebench knows but
//! refuses (fp4, block-scale layout), each with a located error saying why.

use fusebench_frontend::{check_any_text, parse_script, print_script};
use fusebench_ir::{DType, Fusion, GemmOp, Op, ValueDef};

fn direct(body: &str) -> String {
    format!("import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n{body}\nwith FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n")
}

fn legacy(body: &str) -> String {
    format!("from nvfuser import FusionDefinition, DataType\n\ndef nvfuser_fusion_id0(fd : FusionDefinition) -> None :\n{body}\nwith FusionDefinition() as fd:\n    nvfuser_fusion_id0(fd)\n")
}

/// Reads, and checks that the printed script reads back to the same fusion.
fn read(text: &str) -> Fusion {
    check_any_text(text).unwrap_or_else(|e| panic!("{e}"))
}

fn gemm<'f>(f: &'f Fusion, name: &str) -> &'f GemmOp {
    let v = f.values.iter().find(|v| v.name == name).unwrap();
    let ValueDef::Node { node, .. } = v.def else { panic!("{name}") };
    let Op::Gemm(o) = &f.nodes[node].op else { panic!("{name}") };
    o
}

const QKV: &str = "    tv0 = fd.define_tensor(shape=[1, 2, 9, 16], contiguity=[None, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    tv1 = fd.define_tensor(shape=[1, 2, 11, 16], contiguity=[None, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    tv2 = fd.define_tensor(shape=[1, 2, 11, 8], contiguity=[None, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
";

#[test]
fn sdpfa_reads_infers_and_prints_back() {
    let f = read(&direct(&format!(
        "{QKV}    tv3 = fd.define_tensor(shape=[1, 2, 9, 8], contiguity=[None, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    tv4, tv5, tv6, tv7 = fd.ops.sdpfa_fwd(tv0, tv1, tv2, dropout_p=0.00000, is_causal=True, scale=0.300000)
    tv8, tv9, tv10 = fd.ops.sdpfa_bwd(tv3, tv0, tv1, tv2, tv4, tv5, dropout_p=0.00000, is_causal=True, philox_seed=tv6, philox_offset=tv7, scale=0.300000)
    fd.add_output(tv4)
    fd.add_output(tv5)
    fd.add_output(tv8)
    fd.add_output(tv10)"
    )));
    // nvFuser's types: attention in the query's dtype [N, H, L, Ev], the
    // log-sum-exp Float [N, H, L], the philox state UInt64 [2] and [].
    let ty = |n: &str| {
        let v = f.values.iter().find(|v| v.name == n).unwrap();
        (v.dtype, v.shape.clone().unwrap())
    };
    assert_eq!(ty("tv4"), (DType::BFloat16, vec![1, 2, 9, 8]));
    assert_eq!(ty("tv5"), (DType::Float, vec![1, 2, 9]));
    assert_eq!(ty("tv6"), (DType::UInt64, vec![2]));
    assert_eq!(ty("tv7"), (DType::UInt64, vec![]));
    assert_eq!(ty("tv8"), (DType::BFloat16, vec![1, 2, 9, 16]));
    assert_eq!(ty("tv9"), (DType::BFloat16, vec![1, 2, 11, 16]));
    assert_eq!(ty("tv10"), (DType::BFloat16, vec![1, 2, 11, 8]));
    assert!(matches!(gemm(&f, "tv4"), GemmOp::SdpfaFwd { scale: Some(_), .. }));
    let printed = print_script(&f);
    assert!(printed.contains("tv4, tv5, tv6, tv7 = fd.ops.sdpfa_fwd(tv0, tv1, tv2, dropout_p=0.0, is_causal=True, scale=0.3)"), "{printed}");
}

#[test]
fn legacy_sdpfa_takes_positional_bias_and_mask_slots() {
    let f = read(&legacy(&format!(
        "{}    T3, T4, T5, T6 = fd.ops.sdpfa_fwd(T0, T1, T2, None, None, 0.0, False, None)
    fd.add_output(T3)",
        QKV.replace("tv", "T")
    )));
    assert!(matches!(gemm(&f, "T3"), GemmOp::SdpfaFwd { scale: None, .. }));
    let printed = print_script(&f);
    assert!(printed.contains("T3, T4, T5, T6 = fd.ops.sdpfa_fwd(T0, T1, T2, dropout_p=0.0, is_causal=False)"), "{printed}");
}

#[test]
fn grouped_and_scaled_mm_read_and_print_back() {
    let f = read(&direct(
        "    tv0 = fd.define_tensor(shape=[24, 16], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    tv1 = fd.define_tensor(shape=[3, 16, 8], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    tv2 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    tv3 = fd.ops.grouped_mm(tv0, tv1, tv2)
    tv4 = fd.define_tensor(shape=[16, 32], contiguity=[True, True], dtype=DataType.Float8_e4m3fn, is_cpu=False)
    tv5 = fd.define_tensor(shape=[32, 16], contiguity=[True, True], dtype=DataType.Float8_e4m3fn, is_cpu=False, stride_order=[0, 1])
    tv6 = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=False)
    tv7, _, _ = fd.ops.scaled_mm(tv4, tv5, tv6, tv6, dtype=DataType.Half)
    fd.add_output(tv3)
    fd.add_output(tv7)",
    ));
    let printed = print_script(&f);
    assert!(printed.contains("tv3 = fd.ops.grouped_mm(tv0, tv1, tv2)"), "{printed}");
    assert!(printed.contains("tv7, _, _ = fd.ops.scaled_mm(tv4, tv5, tv6, tv6, dtype=DataType.Half)"), "{printed}");
    let out = |n: &str| f.values.iter().find(|v| v.name == n).map(|v| (v.dtype, v.shape.clone().unwrap()));
    assert_eq!(out("tv3"), Some((DType::BFloat16, vec![24, 8])));
    assert_eq!(out("tv7"), Some((DType::Half, vec![16, 16])));
    // `_` names the Nones scaled_mm returns: nothing is bound to it.
    assert!(f.values.iter().all(|v| v.name != "_"));
}

/// The error of `body` (after QKV-style inputs), shown as the user sees it.
fn error(body: &str) -> (usize, usize, String) {
    let e = parse_script("x.py", &direct(body)).expect_err("should not parse");
    (e.line, e.col, e.to_string())
}

#[track_caller]
fn says(e: &(usize, usize, String), line: usize, col: usize, parts: &[&str]) {
    assert_eq!((e.0, e.1), (line, col), "{}", e.2);
    for p in parts {
        assert!(e.2.contains(p), "{}\n--- does not contain ---\n{p}", e.2);
    }
    assert!(!e.2.contains("unknown op"), "{}", e.2);
}

const F32: &str = "    tv0 = fd.define_tensor(shape=[32, 32], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv1 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
";

#[test]
fn fp4_ops_are_known_and_refused_with_their_reason() {
    let e = error(&format!("{F32}    tv2, tv3 = fd.ops.nv_block_quantize(tv0)"));
    says(&e, 6, 16, &["fd.ops.nv_block_quantize is not supported", "Float4_e2m1fn output", "packed 4-bit", "Blackwell"]);
    let e = error(&format!("{F32}    tv2, tv3 = fd.ops.nv_grouped_block_quantize(tv0, tv1, tv1, block_size=16)"));
    says(&e, 6, 16, &["fd.ops.nv_grouped_block_quantize is not supported", "Float4_e2m1fn", "Blackwell"]);
    let e = error(&format!(
        "{F32}    tv2 = fd.ops.cutlass_nvfp4_grouped_mm(tv0, tv0, tv0, tv0, tv0, tv1, tv1, tv1, dtype=DataType.BFloat16)"
    ));
    says(&e, 6, 11, &["fd.ops.cutlass_nvfp4_grouped_mm is not supported", "Float4_e2m1fn_x2 operands", "sm100"]);
    // Arguments are read first: a missing one or an unknown name is reported as such.
    let e = error(&format!("{F32}    tv2, tv3 = fd.ops.nv_grouped_block_quantize(tv0, tv1)"));
    says(&e, 6, 16, &["missing the argument `output_offsets`"]);
    let e = error(&format!("{F32}    tv2, tv3 = fd.ops.nv_block_quantize(tv9)"));
    says(&e, 6, 41, &["`tv9` is not defined"]);
    let e = error(&format!("{F32}    tv2 = fd.ops.preprocess_grouped_matmul_input_sf(tv0, tv1, tv1)"));
    says(&e, 6, 11, &["preprocess_grouped_matmul_input_sf is not supported", "swizzled, padded", "no evaluator"]);
}

#[test]
fn unsupported_arguments_are_refused_where_they_are_written() {
    let e = error(&format!("{QKV}    tv3, tv4, tv5, tv6 = fd.ops.sdpfa_fwd(tv0, tv1, tv2, bias=tv0)"));
    says(&e, 7, 63, &["fd.ops.sdpfa_fwd: `bias` is not supported", "not a log-sum-exp"]);
    let e = error(&format!("{F32}    tv2 = fd.ops.grouped_mm(tv0, tv0, tv1, tv0, tv0)"));
    says(&e, 6, 44, &["the scaled overload", "grouped_mm(mat1, mat2, offsets)"]);
    let e = error(&format!("{F32}    tv2, _, _ = fd.ops.scaled_mm(tv0, tv0, tv0, tv0, output_gamma=True)"));
    says(&e, 6, 67, &["output_gamma is not supported"]);
    let e = error(&format!("{F32}    tv2 = fd.ops.scaled_mm(tv0, tv0, tv0, tv0)"));
    says(&e, 6, 5, &["returns 3 values"]);
    // nvFuser's rules, as inference errors: flash attention takes bf16/fp16.
    let e = error(&format!("{}    tv3, tv4, tv5, tv6 = fd.ops.sdpfa_fwd(tv0, tv1, tv2)", QKV.replace("BFloat16", "Float")));
    says(&e, 7, 26, &["Half or BFloat16", "Float"]);
}
