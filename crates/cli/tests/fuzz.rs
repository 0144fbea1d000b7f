//! `fusebench fuzz` without a GPU: what CI can run. Every drawn fusion must
//! print and read back as itself, plan (and have its CUDA written) without a
//! panic, and run on the CPU reference with its error bounds; the regression
//! scripts of earlier GPU failures must parse, plan and run.

mod common;
use common::*;

fn fuzz_json(args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let mut all = vec!["fuzz", "--json"];
    all.extend(args);
    let o = fusebench(&all);
    let t = text(&o);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {t}"));
    (o.status.code(), v, t)
}

#[test]
fn three_hundred_random_fusions_round_trip_plan_and_run_on_the_cpu() {
    let (code, v, t) = fuzz_json(&["--count", "300", "--seed", "11"]);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(v["generated"], 300, "{t}");
    assert_eq!(v["failed"], 0, "{t}");
    // Ill-typed draws happen and are counted, not failures.
    assert!(v["ill_typed_draws"].as_u64().unwrap() > 0, "{t}");
    let ran = v["matched"].as_u64().unwrap() + v["refused"].as_u64().unwrap();
    assert!(
        ran >= 290,
        "most fusions must run on the CPU reference: {t}"
    );
}

#[test]
fn fusion_i_of_a_seed_is_always_the_same() {
    let one = text(&fusebench(&[
        "fuzz", "--show", "--seed", "3", "--start", "7", "--count", "1",
    ]));
    let three = text(&fusebench(&[
        "fuzz", "--show", "--seed", "3", "--start", "5", "--count", "3",
    ]));
    let script = |t: &str, label: &str| {
        let from = t.find(label).unwrap_or_else(|| panic!("{label} in {t}"));
        let rest = &t[from..];
        rest[..rest.find("fd.execute(inputs)").unwrap()].to_string()
    };
    let a = script(&one, "# seed 3 fusion 7");
    assert_eq!(a, script(&three, "# seed 3 fusion 7"));
    assert_ne!(a, script(&three, "# seed 3 fusion 6"));
    assert!(a.contains("fd.define_tensor"), "{a}");
}

#[test]
fn fuzz_regression_scripts_parse_plan_and_run_on_the_cpu() {
    let dir = "crates/cli/tests/fixtures/fuzz-regressions";
    let n = std::fs::read_dir(root().join(dir))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "py")
        })
        .count();
    assert!(n > 0, "the regression directory has scripts");
    let (code, v, t) = fuzz_json(&["--replay", dir]);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(v["generated"].as_u64(), Some(n as u64), "{t}");
    assert_eq!(v["failed"], 0, "{t}");
    assert_eq!(v["skipped"], 0, "{t}");
    // Each once failed or was refused on the GPU; the planner takes them all now
    // (seed1-2767 and five more: an index kernel reading a reduction result).
    assert_eq!(v["refused"], 0, "{t}");
}

/// `--keep` also keeps what the planner refused, under `refused/`, with the
/// reason, so a refusal can be looked at without redrawing it, or (replayed)
/// a directory of scripts sorted by what the GPU engine takes. The random
/// streams hold none now that seeds 1 to 7 and 34 plan (40,000 fusions each),
/// so a replayed script it refuses by name: a Float `grouped_mm`.
#[test]
fn keep_writes_refused_fusions_with_their_reason() {
    let dir = tmp_dir(file!(), "keep_refused");
    let script = dir.join("grouped_float.py");
    std::fs::write(
        &script,
        "import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    a = fd.define_tensor(shape=[16, 8], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    b = fd.define_tensor(shape=[8, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    offsets = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    y = fd.ops.grouped_mm(a, b, offsets)
    fd.add_output(y)
with FusionDefinition() as fd:
    nvfuser_fusion(fd)
inputs = [
    torch.randn((16, 8), dtype=torch.float32, device='cuda:0'),
    torch.randn((8, 4), dtype=torch.float32, device='cuda:0'),
    torch.testing.make_tensor((2,), dtype=torch.int32, device='cuda:0'),
]
fd.execute(inputs)
",
    )
    .unwrap();
    let kept_dir = dir.join("kept");
    let (code, v, t) = fuzz_json(&["--replay", script.to_str().unwrap(), "--keep", kept_dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(v["refused"], 1, "{t}");
    let kept = kept_dir.join("refused/grouped_float.py");
    let text_kept = std::fs::read_to_string(&kept).unwrap_or_else(|e| panic!("{}: {e}: {t}", kept.display()));
    assert!(text_kept.contains("# refused: not supported by the GPU engine: grouped_mm"), "{text_kept}");
    assert!(text_kept.contains("# redo: fusebench fuzz --replay"), "{text_kept}");
    // The kept script is a repro the tools read back.
    let o = fusebench(&["print", kept.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}
