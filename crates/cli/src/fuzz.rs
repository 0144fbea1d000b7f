//! `fusebench fuzz`: random well-typed fusions (`fusebench_ir::random`) checked
//! end to end. Every fusion: printed and read back (it must be the same
//! fusion), planned with its CUDA written (no panic), run on the CPU
//! reference with a per-element error bound for each output
//! (`fusebench_reference::bounds`); with `--device gpu` also run on the GPU,
//! outputs poisoned each of `POISONS` ways, every output compared with the
//! reference within its bounds. Fusion `i` of seed `S` is always the same
//! fusion, with the same inputs.

use anyhow::Context;
use crate::check::DeviceArg;
use fusebench_codegen::{plan, Device};
use fusebench_engine::{Engine, POISONS};
use fusebench_ir::Fusion;
use fusebench_reference::bounds::{compare_bounded, run_with_bounds};
use fusebench_reference::{generate_inputs, Arg, Tensor};
use serde::Serialize;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Fusions to draw.
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// Which stream of fusions: fusion i of seed S is always the same fusion.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Index of the first fusion (`--start I --count 1` redoes fusion I alone).
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// `cpu`: round trip, planning and CUDA generation, the CPU reference; `gpu`: also the GPU against it.
    #[arg(long, value_enum, default_value = "cpu")]
    device: DeviceArg,
    /// Write each failing fusion here as a repro script named by its seed and index (and each
    /// fusion or replayed script the planner refused under DIR/refused/, with the reason).
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Check these repro scripts (files or directories) the same way instead of drawing fusions.
    #[arg(long)]
    replay: Vec<PathBuf>,
    /// Threads for the CPU part (reference, planning) and for compiling kernels ahead of the GPU runs.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Print each drawn fusion's repro script before checking it.
    #[arg(long)]
    show: bool,
    /// Stop drawing after this many seconds and report what ran (the counts say how many).
    #[arg(long)]
    max_seconds: Option<f64>,
    /// Machine-readable output: one JSON document.
    #[arg(long)]
    json: bool,
}

/// What happened to one fusion.
#[derive(Serialize, Clone, Debug)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Every check passed.
    Matched,
    /// The CPU reference refused the fusion (not a failure: an op it rejects at run time).
    Skipped { reason: String },
    /// The planner refused it (a codegen error: not lowered yet).
    Refused { reason: String },
    /// The GPU's outputs differ from the reference.
    Mismatched { detail: String },
    /// A broken round trip, a panic, or a GPU error other than a refusal.
    Failed { detail: String },
}

#[derive(Serialize, Default)]
struct Summary {
    fusebench_fuzz: u32,
    seed: u64,
    start: u64,
    device: String,
    generated: u64,
    ill_typed_draws: usize,
    skipped: u64,
    run: u64,
    matched: u64,
    mismatched: u64,
    failed: u64,
    refused: u64,
    refused_reasons: BTreeMap<String, u64>,
    skipped_reasons: BTreeMap<String, u64>,
    elements_checked: u64,
    elements_unchecked: u64,
    seconds: f64,
    failures: Vec<Failure>,
    /// Every mismatched or failed fusion (its index, or a replayed file's
    /// name), beyond the first 20 printed in detail too.
    failed_all: Vec<String>,
}

#[derive(Serialize)]
struct Failure {
    label: String,
    #[serde(flatten)]
    outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    kept: Option<String>,
}

/// Elements of the outputs checked and not checked (bound +inf).
#[derive(Default, Clone, Copy)]
struct Tally {
    checked: u64,
    unchecked: u64,
}

