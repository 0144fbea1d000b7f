//! `fusebench peak`: this GPU's copy bandwidth at several sizes, cold and
//! warm, and its L2 size — the ceilings bandwidth numbers are judged against,
//! timed exactly as `bench` times a fusion's copy ceiling (same method, cache
//! set-up and placements).

use crate::timing::MethodArg;
use comfy_table::{presets::NOTHING, Table};
use fusebench_measure::CachePolicy;
use serde::Serialize;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// How a copy is timed (see `fusebench bench --help`).
    #[arg(long, value_enum, default_value = "auto")]
    method: MethodArg,
    /// Print the result as JSON on standard output (for scripts; no table, no progress).
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    /// Bytes read plus bytes written.
    bytes: usize,
    cold_us: f64,
    cold_tbps: f64,
    warm_us: f64,
    warm_tbps: f64,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let engine = match crate::engine("fusebench peak") {
        Ok(e) => e,
        Err(code) => return Ok(code),
    };
    let timing = crate::timing::TimingArgs {
        stop: None,
        samples: None,
        target: None,
        max_time: None,
        method: a.method,
        seed: 0,
    };
    let harness = match timing.harness(engine.gpu.clone()) {
        Ok(h) => h,
        Err(code) => return Ok(code),
    };
    let info = engine.gpu.info().clone();
    let mut rows = Vec::new();
    for mib in [16usize, 32, 64, 128, 256, 1024] {
        let bytes = mib << 20;
        let cold_us = harness.ceiling(bytes as u64, CachePolicy::Cold, None)?.median_us;
        let warm_us = harness.ceiling(bytes as u64, CachePolicy::Warm, None)?.median_us;
        rows.push(Row {
            bytes,
            cold_us,
            cold_tbps: bytes as f64 / cold_us / 1e6,
            warm_us,
            warm_tbps: bytes as f64 / warm_us / 1e6,
        });
    }
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "gpu": info, "copies": rows }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let env = harness.environment();
    outln!(
        "{} ({}, {} SMs), L2 {} MiB (device attribute), driver {} (CUDA {}), copies timed by {}",
        info.name,
        info.arch,
        info.sm_count,
        info.l2_cache_bytes >> 20,
        env.driver,
        env.cuda,
        harness.method().words()
    );
    let mut t = Table::new();
    t.load_preset(NOTHING);
    t.set_header(vec![
        "copy (read + write)",
        "cold us",
        "cold TB/s",
        "warm us",
        "warm TB/s",
    ]);
    for r in &rows {
        t.add_row(vec![
            format!("{} MiB", r.bytes >> 20),
            format!("{:.2}", r.cold_us),
            format!("{:.2}", r.cold_tbps),
            format!("{:.2}", r.warm_us),
            format!("{:.2}", r.warm_tbps),
        ]);
    }
    outln!("{t}");
    outln!("warm copies that fit in L2 run faster than DRAM allows: a warm timing of such data measures L2");
    Ok(ExitCode::SUCCESS)
}
