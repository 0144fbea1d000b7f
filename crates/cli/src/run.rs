//! `fusebench run`: a program's fusions timed inside the program (policy
//! `in-program`: whatever the earlier fusions leave in L2) and with the L2
//! flushed before each (`cold`). `fusebench compare` adds each fusion timed
//! standalone from its saved repro, and says per fusion whether the two agree.

use crate::program::Program;
pub(crate) use crate::timing::TimingArgs;
use anyhow::Context;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use fusebench_engine::{Engine, Prepared};
use fusebench_harness::{FusionSubject, Harness, Options, Subject};
use fusebench_ir::Fusion;
use fusebench_measure::{explain, CachePolicy, Measurement, StoppingRule};
use fusebench_reference::Generated;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Programs: directories of repro scripts (run in name order), manifests
    /// (`.txt`: `PATH [xN]` per line), or scripts.
    #[arg(required = true)]
    programs: Vec<PathBuf>,
    /// Split each directory into one program per model and pass (`NNN_<model>_<fw|bw>_nvFusionK.py`).
    #[arg(long)]
    by_model: bool,
    #[command(flatten)]
    timing: TimingArgs,
    /// Print the result as JSON on standard output (for scripts; no table, no progress).
    #[arg(long)]
    json: bool,
    /// Write every measurement record to this directory (one JSON file each, for `fusebench explain`).
    #[arg(long)]
    records: Option<PathBuf>,
    /// Store every measurement in the results database.
    #[arg(long)]
    save: bool,
}

#[derive(clap::Args)]
pub struct CompareArgs {
    #[command(flatten)]
    run: Args,
    /// Time the standalone side from the repros `fusebench save` wrote here (NAME.py);
    /// by default from the program's own files.
    #[arg(long)]
    saved: Option<PathBuf>,
}

/// A fusion of a program, read and given inputs.
pub(crate) struct Source {
    pub path: PathBuf,
    pub name: String,
    pub fusion: Fusion,
    pub generated: Generated,
}

/// ... and prepared on the GPU.
pub(crate) struct Loaded {
    pub src: Source,
    pub prep: Prepared,
}

impl std::ops::Deref for Loaded {
    type Target = Source;
    fn deref(&self) -> &Source {
        &self.src
    }
}

pub(crate) fn load_source(path: &Path, seed: u64) -> anyhow::Result<Source> {
    let fusion = crate::files::load(path)?;
    let generated = fusebench_reference::generate_inputs(&fusion, seed)
        .with_context(|| format!("{}: generating inputs", path.display()))?;
    for n in &generated.notes {
        eprintln!("{}: note: {n}", path.display());
    }
    Ok(Source {
        path: path.to_path_buf(),
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        fusion,
        generated,
    })
}

pub(crate) fn load_and_prepare(engine: &Engine, path: &Path, seed: u64) -> anyhow::Result<Loaded> {
    let src = load_source(path, seed)?;
    let prep = engine
        .prepare(&src.fusion, &src.generated.inputs)
        .with_context(|| format!("{}: preparing on the GPU", path.display()))?;
    Ok(Loaded { src, prep })
}

/// What timing needs besides the fusions.
pub(crate) struct Timing {
    pub rule: Box<dyn StoppingRule>,
    pub harness: Harness,
}

impl Timing {
    /// The rule `a` asks for, parsed before a GPU is looked for: `target` is the
    /// noise target when no rule is given; the budget is 3 s per program and
    /// policy unless --max-time says otherwise.
    pub(crate) fn rule(a: &TimingArgs, target: f64) -> Result<Box<dyn StoppingRule>, ExitCode> {
        a.rule(target, 3.0)
    }

    pub(crate) fn new(
        a: &TimingArgs,
        engine: &Engine,
        rule: Box<dyn StoppingRule>,
    ) -> Result<Timing, ExitCode> {
        Ok(Timing {
            rule,
            harness: a.harness(engine.gpu.clone())?,
        })
    }

    fn options(&self, cache: CachePolicy, context: Option<String>) -> Options<'_> {
        Options {
            cache,
            warmup: 3,
            rule: self.rule.as_ref(),
            context,
            ceiling: false,
            siblings: false,
            flush: None,
        }
    }
}

fn subject(l: &Loaded) -> FusionSubject<'_> {
    FusionSubject::new(&l.name, &l.fusion, &l.prep)
}

/// Records of one program under one policy, one per step, in program order.
pub(crate) fn time_in_program(
    program: &Program,
    loaded: &[&Loaded],
    cache: CachePolicy,
    t: &Timing,
) -> anyhow::Result<Vec<Measurement>> {
    let subjects: Vec<FusionSubject> = loaded.iter().map(|l| subject(l)).collect();
    let steps: Vec<&dyn Subject> = subjects.iter().map(|s| s as &dyn Subject).collect();
    let n = loaded.len();
    let measured = t
        .harness
        .measure_steps(&steps, &t.options(cache, None))
        .with_context(|| format!("program {}", program.name))?;
    Ok(measured
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            // Every step's record says where in the program it ran.
            let mut r = m.record;
            r.context = Some(format!("program {}, fusion {} of {n}", program.name, i + 1));
            r
        })
        .collect())
}

