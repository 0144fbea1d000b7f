//! `fusebench save`: each fusion of a program as a standalone repro that
//! reproduces what ran in the program: the same definition, inputs of the
//! same shapes, strides and dtypes (index inputs drawn within the range the
//! gather needs, never the negative values a default `make_tensor` draws),
//! and the live measurement's fingerprints. Written as an nvFuser repro
//! script (NAME.py, runnable with nvFuser), as fusebench's JSON form
//! (json/NAME.json) and, with a GPU, the in-program record (live/NN_NAME.json).

use crate::run::{
    load_and_prepare, load_source, time_in_program, Loaded, Source, Timing, TimingArgs,
};
use anyhow::Context;
use fusebench_ir::analysis::index_inputs;
use fusebench_ir::recipe::row_major_strides;
use fusebench_ir::{Fusion, InputRecipe};
use fusebench_measure::{CachePolicy, Measurement};
use fusebench_reference::{Arg, Generated};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Programs, as for `fusebench run`.
    #[arg(required = true)]
    programs: Vec<PathBuf>,
    /// Write the repros here.
    #[arg(long, required = true)]
    out: PathBuf,
    /// Split each directory into one program per model and pass, as `fusebench run --by-model`.
    #[arg(long)]
    by_model: bool,
    /// Only write the repros: take no live measurement even where a GPU is present.
    #[arg(long)]
    no_measure: bool,
    #[command(flatten)]
    timing: TimingArgs,
}

/// The input list of the saved repro: the script's own recipe where it made
/// the live inputs, index inputs drawn in range, and otherwise a recipe
/// that makes the live layout (a strided view of a flat buffer when the
/// live input was not contiguous).
pub fn saved_recipe(f: &Fusion, g: &Generated) -> Vec<InputRecipe> {
    let index = index_inputs(f);
    g.inputs
        .iter()
        .enumerate()
        .map(|(i, arg)| match arg {
            Arg::Scalar(l) => InputRecipe::Scalar { value: *l },
            Arg::Tensor(t) => {
                let shape = t.shape().to_vec();
                if let Some(u) = index.iter().find(|u| u.input == i) {
                    return InputRecipe::Randint {
                        low: 0,
                        high: u.bound as i64,
                        size: shape,
                        dtype: t.dtype(),
                        as_strided: None,
                    };
                }
                if let Some(r) = f.recipe.as_ref().and_then(|r| r.get(i)) {
                    return r.clone();
                }
                if t.strides() == row_major_strides(&shape).as_slice() {
                    InputRecipe::MakeTensor {
                        shape,
                        dtype: t.dtype(),
                        low: None,
                        high: None,
                    }
                } else {
                    let len = shape
                        .iter()
                        .zip(t.strides())
                        .map(|(&e, &s)| (e.saturating_sub(1)) * s.unsigned_abs() as usize)
                        .sum::<usize>()
                        + 1;
                    InputRecipe::Randn {
                        size: vec![len],
                        dtype: t.dtype(),
                        as_strided: Some((shape, t.strides().to_vec())),
                    }
                }
            }
        })
        .collect()
}

/// The fusion as saved: the new input list, and a header saying where it came from.
pub fn saved_fusion(
    l: &Source,
    program: &str,
    position: usize,
    live: Option<&Measurement>,
) -> Fusion {
    let mut f = l.fusion.clone();
    f.recipe = Some(saved_recipe(&l.fusion, &l.generated));
    let facts: Vec<Option<fusebench_ir::recipe::InputFacts>> = l
        .generated
        .inputs
        .iter()
        .map(|a| match a {
            Arg::Tensor(t) => Some(fusebench_reference::facts::facts(t)),
            Arg::Scalar(_) => None,
        })
        .collect();
    let inputs_hash = fusebench_harness::fingerprint::inputs(&fusebench_engine::input_layouts(
        &l.generated.inputs,
    ));
    let mut header = vec![
        format!(
            "fusebench save: fusion {position} of program {program}, from {}",
            l.path.display()
        ),
        format!(
            "definition {}, inputs {inputs_hash}",
            fusebench_harness::fingerprint::definition(&l.fusion)
        ),
    ];
    if let Some(m) = live {
        header.push(format!(
            "live in-program median {:.2} us [{:.2}, {:.2}], {} samples, {} {}, {:?}",
            m.summary.median,
            m.summary.ci_low,
            m.summary.ci_high,
            m.summary.n,
            m.environment.gpu_name,
            m.environment.driver,
            m.method
        ));
    }
    for (i, x) in facts.iter().enumerate() {
        if let Some(x) = x {
            header.push(format!(
                "input {i}: values in [{}, {}], contents {}",
                x.min, x.max, x.content_hash
            ));
        }
    }
    f.input_facts = Some(facts);
    if !f.script.header.is_empty() {
        header.push("header of the original script:".into());
        header.extend(f.script.header.iter().cloned());
    }
    f.script.header = header;
    f
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let programs = match crate::program::load(&a.programs, a.by_model) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
    let engine = if a.no_measure {
        None
    } else {
        match fusebench_engine::Engine::new() {
            Ok(e) => Some(e),
            Err(e) => {
                eprintln!("note: writing the repros without a live measurement: {e}");
                None
            }
        }
    };
    let timing = match &engine {
        Some(e) => match Timing::rule(&a.timing, 0.01).and_then(|r| Timing::new(&a.timing, e, r)) {
            Ok(t) => Some(t),
            Err(code) => return Ok(code),
        },
        None => None,
    };
    let mut written = 0;
    for program in &programs {
        let (files, at) = program.files();
        let mut sources: Vec<Source> = Vec::new();
        let mut prepared: Vec<Loaded> = Vec::new();
        for p in &files {
            match &engine {
                Some(e) => prepared.push(load_and_prepare(e, p, a.timing.seed)?),
                None => sources.push(load_source(p, a.timing.seed)?),
            }
        }
        let live = match &timing {
            Some(t) => {
                let steps: Vec<&Loaded> = at.iter().map(|&k| &prepared[k]).collect();
                Some(time_in_program(program, &steps, CachePolicy::InProgram, t)?)
            }
            None => None,
        };
        let unique: Vec<&Source> = if prepared.is_empty() {
            sources.iter().collect()
        } else {
            prepared.iter().map(|l| &l.src).collect()
        };
        let stem = |l: &Source| {
            Path::new(&l.name)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        // Each file once, with the live record of its first run in the step.
        for (k, l) in unique.iter().enumerate() {
            let first = at.iter().position(|&x| x == k).expect("every file runs");
            let f = saved_fusion(
                l,
                &program.name,
                first + 1,
                live.as_ref().map(|v| &v[first]),
            );
            write(
                &a.out.join(format!("{}.py", stem(l))),
                &fusebench_frontend::print_script(&f),
            )?;
            write(
                &a.out.join("json").join(format!("{}.json", stem(l))),
                &f.to_json(),
            )?;
            written += 1;
        }
        for (i, m) in live.iter().flatten().enumerate() {
            let name = format!("{:02}_{}.json", i + 1, stem(unique[at[i]]));
            write(&a.out.join("live").join(name), &m.to_json())?;
        }
    }
    eprintln!(
        "wrote {written} repros to {}{}",
        a.out.display(),
        if engine.is_some() {
            " with their live records in live/"
        } else {
            ""
        }
    );
    Ok(ExitCode::from(crate::exit::OK))
}
