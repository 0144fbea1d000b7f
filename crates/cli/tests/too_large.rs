//! Fusions larger than the machine: `check` fails that fusion with the file,
//! the input and the bytes needed, before allocating (an allocation the
//! system cannot give aborts the process), and goes on with the rest;
//! `emit` refuses a grid over the GPU's limits instead of planning it.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

const SMALL: &str = "crates/cli/tests/fixtures/zero_dim.py";

/// A script of one `[rows, cols]` float input, its exp the output.
fn huge_input(rows: u64, cols: u64) -> String {
    format!(
        "import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv1 = fd.ops.exp(tv0)
    fd.add_output(tv1)
with FusionDefinition() as fd:
    nvfuser_fusion(fd)
inputs = [
    torch.testing.make_tensor(({rows}, {cols}), dtype=torch.float32, device='cuda:0'),
]
fd.execute(inputs)
"
    )
}

/// A small input broadcast to `[n, n]` and added to itself: the output is huge.
fn huge_output(n: u64) -> String {
    format!(
        "import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[{n}], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    tv1 = fd.ops.broadcast(tv0, is_broadcast_dim=[True, False])
    tv2 = fd.ops.expand(tv1, shape=[{n}, {n}])
    tv3 = fd.ops.exp(tv2)
    fd.add_output(tv3)
with FusionDefinition() as fd:
    nvfuser_fusion(fd)
inputs = [
    torch.testing.make_tensor(({n},), dtype=torch.float32, device='cuda:0'),
]
fd.execute(inputs)
"
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn a_fusion_too_large_for_memory_fails_alone_and_the_run_goes_on() {
    let dir = tmp_dir("too-large", "check");
    let huge = write(&dir, "a_huge.py", &huge_input(1 << 20, 1 << 20));
    let out = write(&dir, "b_huge_output.py", &huge_output(1 << 20));
    std::fs::copy(root().join(SMALL), dir.join("c_small.py")).unwrap();
    let o = fusebench_within(120, &["check", "--json", dir.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let v: Value = serde_json::from_slice(&o.stdout).expect("--json stays JSON");
    assert_eq!(v["fusions"], 3, "{t}");
    assert_eq!(v["ok"], 1, "{t}");
    let reports = v["reports"].as_array().unwrap();
    let err = |k: usize| reports[k]["error"].as_str().unwrap_or_default().to_string();
    assert_eq!(reports[0]["ok"], false);
    let e = err(0);
    assert!(e.contains(&huge), "names the file: {e}");
    assert!(e.contains("input 0 (tv0: float32 [1048576, 1048576])"), "names the input: {e}");
    assert!(e.contains("4398046511104 bytes"), "says the bytes: {e}");
    assert_eq!(reports[1]["ok"], false);
    let e = err(1);
    assert!(e.contains(&out) && e.contains("tv3 = fd.ops.exp") && e.contains("4398046511104 bytes"), "{e}");
    assert_eq!(reports[2]["ok"], true, "the fusion after them still runs: {t}");
    // Without --json the summary line still comes.
    let o = fusebench_within(120, &["check", dir.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("3 fusions: 1 ok, 2 failed"), "{t}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn emit_refuses_a_grid_over_the_gpus_limits() {
    let dir = tmp_dir("too-large", "emit");
    let huge = write(&dir, "huge.py", &huge_input(1 << 20, 1 << 20));
    let o = fusebench_within(60, &["emit", &huge]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(o.stdout.is_empty(), "no plan printed: {t}");
    assert!(t.contains(&huge) && t.contains("too large for the GPU"), "{t}");
    assert!(t.contains("along grid dim x and the GPU launches at most 2147483647"), "{t}");
    // Past u32 too: the count saturates rather than wrapping to a small grid.
    let huger = write(&dir, "huger.py", &huge_input(1 << 30, 1 << 20));
    let o = fusebench_within(60, &["emit", &huger]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("or more blocks along grid dim x"), "{t}");
    // A large fusion within the limits still plans.
    let big = write(&dir, "big.py", &huge_input(1 << 16, 1 << 16));
    let o = fusebench_within(60, &["emit", &big]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::remove_dir_all(dir).ok();
}

/// `bench` of a fusion too large for the GPU (the 40000x1048576 float input,
/// 168 GB, that once gave an empty table and exit 0). Without a GPU the verb
/// says it needs one (exit 2) and prints no table; with one, the fusion is a
/// failure said on stderr (the file, what, why), listed under `failures` in
/// --json, and the run exits 1. The decision per fusion is unit-tested in
/// bench.rs (`a_fusion_that_fails_is_a_failure_and_the_run_exits_1`).
#[test]
fn bench_of_a_fusion_too_large_for_the_gpu_is_a_failure_said_clearly() {
    let dir = tmp_dir("too-large", "bench");
    let huge = write(&dir, "huge.py", &huge_input(40_000, 1 << 20));
    let gpu = fusebench_runtime::probe().is_ok();
    let o = fusebench_within(120, &["bench", &huge]);
    let t = text(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    if gpu {
        assert_eq!(o.status.code(), Some(1), "{t}");
        assert!(err.contains(&format!("{huge}: FAILED: ")), "{t}");
        assert!(err.contains("167772160000 bytes"), "says the bytes: {t}");
        assert!(t.contains("1 failed"), "{t}");
    } else {
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert_eq!(err.matches("needs a GPU").count(), 1, "{t}");
        assert!(o.stdout.is_empty(), "no table: {t}");
    }
    let o = fusebench_within(120, &["bench", "--json", &huge]);
    let t = text(&o);
    if gpu {
        assert_eq!(o.status.code(), Some(1), "{t}");
        let v: Value = serde_json::from_slice(&o.stdout).expect("--json stays JSON");
        assert_eq!(v["rows"], serde_json::json!([]), "{t}");
        assert_eq!(v["failures"][0]["file"], huge.as_str(), "{t}");
    } else {
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(o.stdout.is_empty(), "no JSON without a GPU: {t}");
    }
    std::fs::remove_dir_all(dir).ok();
}
