//! `fusebench history`: stored measurements of a fusion, oldest first, with
//! regressions beyond the noise flagged. Exit codes: 0 fine, 1 a regression,
//! 2 nothing stored or a database that cannot be read.

use crate::exit;
use comfy_table::{presets::NOTHING, Table};
use fusebench_store::{Store, StoreError};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The fusion: the file name it was benchmarked under, or its definition hash.
    fusion: String,
    /// Flag a slowdown only above this (2% = 2%), and only beyond both measurements' noise.
    #[arg(long, default_value = "2%", value_parser = crate::bench::parse_percent)]
    threshold: f64,
    /// The results database (default: $FUSEBENCH_DB, else the per-user data directory).
    #[arg(long, conflicts_with = "results")]
    db: Option<PathBuf>,
    /// Read runs from result files instead of the database: each a file or a directory (the
    /// shards of one run, `bench --shard I/N --out DIR`); repeat it for several runs.
    #[arg(long, value_name = "PATH")]
    results: Vec<PathBuf>,
    /// Print the result as JSON on standard output (for scripts; no table, no progress).
    #[arg(long)]
    json: bool,
}

/// UTC date and time of a Unix timestamp (days-from-civil, inverted).
fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Exit code 2 for a database that cannot be read, with the reason said.
fn unreadable(e: &StoreError) -> ExitCode {
    match e {
        StoreError::Missing { .. } => {
            eprintln!("error: {e} (`fusebench bench --save` saves measurements)")
        }
        _ => eprintln!("error: {e}"),
    }
    ExitCode::from(exit::USAGE)
}

/// The measurements of `subject` (by name or definition hash) in result
/// files, oldest first, numbered from 1 in that order.
fn from_results(paths: &[PathBuf], subject: &str) -> Result<fusebench_store::History, String> {
    let mut found = Vec::new();
    for p in paths {
        let entries = fusebench_report::load_paths(std::slice::from_ref(p)).map_err(|e| e.to_string())?;
        found.extend(
            entries
                .into_iter()
                .filter_map(|e| e.record)
                .filter(|m| m.subject.name == subject || m.subject.definition_hash == subject),
        );
    }
    found.sort_by_key(|m| m.taken_at);
    Ok(fusebench_store::History {
        records: found
            .into_iter()
            .enumerate()
            .map(|(i, measurement)| fusebench_store::Stored { id: i as i64 + 1, measurement })
            .collect(),
        skipped: Vec::new(),
    })
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if !a.results.is_empty() {
        if let Some(code) = a.results.iter().find_map(|p| crate::missing(p)) {
            return Ok(code);
        }
        return match from_results(&a.results, &a.fusion) {
            Ok(h) => show(&a, &h, || format!("no measurements of {:?} in the result files", a.fusion)),
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::from(exit::USAGE))
            }
        };
    }
    // Read-only: looking at the history never creates a database or a directory.
    let opened = match &a.db {
        Some(p) => Store::open_read_only(p),
        None => fusebench_store::default_path().and_then(|p| Store::open_read_only(&p)),
    };
    let store = match opened {
        Ok(s) => s,
        Err(e) => return Ok(unreadable(&e)),
    };
    let h = match store.history(&a.fusion) {
        Ok(h) => h,
        Err(e) => return Ok(unreadable(&e)),
    };
    for s in &h.skipped {
        eprintln!(
            "warning: results database {}: record {} skipped: {}",
            store.path().display(),
            s.id,
            s.reason
        );
    }
    let readable = if h.skipped.is_empty() { "" } else { "readable " };
    show(&a, &h, || {
        format!(
            "no {readable}stored measurements of {:?} (save some with `fusebench bench --save`)",
            a.fusion
        )
    })
}

/// The history as a table or JSON, regressions flagged; exit 1 for a
/// regression, 2 with `none()` said when there is nothing to show.
fn show(a: &Args, h: &fusebench_store::History, none: impl FnOnce() -> String) -> anyhow::Result<ExitCode> {
    if h.records.is_empty() {
        eprintln!("{}", none());
        return Ok(ExitCode::from(exit::USAGE));
    }
    let regressions = fusebench_store::regressions(&h.records, a.threshold);
    let regression_of = |id: i64| regressions.iter().find(|r| r.after == id);
    if a.json {
        let rows: Vec<_> = h
            .records
            .iter()
            .map(|s| serde_json::json!({ "id": s.id, "regression": regression_of(s.id).is_some(), "measurement": s.measurement }))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        let mut t = Table::new();
        t.load_preset(NOTHING);
        t.set_header(vec![
            "id",
            "taken",
            "GPU",
            "method",
            "cache",
            "median us",
            "95% CI us",
            "n",
            "stop",
            "throttled",
            "",
        ]);
        for s in &h.records {
            let m = &s.measurement;
            // Each record is compared with the latest earlier one of its own kind
            // (same benchmark, method, set-up and GPU), which need not be the row above.
            let flag = regression_of(s.id).map_or(String::new(), |r| {
                format!("REGRESSION x{:.3} vs id {}", r.ratio, r.before)
            });
            t.add_row(vec![
                s.id.to_string(),
                utc(m.taken_at),
                m.environment.gpu_name.clone(),
                m.method.name().to_string(),
                m.cache.name().to_string(),
                format!("{:.2}", m.summary.median),
                format!("{:.2}-{:.2}", m.summary.ci_low, m.summary.ci_high),
                m.summary.n.to_string(),
                serde_json::to_value(&m.stop)
                    .ok()
                    .and_then(|v| v["reason"].as_str().map(String::from))
                    .unwrap_or_default(),
                m.throttled_samples.to_string(),
                flag,
            ]);
        }
        outln!("{t}");
    }
    Ok(ExitCode::from(if regressions.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(super::utc(1_764_480_000), "2025-11-30 05:20 UTC");
        assert_eq!(super::utc(951_782_400), "2000-02-29 00:00 UTC");
    }
}