/// One fusion timed alone under `cache`.
pub(crate) fn time_standalone(
    l: &Loaded,
    cache: CachePolicy,
    t: &Timing,
) -> anyhow::Result<Measurement> {
    Ok(t.harness
        .measure(&subject(l), &t.options(cache, None))
        .with_context(|| format!("{}: standalone", l.name))?
        .record)
}

#[derive(Serialize)]
struct Pair {
    /// B's median over A's, and the range the two intervals allow.
    ratio: f64,
    ratio_low: f64,
    ratio_high: f64,
    /// "same" when the intervals overlap, else "different".
    verdict: String,
    /// What `fusebench explain` names, most likely first.
    causes: Vec<String>,
}

fn pair(a: &Measurement, b: &Measurement) -> Pair {
    let e = explain(a, b);
    Pair {
        ratio: e.ratio,
        ratio_low: e.ratio_low,
        ratio_high: e.ratio_high,
        verdict: if e.beyond_noise { "different" } else { "same" }.into(),
        causes: e.causes.iter().map(|c| c.title().to_string()).collect(),
    }
}

#[derive(Serialize)]
struct Step {
    position: usize,
    file: String,
    in_program: Measurement,
    cold: Measurement,
    #[serde(skip_serializing_if = "Option::is_none")]
    standalone_cold: Option<Measurement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    standalone_warm: Option<Measurement>,
    /// Standalone cold on the program's own buffers: with `standalone_cold`
    /// (fresh buffers from the saved repro) it separates what ran before from
    /// where the data lies in memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    standalone_cold_same_buffers: Option<Measurement>,
    /// In-program cold vs standalone cold.
    #[serde(skip_serializing_if = "Option::is_none")]
    cold_vs_standalone: Option<Pair>,
    /// In-program vs standalone warm.
    #[serde(skip_serializing_if = "Option::is_none")]
    in_program_vs_warm: Option<Pair>,
}

#[derive(Serialize)]
struct ProgramReport {
    name: String,
    steps: Vec<Step>,
}

fn us(m: &Measurement) -> String {
    format!("{:.2} ±{:.1}%", m.summary.median, m.summary.rel_ci * 100.0)
}

fn write_records(dir: &Path, program: &str, steps: &[Step]) -> anyhow::Result<()> {
    let d = dir.join(program);
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    for s in steps {
        let stem = Path::new(&s.file)
            .file_stem()
            .map(|x| x.to_string_lossy().into_owned())
            .unwrap_or_default();
        let put = |tag: &str, m: &Measurement| {
            let p = d.join(format!("{:02}_{stem}.{tag}.json", s.position));
            std::fs::write(&p, m.to_json()).with_context(|| format!("writing {}", p.display()))
        };
        put("in-program", &s.in_program)?;
        put("cold", &s.cold)?;
        if let Some(m) = &s.standalone_cold {
            put("standalone-cold", m)?;
        }
        if let Some(m) = &s.standalone_warm {
            put("standalone-warm", m)?;
        }
    }
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    go(a, None)
}

pub fn compare(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let saved = a.saved.unwrap_or_default();
    go(a.run, Some(saved))
}

/// `standalone`: `None` for `run`; for `compare`, the saved-repro directory
/// (empty: the program's own files).
fn go(a: Args, standalone: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let programs = match crate::program::load(&a.programs, a.by_model) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
    };
    let verb = if standalone.is_some() {
        "fusebench compare"
    } else {
        "fusebench run"
    };
    // Measured on the H200: with medians to +-1%, one or two of 33 fusions missed a 2%
    // agreement by noise alone in a run; +-0.5% costs little (samples take microseconds).
    let target = if standalone.is_some() { 0.005 } else { 0.01 };
    let rule = match Timing::rule(&a.timing, target) {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let engine = match crate::engine(verb) {
        Ok(e) => e,
        Err(code) => return Ok(code),
    };
    let t = match Timing::new(&a.timing, &engine, rule) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    let mut store = if a.save {
        Some(fusebench_store::Store::open_default()?)
    } else {
        None
    };
    let mut reports = Vec::new();
    let mut failed = 0;
    let mut progress = crate::progress::Progress::new(programs.len(), a.json);
    for program in &programs {
        progress.step(&format!("program {}", program.name));
        match one_program(&engine, program, &t, a.timing.seed, standalone.as_deref()) {
            Ok(steps) => {
                if let Some(dir) = &a.records {
                    write_records(dir, &program.name, &steps)?;
                }
                if let Some(s) = store.as_mut() {
                    for st in &steps {
                        for m in [
                            Some(&st.in_program),
                            Some(&st.cold),
                            st.standalone_cold.as_ref(),
                            st.standalone_warm.as_ref(),
                        ]
                        .into_iter()
                        .flatten()
                        {
                            s.save(m)?;
                        }
                    }
                }
                reports.push(ProgramReport {
                    name: program.name.clone(),
                    steps,
                });
            }
            Err(e) => {
                failed += 1;
                eprintln!("program {}: FAILED: {e:#}", program.name);
            }
        }
    }
    let info = engine.gpu.info();
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "gpu": info, "programs": reports }))?
        );
    } else {
        outln!(
            "{} ({}, {} SMs, L2 {} MiB), {}, median until {} (per program and policy)",
            info.name,
            info.arch,
            info.sm_count,
            info.l2_cache_bytes >> 20,
            t.harness.method().words(),
            t.rule.describe()
        );
        for r in &reports {
            print_program(r, standalone.is_some());
        }
    }
    Ok(crate::outcome::exit_code(failed))
}

