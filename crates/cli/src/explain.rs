//! `fusebench explain A B`: why two measurements of a fusion differ.

use anyhow::{anyhow, bail, Context};
use fusebench_measure::{explain, Measurement};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A measurement record (`run --records`, `save`'s live/ records), or the
    /// `--json` output of `bench` (pick the fusion with --name when it holds several).
    a: PathBuf,
    b: PathBuf,
    /// The fusion (file name) to take from outputs that hold several.
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    json: bool,
}

/// A record from `path`: a measurement itself, or one row of `bench --json`.
pub fn read(path: &Path, name: Option<&str>) -> anyhow::Result<Measurement> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| anyhow!("{}: not JSON: {e}", path.display()))?;
    let record = if let Some(rows) = v.get("rows").and_then(|r| r.as_array()) {
        let names: Vec<&str> = rows.iter().filter_map(|r| r["file"].as_str()).collect();
        let row = match name {
            Some(n) => rows
                .iter()
                .find(|r| r["file"].as_str() == Some(n))
                .ok_or_else(|| {
                    anyhow!(
                        "{}: no fusion named {n}; it holds {}",
                        path.display(),
                        names.join(", ")
                    )
                })?,
            None if rows.len() == 1 => &rows[0],
            None => bail!(
                "{}: holds {} fusions ({}); choose one with --name",
                path.display(),
                rows.len(),
                names.join(", ")
            ),
        };
        row["record"].clone()
    } else {
        v
    };
    Measurement::from_json(&record.to_string()).map_err(|e| anyhow!("{}: {e}", path.display()))
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    for p in [&a.a, &a.b] {
        if let Some(code) = crate::missing(p) {
            return Ok(code);
        }
    }
    let (x, y) = match (read(&a.a, a.name.as_deref()), read(&a.b, a.name.as_deref())) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
    let e = explain(&x, &y);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        print!("{}", e.render(&x, &y));
    }
    Ok(ExitCode::from(crate::exit::OK))
}
