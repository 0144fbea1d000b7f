//! `fusebench bench`: cold-L2 kernel time of each fusion on the GPU, beside
//! nvFuser's time from the corpus index and a copy of the same bytes.

use crate::files;
use crate::outcome::{self, Failure};
pub use crate::timing::parse_percent;
use crate::timing::TimingArgs;
use anyhow::Context;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use fusebench_harness::{FusionSubject, Options};
use fusebench_measure::CachePolicy;
use serde::{Deserialize, Serialize};
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
    /// Also print each kernel: time, launch shape, registers and spills, the blocks a multiprocessor
    /// holds at once (and what bounds them) and the waves of its grid.
    #[arg(long)]
    kernels: bool,
    /// nvFuser's times from this JSON (written by bench/nvfuser_peer.py in the same run) instead of
    /// an index.json beside the scripts.
    #[arg(long)]
    nvfuser: Option<PathBuf>,
    #[command(flatten)]
    shard: crate::shard::ShardArgs,
    /// Also write the JSON result into this directory, as shard-I-of-N.json with --shard (else
    /// results.json): `diff` and `report` read a directory of shards as one run.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also append each fusion's row (as in --json's "rows") to this file, one JSON line each, as
    /// soon as it is measured: a run cut short keeps the rows it finished. With --devices, the
    /// rows are appended when the workers finish.
    #[arg(long, value_name = "FILE")]
    jsonl: Option<PathBuf>,
    #[command(flatten)]
    devices: crate::workers::DeviceArgs,
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

#[derive(Serialize, Deserialize)]
struct KernelRow {
    name: String,
    us: f64,
    grid: [u32; 3],
    block: [u32; 3],
    registers: u32,
    spill_bytes: u32,
    /// Blocks one multiprocessor holds at once at the registers and shared memory CUPTI
    /// recorded, what bounds them, and the waves of the grid (`codegen::launch::resident`).
    #[serde(default)]
    resident: u32,
    #[serde(default)]
    bound: String,
    #[serde(default)]
    waves: f64,
    summary: String,
}

#[derive(Serialize, Deserialize)]
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
    /// The arithmetic of the fusion's matrix products and attention
    /// (`ir::gemm::flops`), 0 where it has none, and its rate at the median.
    #[serde(default)]
    flops: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tflops: Option<f64>,
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
    let shard = match a.shard.shard() {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let paths = crate::shard::narrow(paths, shard);
    if let Some(spec) = &a.devices.devices {
        return on_devices(&a, spec, &paths, shard);
    }
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
    let dev = engine.device()?;
    let mut lines = match &a.jsonl {
        Some(path) => Some(Lines::open(path)?),
        None => None,
    };
    let measured = measure_all(&paths, a.json, |p| {
        let f = files::load(p)?;
        let flops = fusebench_ir::gemm::flops(&f);
        let g =
            fusebench_reference::generate_inputs(&f, a.timing.seed).context("generating inputs")?;
        for n in &g.notes {
            eprintln!("{}: note: {n}", p.display());
        }
        let prep = engine
            .prepare(&f, &g.inputs)
            .context("preparing for the GPU (plan, compile, allocate)")?;
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let measured = harness
            .measure(
                &FusionSubject::new(&name, &f, &prep),
                &Options {
                    cache,
                    warmup: 3,
                    rule: rule.as_ref(),
                    context: None,
                    ceiling: true,
                    siblings: true,
                    flush: None,
                },
            )
            .context("measuring")?;
        let record = measured.record;
        let nv = nvf.get(&name).copied();
        let kernels = record.kernels.clone();
        let stored_id = match store.as_mut() {
            Some(s) => Some(s.save(&record).context("saving to the results database")?),
            None => None,
        };
        let summary = record.summary.clone();
        let bytes = record.bytes.unwrap_or(0);
        let copy_us = record.ceiling.as_ref().map_or(f64::NAN, |c| c.median_us);
        if !a.json {
            eprintln!("{name}: {:.2} us", summary.median);
        }
        let row = Row {
            file: name,
            kernels: prep
                .plan
                .kernels
                .iter()
                .zip(&kernels)
                .map(|(pk, k)| {
                    let o = fusebench_codegen::launch::occupancy(&dev, k.grid, k.block, k.registers, k.shared_bytes);
                    KernelRow {
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
                        resident: o.per_sm,
                        bound: o.bound.into(),
                        waves: o.waves,
                        summary: pk.summary.clone(),
                    }
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
            flops,
            tflops: (flops > 0).then(|| flops as f64 / summary.median / 1e6),
            method: record.method.name().to_string(),
            record,
        };
        if let Some(l) = lines.as_mut() {
            l.append(&row)?;
        }
        Ok(row)
    });
    let rows = &measured.rows;
    if let Some(dir) = &a.out {
        let mut doc = document(&info, &measured);
        doc["shard"] = serde_json::json!(shard);
        write_out(dir, shard, &doc)?;
    }
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&document(&info, &measured))?
        );
    } else {
        let policy = policy_words(a.cache);
        let title = format!(
            "{} ({}, {} SMs, L2 {} MiB), {policy}, {}, median until {}; copies timed the same way",
            info.name,
            info.arch,
            info.sm_count,
            info.l2_cache_bytes >> 20,
            harness.method().words(),
            rule.describe()
        );
        print_table(rows, &measured.failures, &title, a.kernels);
    }
    Ok(measured.exit_code())
}

