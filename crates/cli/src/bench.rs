//! `fusebench bench`: cold-L2 kernel time of each fusion on the GPU, beside
//! nvFuser's time from the corpus index and a copy of the same bytes.

pub use crate::timing::parse_percent;
use crate::timing::TimingArgs;
use crate::{exit, files};
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use fusebench_harness::{FusionSubject, Options};
use fusebench_measure::CachePolicy;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Repro scripts (.py), fusions in JSON form (.json), or directories of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    timing: TimingArgs,
    /// What is in L2 when a sample starts.
    #[arg(long, value_enum, default_value = "cold")]
    cache: CacheArg,
    /// Store each measurement in the results database (see `fusebench history`).
    #[arg(long)]
    save: bool,
    /// Print the result as JSON on standard output (for scripts; no table, no progress).
    #[arg(long)]
    json: bool,
    /// Also print each kernel: time, launch shape, registers and spills.
    #[arg(long)]
    kernels: bool,
    /// nvFuser's times from this JSON (written by bench/nvfuser_peer.py in the same run) instead of
    /// an index.json beside the scripts.
    #[arg(long)]
    nvfuser: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq)]
pub enum CacheArg {
    /// L2 flushed before each sample.
    Cold,
    /// Back to back: data that fits in L2 is read from L2.
    Warm,
    /// Back to back over copies of the inputs that together exceed twice the L2.
    Rotate,
}

#[derive(Serialize)]
struct KernelRow {
    name: String,
    us: f64,
    grid: [u32; 3],
    block: [u32; 3],
    registers: u32,
    spill_bytes: u32,
    summary: String,
}

#[derive(Serialize)]
struct Row {
    file: String,
    kernels: Vec<KernelRow>,
    ours_us: f64,
    ours_min_us: f64,
    /// 95% interval of the median, relative half-width.
    rel_ci: f64,
    samples: usize,
    stop: String,
    /// Seconds spent sampling (warm-up excluded).
    sampling_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_id: Option<i64>,
    record: fusebench_measure::Measurement,
    nvfuser_cold_us: Option<f64>,
    /// nvFuser's time over ours: above 1 means fusebench is faster.
    speedup: Option<f64>,
    bytes: u64,
    gbps: f64,
    /// A copy of `bytes` timed by the same method, cache policy and set-up.
    copy_us: f64,
    pct_of_copy: f64,
    method: String,
}

