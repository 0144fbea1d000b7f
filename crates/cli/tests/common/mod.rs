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
