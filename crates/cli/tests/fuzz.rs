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
/// reason, so a refusal can be looked at without redrawing (seed 1, fusion
/// 93: a matmul whose broadcast batch dims would take more library calls
/// than the planner makes; a change to what the generator draws moves it).
#[test]
fn keep_writes_refused_fusions_with_their_reason() {
    let dir = tmp_dir(file!(), "keep_refused");
    let d = dir.to_str().unwrap();
    let (code, v, t) = fuzz_json(&["--seed", "1", "--start", "93", "--count", "1", "--keep", d]);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(v["refused"], 1, "{t}");
    let kept = dir.join("refused/seed1-93.py");
    let script = std::fs::read_to_string(&kept).unwrap_or_else(|e| panic!("{}: {e}: {t}", kept.display()));
    assert!(script.contains("# refused: not supported by the GPU engine: matmul"), "{script}");
    // The kept script is a repro the tools read back.
    let o = fusebench(&["print", kept.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}
