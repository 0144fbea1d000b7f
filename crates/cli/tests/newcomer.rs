//! What a newcomer meets first: `--help`, percentages, directories given to
//! every verb, messages that name what they concern.

mod common;
use common::*;

#[test]
fn a_bare_threshold_is_refused_with_the_percent_spelling() {
    for verb in [
        vec!["diff", "a.json", "b.json"],
        vec!["report", "a.json"],
        vec!["history", "seed.py"],
    ] {
        let mut args = verb.clone();
        args.extend(["--threshold", "5"]);
        let o = fusebench(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{verb:?}: {t}");
        assert!(t.contains("write 5% for 5 percent"), "{verb:?}: {t}");
    }
}

#[test]
fn every_verb_shows_examples_in_its_help() {
    for verb in ["check", "diff", "report", "export", "explain", "emit", "print"] {
        // -h: one line per flag, so a flag without help ends its line.
        let o = fusebench(&[verb, "-h"]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{t}");
        assert!(t.contains("Examples:\n  fusebench "), "{verb}: {t}");
        assert!(!t.lines().any(|l| l.trim() == "--json"), "{verb}: --json without help:\n{t}");
    }
}

#[test]
fn emit_and_print_take_directories() {
    let o = fusebench(&["emit", "examples/"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("examples/seed_rmsnorm_legacy.py: 1 kernel\n"), "{t}");
    assert!(t.contains("examples/005_Llama-3.2-1B_bw_nvFusion9.py: 2 kernels"), "{t}");
    let o = fusebench(&["emit", "--json", "examples/"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["plans"].as_array().map(Vec::len), Some(4), "{}", text(&o));
    let o = fusebench(&["print", "examples/"]);
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(t.matches("# ---- examples/").count(), 4, "{t}");
    let o = fusebench(&["print", "--json", "examples/"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["fusions"].as_array().map(Vec::len), Some(4), "{}", text(&o));
    // One file prints as it always did.
    let o = fusebench(&["print", "examples/seed_rmsnorm_legacy.py"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("# ----"));
}

#[test]
fn emit_cuda_is_source_with_the_plan_as_comments() {
    let o = fusebench(&["emit", "--cuda", "examples/seed_rmsnorm_legacy.py"]);
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Everything before the source is a comment: the plan, kernel by kernel.
    let head: Vec<&str> = t.lines().take_while(|l| !l.is_empty()).collect();
    assert!(head.len() >= 3, "{t}");
    assert!(head.iter().all(|l| l.starts_with("//")), "{t}");
    assert!(head[0].contains("1 kernel"), "{t}");
    assert!(t.contains("__global__"), "{t}");
    // No line of the plan is left bare where a compiler would read it.
    for l in t.lines().filter(|l| l.contains("grid [")) {
        assert!(l.trim_start().starts_with("//"), "{l}");
    }
}

#[test]
fn print_and_emit_of_a_missing_path_name_it() {
    for verb in ["print", "emit"] {
        let o = fusebench(&[verb, "no/such.py"]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(t.contains("no/such.py: no such file or directory"), "{t}");
    }
}

#[test]
fn report_out_errors_name_the_path() {
    let results = "crates/report/tests/fixtures/corpus-run-1.json";
    let o = fusebench(&["report", results, "--out", "/proc/fusebench-x"]);
    let t = text(&o);
    assert_ne!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("/proc/fusebench-x"), "{t}");
    let file = std::env::temp_dir().join(format!("fusebench-out-file-{}", std::process::id()));
    std::fs::write(&file, "x").unwrap();
    let o = fusebench(&["report", results, "--out", file.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains(&format!("--out {}: exists and is not a directory", file.display())), "{t}");
    std::fs::remove_file(&file).ok();
}

#[test]
fn export_out_errors_name_the_path() {
    let results = "crates/report/tests/fixtures/corpus-run-1.json";
    let o = fusebench(&["export", results, "--format", "nvbench", "--out", "/proc/fusebench-x/n.json"]);
    let t = text(&o);
    assert_ne!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("--out /proc/fusebench-x/n.json"), "{t}");
}

/// One Rust version: the one Cargo.toml declares is the one CI asks for.
#[test]
fn ci_and_cargo_toml_name_the_same_rust_version() {
    let toml = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let version = toml
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version in Cargo.toml");
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(ci.contains(&format!("({version} or newer")), ".ci/run does not say {version}");
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains(&format!("Rust {version}")), "README does not say Rust {version}");
}

#[test]
fn no_progress_count_when_stderr_is_not_a_terminal() {
    // The tests read stderr through a pipe: a log gets results, not a count.
    let o = fusebench(&["check", "examples/"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(!t.contains("[1/4]"), "{t}");
}

#[test]
fn counts_are_said_in_the_singular_for_one() {
    let o = fusebench(&["check", "examples/seed_rmsnorm_legacy.py"]);
    let t = text(&o);
    assert!(t.contains("1 fusion: 1 ok, 0 failed"), "{t}");
    let o = fusebench(&["check", "examples/"]);
    assert!(text(&o).contains("4 fusions: 4 ok, 0 failed"));
}

#[test]
fn needing_a_gpu_is_said_once() {
    if fusebench_runtime::probe().is_ok() {
        eprintln!("skipped: a GPU is present");
        return;
    }
    let o = fusebench(&["check", "--device", "gpu", "examples/"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("needs a GPU: "), "{t}");
    assert!(!t.contains("no GPU: "), "said twice: {t}");
}