/// The table of `bench`: a row per fusion measured and per fusion that
/// failed, under `title` (the rate of products' and attention's arithmetic
/// where a fusion has them); with `kernels` each kernel too; then throttling
/// warnings and the geometric mean against nvFuser.
fn print_table(rows: &[Row], failures: &[Failure], title: &str, kernels: bool) {
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
        "TFLOP/s",
    ]);
    for r in rows {
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
            r.tflops.map_or("-".into(), |t| format!("{t:.0}")),
        ]);
    }
    // A fusion that failed has its row too: never an empty table without a word.
    for f in failures {
        let mut row = vec![f.file.clone(), "FAILED".into()];
        row.resize(12, "-".into());
        t.add_row(row);
    }
    outln!("{title}");
    outln!("{t}");
    if kernels {
        for r in rows {
            outln!("{}", r.file);
            for k in &r.kernels {
                outln!(
                    "  {:<14} {:>8.2} us  grid {:?} block {:?}  {} regs, {} B spilled, {} blocks/SM ({}), {:.2} waves  {}",
                    k.name,
                    k.us,
                    k.grid,
                    k.block,
                    k.registers,
                    k.spill_bytes,
                    k.resident,
                    k.bound,
                    k.waves,
                    k.summary
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
    if !failures.is_empty() {
        outln!(
            "{} measured, {} failed (the errors are on stderr)",
            crate::plural(rows.len(), "fusion"),
            failures.len()
        );
    }
}

/// `--out DIR`: the run's JSON document as DIR/shard-I-of-N.json (results.json without a shard).
fn write_out(dir: &Path, shard: Option<crate::shard::Shard>, doc: &serde_json::Value) -> anyhow::Result<()> {
    let file = dir.join(crate::shard::file_name(shard));
    std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&file, serde_json::to_string_pretty(doc)? + "\n"))
        .with_context(|| format!("writing {}", file.display()))
}

/// The cache policy in words, for the table's title.
fn policy_words(cache: CacheArg) -> &'static str {
    match cache {
        CacheArg::Cold => "cold L2 (flushed before each sample)",
        CacheArg::Warm => "warm L2",
        CacheArg::Rotate => "inputs rotated through copies exceeding twice the L2",
    }
}

