//! `fusebench check`: parse, validate and run each fusion on the CPU reference.

use crate::{exit, files};
use comfy_table::{presets::NOTHING, Table};
use fusebench_ir::{recipe::check_recipes, Fusion};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Repro scripts (.py), fusions in JSON form (.json), or directories of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Machine-readable output: one JSON document with a report per fusion.
    #[arg(long)]
    json: bool,
    /// Seed for the generated inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Treat disagreements between a script's inputs and its definition as failures.
    #[arg(long)]
    strict: bool,
    /// Also run each fusion on this device and compare every output with the CPU reference.
    #[arg(long, value_enum, default_value = "cpu")]
    device: DeviceArg,
    /// A safetensors file of recorded tensors for one script: inputs `in0`, `in1`, ... (scalars from
    /// the script), every output compared with `out0`, `out1`, ... and each input updated in place
    /// with `post_in<i>`. Exits 1 on any mismatch.
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
    #[command(flatten)]
    shard: crate::shard::ShardArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq)]
pub enum DeviceArg {
    /// The CPU reference only.
    Cpu,
    /// The GPU engine, checked against the CPU reference.
    Gpu,
}

#[derive(Serialize)]
struct TensorInfo {
    name: String,
    dtype: String,
    shape: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strides: Option<Vec<i64>>,
}

#[derive(Serialize)]
struct OutputInfo {
    #[serde(flatten)]
    tensor: TensorInfo,
    mean: f64,
    /// Of a complex output, the mean's imaginary part.
    #[serde(skip_serializing_if = "Option::is_none")]
    mean_imag: Option<f64>,
    abs_max: f64,
    nan: usize,
    inf: usize,
}

#[derive(Serialize, Default)]
struct Report {
    file: String,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    syntax: Option<fusebench_ir::Syntax>,
    ops: usize,
    inputs: Vec<TensorInfo>,
    outputs: Vec<OutputInfo>,
    /// Where the script's own inputs disagree with its definition.
    input_issues: Vec<String>,
    /// What input generation did differently from the script, and why.
    input_notes: Vec<String>,
    parse_ms: f64,
    inputs_ms: f64,
    cpu_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu: Option<crate::gpu::GpuCheck>,
    /// Inputs updated in place: (output, input) names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    updated_inputs: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<crate::data::DataCheck>,
}

