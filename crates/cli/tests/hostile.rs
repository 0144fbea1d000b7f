//! Hostile scripts: each reads and runs, or fails with an error located in
//! the file; never a panic, an abort (a stack overflow is one) or a hang.
//! Small cases are fixtures in `fixtures/hostile/`; large ones are generated
//! here.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> String {
    format!("crates/cli/tests/fixtures/hostile/{name}")
}

const HEAD: &str = "import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[4, 8], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
";
const TAIL: &str = "with FusionDefinition() as fd:
    nvfuser_fusion(fd)
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `check --json FILE`: its exit code, its report and all it said.
fn check(file: &str) -> (Option<i32>, Value, String) {
    let o = fusebench_within(120, &["check", "--json", file]);
    let t = text(&o);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {t}"));
    (o.status.code(), v["reports"][0].clone(), t)
}

/// A failed check's error, checked to start with `file:line:col:`.
fn located_error(file: &str, line: usize, col: usize) -> String {
    let (code, r, t) = check(file);
    assert_eq!(code, Some(1), "{t}");
    let e = r["error"].as_str().unwrap_or_default().to_string();
    assert!(e.starts_with(&format!("{file}:{line}:{col}: ")), "{e}");
    e
}

#[test]
fn a_ten_megabyte_script_runs_and_the_planner_refuses_its_chain() {
    let dir = tmp_dir("hostile", "big");
    let mut s = String::from(HEAD);
    let mut n = 0;
    while s.len() < 10_000_000 {
        n += 1;
        s.push_str(&format!("    tv{n} = fd.ops.neg(tv{})\n", n - 1));
    }
    s.push_str(&format!("    fd.add_output(tv{n})\n{TAIL}"));
    let p = write(&dir, "big.py", &s);
    let p = p.to_str().unwrap();
    // The CPU reference stores a chain of lazy values every 512 (it overflowed the stack).
    let (code, r, t) = check(p);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(r["ops"], n, "{t}");
    let o = fusebench_within(120, &["emit", p]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("tv1001 is computed by a chain of more than 1000 ops"),
        "{t}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn ten_thousand_nested_calls_are_a_short_located_error() {
    let dir = tmp_dir("hostile", "nested");
    let n = 10_000;
    let cases = [
        ("calls.py", format!("{}tv0{}", "fd.ops.neg(".repeat(n), ")".repeat(n))),
        ("parens.py", format!("fd.ops.mul(tv0, {}2.0{})", "(".repeat(n), ")".repeat(n))),
        ("lists.py", format!("fd.ops.sum(tv0, dims={}0{})", "[".repeat(n), "]".repeat(n))),
    ];
    for (name, e) in cases {
        let p = write(&dir, name, &format!("{HEAD}    tv1 = {e}\n    fd.add_output(tv1)\n{TAIL}"));
        let p = p.to_str().unwrap();
        let (code, r, t) = check(p);
        assert_eq!(code, Some(1), "{name}: {t}");
        let e = r["error"].as_str().unwrap();
        assert!(e.starts_with(&format!("{p}:5:")), "{e}");
        assert!(e.contains("nested more than 100 levels deep"), "{e}");
        // The 20,000-character line is shown as a window around the error.
        assert!(e.len() < 1000, "{} characters: {e}", e.len());
        assert!(e.contains('…') && e.contains('^'), "{e}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_cycle_of_names_is_a_located_error() {
    let e = located_error(&fixture("cycle.py"), 5, 22);
    assert!(e.contains("`tv2` is not defined"), "{e}");
}

#[test]
fn nan_or_inf_in_a_shape_is_a_located_error() {
    for f in ["nan_shape.py", "inf_shape.py"] {
        let e = located_error(&fixture(f), 4, 35);
        assert!(e.contains("expected an integer for shape"), "{e}");
    }
}

#[test]
fn nan_and_inf_scalars_run() {
    let (code, r, t) = check(&fixture("nan_scalar.py"));
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(r["outputs"][0]["nan"], 32, "{t}");
}

#[test]
fn a_tensor_of_64_dims_runs_and_plans() {
    let (code, r, t) = check(&fixture("dims64.py"));
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(r["outputs"][0]["shape"].as_array().unwrap().len(), 64, "{t}");
    let o = fusebench_within(60, &["emit", &fixture("dims64.py")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn one_value_added_as_output_twice_gives_two_outputs() {
    let (code, r, t) = check(&fixture("dup_output.py"));
    assert_eq!(code, Some(0), "{t}");
    let outs = r["outputs"].as_array().unwrap();
    assert_eq!(outs.len(), 2, "{t}");
    assert_eq!(outs[0], outs[1], "{t}");
    let o = fusebench_within(60, &["emit", &fixture("dup_output.py")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn unicode_names_run_and_plan() {
    let (code, r, t) = check(&fixture("unicode.py"));
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(r["inputs"][0]["name"], "tenseur_é", "{t}");
    assert_eq!(r["outputs"][0]["name"], "张量", "{t}");
    let o = fusebench_within(60, &["emit", "--cuda", &fixture("unicode.py")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn crlf_line_endings_read_and_locate_errors_by_line() {
    let dir = tmp_dir("hostile", "crlf");
    let crlf = |name: &str| {
        let text = std::fs::read_to_string(root().join(fixture(name))).unwrap();
        assert!(!text.contains('\r'));
        let p = write(&dir, name, &text.replace('\n', "\r\n"));
        p.to_str().unwrap().to_string()
    };
    let (code, _, t) = check(&crlf("unicode.py"));
    assert_eq!(code, Some(0), "{t}");
    let e = located_error(&crlf("cycle.py"), 5, 22);
    assert!(e.contains("`tv2` is not defined"), "{e}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_script_with_two_fusion_definitions_is_a_located_error() {
    let e = located_error(&fixture("two_defs.py"), 9, 1);
    assert!(e.contains("a second fusion definition"), "{e}");
}

/// Found by fuzzing the check pipeline (fuzz/fuzz_targets/check_pipeline.rs):
/// planning a random tensor with a zero extent divided by zero.
#[test]
fn a_random_tensor_with_a_zero_extent_plans_and_runs() {
    let f = fixture("zero_extent_rng.py");
    let o = fusebench_within(60, &["emit", &f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (code, r, t) = check(&f);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(r["outputs"][0]["shape"], serde_json::json!([0, 7]), "{t}");
}

/// Found by fuzzing the check pipeline: an integer welford or var_mean over
/// an empty extent read past its empty input (a panic in the reference).
#[test]
fn integer_welford_over_an_empty_extent_runs() {
    let (code, r, t) = check(&fixture("int_welford_empty.py"));
    assert_eq!(code, Some(0), "{t}");
    for o in r["outputs"].as_array().unwrap() {
        assert_eq!(o["shape"], serde_json::json!([3, 5]), "{t}");
        assert_eq!(o["abs_max"], 0.0, "nothing merged: {t}");
    }
}

/// Found by fuzzing the check pipeline: a sum over the rows of a [300, 0]
/// random tensor (no inputs) divided its rows by its zero columns where the
/// segmenter looked for outputs to write beside it.
#[test]
fn a_sum_over_rows_of_no_columns_plans_and_runs() {
    let f = fixture("sum_of_empty_random.py");
    let o = fusebench_within(60, &["emit", &f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (code, r, t) = check(&f);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(r["outputs"][0]["shape"], serde_json::json!([0]), "{t}");
}

/// Found by fuzzing the check pipeline: a reshape of a [2, 0, 1] value to
/// [0, 1] matched the two shapes' extents group by group, which no product
/// of extents meets where one is 0 (an index past the shape).
#[test]
fn a_reshape_of_no_elements_plans_and_runs() {
    let f = fixture("reshape_of_empty.py");
    let o = fusebench_within(60, &["emit", &f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (code, r, t) = check(&f);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(r["outputs"][0]["shape"], serde_json::json!([0, 1]), "{t}");
}

/// Found by fuzzing the check pipeline: a batch norm of a [0, 3, 5, 7]
/// input planned a grid reduction over no elements in chunks of 0 (a
/// division by zero).
#[test]
fn a_batch_norm_over_an_empty_batch_plans_and_runs() {
    let f = fixture("batch_norm_empty.py");
    let o = fusebench_within(60, &["emit", &f]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (code, _, t) = check(&f);
    assert_eq!(code, Some(0), "{t}");
}