/// `bench --devices`: a worker per GPU on its shard (`workers.rs`), their
/// results merged, then written, saved and shown as one run. Exit 2 when a
/// worker was refused (no GPU, a bad argument), else 1 when a fusion failed.
fn on_devices(a: &Args, spec: &str, paths: &[PathBuf], shard: Option<crate::shard::Shard>) -> anyhow::Result<ExitCode> {
    let devices = match crate::workers::parse(spec, || {
        fusebench_runtime::device_count().map_err(|e| format!("counting GPUs: {e}"))
    }) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: --devices {spec}: {e}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
    let exe = std::env::current_exe().context("finding the fusebench executable for the workers")?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let every = a.devices.every_gpu;
    eprintln!(
        "{} on {}: {}{}",
        crate::plural(paths.len(), "fusion"),
        crate::plural(devices.len(), "GPU"),
        devices.join(", "),
        if every { ", each timing every fusion" } else { "" }
    );
    let n = devices.len();
    let workers = crate::workers::run(exe.as_os_str(), &devices, |d| {
        // --every-gpu: each worker takes this host's whole share.
        let s = if every { shard } else { Some(crate::workers::worker_shard(shard, d, n)) };
        crate::workers::worker_args(&args, s)
    })
    .context("starting the workers")?;
    let order: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut doc = crate::workers::merge(&workers, &order);
    doc["shard"] = serde_json::json!(shard);
    if every {
        doc["spread"] = crate::workers::spread(&workers, &order);
    }
    let refused: Vec<String> = workers
        .iter()
        .filter(|w| w.doc.is_none() || w.code == Some(crate::exit::USAGE as i32))
        .map(|w| format!("GPU {} (exit {})", w.device, w.code.map_or("none".into(), |c| c.to_string())))
        .collect();
    let rows: Vec<Row> = serde_json::from_value(doc["rows"].clone()).context("reading the workers' rows")?;
    if let Some(path) = &a.jsonl {
        let mut l = Lines::open(path)?;
        for r in &rows {
            l.append(r)?;
        }
    }
    let failures: Vec<Failure> = serde_json::from_value(doc["failures"].clone()).context("reading the workers' failures")?;
    if a.save {
        let mut store = fusebench_store::Store::open_default()?;
        for r in &rows {
            store.save(&r.record).context("saving to the results database")?;
        }
    }
    if let Some(dir) = &a.out {
        write_out(dir, shard, &doc)?;
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else if every {
        print_spread(&doc["spread"], &devices, &failures);
    } else if let Some(first) = rows.first() {
        let e = &first.record.environment;
        let title = format!(
            "{} x{n} ({} SMs, L2 {} MiB), {}, {}, median until {}; copies timed the same way; a worker per GPU",
            e.gpu_name,
            e.sm_count,
            e.l2_bytes >> 20,
            policy_words(a.cache),
            first.record.method.words(),
            first.record.rule
        );
        print_table(&rows, &failures, &title, a.kernels);
    }
    if !refused.is_empty() {
        eprintln!("error: {} gave no results: {}", crate::plural(refused.len(), "worker"), refused.join(", "));
        return Ok(ExitCode::from(crate::exit::USAGE));
    }
    Ok(outcome::exit_code(failures.len()))
}

/// `--every-gpu`'s table: each fusion's median and 95% interval on each GPU,
/// the spread (slowest over fastest, less 1) and whether the intervals meet.
fn print_spread(spread: &serde_json::Value, devices: &[String], failures: &[Failure]) {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    let mut header = vec!["fusion".to_string()];
    header.extend(devices.iter().map(|d| format!("GPU {d} us [95%]")));
    header.extend(["spread".to_string(), "intervals meet".to_string()]);
    t.set_header(header);
    let fusions = spread.as_array().cloned().unwrap_or_default();
    let mut spreads = Vec::new();
    for f in &fusions {
        let mut row = vec![f["file"].as_str().unwrap_or("").to_string()];
        for d in devices {
            let g = f["gpus"].as_array().into_iter().flatten().find(|g| g["device"].as_str() == Some(d));
            row.push(g.map_or("-".into(), |g| {
                format!(
                    "{:.2} [{:.2}, {:.2}]",
                    g["median_us"].as_f64().unwrap_or(f64::NAN),
                    g["ci_low_us"].as_f64().unwrap_or(f64::NAN),
                    g["ci_high_us"].as_f64().unwrap_or(f64::NAN)
                )
            }));
        }
        let sp = f["spread"].as_f64();
        spreads.extend(sp);
        row.push(sp.map_or("-".into(), |v| format!("{:.1}%", v * 100.0)));
        row.push(if f["intervals_overlap"].as_bool() == Some(true) { "yes".into() } else { "no".into() });
        t.add_row(row);
    }
    for f in failures {
        let mut row = vec![f.file.clone(), "FAILED".into()];
        row.resize(devices.len() + 3, "-".into());
        t.add_row(row);
    }
    outln!("every fusion on each of {}: kernel time, median [95% interval]", crate::plural(devices.len(), "GPU"));
    outln!("{t}");
    if !spreads.is_empty() {
        let apart = fusions.iter().filter(|f| f["spread"].is_number() && f["intervals_overlap"] == false).count();
        outln!(
            "spread over {}: median {:.1}%, largest {:.1}%; {apart} whose intervals do not meet",
            crate::plural(spreads.len(), "fusion"),
            fusebench_measure::median(&spreads) * 100.0,
            spreads.iter().copied().fold(f64::NEG_INFINITY, f64::max) * 100.0
        );
    }
}

/// What `bench` measured: a row per fusion measured, a failure per fusion
/// that was not (loading, generating inputs, preparing, measuring or saving).
struct Measured<T> {
    rows: Vec<T>,
    failures: Vec<Failure>,
}

impl<T> Measured<T> {
    fn exit_code(&self) -> ExitCode {
        outcome::exit_code(self.failures.len())
    }
}

/// `bench --jsonl FILE`: rows appended one JSON line each, flushed as they
/// come, so a run stopped part way (a time limit) leaves the rows it measured.
struct Lines {
    file: std::fs::File,
    path: PathBuf,
}

impl Lines {
    fn open(path: &Path) -> anyhow::Result<Lines> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {} for --jsonl", path.display()))?;
        Ok(Lines { file, path: path.to_path_buf() })
    }

    fn append(&mut self, row: &impl Serialize) -> anyhow::Result<()> {
        use std::io::Write;
        let mut line = serde_json::to_string(row)?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.flush())
            .with_context(|| format!("appending to {}", self.path.display()))
    }
}

