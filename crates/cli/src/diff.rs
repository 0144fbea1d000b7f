//! `fusebench diff OLD NEW`: per fusion, new against old, a verdict from their
//! samples, and an exit code a CI job can use: 1 only for a regression beyond
//! the noise of both and beyond the threshold.

use crate::bench::parse_percent;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use fusebench_report::{diff, load_paths, Verdict};
use std::path::PathBuf;
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
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    for p in [&a.old, &a.new] {
        if let Some(code) = crate::missing(p) {
            return Ok(code);
        }
    }
    let (old, new) = match (
        load_paths(std::slice::from_ref(&a.old)),
        load_paths(std::slice::from_ref(&a.new)),
    ) {
        (Ok(o), Ok(n)) => (o, n),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
    let d = diff(&old, &new, a.threshold, a.across_gpus);
    let compared = d
        .pairs
        .iter()
        .filter(|p| p.old.is_some() && p.new.is_some())
        .count();
    let refused: Vec<_> = d
        .pairs
        .iter()
        .filter(|p| p.verdict == Verdict::DifferentGpu)
        .collect();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        let mut t = Table::new();
        t.load_preset(UTF8_BORDERS_ONLY);
        t.set_header(vec![
            "fusion",
            "old µs [95%]",
            "new µs [95%]",
            "new / old [range]",
            "verdict",
        ]);
        let us = |e: &Option<fusebench_report::Entry>| {
            e.as_ref()
                .map_or("–".into(), fusebench_report::Entry::interval_text)
        };
        for p in &d.pairs {
            t.add_row(vec![
                p.name.clone(),
                us(&p.old),
                us(&p.new),
                p.ratio_text(),
                match p.verdict {
                    Verdict::DifferentGpu => format!(
                        "not compared: {} vs {}",
                        p.old.as_ref().map(|e| e.gpu.as_str()).unwrap_or(""),
                        p.new.as_ref().map(|e| e.gpu.as_str()).unwrap_or("")
                    ),
                    v => v.label(),
                },
            ]);
        }
        println!("{t}");
    }
    if !refused.is_empty() {
        eprintln!(
            "{} result(s) were measured on different GPUs and not compared; --across-gpus compares them anyway",
            refused.len()
        );
    }
    if compared == 0 {
        eprintln!("error: no fusion appears in both the old and the new results");
        return Ok(ExitCode::from(crate::exit::USAGE));
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
            "{} regression(s) beyond the noise and {:.1}%: {}",
            regressions.len(),
            a.threshold * 100.0,
            regressions.join(", ")
        );
        Ok(ExitCode::from(crate::exit::FAILED))
    }
}
