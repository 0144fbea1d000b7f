//! Where the results database lives when no path is given.

use crate::StoreError;
use fusebench_knobs::{KnobError, Knobs};
use std::path::{Path, PathBuf};

/// The process's default database path: the `FUSEBENCH_DB` setting, else
/// `$XDG_DATA_HOME/fusebench/results.sqlite`, else
/// `~/.local/share/fusebench/results.sqlite`.
pub fn default_path() -> Result<PathBuf, StoreError> {
    let knobs = fusebench_knobs::get();
    default_path_from(knobs.as_ref().copied(), |v| std::env::var(v).ok())
}

/// [`default_path`] from given settings and variables, so that it can be
/// checked without changing the process's environment. Settings that do not
/// validate are an error even when `FUSEBENCH_DB` itself is fine: every
/// command refuses a bad `FUSEBENCH_*` variable rather than guess.
pub fn default_path_from(
    knobs: Result<&Knobs, &KnobError>,
    var: impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, StoreError> {
    let knobs = knobs.map_err(|e| StoreError::Settings(e.to_string()))?;
    if let Some(p) = &knobs.db {
        return Ok(p.clone());
    }
    let set = |name| var(name).filter(|p: &String| !p.is_empty());
    let base = set("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| Path::new(&h).join(".local/share")))
        .ok_or(StoreError::NoPath)?;
    Ok(base.join("fusebench/results.sqlite"))
}