/// A case to check: its label, the fusion (or why it did not read), and
/// whether it was drawn at random (else replayed from a file).
type Case = (String, Result<Fusion, String>, bool);

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let engine = match a.device {
        DeviceArg::Cpu => None,
        DeviceArg::Gpu => match crate::engine("fuzz --device gpu") {
            Ok(e) => Some(e),
            Err(code) => return Ok(code),
        },
    };
    // Planned as the engine plans, with the FUSEBENCH_ settings in force.
    let dev = fusebench_engine::planner_device(Device::default()).context("the FUSEBENCH_ settings")?;
    let t0 = Instant::now();
    let mut s = Summary {
        fusebench_fuzz: 1,
        seed: a.seed,
        start: a.start,
        device: if engine.is_some() { "gpu" } else { "cpu" }.into(),
        ..Default::default()
    };
    // Ill-typed draws of each drawn fusion, counted as the fusion is checked.
    let mut ill = vec![];
    let cases: Vec<Case> = if a.replay.is_empty() {
        (a.start..a.start + a.count)
            .map(|i| {
                let d = fusebench_ir::random::fusion(a.seed, i);
                ill.push(d.ill_typed);
                (format!("seed {} fusion {i}", a.seed), Ok(d.fusion), true)
            })
            .collect()
    } else {
        let paths = match crate::paths_arg(&a.replay) {
            Ok(p) => p,
            Err(code) => return Ok(code),
        };
        paths
            .iter()
            .map(|p| {
                let f = crate::files::load(p).map_err(|e| format!("{e:#}"));
                (p.display().to_string(), f, false)
            })
            .collect()
    };
    let jobs = a.jobs.max(1);
    let batch_len = if jobs > 1 { 8 * jobs } else { 1 };
    let mut progress = crate::progress::Progress::throttled(cases.len(), a.json);
    let mut cases = cases.into_iter().enumerate().peekable();
    while cases.peek().is_some() {
        if a.max_seconds
            .is_some_and(|m| t0.elapsed().as_secs_f64() > m)
        {
            break;
        }
        let batch: Vec<(usize, Case)> = cases.by_ref().take(batch_len).collect();
        let plain: Vec<Case> = batch.iter().map(|(_, c)| c.clone()).collect();
        for (_, (label, f, _)) in &batch {
            if let (true, false, Ok(f)) = (a.show, a.json, f) {
                outln!("# {label}\n{}", fusebench_frontend::print_script(f));
            }
        }
        let readies = cpu_batch(&plain, &dev, engine.as_ref().filter(|_| jobs > 1), jobs);
        for ((k, (label, f, drawn)), ready) in batch.into_iter().zip(readies) {
            s.generated += 1;
            progress.step(&label);
            s.ill_typed_draws += ill.get(k).copied().unwrap_or(0);
            let mut tally = Tally::default();
            let outcome = match (ready, &f, engine.as_ref()) {
                (Err(o), _, _) => o,
                (Ok(_), _, None) => Outcome::Matched,
                (Ok(r), Ok(f), Some(e)) => {
                    catch_unwind(AssertUnwindSafe(|| gpu_outcome(e, f, &r, &mut tally)))
                        .unwrap_or_else(|e| Outcome::Failed {
                            detail: format!("panic: {}", crate::panic_message(&e)),
                        })
                }
                (Ok(_), Err(e), _) => Outcome::Failed { detail: e.clone() },
            };
            s.elements_checked += tally.checked;
            s.elements_unchecked += tally.unchecked;
            match &outcome {
                Outcome::Matched => {
                    s.run += 1;
                    s.matched += 1
                }
                Outcome::Skipped { reason } => {
                    s.skipped += 1;
                    *s.skipped_reasons.entry(reason_key(reason)).or_default() += 1;
                }
                Outcome::Refused { reason } => {
                    s.refused += 1;
                    *s.refused_reasons.entry(reason_key(reason)).or_default() += 1;
                    match (&a.keep, &f, drawn) {
                        (Some(dir), Ok(f), true) => {
                            keep(&dir.join("refused"), f, a.seed, a.start + k as u64, &outcome)?;
                        }
                        (Some(dir), Ok(f), false) => {
                            keep_replayed(&dir.join("refused"), f, &label, &outcome)?;
                        }
                        _ => {}
                    }
                }
                Outcome::Mismatched { .. } => {
                    s.run += 1;
                    s.mismatched += 1
                }
                Outcome::Failed { .. } => s.failed += 1,
            }
            if matches!(outcome, Outcome::Mismatched { .. } | Outcome::Failed { .. }) {
                let index = a.start + k as u64;
                let kept = match (&a.keep, &f, drawn) {
                    (Some(dir), Ok(f), true) => Some(keep(dir, f, a.seed, index, &outcome)?),
                    _ => None,
                };
                s.failed_all.push(if drawn { index.to_string() } else { label.clone() });
                if s.failures.len() < 20 {
                    s.failures.push(Failure {
                        label,
                        outcome,
                        kept,
                    });
                }
            }
        }
    }
    s.seconds = t0.elapsed().as_secs_f64();
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print_summary(&s);
    }
    Ok(ExitCode::from(if s.mismatched + s.failed == 0 {
        crate::exit::OK
    } else {
        crate::exit::FAILED
    }))
}

