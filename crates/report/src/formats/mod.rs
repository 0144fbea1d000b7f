//! Reading any supported results file into entries, by what its JSON holds.

pub mod gbench;
pub mod nvbench;
pub mod pytest_benchmark;

use crate::{Entry, ReportError};
use fusebench_measure::Measurement;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub const SUPPORTED: &str =
    "supported: fusebench records and the --json output of bench, run and compare; \
nvbench JSON; pytest-benchmark JSON; Google Benchmark JSON";

/// Every entry of one file.
pub fn load(path: &Path) -> Result<Vec<Entry>, ReportError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::file(&p, e.to_string()))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| ReportError::file(&p, format!("not JSON: {e}")))?;
    let record = |x: &Value| -> Result<Entry, ReportError> {
        Measurement::from_json(&x.to_string())
            .map(|m| Entry::from_record(&m, &p))
            .map_err(|e| ReportError::file(&p, e.to_string()))
    };
    match &v {
        Value::Array(xs) => xs.iter().map(record).collect(),
        Value::Object(o) if o.contains_key("schema") => Ok(vec![record(&v)?]),
        Value::Object(o) if o.contains_key("rows") => v["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| record(&r["record"]))
            .collect(),
        Value::Object(o) if o.contains_key("programs") => {
            let mut out = Vec::new();
            for prog in v["programs"].as_array().into_iter().flatten() {
                for step in prog["steps"].as_array().into_iter().flatten() {
                    for k in ["in_program", "cold", "standalone_cold", "standalone_warm"] {
                        if step.get(k).is_some_and(|x| !x.is_null()) {
                            out.push(record(&step[k])?);
                        }
                    }
                }
            }
            Ok(out)
        }
        Value::Object(o) if o.contains_key("benchmarks") && o.contains_key("machine_info") => {
            pytest_benchmark::read(&v, &p)
        }
        Value::Object(o) if o.contains_key("benchmarks") && o.contains_key("devices") => {
            nvbench::read(&v, &p)
        }
        Value::Object(o) if o.contains_key("benchmarks") && o.contains_key("context") => {
            gbench::read(&v, &p)
        }
        _ => Err(ReportError::file(
            &p,
            format!("not a results file this build reads ({SUPPORTED})"),
        )),
    }
}

/// Every entry of the files and directories given (a directory gives its
/// `.json` files), merged: for one identity on one GPU taken one way, the
/// latest result wins, so a partial rerun replaces what it reran and keeps
/// the rest (and a CUPTI result never replaces an events one).
pub fn load_paths(paths: &[PathBuf]) -> Result<Vec<Entry>, ReportError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| ReportError::file(&p.display().to_string(), e.to_string()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().and_then(|e| e.to_str()) == Some("json"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let mut out: Vec<Entry> = Vec::new();
    for f in files {
        for e in load(&f)? {
            match out
                .iter_mut()
                .find(|x| x.identity == e.identity && x.gpu == e.gpu && x.how() == e.how())
            {
                Some(x) if e.taken_at >= x.taken_at => *x = e,
                Some(_) => {}
                None => out.push(e),
            }
        }
    }
    Ok(out)
}

/// A float that tools write as a number or as a string.
pub(crate) fn num(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}
