//! `fusebench history`: stored measurements of a fusion, oldest first, with
//! regressions beyond the noise flagged.

use crate::exit;
use comfy_table::{presets::NOTHING, Table};
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
    #[arg(long)]
    db: Option<PathBuf>,
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

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let store = match &a.db {
        Some(p) => fusebench_store::Store::open(p)?,
        None => fusebench_store::Store::open_default()?,
    };
    let h = store.history(&a.fusion)?;
    if h.is_empty() {
        eprintln!(
            "no stored measurements of {:?} (save some with `fusebench bench --save`)",
            a.fusion
        );
        return Ok(ExitCode::from(exit::FAILED));
    }
    let regressions = fusebench_store::regressions(&h, a.threshold);
    if a.json {
        let rows: Vec<_> = h
            .iter()
            .map(|s| serde_json::json!({ "id": s.id, "regression": regressions.iter().any(|r| r.after == s.id), "measurement": s.measurement }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        let mut t = Table::new();
        t.load_preset(NOTHING);
        t.set_header(vec![
            "id",
            "taken",
            "GPU",
            "cache",
            "median us",
            "95% CI us",
            "n",
            "stop",
            "throttled",
            "",
        ]);
        for s in &h {
            let m = &s.measurement;
            let flag = regressions
                .iter()
                .find(|r| r.after == s.id)
                .map_or(String::new(), |r| format!("REGRESSION x{:.3}", r.ratio));
            t.add_row(vec![
                s.id.to_string(),
                utc(m.taken_at),
                m.environment.gpu_name.clone(),
                format!("{:?}", m.cache).to_lowercase(),
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
        println!("{t}");
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
