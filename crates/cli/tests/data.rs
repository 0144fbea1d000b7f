//! `fusebench check SCRIPT --data FILE.safetensors`: inputs from the file,
//! every output compared with the file's, exit 1 on a mismatch, clear errors
//! for a missing tensor, a wrong dtype or shape. Files are written to a
//! temporary directory here; the shared golden cases are used when present.

mod common;
use common::*;
use safetensors::{serialize, tensor::TensorView, Dtype};
use std::path::{Path, PathBuf};

const ADD: &str = "import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv1 = fd.define_tensor(shape=[2, 2], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv2 = fd.ops.add(tv0, tv1)
    tv3 = fd.ops.mul(tv0, 2.0)
    fd.add_output(tv2)
    fd.add_output(tv3, tv0)
with FusionDefinition() as fd:
    nvfuser_fusion(fd)
";

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes `tensors` (name, dtype, shape, bytes) as DIR/NAME.safetensors.
fn write(dir: &Path, name: &str, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> PathBuf {
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let bytes = serialize(views, None).unwrap();
    let p = dir.join(format!("{name}.safetensors"));
    std::fs::write(&p, bytes).unwrap();
    p
}

fn case(dir: &Path) -> PathBuf {
    let p = dir.join("add.py");
    std::fs::write(&p, ADD).unwrap();
    p
}

fn good() -> Vec<(&'static str, Dtype, Vec<usize>, Vec<u8>)> {
    vec![
        ("in0", Dtype::F32, vec![2, 2], f32s(&[1., 2., 3., 4.])),
        ("in1", Dtype::F32, vec![2, 2], f32s(&[10., 20., 30., 40.])),
        ("out0", Dtype::F32, vec![2, 2], f32s(&[11., 22., 33., 44.])),
        ("post_in0", Dtype::F32, vec![2, 2], f32s(&[2., 4., 6., 8.])),
    ]
}

fn check(script: &Path, data: &Path, json: bool) -> (Option<i32>, String) {
    let (s, d) = (script.to_str().unwrap(), data.to_str().unwrap());
    let mut args = vec!["check", s, "--data", d];
    if json {
        args.push("--json");
    }
    let o = fusebench(&args);
    (o.status.code(), text(&o))
}

#[test]
fn matching_file_passes_and_reports_each_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(dir.path(), "add", &good());
    let (code, t) = check(&case(dir.path()), &data, false);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("every tensor matches") && t.contains("post_in0") && t.contains("tv3 updates input tv0"), "{t}");
    let (code, t) = check(&case(dir.path()), &data, true);
    assert_eq!(code, Some(0), "{t}");
    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
    let rows = v["reports"][0]["data"]["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["tensor"].as_str().unwrap()).collect();
    assert_eq!(names, ["out0", "post_in0"]);
    assert_eq!(rows[0]["cpu"]["ok"], true);
}

#[test]
fn a_wrong_output_or_updated_input_fails() {
    let dir = tempfile::tempdir().unwrap();
    for (k, wrong) in [(2, f32s(&[11., 22., 33., 45.])), (3, f32s(&[2., 4., 6., 9.]))] {
        let mut t = good();
        t[k].3 = wrong;
        let data = write(dir.path(), "bad", &t);
        let (code, out) = check(&case(dir.path()), &data, false);
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains("MISMATCH") && out.contains("1 of 4 outside"), "{out}");
    }
    // An f32 output recorded as f64 is a mismatch, not a conversion.
    let mut t = good();
    t[2] = ("out0", Dtype::F64, vec![2, 2], [11f64, 22., 33., 44.].iter().flat_map(|x| x.to_le_bytes()).collect());
    let (code, out) = check(&case(dir.path()), &write(dir.path(), "dt", &t), false);
    assert_eq!(code, Some(1), "{out}");
}

#[test]
fn missing_tensor_wrong_dtype_or_shape_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let script = case(dir.path());
    let mut t = good();
    t.remove(1);
    let (code, out) = check(&script, &write(dir.path(), "m", &t), false);
    assert_eq!(code, Some(1));
    assert!(out.contains("no tensor `in1` for input 1 (tv1)"), "{out}");
    let mut t = good();
    t.remove(2);
    let (code, out) = check(&script, &write(dir.path(), "o", &t), false);
    assert_eq!(code, Some(1));
    assert!(out.contains("no tensor `out0`"), "{out}");
    let mut t = good();
    t[1] = ("in1", Dtype::F64, vec![2, 2], vec![0u8; 32]);
    let (_, out) = check(&script, &write(dir.path(), "d", &t), false);
    assert!(out.contains("in1 is float64, but input 1 (tv1) is defined as float32"), "{out}");
    let mut t = good();
    t[1] = ("in1", Dtype::F32, vec![4], f32s(&[1., 2., 3., 4.]));
    let (_, out) = check(&script, &write(dir.path(), "s", &t), false);
    assert!(out.contains("in1 has shape [4], but input 1 (tv1) is defined with shape [2, 2]"), "{out}");
    // The symbolic input takes in0's shape, which then must fit tv1.
    let mut t = good();
    t[0] = ("in0", Dtype::F32, vec![1, 4], f32s(&[1., 2., 3., 4.]));
    let (code, out) = check(&script, &write(dir.path(), "b", &t), false);
    assert_eq!(code, Some(1), "{out}");
    std::fs::write(dir.path().join("junk.safetensors"), b"not a file").unwrap();
    let (code, out) = check(&script, &dir.path().join("junk.safetensors"), false);
    assert_eq!(code, Some(1));
    assert!(out.contains("not a safetensors file"), "{out}");
    let o = fusebench(&["check", "examples/", "--data", "x.safetensors"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

fusebench_testdata::needs_golden! {
#[test]
fn shared_golden_cases_match_with_manifest_strides() {
    let dir = fusebench_testdata::require("golden");
    // noncontiguous_inputs has a transposed and a stride-0 input: the manifest's strides.
    for c in ["binary_add_f32", "noncontiguous_inputs", "var_mean"] {
        let (code, t) = check(&dir.join(format!("{c}.py")), &dir.join(format!("{c}.safetensors")), false);
        assert_eq!(code, Some(0), "{c}: {t}");
        assert!(t.contains("every tensor matches"), "{t}");
    }
}
}
