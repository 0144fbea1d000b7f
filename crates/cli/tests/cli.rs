//! The `fusebench` command as a user runs it: exit codes, messages, JSON.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn fixture(name: &str) -> String {
    format!("crates/cli/tests/fixtures/{name}")
}


#[test]
fn check_examples_is_ok() {
    let o = fusebench(&["check", "examples/"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("4 fusions: 4 ok, 0 failed"), "{t}");
    assert!(
        t.contains("abs-max") && t.contains("legacy syntax") && t.contains("direct syntax"),
        "{t}"
    );
}

#[test]
fn check_json_reports_every_output() {
    let o = fusebench(&["check", "--json", "examples/seed_rmsnorm_legacy.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    let r = &v["reports"][0];
    assert_eq!(r["ok"], true);
    assert_eq!(r["ops"], 14);
    assert_eq!(r["outputs"].as_array().unwrap().len(), 2);
    assert_eq!(r["outputs"][1]["shape"], serde_json::json!([4, 1024, 4096]));
    assert_eq!(r["outputs"][1]["nan"], 0);
    assert!(r["outputs"][1]["abs_max"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_missing_file_is_a_usage_error() {
    let o = fusebench(&["check", "no/such/file.py"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("no/such/file.py: no such file or directory"),
        "{}",
        text(&o)
    );
    let o = fusebench(&["check", "--frobnicate", "examples/"]);
    assert_eq!(o.status.code(), Some(2));
    for verb in ["print", "emit"] {
        let o = fusebench(&[verb, "no/such/file.py"]);
        assert_eq!(o.status.code(), Some(2), "{verb}: {}", text(&o));
        let o = fusebench(&[verb, &fixture("unknown_op.py")]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{verb} of a broken script fails: {}",
            text(&o)
        );
        assert!(text(&o).contains("unknown_op.py:5:11"), "{}", text(&o));
    }
}

#[test]
fn an_unknown_op_fails_with_its_location_and_what_is_supported() {
    let o = fusebench(&["check", &fixture("unknown_op.py")]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("unknown_op.py:5:"), "{t}");
    assert!(t.contains("softplus"), "{t}");
    assert!(t.contains("supported") && t.contains("index_select"), "{t}");
}

#[test]
fn zero_dim_tensors_run() {
    let o = fusebench(&["check", &fixture("zero_dim.py")]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("[]"), "{t}");
}

fusebench_testdata::needs_corpus! {
#[test]
fn invalid_gather_indices_of_a_script_are_reported() {
    let corpus = fusebench_testdata::require("corpus");
    let f = corpus.join("000_Llama-3.2-1B_fw_nvFusion0.py");
    let o = fusebench(&["check", f.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("would give invalid indices"), "{t}");
    assert!(t.contains("[0, 128256)"), "{t}");
}
}

#[test]
fn printed_scripts_and_json_read_back() {
    let dir = std::env::temp_dir().join(format!("fusebench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (args, name) in [
        (vec!["print"], "again.py"),
        (vec!["print", "--json"], "again.json"),
        (vec!["print", "--syntax", "direct"], "direct.py"),
    ] {
        let mut a = args.clone();
        a.push("examples/seed_rmsnorm_legacy.py");
        let o = fusebench(&a);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let path = dir.join(name);
        std::fs::write(&path, &o.stdout).unwrap();
        let c = fusebench(&["check", "--json", path.to_str().unwrap()]);
        let v: serde_json::Value = serde_json::from_slice(&c.stdout).expect("valid JSON");
        assert_eq!(v["reports"][0]["ok"], true, "{name}: {}", text(&c));
        assert_eq!(v["reports"][0]["ops"], 14, "{name}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn gpu_commands_say_clearly_when_there_is_no_gpu() {
    if fusebench_runtime::probe().is_ok() {
        eprintln!("skipped: a GPU is present");
        return;
    }
    for args in [
        vec!["check", "--device", "gpu", "examples/"],
        vec!["bench", "examples/"],
        vec!["run", "examples/"],
        vec!["compare", "--by-model", "examples/"],
    ] {
        let o = fusebench(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(t.contains("no GPU") || t.contains("needs a GPU"), "{t}");
        assert!(!t.contains("panicked"), "{t}");
    }
}

#[test]
fn emit_plans_without_a_gpu() {
    let o = fusebench(&["emit", "--cuda", "examples/seed_rmsnorm_legacy.py"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("extern \"C\" __global__"), "{t}");
    assert!(t.contains("grid"), "{t}");
}

#[test]
fn emit_compiles_with_nvrtc_alone_or_says_it_cannot() {
    let o = fusebench(&["emit", "--compile", "examples/seed_rmsnorm_legacy.py", "examples/005_Llama-3.2-1B_bw_nvFusion9.py"]);
    let t = text(&o);
    match o.status.code() {
        // NVRTC loaded (no GPU is needed): every module compiles.
        Some(0) => {
            assert!(t.contains("seed_rmsnorm_legacy.py: 1 kernel compiled in "), "{t}");
            assert!(t.contains("2 fusions compiled, 0 failed"), "{t}");
        }
        // No NVRTC here: a usage error saying what to install, not a panic.
        Some(2) => assert!(t.contains("NVRTC could not be loaded") && t.contains("LD_LIBRARY_PATH"), "{t}"),
        c => panic!("exit {c:?}: {t}"),
    }
    // --compile prints neither the source nor the plan as JSON.
    let o = fusebench(&["emit", "--compile", "--cuda", "examples/seed_rmsnorm_legacy.py"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn grouped_products_with_contiguous_rows_compile_in_every_form_or_say_they_cannot() {
    // A weight gradient with both operands rows-contiguous, and a forward
    // product with the weight held [in, out]: element by element (0),
    // through mma.sync (1) and through wgmma (2), for sm_90a and sm_90.
    let files = [
        "crates/cli/tests/fixtures/ops/products/grouped_mm_k_tokens_strided_f16.py",
        "crates/cli/tests/fixtures/ops/products/grouped_mm_rows_bf16.py",
    ];
    for mn in ["0", "1", "2"] {
        for arch in ["sm_90a", "sm_90"] {
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_fusebench"))
                .args(["emit", "--compile", "--arch", arch, files[0], files[1]])
                .env("FUSEBENCH_GROUPED_MN", mn)
                .current_dir(root())
                .output()
                .expect("fusebench runs");
            let t = text(&o);
            match o.status.code() {
                Some(0) => assert!(t.contains("2 fusions compiled, 0 failed"), "{mn} {arch}: {t}"),
                Some(2) => assert!(t.contains("NVRTC could not be loaded"), "{t}"),
                c => panic!("{mn} {arch}: exit {c:?}: {t}"),
            }
        }
    }
}

#[test]
fn emit_writes_each_translation_unit_after_a_line_of_its_own() {
    // Flash attention's forward and backward: three kernels, each a unit of its own.
    let f = "crates/cli/tests/fixtures/ops/attention/attn_bwd_bf16.py";
    let o = fusebench(&["emit", "--cuda", f]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let units: Vec<&str> = t.split("// fusebench translation unit ").skip(1).collect();
    assert_eq!(units.len(), 3, "{t}");
    for (i, u) in units.iter().enumerate() {
        assert!(u.starts_with(&format!("{} of 3: fb_attn_", i + 1)), "{u}");
        // Each a whole module: the prelude, then its one kernel.
        assert!(u.contains("typedef unsigned short fb_bf16;"), "{u}");
        assert_eq!(u.matches("__global__").count(), 1, "{u}");
    }
    let o = fusebench(&["emit", "--compile", f]);
    let t = text(&o);
    match o.status.code() {
        Some(0) => assert!(t.contains("3 kernels compiled in "), "{t}"),
        Some(2) => assert!(t.contains("NVRTC could not be loaded"), "{t}"),
        c => panic!("exit {c:?}: {t}"),
    }
}

#[test]
fn emit_resources_says_each_kernels_registers_residency_and_waves() {
    let o = fusebench(&["emit", "--compile", "--resources", "examples/seed_rmsnorm_legacy.py"]);
    let t = text(&o);
    match o.status.code() {
        // NVRTC loaded: one line for the one kernel, from ptxas's report.
        Some(0) => {
            let line = t.lines().find(|l| l.trim_start().starts_with("fb_")).unwrap_or_else(|| panic!("{t}"));
            assert!(line.contains(" registers, ") && line.contains(" threads per multiprocessor (") && line.contains(" waves"), "{t}");
            assert!(!line.contains("ptxas reported nothing"), "{t}");
        }
        Some(2) => assert!(t.contains("NVRTC could not be loaded"), "{t}"),
        c => panic!("exit {c:?}: {t}"),
    }
    // --resources needs --compile.
    let o = fusebench(&["emit", "--resources", "examples/seed_rmsnorm_legacy.py"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn emit_says_each_kernels_schedule_and_why() {
    let o = fusebench(&["emit", "examples/seed_rmsnorm_legacy.py"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("schedule: rowwise — row of 4096 bfloat16 = 512 vectors of 8 held by 128 of 128 threads x 4 vectors; 4096 rows"),
        "{t}"
    );
    // Every kernel of a plan with a combine says its schedule.
    let o = fusebench(&["emit", "examples/005_Llama-3.2-1B_bw_nvFusion9.py"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert_eq!(
        t.matches("      schedule: ").count(),
        t.matches("grid [").count(),
        "every kernel says its schedule: {t}"
    );
    // A stored row sum: grid and rowwise tried, in registry order, before persistent.
    let o = fusebench(&["emit", &fixture("fuzz-regressions/seed1-1698.py")]);
    let t = text(&o);
    let lines = [
        "      schedule: persistent — reduces the innermost 511 of each of 1 rows",
        "      not grid — 1 results of 511 elements each: splitting a result over blocks needs fewer than 66 results of at least 65536 elements",
        "      not rowwise — reduces the innermost dims [2] of [1, 1, 511], not over rows",
    ];
    let at: Vec<usize> = lines
        .iter()
        .map(|l| t.find(l).unwrap_or_else(|| panic!("{l} missing: {t}")))
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{t}");
    let o = fusebench(&["emit", "--json", "examples/seed_rmsnorm_legacy.py"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kernels"][0]["choice"]["schedule"], "rowwise");
    assert!(j["kernels"][0]["choice"]["reason"]
        .as_str()
        .is_some_and(|r| r.contains("128 of 128 threads")));
}

#[test]
fn history_lists_stored_results_and_flags_regressions() {
    use fusebench_measure::{CachePolicy, Environment, Measurement, Method, Sample, Stop, Subject};
    let dir = std::env::temp_dir().join(format!("fusebench-history-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("r.sqlite");
    let mut store = fusebench_store::Store::open(&db).unwrap();
    for (i, base) in [20.0, 20.02, 21.0].into_iter().enumerate() {
        let samples = (0..40)
            .map(|k| Sample::time(base + (k % 5) as f64 * 0.05))
            .collect();
        let m = Measurement::new(
            Subject {
                name: "seed.py".into(),
                definition_hash: "d".into(),
                inputs_hash: "i".into(),
                inputs: vec![],
            },
            Method::CudaEvents,
            CachePolicy::Cold,
            "fixed count of 40 samples".into(),
            Stop::Count,
            3,
            Environment {
                gpu_name: "NVIDIA H200".into(),
                gpu_uuid: "GPU-1".into(),
                ..Default::default()
            },
            vec![],
            samples,
            1_764_480_000 + i as u64 * 3600,
        )
        .unwrap();
        store.save(&m).unwrap();
    }
    drop(store);
    let o = fusebench(&["history", "seed.py", "--db", db.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a regression fails the command: {t}"
    );
    assert_eq!(t.matches("REGRESSION").count(), 1, "{t}");
    assert!(
        t.contains("2025-11-30 07:20 UTC") && t.contains("NVIDIA H200"),
        "{t}"
    );
    let o = fusebench(&[
        "history",
        "seed.py",
        "--db",
        db.to_str().unwrap(),
        "--threshold",
        "10%",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "5% is under a 10% threshold: {}",
        text(&o)
    );
    let o = fusebench(&["history", "nothing.py", "--db", db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "nothing stored is exit 2");
    assert!(text(&o).contains("no stored measurements"), "{}", text(&o));
    std::fs::remove_dir_all(&dir).ok();
}

fusebench_testdata::needs_corpus! {
#[test]
fn saved_repros_of_a_gather_feed_valid_indices() {
    let corpus = fusebench_testdata::require("corpus");
    let dir = std::env::temp_dir().join(format!("fusebench-save-{}", std::process::id()));
    let f = corpus.join("000_Llama-3.2-1B_fw_nvFusion0.py");
    let o = fusebench(&[
        "save",
        "--no-measure",
        "--out",
        dir.to_str().unwrap(),
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let saved = dir.join("000_Llama-3.2-1B_fw_nvFusion0.py");
    let script = std::fs::read_to_string(&saved).unwrap();
    // The token ids: drawn over the embedding table's rows, never make_tensor's [-9, 10).
    assert!(
        script.contains("torch.randint(0, 128256, (2, 1024), dtype=torch.int64"),
        "{script}"
    );
    assert!(
        script.contains("fusebench save: fusion 1 of program"),
        "{script}"
    );
    let c = fusebench(&["check", "--strict", saved.to_str().unwrap()]);
    let t = text(&c);
    assert_eq!(c.status.code(), Some(0), "{t}");
    assert!(!t.contains("invalid indices"), "{t}");
    // The JSON form holds the same definition and input list.
    let json = dir.join("json/000_Llama-3.2-1B_fw_nvFusion0.json");
    let c = fusebench(&["check", "--json", json.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&c.stdout).expect("valid JSON");
    assert_eq!(v["reports"][0]["ok"], true, "{}", text(&c));
    std::fs::remove_dir_all(&dir).ok();
}
}

#[test]
fn a_bad_manifest_line_is_a_usage_error_with_its_place() {
    let dir = std::env::temp_dir().join(format!("fusebench-manifest-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = dir.join("step.txt");
    std::fs::write(&m, "../../no_such.py\n").unwrap();
    let o = fusebench(&["run", m.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("step.txt:1:1:") && t.contains("is not a file"),
        "{t}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explain_names_the_cause_of_recorded_pairs() {
    let fx = |n: &str| format!("crates/measure/tests/fixtures/explain/{n}.json");
    let o = fusebench(&["explain", &fx("b1-cold"), &fx("b1-warm")]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("Most likely cause: working set vs L2 size."),
        "{t}"
    );
    assert!(t.contains("ruled out  different GPU or driver"), "{t}");
    let o = fusebench(&["explain", "--json", &fx("seed-cold-1"), &fx("seed-cold-2")]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["causes"], serde_json::json!(["noise"]));
    let o = fusebench(&["explain", &fx("seed-cold-1"), "no/such.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn diff_exits_one_only_for_a_regression_and_names_it() {
    let fx = |n: &str| format!("crates/report/tests/fixtures/{n}");
    let o = fusebench(&["diff", &fx("corpus-run-1.json"), &fx("corpus-run-2.json")]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("no regression beyond the noise and 2.0% (32 compared)"),
        "{t}"
    );
    let o = fusebench(&[
        "diff",
        &fx("corpus-run-1.json"),
        &fx("corpus-run-2-029-slower.json"),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("1 regression beyond the noise and 2.0%: 029_pythia-1b_bw_nvFusion6.py"),
        "{t}"
    );
    let o = fusebench(&[
        "diff",
        "--threshold",
        "10%",
        &fx("corpus-run-1.json"),
        &fx("corpus-run-2-029-slower.json"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = fusebench(&[
        "diff",
        &fx("corpus-run-1.json"),
        &fx("pytest_benchmark.json"),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("no fusion appears in both"), "{t}");
}

#[test]
fn export_writes_files_the_readers_take_back() {
    let dir = std::env::temp_dir().join(format!("fusebench-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = "crates/report/tests/fixtures/corpus-run-1.json";
    for (fmt, name) in [("nvbench", "nv.json"), ("pytest-benchmark", "pb.json")] {
        let out = dir.join(name);
        let o = fusebench(&[
            "export",
            "--format",
            fmt,
            "--out",
            out.to_str().unwrap(),
            run,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let d = fusebench(&["diff", run, out.to_str().unwrap()]);
        let t = text(&d);
        assert_eq!(d.status.code(), Some(0), "{fmt}: {t}");
        assert!(t.contains("(32 compared)"), "{fmt}: {t}");
    }
    let o = fusebench(&["report", "--out", dir.join("r").to_str().unwrap(), run]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = std::fs::read_to_string(dir.join("r/report.md")).unwrap();
    assert!(
        md.contains("![kernel times](times.svg)") && md.contains("| seed_rmsnorm_legacy.py |"),
        "{md}"
    );
    assert!(dir.join("r/times.svg").is_file());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn saved_fusions_record_their_inputs_and_checks_respect_them() {
    let dir = std::env::temp_dir().join(format!("fusebench-facts-{}", std::process::id()));
    let o = fusebench(&[
        "save",
        "--no-measure",
        "--out",
        dir.to_str().unwrap(),
        "examples/seed_rmsnorm_legacy.py",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let json_path = dir.join("json/seed_rmsnorm_legacy.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let facts = v["input_facts"].as_array().unwrap().clone();
    assert_eq!(facts.len(), 2);
    assert!(
        facts[0]["min"].as_f64().unwrap() < 0.0
            && facts[0]["content_hash"].as_str().unwrap().len() == 24
    );
    let script = std::fs::read_to_string(dir.join("seed_rmsnorm_legacy.py")).unwrap();
    assert!(script.contains("# input 0: values in ["), "{script}");
    // The saved form regenerates the live values: nothing to say.
    let c = fusebench(&["check", json_path.to_str().unwrap()]);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c));
    assert!(!text(&c).contains("live values"), "{}", text(&c));
    // A recorded range the recipe would leave: the check says so and draws within it.
    v["input_facts"][0]["min"] = serde_json::json!(0.0);
    std::fs::write(&json_path, v.to_string()).unwrap();
    let c = fusebench(&["check", json_path.to_str().unwrap()]);
    let t = text(&c);
    assert_eq!(c.status.code(), Some(0), "{t}");
    assert!(
        t.contains("the live values lay in [0, ")
            && t.contains("negative values the live inputs never had"),
        "{t}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_misspelt_setting_is_an_error_naming_what_is_accepted() {
    let run = |var: &str, value: &str| {
        Command::new(env!("CARGO_BIN_EXE_fusebench"))
            .args(["check", "examples/seed_rmsnorm_legacy.py"])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .env(var, value)
            .output()
            .expect("fusebench runs")
    };
    let o = run("FUSEBENCH_FLUSH", "Read");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("FUSEBENCH_FLUSH takes read or write"),
        "{}",
        text(&o)
    );
    let o = run("FUSEBENCH_FLUHS", "read");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a fusebench setting"), "{}", text(&o));
    let o = run("FUSEBENCH_FLUSH", "read");
    assert_eq!(o.status.code(), Some(0), "a valid setting: {}", text(&o));
}

#[test]
fn a_stopping_rule_that_does_not_parse_is_a_usage_error() {
    // Checked before a GPU is looked for, so the message is the rule's everywhere.
    let o = fusebench(&[
        "bench",
        "examples/seed_rmsnorm_legacy.py",
        "--stop",
        "nosie:1%",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("the rules are"), "{}", text(&o));
}
