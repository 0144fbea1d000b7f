//! `fusebench peak`: this GPU's copy bandwidth at several sizes, cold and
//! warm, and its L2 size — the ceilings bandwidth numbers are judged against.

use comfy_table::{presets::NOTHING, Table};
use fusebench_engine::copy_time;
use serde::Serialize;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Samples per size and launch shape.
    #[arg(long, default_value_t = 20)]
    samples: usize,
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
    let info = engine.gpu.info().clone();
    let mut rows = Vec::new();
    for mib in [16usize, 32, 64, 128, 256, 1024] {
        let bytes = mib << 20;
        let cold_us = copy_time(&engine.gpu, bytes, a.samples, true)?;
        let warm_us = copy_time(&engine.gpu, bytes, a.samples, false)?;
        rows.push(Row {
            bytes,
            cold_us,
            cold_tbps: bytes as f64 / cold_us / 1e6,
            warm_us,
            warm_tbps: bytes as f64 / warm_us / 1e6,
        });
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "gpu": info, "copies": rows }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} ({}, {} SMs), L2 {} MiB (device attribute), driver {}",
        info.name,
        info.arch,
        info.sm_count,
        info.l2_cache_bytes >> 20,
        info.driver_version_string()
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
    println!("{t}");
    println!("warm copies that fit in L2 run faster than DRAM allows: a warm timing of such data measures L2");
    Ok(ExitCode::SUCCESS)
}
