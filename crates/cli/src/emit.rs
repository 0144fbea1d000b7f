//! `fusebench emit`: the GPU plan of a fusion — kernels, launch shapes, CUDA C.

use crate::files;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Repro scripts (.py), fusions in JSON form (.json), or directories of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print the generated CUDA C, with the plan above it as comments: the output compiles
    /// (one file at a time; each file's kernels are named alike).
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
    /// Compile each plan's CUDA with NVRTC, as the runtime would, with no GPU: says which fail
    /// (with NVRTC's log) and how long each took. Needs the NVRTC library only.
    #[arg(long, conflicts_with_all = ["cuda", "json"])]
    compile: bool,
    /// With --compile: each kernel's registers, spills and shared memory as ptxas reports them,
    /// the blocks a multiprocessor of the planned device holds at once (and what bounds them) and
    /// the waves its grid takes.
    #[arg(long, requires = "compile")]
    resources: bool,
    /// Architecture to compile for with --compile: the H200's own, as the runtime compiles for
    /// it (sm_90a: its wgmma, which a grouped_mm uses; other targets compile the kernel's
    /// mma.sync form).
    #[arg(long, default_value = "sm_90a", requires = "compile")]
    arch: String,
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

/// One line per kernel of `plan`: its resources as compiled, the blocks a multiprocessor of `dev`
/// holds at once and what bounds them, the waves of its grid.
fn resource_lines(
    plan: &fusebench_codegen::Plan,
    resources: &[fusebench_runtime::KernelResources],
    dev: &fusebench_codegen::Device,
) -> Vec<String> {
    plan.kernels
        .iter()
        .map(|k| {
            let Some(r) = resources.iter().find(|r| r.name == k.name) else {
                return format!("{}: ptxas reported nothing for it", k.name);
            };
            let threads = k.block.iter().product::<u32>();
            let shared = r.static_shared_bytes + k.shared_bytes;
            let o = fusebench_codegen::launch::occupancy(dev, k.grid, k.block, r.registers, shared);
            let spills = match (r.spill_store_bytes, r.spill_load_bytes) {
                (0, 0) => "no spills".to_string(),
                (s, l) => format!("spills {s} B stored, {l} B loaded a thread"),
            };
            format!(
                "{}: {} registers, {spills}, {} B shared; {} of {threads} threads per multiprocessor ({}), {} warps; grid of {}: {:.2} waves",
                k.name,
                r.registers,
                shared,
                crate::plural(o.per_sm as usize, "block"),
                o.bound,
                o.per_sm * threads.div_ceil(32),
                crate::plural(o.blocks as usize, "block"),
                o.waves,
            )
        })
        .collect()
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let files = match crate::paths_arg(&a.paths) {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    // Attention is planned for cuDNN where it loads here, as a run here would;
    // a grouped product for the planned H200's wgmma.
    let mut dev = fusebench_engine::planner_device(fusebench_codegen::Device {
        sm_count: a.sms,
        attention_library: fusebench_runtime::dnn_available().is_ok(),
        grouped_wgmma: true,
        ..Default::default()
    })?;
    if let Some(u) = a.row_unroll {
        dev.row_unroll = u;
    }
    let several = files.len() > 1;
    let mut plans = vec![];
    let mut failed = 0;
    let mut compile_ms: Vec<f64> = vec![];
    for path in &files {
        let planned = files::load(path).and_then(|f| {
            let p = fusebench_codegen::plan(&f, &layouts(&f), dev)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            Ok((f, p))
        });
        let (f, plan) = match planned {
            Ok(fp) => fp,
            Err(e) => {
                eprintln!("error: {e:#}");
                failed += 1;
                continue;
            }
        };
        if a.compile {
            // ptxas's report where it is printed or where a grid may be refit to it.
            let report = a.resources || fusebench_codegen::launch::refits(&dev);
            // Each translation unit on a thread of its own, as the runtime compiles them.
            let apart = fusebench_runtime::compile_apart();
            let compile = |p: &fusebench_codegen::Plan| fusebench_runtime::compile_offline_units(&p.units(apart), &a.arch, report);
            // NVRTC missing: a usage error for the whole run; a module that fails: this file.
            let failure = |e: &fusebench_runtime::RuntimeError| match e {
                fusebench_runtime::RuntimeError::Invalid(why) => {
                    eprintln!("error: {why}");
                    true
                }
                e => {
                    eprintln!("error: {}: {e}", path.display());
                    false
                }
            };
            let c = match compile(&plan) {
                Ok(c) => c,
                Err(e) if failure(&e) => return Ok(ExitCode::from(2)),
                Err(_) => {
                    failed += 1;
                    continue;
                }
            };
            // As the engine does (`Device::fit_waves`): planned again for what is resident.
            let used: Vec<(u32, u32)> = plan
                .kernels
                .iter()
                .map(|k| {
                    c.resources
                        .iter()
                        .find(|r| r.name == k.name)
                        .map_or((0, 0), |r| (r.registers, r.static_shared_bytes))
                })
                .collect();
            let (plan, c, refit) = match fusebench_codegen::launch::refit(&dev, &plan, &used) {
                None => (plan, c, None),
                Some(fit) => {
                    let again = match fusebench_codegen::plan(&f, &layouts(&f), fit) {
                        Ok(p) => p,
                        Err(e) => {
                            eprintln!("error: {}: planned again: {e}", path.display());
                            failed += 1;
                            continue;
                        }
                    };
                    match compile(&again) {
                        Ok(c2) => {
                            let ms = c.ms + c2.ms;
                            (again, fusebench_runtime::OfflineCompile { ms, ..c2 }, Some(fit))
                        }
                        Err(e) if failure(&e) => return Ok(ExitCode::from(2)),
                        Err(_) => {
                            failed += 1;
                            continue;
                        }
                    }
                }
            };
            outln!(
                "{}: {} compiled in {:.1} ms (NVRTC {}.{}, {})",
                path.display(),
                crate::plural(plan.kernels.len(), "kernel"),
                c.ms,
                c.nvrtc_version.0,
                c.nvrtc_version.1,
                a.arch
            );
            if let Some(fit) = refit {
                let mut what = vec![];
                if fit.outer_blocks_per_sm != dev.outer_blocks_per_sm {
                    what.push(format!("the outer partials at {}", crate::plural(fit.outer_blocks_per_sm as usize, "block")));
                }
                if fit.column_sum_blocks_per_sm != dev.column_sum_blocks_per_sm {
                    what.push(format!("the sums over rows at {}", crate::plural(fit.column_sum_blocks_per_sm as usize, "block")));
                }
                if fit.row_blocks_per_sm != dev.row_blocks_per_sm {
                    what.push(format!("the walked rows at {}", crate::plural(fit.row_blocks_per_sm as usize, "block")));
                }
                outln!(
                    "  planned again with {} per multiprocessor, what is resident (FUSEBENCH_FIT_WAVES): compiled twice",
                    what.join(" and ")
                );
            }
            compile_ms.push(c.ms);
            if a.resources {
                for line in resource_lines(&plan, &c.resources, &dev) {
                    outln!("  {line}");
                }
            }
            continue;
        }
        if a.json {
            if several {
                plans.push(serde_json::json!({ "file": path.display().to_string(), "plan": plan }));
            } else {
                outln!("{}", serde_json::to_string_pretty(&plan)?);
            }
            continue;
        }
        let text = describe(path, &f, &plan);
        if a.cuda {
            // The plan as comments above the source, so the whole output
            // compiles; several translation units (`Plan::units`) each after
            // a line of its own, `UNIT_LINE`, to be compiled apart.
            for line in text.lines() {
                outln!("// {line}");
            }
            let units = plan.units(fusebench_runtime::compile_apart());
            if units.len() <= 1 {
                outln!("\n{}", units.first().map_or(plan.source.as_str(), |u| u.0));
            } else {
                for (i, (src, names)) in units.iter().enumerate() {
                    outln!("\n{UNIT_LINE}{} of {}: {}\n{src}", i + 1, units.len(), names.join(", "));
                }
            }
        } else {
            out!("{text}");
        }
    }
    if a.json && several {
        outln!("{}", serde_json::to_string_pretty(&serde_json::json!({ "plans": plans }))?);
    }
    if a.compile && several {
        let times = match compile_ms.iter().copied().reduce(f64::max) {
            Some(max) => format!("; compile time median {:.1} ms, max {max:.1} ms", fusebench_measure::median(&compile_ms)),
            None => String::new(),
        };
        outln!("{} compiled, {failed} failed{times}", crate::plural(compile_ms.len(), "fusion"));
    }
    Ok(crate::outcome::exit_code(failed))
}

/// Starts the line before each translation unit where `emit --cuda` writes
/// several.
pub const UNIT_LINE: &str = "// fusebench translation unit ";

/// The plan in words: kernels with their launch shapes and schedule choices,
/// where each output comes from, the temporaries.
#[allow(unused_must_use)] // writing to a String cannot fail
fn describe(
    path: &std::path::Path,
    f: &fusebench_ir::Fusion,
    plan: &fusebench_codegen::Plan,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut products = if plan.products.is_empty() {
        String::new()
    } else {
        format!(" and {} in the BLAS library", crate::plural(plan.products.len(), "matrix product"))
    };
    if !plan.attention.is_empty() {
        products.push_str(&format!(" and {} in cuDNN", crate::plural(plan.attention.len(), "attention call")));
    }
    writeln!(out, "{}: {}{products}", path.display(), crate::plural(plan.kernels.len(), "kernel"));
    // Library calls run before the kernel they name (after them all at the count).
    let calls_before_kernel = |out: &mut String, k: usize| {
        for call in plan.calls_before(k) {
            let (head, lines) = match call {
                fusebench_codegen::LibraryCall::Product(i) => ("product", plan.products[i].describe()),
                fusebench_codegen::LibraryCall::Attention(i) => ("attention", plan.attention[i].describe()),
            };
            writeln!(out, "  {head}  {}", lines[0]);
            for l in &lines[1..] {
                writeln!(out, "      {l}");
            }
        }
    };
    for (i, k) in plan.kernels.iter().enumerate() {
        calls_before_kernel(&mut out, i);
        writeln!(out, 
            "  {}  grid {:?} block {:?}  {:?}",
            k.name, k.grid, k.block, k.schedule
        );
        writeln!(out, "      {}", k.summary);
        if let Some(c) = &k.choice {
            writeln!(out, "      schedule: {} — {}", c.schedule, c.reason);
            for r in &c.rejected {
                writeln!(out, "      not {} — {}", r.schedule, r.reason);
            }
        }
    }
    calls_before_kernel(&mut out, plan.kernels.len());
    // Outputs past the fusion's own are the plan's: values of a broadcast
    // computed once, which broadcast outputs are views of, and values a
    // matrix product reads or writes.
    let label = |i: usize| match f.outputs.get(i) {
        Some(&v) => format!("output {i} ({})", f.value(v).name),
        None => format!("output {i} (the plan's own, not returned)"),
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
                writeln!(out, 
                    "  {name} {:?} {}: written{layout}",
                    o.shape, o.dtype
                )
            }
            fusebench_codegen::OutputSource::InputView {
                input,
                strides,
                offset,
            } => writeln!(out, 
                "  {name} {:?} {}: a view of input {input} ({}) at strides {strides:?}, offset {offset}: no kernel",
                o.shape,
                o.dtype,
                f.value(f.inputs[*input]).name
            ),
            fusebench_codegen::OutputSource::OutputView {
                output,
                strides,
                offset,
            } => writeln!(out, 
                "  {name} {:?} {}: a view of {} at strides {strides:?}, offset {offset}: no kernel",
                o.shape,
                o.dtype,
                label(*output)
            ),
        };
    }
    for (i, t) in plan.temps.iter().enumerate() {
        writeln!(out, "  temp {i}: {} x {} ({})", t.elements, t.dtype, t.what);
    }
    out
}