fn one_program(
    engine: &Engine,
    program: &Program,
    t: &Timing,
    seed: u64,
    standalone: Option<&Path>,
) -> anyhow::Result<Vec<Step>> {
    // One preparation per file: a fusion that runs twice in a step reuses its buffers.
    let (files, at) = program.files();
    let unique = files
        .iter()
        .map(|p| load_and_prepare(engine, p, seed))
        .collect::<anyhow::Result<Vec<Loaded>>>()?;
    let loaded: Vec<&Loaded> = at.iter().map(|&k| &unique[k]).collect();
    let in_program = time_in_program(program, &loaded, CachePolicy::InProgram, t)?;
    let cold = time_in_program(program, &loaded, CachePolicy::Cold, t)?;
    // Standalone: each file once, from its saved repro when given.
    let mut alone: HashMap<PathBuf, (Measurement, Measurement)> = HashMap::new();
    let mut same_buffers: HashMap<PathBuf, Measurement> = HashMap::new();
    if let Some(dir) = standalone {
        for l in &unique {
            same_buffers.insert(l.path.clone(), time_standalone(l, CachePolicy::Cold, t)?);
            let path = match dir.as_os_str().is_empty() {
                true => l.path.clone(),
                false => dir.join(&l.name),
            };
            let s = load_and_prepare(engine, &path, seed.wrapping_add(1))?;
            let c = time_standalone(&s, CachePolicy::Cold, t)?;
            let w = time_standalone(&s, CachePolicy::Warm, t)?;
            alone.insert(l.path.clone(), (c, w));
        }
    }
    Ok(loaded
        .iter()
        .zip(in_program)
        .zip(cold)
        .enumerate()
        .map(|(i, ((l, ip), c))| {
            let sa = alone.get(&l.path);
            Step {
                position: i + 1,
                file: l.name.clone(),
                cold_vs_standalone: sa.map(|(sc, _)| pair(&c, sc)),
                in_program_vs_warm: sa.map(|(_, sw)| pair(&ip, sw)),
                standalone_cold: sa.map(|(sc, _)| sc.clone()),
                standalone_warm: sa.map(|(_, sw)| sw.clone()),
                standalone_cold_same_buffers: same_buffers.get(&l.path).cloned(),
                in_program: ip,
                cold: c,
            }
        })
        .collect())
}

fn print_program(r: &ProgramReport, compared: bool) {
    outln!("\nprogram {} ({} fusions per step)", r.name, r.steps.len());
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    if !compared {
        t.set_header(vec![
            "#",
            "fusion",
            "in-program us",
            "cold us",
            "in-program / cold",
        ]);
        for s in &r.steps {
            t.add_row(vec![
                s.position.to_string(),
                s.file.clone(),
                us(&s.in_program),
                us(&s.cold),
                format!("{:.3}", s.in_program.summary.median / s.cold.summary.median),
            ]);
        }
        outln!("{t}");
        return;
    }
    t.set_header(vec![
        "#",
        "fusion",
        "cold in program",
        "cold standalone",
        "standalone / program [range]",
        "",
        "in-program",
        "warm standalone",
        "ratio",
        "why",
    ]);
    let mut within = 0;
    let mut within_same = 0;
    for s in &r.steps {
        let (Some(sc), Some(sw), Some(p), Some(q)) = (
            &s.standalone_cold,
            &s.standalone_warm,
            &s.cold_vs_standalone,
            &s.in_program_vs_warm,
        ) else {
            continue;
        };
        if (p.ratio - 1.0).abs() <= 0.02 {
            within += 1;
        }
        if let Some(sb) = &s.standalone_cold_same_buffers {
            if (sb.summary.median / s.cold.summary.median - 1.0).abs() <= 0.02 {
                within_same += 1;
            }
        }
        t.add_row(vec![
            s.position.to_string(),
            s.file.clone(),
            us(&s.cold),
            us(sc),
            format!("{:.3} [{:.3}, {:.3}]", p.ratio, p.ratio_low, p.ratio_high),
            p.verdict.clone(),
            us(&s.in_program),
            us(sw),
            format!("{:.3} {}", q.ratio, q.verdict),
            q.causes.first().cloned().unwrap_or_default(),
        ]);
    }
    outln!("{t}");
    outln!(
        "cold: {within} of {} fusions agree within 2% in the program and standalone ({within_same} on the program's own buffers)",
        r.steps.len()
    );
}