#[derive(Serialize)]
struct Summary {
    fusebench_check: u32,
    seed: u64,
    fusions: usize,
    ok: usize,
    failed: usize,
    total_cpu_ms: f64,
    reports: Vec<Report>,
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
    if a.data.is_some() && (paths.len() != 1 || a.paths.iter().any(|p| p.is_dir())) {
        eprintln!("error: --data takes one script (its tensors are that script's inputs and outputs)");
        return Ok(ExitCode::from(exit::USAGE));
    }
    let engine = match a.device {
        DeviceArg::Cpu => None,
        DeviceArg::Gpu => match crate::engine("check --device gpu") {
            Ok(e) => Some(e),
            Err(code) => return Ok(code),
        },
    };
    if engine.is_some() && !a.json {
        for d in [
            fusebench_ir::DType::BFloat16,
            fusebench_ir::DType::Half,
            fusebench_ir::DType::Float,
            fusebench_ir::DType::Double,
            fusebench_ir::DType::Int,
        ] {
            outln!(
                "tolerance {}",
                fusebench_reference::compare::Tolerance::describe(d)
            );
        }
        outln!();
    }
    let mut reports = Vec::new();
    let mut progress = crate::progress::Progress::new(paths.len(), a.json);
    for p in &paths {
        progress.step(&p.display().to_string());
        // A bug in fusebench must not hide the results of the other fusions.
        let r = crate::outcome::attempt(|| {
            Ok(check_one(p, a.seed, a.strict, engine.as_ref(), a.data.as_deref()))
        })
        .unwrap_or_else(|error| Report {
            file: p.display().to_string(),
            error: Some(error),
            ..Default::default()
        });
        if !a.json {
            print_report(&r);
        }
        reports.push(r);
    }
    let failed = reports.iter().filter(|r| !r.ok).count();
    let summary = Summary {
        fusebench_check: 1,
        seed: a.seed,
        fusions: reports.len(),
        ok: reports.len() - failed,
        failed,
        total_cpu_ms: reports
            .iter()
            .map(|r| r.parse_ms + r.inputs_ms + r.cpu_ms)
            .sum(),
        reports,
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        outln!(
            "{}: {} ok, {} failed; {:.2} s in all (parse + inputs + CPU run)",
            crate::plural(summary.fusions, "fusion"),
            summary.ok,
            summary.failed,
            summary.total_cpu_ms / 1e3
        );
    }
    Ok(crate::outcome::exit_code(failed))
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn check_one(
    path: &Path,
    seed: u64,
    strict: bool,
    engine: Option<&fusebench_engine::Engine>,
    data: Option<&Path>,
) -> Report {
    let mut r = Report {
        file: path.display().to_string(),
        ..Default::default()
    };
    let t = Instant::now();
    let file = match data.map(fusebench_reference::golden::DataFile::read).transpose() {
        Ok(d) => d,
        Err(e) => {
            r.error = Some(format!("--data: {e}"));
            return r;
        }
    };
    let loaded = match &file {
        Some(df) => crate::data::load(path, df),
        None => files::load(path),
    };
    let f = match loaded {
        Ok(f) => f,
        Err(e) => {
            r.error = Some(format!("{e:#}"));
            return r;
        }
    };
    r.parse_ms = ms(t);
    r.syntax = Some(f.script.syntax);
    r.ops = f.op_count();
    if let Some(rec) = &f.recipe {
        r.input_issues = check_recipes(&f, rec)
            .into_iter()
            .map(|i| i.message)
            .collect();
    }
    let t = Instant::now();
    let generated = match fusebench_reference::generate_inputs(&f, seed) {
        Ok(g) => g,
        Err(e) => {
            r.error = Some(format!("{}: generating inputs: {e}", path.display()));
            return r;
        }
    };
    r.inputs_ms = ms(t);
    r.input_notes = generated.notes.clone();
    r.input_notes.extend(fusebench_ir::rng::unseeded_note(&f));
    r.updated_inputs = f
        .aliases
        .iter()
        .map(|a| (f.value(f.outputs[a.output]).name.clone(), f.value(a.input).name.clone()))
        .collect();
    let mut generated = generated;
    if let Some(df) = &file {
        match crate::data::inputs(&f, df, &generated.inputs) {
            Ok(i) => generated.inputs = i,
            Err(e) => {
                r.error = Some(format!("--data: {e}"));
                return r;
            }
        }
        r.input_notes.clear();
    }
    r.inputs = input_infos(&f, &generated.inputs);
    let t = Instant::now();
    let (mut cpu_outs, mut gpu_outs_kept) = (None, None);
    match fusebench_reference::run(&f, &generated.inputs) {
        Ok(outs) => {
            r.cpu_ms = ms(t);
            r.outputs = f
                .outputs
                .iter()
                .zip(&outs)
                .map(|(&v, t)| {
                    let s = fusebench_reference::stats(t);
                    OutputInfo {
                        tensor: TensorInfo {
                            name: f.value(v).name.clone(),
                            dtype: t.dtype().torch_name().into(),
                            shape: t.shape().to_vec(),
                            strides: None,
                        },
                        mean: s.mean,
                        mean_imag: s.mean_imag,
                        abs_max: s.abs_max,
                        nan: s.nan_count,
                        inf: s.inf_count,
                    }
                })
                .collect();
            r.ok = !strict || r.input_issues.is_empty();
            if !r.ok {
                r.error =
                    Some("the script's inputs disagree with its definition (--strict)".into());
            }
            let mut gpu_outs = None;
            if let Some(engine) = engine {
                match crate::gpu::check(engine, &f, &generated.inputs, &outs) {
                    Ok(mut g) => {
                        if !g.ok {
                            r.ok = false;
                            r.error = Some("GPU outputs differ from the CPU reference".into());
                        }
                        gpu_outs = Some(std::mem::take(&mut g.last));
                        r.gpu = Some(g);
                    }
                    Err(e) => {
                        r.ok = false;
                        r.error = Some(format!("GPU: {e:#}"));
                    }
                }
            }
            cpu_outs = Some(outs);
            gpu_outs_kept = gpu_outs;
        }
        Err(e) => r.error = Some(format!("{}: CPU reference: {e}", path.display())),
    }
    if let (Some(df), Some(outs)) = (&file, cpu_outs) {
        match crate::data::compare(&f, df, &outs, gpu_outs_kept.as_deref()) {
            Ok(d) => {
                if !d.ok {
                    r.ok = false;
                    r.error.get_or_insert_with(|| "outputs differ from the data file".into());
                }
                r.data = Some(d);
            }
            Err(e) => {
                r.ok = false;
                r.error = Some(format!("--data: {e}"));
            }
        }
    }
    r
}

fn input_infos(f: &Fusion, args: &[fusebench_reference::Arg]) -> Vec<TensorInfo> {
    f.inputs
        .iter()
        .zip(args)
        .map(|(&v, a)| {
            let val = f.value(v);
            match a {
                fusebench_reference::Arg::Tensor(t) => TensorInfo {
                    name: val.name.clone(),
                    dtype: t.dtype().torch_name().into(),
                    shape: t.shape().to_vec(),
                    strides: Some(t.strides().to_vec()),
                },
                fusebench_reference::Arg::Scalar(_) => TensorInfo {
                    name: val.name.clone(),
                    dtype: val.dtype.torch_name().into(),
                    shape: vec![],
                    strides: None,
                },
            }
        })
        .collect()
}

fn print_report(r: &Report) {
    let status = if r.ok { "ok" } else { "FAILED" };
    let syntax = match r.syntax {
        Some(fusebench_ir::Syntax::Legacy) => "legacy syntax",
        Some(fusebench_ir::Syntax::Direct) => "direct syntax",
        None => "not parsed",
    };
    outln!(
        "== {}  {status}  ({syntax}, {} ops, inputs {:.1} ms, CPU {:.1} ms)",
        r.file, r.ops, r.inputs_ms, r.cpu_ms
    );
    if let Some(e) = &r.error {
        for line in e.lines() {
            outln!("   {line}");
        }
    }
    if !r.inputs.is_empty() {
        let mut t = Table::new();
        t.load_preset(NOTHING);
        t.set_header(vec!["input", "dtype", "shape", "strides"]);
        for i in &r.inputs {
            t.add_row(vec![
                i.name.clone(),
                i.dtype.clone(),
                format!("{:?}", i.shape),
                i.strides
                    .as_ref()
                    .map_or("scalar".into(), |s| format!("{s:?}")),
            ]);
        }
        outln!("{t}");
    }
    if !r.outputs.is_empty() {
        let mut t = Table::new();
        t.load_preset(NOTHING);
        t.set_header(vec![
            "output", "dtype", "shape", "mean", "abs-max", "NaN", "Inf",
        ]);
        for o in &r.outputs {
            t.add_row(vec![
                o.tensor.name.clone(),
                o.tensor.dtype.clone(),
                format!("{:?}", o.tensor.shape),
                match o.mean_imag {
                    Some(im) => format!("{:.6e}{:+.6e}j", o.mean, im),
                    None => format!("{:.6e}", o.mean),
                },
                format!("{:.6e}", o.abs_max),
                o.nan.to_string(),
                o.inf.to_string(),
            ]);
        }
        outln!("{t}");
    }
    if let Some(g) = &r.gpu {
        outln!(
            "   GPU: {}, compile {:.1} ms{}, load {:.1} ms{}: {}",
            crate::plural(g.kernels, "kernel"),
            g.compile_ms,
            if g.from_cache { " (cached)" } else { "" },
            g.load_ms,
            if g.library_ms > 0.05 { format!(", libraries plan {:.1} ms", g.library_ms) } else { String::new() },
            if g.ok {
                "every output matches the CPU reference"
            } else {
                "MISMATCH"
            }
        );
        for (o, c) in r.outputs.iter().zip(&g.outputs) {
            let status = if c.ok { "ok" } else { "MISMATCH" };
            let mut line = format!(
                "     {:<6} {status:<8} max abs err {:.3e}, max rel err {:.3e}, {} of {} outside tolerance",
                o.tensor.name, c.max_abs_err, c.max_rel_err, c.mismatches, c.elements
            );
            if let Some(p) = &c.problem {
                line.push_str(&format!(" ({p})"));
            }
            if c.by_bound > 0 {
                line.push_str(&format!(
                    "; {} within the error bound carried through its ops",
                    c.by_bound
                ));
            }
            if let Some((idx, got, want)) = &c.first_mismatch {
                line.push_str(&format!("; first at {idx:?}: {got} vs {want}"));
            }
            outln!("{line}");
        }
    }
    for (k, (o, i)) in r.updated_inputs.iter().enumerate() {
        // On the GPU the input's own buffer is read back after the run.
        let gpu = r.gpu.as_ref().and_then(|g| g.updated_inputs.get(k)).map(|(_, c)| {
            if c.ok {
                "; on the GPU: ok".to_string()
            } else {
                format!("; on the GPU: MISMATCH, {} of {} outside tolerance", c.mismatches, c.elements)
            }
        });
        outln!("   {o} updates input {i} in place (add_output alias){}", gpu.unwrap_or_default());
    }
    if let Some(d) = &r.data {
        crate::data::print(d);
    }
    for i in &r.input_issues {
        outln!("   ! {i}");
    }
    for n in &r.input_notes {
        outln!("   note: {n}");
    }
    outln!();
}
