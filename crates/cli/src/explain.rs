//! `fusebench explain A B`: why two measurements of a fusion differ, and how
//! much of the difference each cause accounts for.

use anyhow::{anyhow, bail, Context};
use fusebench_measure::{explain_sides, Measurement, Side};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A measurement record (`run --records`, `save`'s live/ records), the `--json` output of
    /// `bench`, or a result of another tool `diff` reads (nvbench, pytest-benchmark, Google
    /// Benchmark JSON); pick one with --name when the file holds several.
    a: PathBuf,
    /// The other measurement, in any of the same forms; the difference is explained as B - A.
    b: PathBuf,
    /// The fusion or benchmark to take from files that hold several.
    #[arg(long)]
    name: Option<String>,
    /// Print the result as JSON on standard output (for scripts; no table, no progress).
    #[arg(long)]
    json: bool,
}

/// The one item of `names` that `name` picks, or the only one.
fn pick<'a, T>(
    path: &Path,
    items: &'a [T],
    names: &[&str],
    name: Option<&str>,
) -> anyhow::Result<&'a T> {
    let what = if names.is_empty() {
        "nothing".to_string()
    } else {
        names.join(", ")
    };
    match name {
        Some(n) => names
            .iter()
            .position(|x| *x == n)
            .map(|i| &items[i])
            .ok_or_else(|| anyhow!("{}: no fusion named {n}; it holds {what}", path.display())),
        None if items.len() == 1 => Ok(&items[0]),
        None if items.is_empty() => bail!("{}: holds no results", path.display()),
        None => bail!(
            "{}: holds {} results ({what}); choose one with --name",
            path.display(),
            items.len()
        ),
    }
}

/// One side from `path`: a fusebench record or a row of `bench --json`, or a
/// result of another tool, with what its file cannot say marked unknown.
fn read(path: &Path, name: Option<&str>) -> anyhow::Result<Side<'static>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| anyhow!("{}: not JSON: {e}", path.display()))?;
    let record = if let Some(rows) = v.get("rows").and_then(|r| r.as_array()) {
        let names: Vec<&str> = rows
            .iter()
            .map(|r| r["file"].as_str().unwrap_or(""))
            .collect();
        pick(path, rows, &names, name)?["record"].clone()
    } else if v.get("schema").is_some() {
        v
    } else {
        // Any other file `diff` reads: its entries, each a side.
        let entries = fusebench_report::load(path)?;
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        return Ok(pick(path, &entries, &names, name)?.side().into_owned());
    };
    let m = Measurement::from_json(&record.to_string())
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    Ok(Side::from(&m).into_owned())
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
    let e = explain_sides(&x, &y);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        out!("{}", e.render(&x.record, &y.record));
    }
    Ok(ExitCode::from(crate::exit::OK))
}
