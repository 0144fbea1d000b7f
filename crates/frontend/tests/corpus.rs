//! Every script of the shared corpus and golden set reads, prints and reads
//! back to the same fusion, and survives the JSON form.

use fusebench_frontend::{parse_file, parse_script, print_script};
use fusebench_ir::{DType, InputRecipe, Syntax, ValueDef};
use std::path::{Path, PathBuf};

/// The shared directory (`FUSEBENCH_SHARED`, else `../shared`), with both
/// `corpus` and `golden`: a test reaching here without them fails naming the path.
fn shared() -> PathBuf {
    fusebench_testdata::require("corpus");
    fusebench_testdata::require("golden");
    fusebench_testdata::shared_dir()
}

fn scripts(shared: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for dir in ["corpus", "golden"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(shared.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "py"))
            .collect();
        v.sort();
        out.extend(v);
    }
    out
}

fusebench_testdata::needs_shared! {
#[test]
fn every_script_parses() {
    let shared = shared();
    let files = scripts(&shared);
    assert!(files.len() >= 81, "found only {} scripts", files.len());
    let errors: Vec<String> = files
        .iter()
        .filter_map(|p| parse_file(p).err().map(|e| e.to_string()))
        .collect();
    assert!(
        errors.is_empty(),
        "{} scripts failed:\n{}",
        errors.len(),
        errors.join("\n\n")
    );
}

#[test]
fn print_then_parse_gives_the_same_fusion() {
    let shared = shared();
    for p in scripts(&shared) {
        let f = parse_file(&p).unwrap();
        let printed = print_script(&f);
        let g = parse_script("printed.py", &printed)
            .unwrap_or_else(|e| panic!("{}: printed script fails:\n{e}\n{printed}", p.display()));
        assert!(g == f, "{}: round trip differs\n{printed}", p.display());
        // Printing is a fixed point after one round.
        assert_eq!(print_script(&g), printed, "{}", p.display());
    }
}

#[test]
fn json_round_trip() {
    let shared = shared();
    for p in scripts(&shared) {
        let f = parse_file(&p).unwrap();
        let back = fusebench_ir::Fusion::from_json(&f.to_json())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(back == f, "{}: JSON round trip differs", p.display());
    }
}

#[test]
fn seed_rmsnorm_facts() {
    let shared = shared();
    let f = parse_file(&shared.join("corpus/seed_rmsnorm_legacy.py")).unwrap();
    assert_eq!(f.script.syntax, Syntax::Legacy);
    assert_eq!(f.script.function_name, "nvfuser_fusion_id0");
    assert_eq!(f.script.header[0], "CUDA devices:");
    assert_eq!(f.script.header[1], " 0: NVIDIA RTX 6000 Ada Generation");
    assert_eq!(f.inputs.len(), 2);
    assert_eq!(f.outputs.len(), 2);
    // cast x2, broadcast_in_dim x3, mul x4, sum, reciprocal, add, rsqrt, cast.
    assert_eq!(f.op_count(), 14);
    let t0 = f.value(f.inputs[0]);
    assert_eq!(
        (t0.name.as_str(), t0.dtype, t0.shape.clone()),
        ("T0", DType::BFloat16, Some(vec![4, 1024, 4096]))
    );
    match &t0.def {
        ValueDef::TensorInput(d) => assert_eq!(d.stride_order, vec![2, 1, 0]),
        other => panic!("{other:?}"),
    }
    // S16 = fd.define_scalar(4096.00, dtype=DataType.Double); S17 = reciprocal(S16) folds.
    let s17 = f.values.iter().find(|v| v.name == "S17").unwrap();
    assert_eq!(
        s17.constant,
        Some(fusebench_ir::Literal::Float(1.0 / 4096.0))
    );
    let outs: Vec<&str> = f
        .outputs
        .iter()
        .map(|&o| f.value(o).name.as_str())
        .collect();
    assert_eq!(outs, ["T21", "T29"]);
    assert_eq!(f.value(f.outputs[1]).dtype, DType::BFloat16);
    let r = f.recipe.as_ref().unwrap();
    assert_eq!(
        r[1],
        InputRecipe::MakeTensor {
            shape: vec![4096],
            dtype: DType::BFloat16,
            low: None,
            high: None
        }
    );
}

#[test]
fn llama_embedding_facts() {
    let shared = shared();
    let f = parse_file(&shared.join("corpus/000_Llama-3.2-1B_fw_nvFusion0.py")).unwrap();
    assert_eq!(f.script.syntax, Syntax::Direct);
    assert_eq!(f.script.function_name, "nvfuser_fusion");
    let r = f.recipe.as_ref().unwrap();
    assert_eq!(r.len(), 3);
    assert!(r
        .iter()
        .all(|x| matches!(x, InputRecipe::MakeTensor { .. })));
    assert_eq!(r[0].dtype(), DType::Int);
    assert_eq!(r[0].shape(), Some(vec![2, 1024]));
    assert!(f.nodes.iter().any(|n| n.op.name() == "index_select"));
}

#[test]
fn strided_and_tuple_results() {
    let shared = shared();
    let f = parse_file(&shared.join("golden/noncontiguous_inputs.py")).unwrap();
    let r = f.recipe.as_ref().unwrap();
    assert_eq!(
        r[1],
        InputRecipe::Randn {
            size: vec![60],
            dtype: DType::Float,
            as_strided: Some((vec![4, 6, 10], vec![0, 10, 1]))
        }
    );
    let f = parse_file(&shared.join("golden/welford_inner.py")).unwrap();
    let n = &f.nodes[0];
    assert_eq!(n.op.name(), "welford");
    let names: Vec<&str> = n
        .outputs
        .iter()
        .map(|&o| f.value(o).name.as_str())
        .collect();
    assert_eq!(names, ["tv1", "tv2", "tv3"]);
    assert_eq!(f.value(n.outputs[2]).dtype, DType::Index);
}
}
