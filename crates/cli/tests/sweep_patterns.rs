//! The generated sweep (`bench/patterns.py`, issue 14's shapes and layouts):
//! every script of its small grid is a valid nvFuser repro script that
//! `check` parses and runs on the CPU reference. Needs python3; under CI
//! (`CI=true`) its absence is a failure, elsewhere a skip said on stderr.

use std::path::Path;
use std::process::Command;

#[test]
fn every_generated_pattern_script_checks_on_the_cpu() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("fusebench-patterns-{}", std::process::id()));
    let gen = Command::new("python3")
        .arg(root.join("bench/patterns.py"))
        .arg(&dir)
        .arg("--small")
        .output();
    let gen = match gen {
        Ok(o) => o,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("python3 is needed: {e}"),
        Err(e) => {
            eprintln!("skipped: python3 not found ({e})");
            return;
        }
    };
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    let n: usize = String::from_utf8_lossy(&gen.stdout)
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.parse().ok())
        .expect("the generator says how many scripts it wrote");
    assert!(n >= 100, "only {n} scripts");
    let out = Command::new(env!("CARGO_BIN_EXE_fusebench")).arg("check").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("{n} fusions: {n} ok")), "{text}");
}
