//! `fusebench export`: fusebench results as other tools' JSON.

use anyhow::Context;
use fusebench_report::formats::{nvbench, pytest_benchmark};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Clone, Copy)]
pub enum Format {
    /// NVIDIA nvbench's JSON.
    Nvbench,
    /// pytest-benchmark's JSON (--benchmark-json).
    PytestBenchmark,
}

#[derive(clap::Args)]
pub struct Args {
    /// fusebench results: records, or the --json output of bench, run or compare (files or directories).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Which tool's JSON to write: nvbench or pytest-benchmark.
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
            "note: {} from other tools, with no fusebench record, left out",
            crate::plural(entries.len() - records.len(), "result")
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
        Some(p) => std::fs::write(&p, text).with_context(|| format!("--out {}: cannot write", p.display()))?,
        None => outln!("{text}"),
    }
    Ok(ExitCode::from(crate::exit::OK))
}
