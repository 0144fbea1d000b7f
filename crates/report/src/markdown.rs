//! Markdown tables of a run and of a diff.

use crate::{Diff, Entry, Verdict};

/// One row per result: median with its interval, samples, bandwidth and the
/// share of a copy ceiling: the record's own (a copy of its bytes timed beside
/// it by the same method and set-up) where it has one, else of `ceiling_gbps`
/// when given, marked as not measured the same way.
pub fn run(entries: &[Entry], ceiling_gbps: Option<f64>, svg: Option<&str>) -> String {
    let mut s = String::from("# Kernel times\n\n");
    if let Some(e) = entries.first() {
        s += &format!(
            "GPU: {}. Median kernel time in µs with its 95% interval.\n\n",
            e.gpu
        );
    }
    if let Some(f) = svg {
        s += &format!("![kernel times]({f})\n\n");
    }
    s += "| fusion | median µs [95% interval] | samples | MB moved | GB/s | % of copy ceiling | device MiB |\n";
    s += "| --- | --- | --- | --- | --- | --- | --- |\n";
    let mut given = false;
    for e in entries {
        let bytes = e.record.as_ref().and_then(|m| m.bytes);
        let own = e.record.as_ref().and_then(|m| m.pct_of_ceiling());
        let gbps = bytes.map(|b| b as f64 / e.median_us / 1e3);
        let dev = e.record.as_ref().and_then(|m| m.device_bytes);
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            e.name,
            e.interval_text(),
            e.n,
            bytes.map_or("–".into(), |b| format!("{:.1}", b as f64 / 1e6)),
            gbps.map_or("–".into(), |g| format!("{g:.0}")),
            match (own, gbps, ceiling_gbps) {
                (Some(p), _, _) => format!("{p:.0}%"),
                (None, Some(g), Some(c)) => {
                    given = true;
                    format!("{:.0}%†", 100.0 * g / c)
                }
                _ => "–".into(),
            },
            dev.map_or("–".into(), |d| format!(
                "{:.1}",
                d as f64 / (1 << 20) as f64
            )),
        );
    }
    if given {
        s += "\n† of the given copy bandwidth, not of a copy timed beside the result by the same method and set-up.\n";
    }
    s
}

pub fn diff(d: &Diff, svg: Option<&str>) -> String {
    let mut s = format!(
        "# Comparison\n\nNew over old median; a change counts when the 95% intervals of the two medians do not overlap, and is a regression beyond {:.1}%.\n\n",
        d.threshold * 100.0
    );
    if let Some(f) = svg {
        s += &format!("![new / old]({f})\n\n");
    }
    s += "| fusion | old µs | new µs | new / old [range] | verdict |\n| --- | --- | --- | --- | --- |\n";
    for p in &d.pairs {
        let v = match p.verdict {
            Verdict::Regression => "**regression**".to_string(),
            _ => p.verdict_text(),
        };
        s += &format!(
            "| {} | {} | {} | {} | {} |\n",
            p.name,
            p.old.as_ref().map_or("–".into(), Entry::interval_text),
            p.new.as_ref().map_or("–".into(), Entry::interval_text),
            p.ratio_text(),
            v
        );
    }
    let n = d.regressions().count();
    s += &format!("\n{n} regression{}.\n", if n == 1 { "" } else { "s" });
    let refused = d.refused().count();
    s += &format!("{} compared", d.compared());
    if refused > 0 {
        s += &format!(
            "; {refused} not compared (another GPU, or taken another way: method or cold set-up)"
        );
    }
    s += ".\n";
    s
}
