//! What the CLI tests share: running the built `fusebench` from the
//! repository's root, and reading what it said.
#![allow(dead_code)] // each test file uses its own part of this

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root, where the tests run the command.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `fusebench ARGS` run from the repository's root.
pub fn fusebench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fusebench"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("fusebench runs")
}

/// What it printed, stdout then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `fusebench ARGS` started in the repository root, stdout and stderr piped.
pub fn spawn(args: &[&str]) -> std::process::Child {
    use std::process::Stdio;
    Command::new(env!("CARGO_BIN_EXE_fusebench"))
        .args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fusebench runs")
}

/// `fusebench ARGS` killed after `secs` seconds: a test of something that
/// once hung fails with a message instead of hanging the test run.
pub fn fusebench_within(secs: u64, args: &[&str]) -> Output {
    use std::time::{Duration, Instant};
    let mut child = spawn(args);
    let start = Instant::now();
    while child.try_wait().expect("waiting for fusebench").is_none() {
        if start.elapsed() > Duration::from_secs(secs) {
            child.kill().ok();
            child.wait().ok();
            panic!("fusebench {args:?} still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("fusebench's output")
}

/// A fresh temporary directory for one test of one file.
pub fn tmp_dir(file: &str, test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fusebench-{file}-{}-{test}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}
