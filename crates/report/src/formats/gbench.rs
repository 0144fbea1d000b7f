//! Google Benchmark's JSON (`--benchmark_format=json`, as nvFuser's C++
//! benchmarks write it): `context` and `benchmarks[]`, one object per
//! repetition (`run_type: iteration`) plus aggregates. Repetitions of one
//! `run_name` become the samples of one entry; aggregates are skipped.

use super::num;
use crate::{Entry, Origin, ReportError, Tool};
use serde_json::Value;

fn to_us(v: f64, unit: &str) -> f64 {
    match unit {
        "ns" => v * 1e-3,
        "ms" => v * 1e3,
        "s" => v * 1e6,
        _ => v,
    }
}

pub fn read(v: &Value, path: &str) -> Result<Vec<Entry>, ReportError> {
    let host = v["context"]["host_name"]
        .as_str()
        .unwrap_or("unknown machine")
        .to_string();
    let mut runs: Vec<(String, Vec<f64>)> = Vec::new();
    for b in v["benchmarks"].as_array().into_iter().flatten() {
        if b["run_type"].as_str().unwrap_or("iteration") != "iteration"
            || b["error_occurred"] == true
        {
            continue;
        }
        let name = b["run_name"]
            .as_str()
            .or_else(|| b["name"].as_str())
            .unwrap_or("")
            .to_string();
        let Some(t) = num(&b["real_time"]) else {
            continue;
        };
        let us = to_us(t, b["time_unit"].as_str().unwrap_or("ns"));
        match runs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, s)) => s.push(us),
            None => runs.push((name, vec![us])),
        }
    }
    Ok(runs
        .into_iter()
        .filter_map(|(name, samples)| {
            Entry::from_samples(
                name.clone(),
                format!("google-benchmark|{name}"),
                host.clone(),
                samples,
                Origin::host_clock(Tool::GoogleBenchmark),
                path,
            )
        })
        .collect())
}
