//! `fusebench`: read nvFuser repro scripts, run them, and report.

mod check;
mod files;
mod print;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "fusebench", version, about = "How fast is this fused kernel, really?")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse, validate and run fusions on the CPU reference; print inputs, outputs and output statistics.
    Check(check::Args),
    /// Print a fusion back as a repro script, or as fusebench's JSON form.
    Print(print::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(a) => check::run(a),
        Command::Print(a) => print::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Exit codes shared by every verb.
pub mod exit {
    /// Every fusion was fine.
    pub const OK: u8 = 0;
    /// At least one fusion failed.
    pub const FAILED: u8 = 1;
    /// The command was used wrongly (bad flag, missing file).
    pub const USAGE: u8 = 2;
}

pub(crate) fn paths_arg(p: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    files::collect(p)
}