/// A refusal message without its numbers and names of values, so that
/// refusals of one kind count together.
fn reason_key(r: &str) -> String {
    let first = r.lines().next().unwrap_or("");
    let mut out = String::new();
    let mut last_digit = false;
    for ch in first.chars() {
        if ch.is_ascii_digit() {
            if !last_digit {
                out.push('N');
            }
            last_digit = true;
        } else {
            out.push(ch);
            last_digit = false;
        }
    }
    out.chars().take(100).collect()
}

/// Input layouts from the recipe (every drawn fusion has one).
fn layouts(f: &Fusion) -> Vec<Option<(Vec<i64>, i64)>> {
    crate::emit::layouts(f)
}

/// A fusion's CPU results, ready for the GPU.
struct Ready {
    inputs: Vec<Arg>,
    want: Vec<Tensor>,
    bounds: Vec<Option<Tensor>>,
}

/// The checks that need no GPU: round trip, planning (never a panic),
/// inputs, the reference with its bounds. `Err` is the fusion's final
/// outcome. With `warm`, the fusion's kernels are also compiled into the
/// kernel cache, so that this part can run on many threads and the GPU part
/// after it finds them compiled.
fn on_cpu(f: &Fusion, dev: &Device, drawn: bool, warm: Option<&Engine>) -> Result<Ready, Outcome> {
    if drawn {
        round_trip(f).map_err(|detail| Outcome::Failed { detail })?;
    }
    // Planning and CUDA generation need no GPU: they must never panic.
    let planned = catch_unwind(AssertUnwindSafe(|| {
        plan(f, &layouts(f), *dev).map(|p| p.source.len())
    }));
    let refusal = match planned {
        Err(e) => {
            return Err(Outcome::Failed {
                detail: format!("planning panicked: {}", crate::panic_message(&e)),
            })
        }
        Ok(Err(e)) => Some(e.to_string()),
        Ok(Ok(_)) => None,
    };
    let inputs = generate_inputs(f, 0)
        .map_err(|e| Outcome::Skipped {
            reason: format!("inputs: {e}"),
        })?
        .inputs;
    let (want, bounds) = run_with_bounds(f, &inputs).map_err(|e| Outcome::Skipped {
        reason: format!("CPU reference: {e}"),
    })?;
    if let Some(reason) = refusal {
        return Err(Outcome::Refused { reason });
    }
    if let Some(engine) = warm {
        warm_cache(engine, f, &inputs);
    }
    Ok(Ready {
        inputs,
        want,
        bounds,
    })
}

/// Compiles the kernels `engine.prepare` will ask for (errors are left for it to report).
fn warm_cache(engine: &Engine, f: &Fusion, inputs: &[Arg]) {
    let layouts: Vec<Option<(Vec<i64>, i64)>> = inputs
        .iter()
        .map(|a| match a {
            Arg::Tensor(t) => Some((t.strides().to_vec(), t.offset() as i64)),
            Arg::Scalar(_) => None,
        })
        .collect();
    let Ok(device) = engine.device() else { return };
    if let Ok(p) = plan(f, &layouts, device) {
        let _ = engine.gpu.compile_units(&p.units(fusebench_runtime::compile_apart()));
    }
}

/// The GPU part: runs `f` poisoned each way and compares.
fn gpu_outcome(engine: &Engine, f: &Fusion, r: &Ready, tally: &mut Tally) -> Outcome {
    match on_gpu(engine, f, &r.inputs, &r.want, &r.bounds, tally) {
        Ok(None) => Outcome::Matched,
        Ok(Some(detail)) => Outcome::Mismatched { detail },
        Err(fusebench_engine::EngineError::Codegen(e)) => Outcome::Refused {
            reason: e.to_string(),
        },
        Err(e) => Outcome::Failed {
            detail: format!("GPU: {e}"),
        },
    }
}

