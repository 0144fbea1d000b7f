//! `fusebench diff OLD NEW`: per fusion, new against old, a verdict from their
//! samples, and an exit code a CI job can use: 1 only for a regression beyond
//! the noise of both and beyond the threshold; 2 when nothing could be
//! compared (no result on both sides, or every pair refused).

use crate::bench::parse_percent;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use fusebench_report::{diff, load_paths, Across, Diff, Entry, Verdict};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The old results: a file or a directory of them (merged; the latest result of a fusion wins).
    old: PathBuf,
    /// The new results, likewise.
    new: PathBuf,
    /// A change beyond the noise counts as a regression when new / old exceeds 1 + this.
    #[arg(long, default_value = "2%", value_parser = parse_percent)]
    threshold: f64,
    /// Compare results taken on different GPUs (refused by default: the difference would be the GPU).
    #[arg(long)]
    across_gpus: bool,
    /// Compare results taken by another method or cold set-up (refused by default: CUPTI and
    /// events times, or a read and a write flush, differ by how they were taken).
    #[arg(long)]
    across_methods: bool,
    /// Print the result as JSON on standard output (for scripts; no table, no progress).
    #[arg(long)]
    json: bool,
}

/// The results under `path`, or the error to print: unreadable, or holding none.
fn read(path: &Path) -> Result<Vec<Entry>, String> {
    match load_paths(&[path.to_path_buf()]) {
        Ok(e) if e.is_empty() => Err(format!("{}: holds no results", path.display())),
        Ok(e) => Ok(e),
        Err(e) => Err(e.to_string()),
    }
}

/// Why nothing was compared, when nothing was.
fn nothing_compared(d: &Diff) -> Option<String> {
    if d.compared() > 0 {
        return None;
    }
    let count = |v: Verdict| d.pairs.iter().filter(|p| p.verdict == v).count();
    let (gpus, ways) = (count(Verdict::DifferentGpu), count(Verdict::NotComparable));
    if gpus + ways == 0 {
        return Some("no fusion appears in both the old and the new results".into());
    }
    let mut why = Vec::new();
    if gpus > 0 {
        why.push(format!(
            "{} measured on different GPUs (--across-gpus compares them anyway)",
            crate::plural(gpus, "pair")
        ));
    }
    if ways > 0 {
        why.push(format!(
            "{} taken another way, by method or cold set-up (--across-methods compares them anyway)",
            crate::plural(ways, "pair")
        ));
    }
    let example = d
        .refused()
        .next()
        .map(|p| format!("; e.g. {}: {}", p.name, p.verdict_text()))
        .unwrap_or_default();
    Some(format!(
        "no result was compared: {}{example}",
        why.join("; ")
    ))
}

fn table(d: &Diff) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "fusion",
        "old µs [95%]",
        "new µs [95%]",
        "new / old [range]",
        "verdict",
    ]);
    let us = |e: &Option<Entry>| e.as_ref().map_or("–".into(), Entry::interval_text);
    for p in &d.pairs {
        t.add_row(vec![
            p.name.clone(),
            us(&p.old),
            us(&p.new),
            p.ratio_text(),
            p.verdict_text(),
        ]);
    }
    t
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    for p in [&a.old, &a.new] {
        if let Some(code) = crate::missing(p) {
            return Ok(code);
        }
    }
    let (old, new) = match (read(&a.old), read(&a.new)) {
        (Ok(o), Ok(n)) => (o, n),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
    let across = Across {
        gpus: a.across_gpus,
        methods: a.across_methods,
    };
    let d = diff(&old, &new, a.threshold, across);
    // Decided before anything is printed: an error comes alone, not after a table.
    if let Some(why) = nothing_compared(&d) {
        eprintln!("error: {why}");
        return Ok(ExitCode::from(crate::exit::USAGE));
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        outln!("{}", table(&d));
    }
    let compared = d.compared();
    let gpus = d
        .refused()
        .filter(|p| p.verdict == Verdict::DifferentGpu)
        .count();
    let ways = d.refused().count() - gpus;
    if gpus > 0 {
        eprintln!(
            "{} measured on different GPUs, not compared; --across-gpus compares them anyway",
            crate::plural(gpus, "result")
        );
    }
    if ways > 0 {
        eprintln!(
            "{} taken another way (method or cold set-up), not compared; --across-methods compares them anyway",
            crate::plural(ways, "result")
        );
    }
    let regressions: Vec<&str> = d.regressions().map(|p| p.name.as_str()).collect();
    if regressions.is_empty() {
        eprintln!(
            "no regression beyond the noise and {:.1}% ({compared} compared)",
            a.threshold * 100.0
        );
        Ok(ExitCode::from(crate::exit::OK))
    } else {
        eprintln!(
            "{} beyond the noise and {:.1}%: {}",
            crate::plural(regressions.len(), "regression"),
            a.threshold * 100.0,
            regressions.join(", ")
        );
        Ok(ExitCode::from(crate::exit::FAILED))
    }
}
