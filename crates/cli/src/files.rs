//! Turning FILE|DIR arguments into the list of scripts to read.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// Files given directly are taken as they are; a directory contributes its
/// `*.py` and `*.json` files (not recursively), sorted by name.
pub fn collect(args: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        if a.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(a)
                .with_context(|| format!("reading directory {}", a.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file()
                        && matches!(
                            p.extension().and_then(|e| e.to_str()),
                            Some("py") | Some("json")
                        )
                })
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()) != Some("index.json")
                        && p.file_name().and_then(|n| n.to_str()) != Some("manifest.json")
                })
                .collect();
            found.sort();
            if found.is_empty() {
                bail!(
                    "{}: no .py or .json fusion files in this directory",
                    a.display()
                );
            }
            out.extend(found);
        } else if a.is_file() {
            out.push(a.clone());
        } else {
            bail!("{}: no such file or directory", a.display());
        }
    }
    Ok(out)
}

/// Reads a fusion from a repro script (`.py`) or fusebench's JSON form (`.json`).
pub fn load(path: &Path) -> anyhow::Result<fusebench_ir::Fusion> {
    if path.extension().and_then(|e| e.to_str()) == Some("json") {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        fusebench_ir::Fusion::from_json(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    } else {
        fusebench_frontend::parse_file(path).map_err(|e| anyhow::anyhow!("{e}"))
    }
}
