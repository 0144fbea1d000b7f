//! SVG charts (plotters): kernel times with their intervals, and the ratios
//! of a diff with the range their intervals allow.

use crate::{Diff, Entry, ReportError, Verdict};
use plotters::prelude::*;
use std::path::Path;

fn err(e: impl std::fmt::Display) -> ReportError {
    ReportError::Svg(e.to_string())
}

fn short(name: &str) -> String {
    name.trim_end_matches(".py").chars().take(3).collect()
}

/// The µs range of a log axis holding `values`: only finite positive values
/// count, so that no input (none at all, a zero, an infinity) gives plotters
/// infinite or reversed bounds, on which its log axis never finishes.
fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let ok: Vec<f64> = values.filter(|v| v.is_finite() && *v > 0.0).collect();
    let lo = ok
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .clamp(0.1, 1e12);
    let hi = ok
        .iter()
        .copied()
        .fold(0.0, f64::max)
        .clamp(1.0, 1e12)
        .max(lo * 2.0);
    (lo * 0.8, hi * 1.25)
}

/// A linear range holding `base` and the finite `values`.
fn linear_bounds(values: impl Iterator<Item = f64>, base: (f64, f64)) -> (f64, f64) {
    values
        .filter(|v| v.is_finite())
        .fold(base, |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// Median and 95% interval per fusion, log scale of µs.
pub fn times(entries: &[Entry], path: &Path) -> Result<(), ReportError> {
    let n = entries.len().max(1);
    let root = SVGBackend::new(path, (((n * 28) + 160).max(480) as u32, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (lo, hi) = log_bounds(entries.iter().flat_map(|e| [e.ci_low_us, e.ci_high_us]));
    let gpu = entries.first().map(|e| e.gpu.clone()).unwrap_or_default();
    let mut c = ChartBuilder::on(&root)
        .caption(
            format!("kernel time per fusion, median and 95% interval ({gpu})"),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo..hi).log_scale())
        .map_err(err)?;
    c.configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round() as usize;
            entries.get(i).map(|e| short(&e.name)).unwrap_or_default()
        })
        .y_desc("µs")
        .x_desc("fusion")
        .draw()
        .map_err(err)?;
    c.draw_series(entries.iter().enumerate().map(|(i, e)| {
        ErrorBar::new_vertical(
            i as f64,
            e.ci_low_us,
            e.median_us,
            e.ci_high_us,
            BLUE.filled(),
            8,
        )
    }))
    .map_err(err)?;
    c.draw_series(
        entries
            .iter()
            .enumerate()
            .map(|(i, e)| Circle::new((i as f64, e.median_us), 3, BLUE.filled())),
    )
    .map_err(err)?;
    root.present().map_err(err)
}

/// New over old per fusion with the range the two intervals allow, the noise
/// band of each pair as an error bar, and the regression threshold.
pub fn diff(d: &Diff, path: &Path) -> Result<(), ReportError> {
    let pairs: Vec<_> = d.pairs.iter().filter(|p| p.ratio.is_finite()).collect();
    let n = pairs.len().max(1);
    let root = SVGBackend::new(path, (((n * 28) + 160).max(480) as u32, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let t = if d.threshold.is_finite() {
        d.threshold.abs().min(10.0)
    } else {
        0.0
    };
    let (lo, hi) = linear_bounds(
        pairs.iter().flat_map(|p| [p.ratio_low, p.ratio_high]),
        (1.0 - 2.0 * t, 1.0 + 2.0 * t),
    );
    let (lo, hi) = (lo - 0.01, hi + 0.01);
    let mut c = ChartBuilder::on(&root)
        .caption(
            "new / old per fusion, with the range the 95% intervals allow",
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), lo..hi)
        .map_err(err)?;
    c.configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            pairs
                .get(x.round() as usize)
                .map(|p| short(&p.name))
                .unwrap_or_default()
        })
        .y_desc("new / old")
        .draw()
        .map_err(err)?;
    for (y, style) in [
        (1.0, BLACK.mix(0.6)),
        (1.0 + d.threshold, RED.mix(0.5)),
        (1.0 - d.threshold, GREEN.mix(0.5)),
    ] {
        c.draw_series(LineSeries::new([(-0.5, y), (n as f64 - 0.5, y)], style))
            .map_err(err)?;
    }
    c.draw_series(pairs.iter().enumerate().map(|(i, p)| {
        let color = match p.verdict {
            Verdict::Regression | Verdict::Slower => RED,
            Verdict::Improvement | Verdict::Faster => GREEN,
            _ => BLUE,
        };
        ErrorBar::new_vertical(
            i as f64,
            p.ratio_low,
            p.ratio,
            p.ratio_high,
            color.filled(),
            8,
        )
    }))
    .map_err(err)?;
    root.present().map_err(err)
}