/// nvFuser's cold time per file name, from `given` or else an `index.json` beside the scripts.
fn nvfuser_times(paths: &[PathBuf], given: Option<&Path>) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    let files: Vec<PathBuf> = match given {
        Some(g) => vec![g.to_path_buf()],
        None => paths
            .iter()
            .filter_map(|p| p.parent().map(|d| d.join("index.json")))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
    };
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        for f in v["fusions"].as_array().into_iter().flatten() {
            if let (Some(name), Some(t)) = (f["file"].as_str(), f["nvfuser_cold_us"].as_f64()) {
                out.insert(name.to_string(), t);
            }
        }
    }
    out
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let paths = match crate::paths_arg(&a.paths) {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let rule = match a.timing.rule(0.01, 1.0) {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let engine = match crate::engine("fusebench bench") {
        Ok(e) => e,
        Err(code) => return Ok(code),
    };
    let nvf = nvfuser_times(&paths, a.nvfuser.as_deref());
    let harness = match a.timing.harness(engine.gpu.clone()) {
        Ok(h) => h,
        Err(code) => return Ok(code),
    };
    let mut store = if a.save {
        Some(fusebench_store::Store::open_default()?)
    } else {
        None
    };
    let cache = match a.cache {
        CacheArg::Cold => CachePolicy::Cold,
        CacheArg::Warm => CachePolicy::Warm,
        CacheArg::Rotate => CachePolicy::Rotate,
    };
    let info = engine.gpu.info().clone();
    let mut rows = Vec::new();
    let mut failed = 0;
    // A progress bar on a terminal; nothing when stderr is redirected or with --json.
    let bar = indicatif::ProgressBar::new(paths.len() as u64);
    if a.json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template("[{pos}/{len}] {msg} {bar:30}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    for p in &paths {
        bar.set_message(
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        let res = (|| -> anyhow::Result<Row> {
            let f = files::load(p)?;
            let g = fusebench_reference::generate_inputs(&f, a.timing.seed)?;
            for n in &g.notes {
                bar.suspend(|| eprintln!("{}: note: {n}", p.display()));
            }
            let prep = engine.prepare(&f, &g.inputs)?;
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let measured = harness.measure(
                &FusionSubject::new(&name, &f, &prep),
                &Options {
                    cache,
                    warmup: 3,
                    rule: rule.as_ref(),
                    context: None,
                    ceiling: true,
                    siblings: true,
                },
            )?;
            let record = measured.record;
            let nv = nvf.get(&name).copied();
            let kernels = record.kernels.clone();
            let stored_id = match store.as_mut() {
                Some(s) => Some(s.save(&record)?),
                None => None,
            };
            let summary = record.summary.clone();
            let bytes = record.bytes.unwrap_or(0);
            let copy_us = record.ceiling.as_ref().map_or(f64::NAN, |c| c.median_us);
            Ok(Row {
                file: name,
                kernels: prep
                    .plan
                    .kernels
                    .iter()
                    .zip(&kernels)
                    .map(|(pk, k)| KernelRow {
                        name: k.name.clone(),
                        us: k.median_us,
                        grid: k.grid,
                        block: k.block,
                        registers: k.registers,
                        spill_bytes: prep
                            .kernels
                            .iter()
                            .find(|x| x.name() == k.name)
                            .map_or(0, |x| x.attributes().local_bytes_per_thread),
                        summary: pk.summary.clone(),
                    })
                    .collect(),
                ours_us: summary.median,
                ours_min_us: summary.min,
                rel_ci: summary.rel_ci,
                samples: summary.n,
                stop: serde_json::to_string(&record.stop).unwrap_or_default(),
                sampling_s: measured.elapsed.as_secs_f64(),
                stored_id,
                nvfuser_cold_us: nv,
                speedup: nv.map(|n| n / summary.median),
                bytes,
                gbps: bytes as f64 / summary.median / 1e3,
                copy_us,
                pct_of_copy: record.pct_of_ceiling().unwrap_or(f64::NAN),
                method: record.method.name().to_string(),
                record,
            })
        })();
        match res {
            Ok(r) => {
                if !a.json {
                    bar.suspend(|| eprintln!("{}: {:.2} us", r.file, r.ours_us));
                }
                rows.push(r)
            }
            Err(e) => {
                failed += 1;
                bar.suspend(|| eprintln!("{}: FAILED: {e:#}", p.display()));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "gpu": info, "rows": rows }))?
        );
    } else {
        let mut t = Table::new();
        t.load_preset(UTF8_BORDERS_ONLY);
        t.set_header(vec![
            "fusion",
            "kernels",
            "ours us",
            "+-CI",
            "n",
            "nvFuser us",
            "nvF/ours",
            "MB",
            "GB/s",
            "copy us",
            "% of copy",
        ]);
        for r in &rows {
            t.add_row(vec![
                r.file.clone(),
                r.kernels.len().to_string(),
                format!("{:.2}", r.ours_us),
                format!("{:.1}%", r.rel_ci * 100.0),
                r.samples.to_string(),
                r.nvfuser_cold_us.map_or("-".into(), |v| format!("{v:.2}")),
                r.speedup.map_or("-".into(), |v| format!("{v:.2}")),
                format!("{:.1}", r.bytes as f64 / 1e6),
                format!("{:.0}", r.gbps),
                format!("{:.2}", r.copy_us),
                format!("{:.0}%", r.pct_of_copy),
            ]);
        }
        let policy = match a.cache {
            CacheArg::Cold => "cold L2 (flushed before each sample)",
            CacheArg::Warm => "warm L2",
            CacheArg::Rotate => "inputs rotated through copies exceeding twice the L2",
        };
        outln!(
            "{} ({}, {} SMs, L2 {} MiB), {policy}, {}, median until {}; copies timed the same way",
            info.name,
            info.arch,
            info.sm_count,
            info.l2_cache_bytes >> 20,
            harness.method().words(),
            rule.describe()
        );
        outln!("{t}");
        if a.kernels {
            for r in &rows {
                outln!("{}", r.file);
                for k in &r.kernels {
                    outln!(
                        "  {:<14} {:>8.2} us  grid {:?} block {:?}  {} regs, {} B spilled  {}",
                        k.name, k.us, k.grid, k.block, k.registers, k.spill_bytes, k.summary
                    );
                }
            }
        }
        for r in rows.iter().filter(|r| r.record.throttled_samples > 0) {
            outln!(
                "warning: {} of {} samples of {} were taken while the GPU reported a throttle reason",
                r.record.throttled_samples, r.samples, r.file
            );
        }
        let sp: Vec<f64> = rows.iter().filter_map(|r| r.speedup).collect();
        if !sp.is_empty() {
            let geo = (sp.iter().map(|x| x.ln()).sum::<f64>() / sp.len() as f64).exp();
            let worst = sp.iter().cloned().fold(f64::INFINITY, f64::min);
            outln!(
                "geometric mean of nvFuser/ours over {} fusions: {geo:.3}; lowest {worst:.3}",
                sp.len()
            );
        }
    }
    Ok(ExitCode::from(if failed == 0 {
        exit::OK
    } else {
        exit::FAILED
    }))
}
