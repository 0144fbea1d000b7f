//! `fusebench report`: a run, or a diff of two, as markdown with an SVG chart.

use crate::bench::parse_percent;
use anyhow::Context;
use fusebench_report::{diff, formats::SUPPORTED, load_paths, markdown, svg, Across, Entry};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Results (files or directories; merged).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Compare with these older results instead: a diff report.
    #[arg(long)]
    against: Option<PathBuf>,
    /// Write report.md and its SVG into this directory.
    #[arg(long, default_value = "fusebench-report")]
    out: PathBuf,
    /// Copy bandwidth of the GPU in GB/s (from `fusebench peak`), for the share of the ceiling of
    /// results that carry no copy ceiling of their own (marked: not measured alike).
    #[arg(long)]
    ceiling_gbps: Option<f64>,
    /// With --against: a change beyond the noise counts as a regression above this (with its % sign: 5%).
    #[arg(long, default_value = "2%", value_parser = parse_percent)]
    threshold: f64,
}

/// The results under `paths`, or the error to print: unreadable, or holding none
/// (a chart of nothing has no scale to draw on).
pub(crate) fn results(paths: &[PathBuf]) -> Result<Vec<Entry>, String> {
    match load_paths(paths) {
        Ok(e) if e.is_empty() => Err(format!("{}: holds no results ({SUPPORTED})", names(paths))),
        Ok(e) => Ok(e),
        Err(e) => Err(e.to_string()),
    }
}

fn names(paths: &[PathBuf]) -> String {
    let v: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    v.join(", ")
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let new = match results(&a.paths) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
    if a.out.exists() && !a.out.is_dir() {
        eprintln!(
            "error: --out {}: exists and is not a directory (report.md and its SVG are written into a directory)",
            a.out.display()
        );
        return Ok(ExitCode::from(crate::exit::USAGE));
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("--out {}: cannot create the directory", a.out.display()))?;
    let md = match &a.against {
        None => {
            let chart = a.out.join("times.svg");
            svg::times(&new, &chart).with_context(|| format!("writing {}", chart.display()))?;
            markdown::run(&new, a.ceiling_gbps, Some("times.svg"))
        }
        Some(old) => {
            let old = match results(std::slice::from_ref(old)) {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(crate::exit::USAGE));
                }
            };
            let d = diff(&old, &new, a.threshold, Across::default());
            let chart = a.out.join("diff.svg");
            svg::diff(&d, &chart).with_context(|| format!("writing {}", chart.display()))?;
            markdown::diff(&d, Some("diff.svg"))
        }
    };
    let md_path = a.out.join("report.md");
    std::fs::write(&md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    eprintln!("wrote {}", a.out.join("report.md").display());
    Ok(ExitCode::from(crate::exit::OK))
}