/// Each file measured by `one`, in order, with the count on a terminal. A
/// file that fails is said on stderr at once (the file, what was being done,
/// why), kept as a failure, and the run goes on with the next.
fn measure_all<T>(
    paths: &[PathBuf],
    json: bool,
    mut one: impl FnMut(&Path) -> anyhow::Result<T>,
) -> Measured<T> {
    let mut progress = crate::progress::Progress::new(paths.len(), json);
    let mut m = Measured {
        rows: vec![],
        failures: vec![],
    };
    for p in paths {
        progress.step(&p.display().to_string());
        match outcome::attempt(|| one(p)) {
            Ok(row) => m.rows.push(row),
            Err(error) => {
                eprintln!("{}: FAILED: {error}", p.display());
                m.failures.push(Failure {
                    file: p.display().to_string(),
                    error,
                });
            }
        }
    }
    m
}

/// `bench --json`: the GPU, the rows measured (each with its record), and the
/// fusions that failed with their errors.
fn document<T: Serialize>(gpu: &impl Serialize, m: &Measured<T>) -> serde_json::Value {
    serde_json::json!({ "gpu": gpu, "rows": m.rows, "failures": m.failures })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--jsonl`: each row a line of its own, kept across opens, so an
    /// interrupted run's rows stay and a second run adds to them.
    #[test]
    fn jsonl_rows_are_appended_a_line_each() {
        let path = std::env::temp_dir().join(format!("fusebench-jsonl-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut l = Lines::open(&path).unwrap();
        l.append(&serde_json::json!({"file": "a.py", "ours_us": 1.5})).unwrap();
        drop(l);
        Lines::open(&path).unwrap().append(&serde_json::json!({"file": "b.py", "ours_us": 2.5})).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert_eq!((rows[0]["file"].as_str(), rows[1]["ours_us"].as_f64()), (Some("a.py"), Some(2.5)));
        // A file that cannot be opened is an error that names it.
        let e = Lines::open(Path::new("/nonexistent-dir/x.jsonl")).err().unwrap();
        assert!(format!("{e:#}").contains("/nonexistent-dir/x.jsonl"), "{e:#}");
    }

    /// The decision `bench` makes per fusion, without a GPU: a fusion that
    /// fails inside the loop (an error or a panic) is a failed row with the
    /// file and why, the others are measured, and the run exits 1.
    #[test]
    fn a_fusion_that_fails_is_a_failure_and_the_run_exits_1() {
        let paths: Vec<PathBuf> = ["a.py", "huge.py", "buggy.py", "d.py"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let m = measure_all(&paths, true, |p| match p.to_str().unwrap() {
            "huge.py" => Err(anyhow::anyhow!(
                "needs 167772160000 bytes, 150000000000 free"
            ))
            .context("preparing for the GPU (plan, compile, allocate)"),
            "buggy.py" => panic!("a bug"),
            other => Ok(other.to_string()),
        });
        assert_eq!(m.rows, ["a.py", "d.py"]);
        assert_eq!(m.failures.len(), 2);
        assert_eq!(m.failures[0].file, "huge.py");
        assert_eq!(
            m.failures[0].error,
            "preparing for the GPU (plan, compile, allocate): needs 167772160000 bytes, 150000000000 free"
        );
        assert_eq!(m.failures[1].file, "buggy.py");
        assert!(
            m.failures[1].error.contains("a bug in fusebench"),
            "{:?}",
            m.failures[1]
        );
        assert_eq!(m.exit_code(), ExitCode::from(crate::exit::FAILED));
        let v = document(&"H200", &m);
        assert_eq!(v["rows"].as_array().unwrap().len(), 2);
        assert_eq!(v["failures"][0]["file"], "huge.py");
        assert!(v["failures"][0]["error"]
            .as_str()
            .unwrap()
            .contains("167772160000 bytes"));

        // Nothing failed: exit 0 and no failures in the JSON.
        let m = measure_all(&paths[..1], true, |_| Ok(1));
        assert_eq!(m.exit_code(), ExitCode::from(crate::exit::OK));
        assert_eq!(document(&"H200", &m)["failures"], serde_json::json!([]));
    }
}
