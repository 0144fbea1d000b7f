//! `fusebench`: read nvFuser repro scripts, run them, and report.

// Standard output goes through `outln!`/`out!` (out.rs), which end the run
// quietly when the reader is gone; `println!` would panic there.
#![deny(clippy::print_stdout)]

#[macro_use]
mod out;
mod bench;
mod check;
mod data;
mod diff;
mod emit;
mod explain;
mod export;
mod files;
mod fuzz;
mod gpu;
mod history;
mod outcome;
mod peak;
mod print;
mod program;
mod progress;
mod report;
mod run;
mod save;
mod shard;
mod timing;
mod workers;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "fusebench",
    version,
    about = "How fast is this fused kernel, really?"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse, validate and run fusions on the CPU reference; print inputs, outputs and output statistics.
    #[command(after_help = "Examples:\n  fusebench check examples/\n  fusebench check --json examples/seed_rmsnorm_legacy.py\n  fusebench check --device gpu examples/")]
    Check(check::Args),
    /// Random well-typed fusions: round trip, planning, CPU reference, and with --device gpu the GPU against it.
    #[command(after_help = "Examples:\n  fusebench fuzz --count 1000 --seed 7\n  fusebench fuzz --device gpu --count 200 --keep failures/")]
    Fuzz(fuzz::Args),
    /// Print a fusion back as a repro script, or as fusebench's JSON form.
    #[command(after_help = "Examples:\n  fusebench print examples/seed_rmsnorm_legacy.py --syntax direct\n  fusebench print --json examples/")]
    Print(print::Args),
    /// Print the GPU engine's plan for a fusion: kernels, launch shapes, CUDA C.
    #[command(after_help = "Examples:\n  fusebench emit examples/seed_rmsnorm_legacy.py\n  fusebench emit --cuda examples/ > kernels.cu")]
    Emit(emit::Args),
    /// Time each fusion's kernels on the GPU until the median is known to the target, beside nvFuser and a copy of the same bytes.
    #[command(after_help = "Examples:\n  fusebench bench examples/\n  fusebench bench --stop samples:30 --cache warm --save examples/seed_rmsnorm_legacy.py\n  fusebench bench sweep/ --shard auto --out results/")]
    Bench(bench::Args),
    /// List stored measurements of a fusion and flag regressions beyond the noise.
    #[command(after_help = "Examples:\n  fusebench history seed_rmsnorm_legacy.py\n  fusebench history seed_rmsnorm_legacy.py --threshold 5% --json")]
    History(history::Args),
    /// Measure this GPU's copy bandwidth (cold and warm L2) at several sizes.
    #[command(after_help = "Examples:\n  fusebench peak\n  fusebench peak --method events --json")]
    Peak(peak::Args),
    /// Run a program of fusions in order, repeatedly, and time each inside it (in-program and cold L2).
    #[command(after_help = "Examples:\n  fusebench run examples/\n  fusebench run --by-model corpus/ --records records/")]
    Run(run::Args),
    /// Write each fusion of a program as a standalone repro with valid inputs and its live record.
    #[command(after_help = "Examples:\n  fusebench save examples/ --out repros/\n  fusebench save --by-model corpus/ --out repros/ --no-measure")]
    Save(save::Args),
    /// Time each fusion of a program inside it and standalone, and say whether they agree and why not.
    #[command(after_help = "Examples:\n  fusebench compare examples/\n  fusebench compare examples/ --saved repros/")]
    Compare(run::CompareArgs),
    /// Why two measurements of a fusion differ: every known cause checked, the likely one named.
    #[command(after_help = "Examples:\n  fusebench explain records/a.json records/b.json\n  fusebench explain old.json nvbench.json --name seed_rmsnorm_legacy.py --json")]
    Explain(explain::Args),
    /// Compare two sets of results; exit 1 only for a regression beyond the noise and the threshold.
    #[command(after_help = "Examples:\n  fusebench diff old-results/ new-results/\n  fusebench diff --threshold 5% old.json new.json --json")]
    Diff(diff::Args),
    /// Write fusebench results as nvbench or pytest-benchmark JSON.
    #[command(after_help = "Examples:\n  fusebench export results/ --format nvbench --out nvbench.json\n  fusebench export run.json --format pytest-benchmark")]
    Export(export::Args),
    /// A run, or a diff of two, as markdown with an SVG chart.
    #[command(after_help = "Examples:\n  fusebench report results/ --out report/\n  fusebench report new/ --against old/ --threshold 5% --out report/")]
    Report(report::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Settings are checked before anything runs: a misspelt value is an error, never a default.
    if let Err(e) = fusebench_knobs::get() {
        eprintln!("error: {e}");
        return ExitCode::from(exit::USAGE);
    }
    let result = match cli.command {
        Command::Check(a) => check::run(a),
        Command::Fuzz(a) => fuzz::run(a),
        Command::Print(a) => print::run(a),
        Command::Emit(a) => emit::run(a),
        Command::Bench(a) => bench::run(a),
        Command::History(a) => history::run(a),
        Command::Peak(a) => peak::run(a),
        Command::Run(a) => run::run(a),
        Command::Save(a) => save::run(a),
        Command::Compare(a) => run::compare(a),
        Command::Explain(a) => explain::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Export(a) => export::run(a),
        Command::Report(a) => report::run(a),
    };
    match result {
        Ok(code) => code,
        // A file that does not read, plan or run is a failure; usage errors
        // (bad flags, missing paths) are answered with exit::USAGE before this.
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::FAILED)
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

/// The scripts FILE|DIR arguments name, or the usage error said and its exit code.
pub(crate) fn paths_arg(p: &[PathBuf]) -> Result<Vec<PathBuf>, ExitCode> {
    files::collect(p).map_err(|e| {
        eprintln!("error: {e:#}");
        ExitCode::from(exit::USAGE)
    })
}

/// The GPU engine, or why there is none said (as `what` needs a GPU) and the usage exit code.
pub(crate) fn engine(what: &str) -> Result<fusebench_engine::Engine, ExitCode> {
    fusebench_engine::Engine::new().map_err(|e| {
        // The engine's own message starts "no GPU: "; "needs a GPU" says it once.
        match &e {
            fusebench_engine::EngineError::Unavailable(reason) => {
                eprintln!("error: {what} needs a GPU: {reason}")
            }
            _ => eprintln!("error: {what} needs a GPU: {e}"),
        }
        ExitCode::from(exit::USAGE)
    })
}

/// Exit code for a FILE argument that does not exist, with the message said.
pub(crate) fn missing(file: &std::path::Path) -> Option<ExitCode> {
    (!file.exists()).then(|| {
        eprintln!("error: {}: no such file or directory", file.display());
        ExitCode::from(exit::USAGE)
    })
}

pub(crate) use fusebench_measure::plural;

/// The message of a caught panic.
pub(crate) fn panic_message(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod help_tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every flag and argument of every verb says what it is for, and every
    /// verb shows an example: `--help` is where a newcomer looks first.
    #[test]
    fn every_flag_of_every_verb_has_help_and_every_verb_an_example() {
        let cli = Cli::command();
        let mut missing = vec![];
        for verb in cli.get_subcommands() {
            for arg in verb.get_arguments() {
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{} {}", verb.get_name(), arg.get_id()));
                }
            }
            let after = verb.get_after_help().map(|s| s.to_string()).unwrap_or_default();
            if !after.contains("fusebench ") {
                missing.push(format!("{}: no example (after_help)", verb.get_name()));
            }
        }
        assert!(missing.is_empty(), "without help:\n{}", missing.join("\n"));
    }
}
