//! `fusebench export`: fusebench results as other tools' JSON.

use fusebench_report::formats::{nvbench, pytest_benchmark};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Clone, Copy)]
pub enum Format {
    Nvbench,
    PytestBenchmark,
}

#[derive(clap::Args)]
pub struct Args {
    /// fusebench results: records, or the --json output of bench, run or compare (files or directories).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[arg(long, value_enum)]
    format: Format,
    /// Write here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let entries = match crate::report::results(&a.paths) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
    let records: Vec<_> = entries.iter().filter_map(|e| e.record.clone()).collect();
    if records.len() < entries.len() {
        eprintln!(
            "note: {} result(s) from other tools have no fusebench record and are left out",
            entries.len() - records.len()
        );
    }
    // An empty file in another tool's format would read as a run with no benchmarks.
    if records.is_empty() {
        eprintln!(
            "error: no fusebench record to export: the results given are other tools' (export takes \
             fusebench records, or the --json output of bench, run or compare)"
        );
        return Ok(ExitCode::from(crate::exit::USAGE));
    }
    let doc = match a.format {
        Format::Nvbench => nvbench::write(&records),
        Format::PytestBenchmark => pytest_benchmark::write(&records),
    };
    let text = serde_json::to_string_pretty(&doc)?;
    match a.out {
        Some(p) => std::fs::write(&p, text)?,
        None => println!("{text}"),
    }
    Ok(ExitCode::from(crate::exit::OK))
}
