//! `fusebench emit`: the GPU plan of a fusion — kernels, launch shapes, CUDA C.

use crate::files;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A repro script (.py) or a fusion in JSON form (.json).
    file: PathBuf,
    /// Print the generated CUDA C after the kernel list.
    #[arg(long)]
    cuda: bool,
    /// Print the whole plan as JSON instead.
    #[arg(long)]
    json: bool,
    /// Multiprocessor count to plan for (the H200's by default, with its other properties; the GPU's own when `bench` or `check --device gpu` plan).
    #[arg(long, default_value_t = 132)]
    sms: u32,
    /// Rows a row-wise block handles at once (a tuning experiment; the default is the measured choice).
    #[arg(long)]
    row_unroll: Option<u32>,
}

/// Input layouts a fusion would run with: the script's own recipe where it
/// has one, else dense layouts that satisfy the definition.
pub fn layouts(f: &fusebench_ir::Fusion) -> Vec<Option<(Vec<i64>, i64)>> {
    f.inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if let Some(r) = f.recipe.as_ref().and_then(|r| r.get(i)) {
                return r.strides().map(|s| (s, 0));
            }
            match &f.value(v).def {
                fusebench_ir::ValueDef::TensorInput(d) => {
                    Some((d.dense_strides(f.value(v).shape.as_ref().unwrap()), 0))
                }
                _ => None,
            }
        })
        .collect()
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if let Some(code) = crate::missing(&a.file) {
        return Ok(code);
    }
    let f = files::load(&a.file)?;
    let dev = fusebench_codegen::Device {
        sm_count: a.sms,
        ..Default::default()
    };
    let plan = fusebench_codegen::plan(&f, &layouts(&f), fusebench_engine::planner_device(dev)?)
        .map_err(|e| anyhow::anyhow!("{}: planning: {e}", a.file.display()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}: {} kernels", a.file.display(), plan.kernels.len());
    for k in &plan.kernels {
        println!(
            "  {}  grid {:?} block {:?}  {:?}",
            k.name, k.grid, k.block, k.schedule
        );
        println!("      {}", k.summary);
        if let Some(c) = &k.choice {
            println!("      schedule: {} — {}", c.schedule, c.reason);
            for r in &c.rejected {
                println!("      not {} — {}", r.schedule, r.reason);
            }
        }
    }
    // Outputs past the fusion's own are the plan's: values of a broadcast
    // computed once, which broadcast outputs are views of.
    let label = |i: usize| match f.outputs.get(i) {
        Some(&v) => format!("output {i} ({})", f.value(v).name),
        None => format!("output {i} (computed once, not returned)"),
    };
    for (i, o) in plan.outputs.iter().enumerate() {
        let name = label(i);
        match &o.source {
            fusebench_codegen::OutputSource::Written => {
                let layout = o
                    .strides
                    .as_ref()
                    .map(|s| format!(" at strides {s:?}"))
                    .unwrap_or_default();
                println!(
                    "  {name} {:?} {}: written{layout}",
                    o.shape, o.dtype
                )
            }
            fusebench_codegen::OutputSource::InputView {
                input,
                strides,
                offset,
            } => println!(
                "  {name} {:?} {}: a view of input {input} ({}) at strides {strides:?}, offset {offset}: no kernel",
                o.shape,
                o.dtype,
                f.value(f.inputs[*input]).name
            ),
            fusebench_codegen::OutputSource::OutputView {
                output,
                strides,
                offset,
            } => println!(
                "  {name} {:?} {}: a view of {} at strides {strides:?}, offset {offset}: no kernel",
                o.shape,
                o.dtype,
                label(*output)
            ),
        }
    }
    for (i, t) in plan.temps.iter().enumerate() {
        println!("  temp {i}: {} x {} ({})", t.elements, t.dtype, t.what);
    }
    if a.cuda {
        println!("\n{}", plan.source);
    }
    Ok(ExitCode::SUCCESS)
}