/// The CPU part of every case of `batch`, on `jobs` threads; panics are failures.
fn cpu_batch(
    batch: &[(String, Result<Fusion, String>, bool)],
    dev: &Device,
    warm: Option<&Engine>,
    jobs: usize,
) -> Vec<Result<Ready, Outcome>> {
    let one = |(_, f, drawn): &(String, Result<Fusion, String>, bool)| match f {
        Err(e) => Err(Outcome::Failed { detail: e.clone() }),
        Ok(f) => catch_unwind(AssertUnwindSafe(|| on_cpu(f, dev, *drawn, warm))).unwrap_or_else(|e| {
            Err(Outcome::Failed {
                detail: format!("panic: {}", crate::panic_message(&e)),
            })
        }),
    };
    if jobs <= 1 {
        return batch.iter().map(one).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<Ready, Outcome>>>> =
        batch.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|sc| {
        for _ in 0..jobs {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= batch.len() {
                    break;
                }
                let r = one(&batch[i]);
                *slots[i].lock().unwrap() = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| m.into_inner().unwrap().expect("every case done"))
        .collect()
}

/// Print, read back, compare.
fn round_trip(f: &Fusion) -> Result<(), String> {
    let text = fusebench_frontend::print_script(f);
    match fusebench_frontend::parse_script("fuzz.py", &text) {
        Ok(g) if g == *f => Ok(()),
        Ok(g) => Err(format!(
            "print -> parse gives a different fusion ({}):\n{text}",
            first_difference(f, &g)
        )),
        Err(e) => Err(format!(
            "the printed script does not read back: {e}\n{text}"
        )),
    }
}

/// Where two fusions first differ, for a round-trip failure.
fn first_difference(f: &Fusion, g: &Fusion) -> String {
    if let Some(i) =
        (0..f.values.len().max(g.values.len())).find(|&i| f.values.get(i) != g.values.get(i))
    {
        return format!(
            "value {i}: {:?} read back as {:?}",
            f.values.get(i),
            g.values.get(i)
        );
    }
    if let Some(i) =
        (0..f.nodes.len().max(g.nodes.len())).find(|&i| f.nodes.get(i) != g.nodes.get(i))
    {
        return format!(
            "node {i}: {:?} read back as {:?}",
            f.nodes.get(i),
            g.nodes.get(i)
        );
    }
    if f.inputs != g.inputs || f.outputs != g.outputs {
        return format!(
            "inputs/outputs {:?}/{:?} read back as {:?}/{:?}",
            f.inputs, f.outputs, g.inputs, g.outputs
        );
    }
    if f.script != g.script {
        return format!("script {:?} read back as {:?}", f.script, g.script);
    }
    format!("recipe {:?} read back as {:?}", f.recipe, g.recipe)
}

/// Runs `f` on the GPU once per poison; the first disagreement, if any.
fn on_gpu(
    engine: &Engine,
    f: &Fusion,
    inputs: &[Arg],
    want: &[Tensor],
    bounds: &[Option<Tensor>],
    tally: &mut Tally,
) -> Result<Option<String>, fusebench_engine::EngineError> {
    let p = engine.prepare(f, inputs)?;
    for byte in POISONS {
        p.run_poisoned(byte)?;
        let got = p.outputs(f, inputs)?;
        for (o, ((g, w), b)) in got.iter().zip(want).zip(bounds).enumerate() {
            let (c, unchecked) = compare_bounded(g, w, b.as_ref());
            if byte == POISONS[0] {
                tally.checked += (c.elements - unchecked) as u64;
                tally.unchecked += unchecked as u64;
            }
            if !c.ok {
                let name = &f.value(f.outputs[o]).name;
                let mut d = format!(
                    "output {o} ({name}, {} {:?}) with outputs poisoned 0x{byte:02X}: ",
                    w.dtype(),
                    w.shape()
                );
                match (&c.problem, &c.first_mismatch) {
                    (Some(p), _) => d.push_str(p),
                    (None, Some((idx, got, want))) => {
                        let bound = b.as_ref().map_or(0.0, |b| b.get_f64(idx));
                        d.push_str(&format!(
                            "{} of {} elements outside their bounds; first at {idx:?}: {got} vs {want} (bound {bound:.3e})",
                            c.mismatches, c.elements
                        ))
                    }
                    (None, None) => d.push_str("mismatch"),
                }
                return Ok(Some(d));
            }
        }
    }
    Ok(None)
}

/// Writes the repro script of a failing fusion into `dir`.
fn keep(dir: &Path, f: &Fusion, seed: u64, index: u64, o: &Outcome) -> anyhow::Result<String> {
    let header = vec![
        format!("fusebench fuzz: seed {seed}, fusion {index}"),
        format!("redo: fusebench fuzz --seed {seed} --start {index} --count 1 --device gpu"),
    ];
    write_kept(dir, f, &format!("seed{seed}-{index}.py"), header, o)
}

/// A replayed script the planner refused, kept under its own file name
/// with the reason (a directory of scripts sorted by what is refused).
fn keep_replayed(dir: &Path, f: &Fusion, label: &str, o: &Outcome) -> anyhow::Result<String> {
    let name = Path::new(label).file_name().map_or_else(|| "script.py".into(), |n| n.to_string_lossy().into_owned());
    let header = vec![
        format!("fusebench fuzz: replayed {label}"),
        format!("redo: fusebench fuzz --replay {label} --device gpu"),
    ];
    write_kept(dir, f, &name, header, o)
}

fn write_kept(dir: &Path, f: &Fusion, name: &str, header: Vec<String>, o: &Outcome) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("--keep {}: cannot create the directory", dir.display()))?;
    let mut f = f.clone();
    let (verb, what) = match o {
        Outcome::Mismatched { detail } | Outcome::Failed { detail } => ("failed", detail.clone()),
        Outcome::Refused { reason } => ("refused", reason.clone()),
        _ => ("", String::new()),
    };
    f.script.header = header;
    f.script
        .header
        .extend(what.lines().take(3).map(|l| format!("{verb}: {l}")));
    let path = dir.join(name);
    std::fs::write(&path, fusebench_frontend::print_script(&f))?;
    Ok(path.display().to_string())
}

fn print_summary(s: &Summary) {
    outln!(
        "fuzz seed {} fusions {}..{} on {}: {:.1} s",
        s.seed,
        s.start,
        s.start + s.generated,
        s.device,
        s.seconds
    );
    outln!("  generated            {}", s.generated);
    outln!(
        "  ill-typed draws      {} (skipped and redrawn)",
        s.ill_typed_draws
    );
    outln!("  skipped (CPU)        {}", s.skipped);
    for (r, n) in &s.skipped_reasons {
        outln!("      {n:>6}  {r}");
    }
    outln!("  refused (planner)    {}", s.refused);
    for (r, n) in &s.refused_reasons {
        outln!("      {n:>6}  {r}");
    }
    if s.device == "gpu" {
        outln!("  run on the GPU       {}", s.run);
        outln!("  matched              {}", s.matched);
        outln!("  mismatched           {}", s.mismatched);
        outln!(
            "  elements checked     {} ({} not checked: bound +inf)",
            s.elements_checked, s.elements_unchecked
        );
    } else {
        outln!("  passed (no GPU run)  {}", s.matched);
    }
    outln!("  failed               {}", s.failed);
    for f in &s.failures {
        let (kind, d) = match &f.outcome {
            Outcome::Mismatched { detail } => ("MISMATCH", detail),
            Outcome::Failed { detail } => ("FAILED", detail),
            _ => continue,
        };
        outln!("\n  {kind} {}", f.label);
        for l in d.lines().take(40) {
            outln!("    {l}");
        }
        if let Some(k) = &f.kept {
            outln!("    kept: {k}");
        }
    }
    if !s.failed_all.is_empty() {
        outln!(
            "\n  all {} mismatched or failed: {}",
            s.failed_all.len(),
            s.failed_all.join(" ")
        );
    }
}
