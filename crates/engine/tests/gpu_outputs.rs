//! The engine's outputs on the GPU against the exact CPU reference, for every
//! fusion of the shared corpus and every golden case, and against nvFuser's
//! own recorded outputs for the golden cases.
//!
//! Inputs are generated with seed 0 (the seed `fusebench check --device gpu`
//! uses by default) and with a seed taken from the clock, so every run also
//! tries inputs no earlier run saw; the seed is printed, and
//! `fusebench check --device gpu --seed N FILE` redoes one fusion with it.
//!
//! Each set of inputs runs twice: once as the engine runs it (outputs and
//! temporaries filled with 0xFF bytes first) and once with the outputs filled
//! with zero bytes instead. 0xFF reads back as NaN in a float, -1 in an
//! integer and `true` in a bool, so on its own it lets an element no kernel
//! wrote pass wherever the right answer is NaN, -1 or `true`; zero bytes read
//! back as 0 and `false`. No value equals both, so an unwritten element fails
//! one of the two runs whatever it should have held.
//!
//! The per-op golden cases (crates/reference/tests/fixtures/golden-ops) run
//! on nvFuser's own inputs against nvFuser's outputs and the CPU reference,
//! except those the reference cannot run yet (its NOT_YET) and those the GPU
//! path refuses or gets wrong yet (GPU_NOT_YET below, kept true the same way:
//! a listed case that passes fails the test).
//!
//! Every mismatch is collected (file, inputs, which fill, output, how many
//! elements, largest error) and the test fails at the end with all of them.
//!
//! Data: `FUSEBENCH_SHARED` when set, else `../shared` beside the workspace.
//! Without it the tests are ignored with the reason, or fail naming the path
//! they looked for when `CI=true` (crates/testdata). Built without an NVIDIA
//! driver they are ignored with that reason (`needs_gpu!`, CI included); run
//! without a GPU (`--include-ignored`) they say they skipped and why.

#[path = "../../reference/tests/support/golden_ops.rs"]
mod golden_ops;
#[path = "../../reference/tests/support/golden_ops_not_yet.rs"]
mod golden_ops_not_yet;
use fusebench_engine::{Engine, Prepared};
use fusebench_ir::Fusion;
use fusebench_reference::compare::{compare, Comparison};
use fusebench_reference::golden::Case;
use fusebench_reference::{generate_inputs, Arg, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The shared corpus has 33 fusions; fewer means a partial copy, which would
/// let most of the corpus go unchecked.
const CORPUS_MIN: usize = 30;

/// Where the shared corpus and golden cases are.
fn shared_dir() -> PathBuf {
    let knobs = fusebench_knobs::get().unwrap_or_else(|e| panic!("FUSEBENCH_* settings: {e}"));
    knobs
        .shared
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// `present` when the data is there; otherwise a failure naming `looked_for`
/// under CI (where the data is expected), else a skip said on stderr.
fn data_or_skip(test: &str, present: bool, looked_for: &Path) -> bool {
    if present {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{test}: the shared data is missing: looked for {} (set FUSEBENCH_SHARED, or put shared/ beside the repository)",
            looked_for.display()
        );
    }
    eprintln!(
        "skipped {test}: shared data not found: looked for {}",
        looked_for.display()
    );
    false
}

/// The engine on the first GPU, or `None` with the reason said.
fn engine_or_skip(test: &str) -> Option<Engine> {
    if let Err(reason) = fusebench_runtime::probe() {
        eprintln!("skipped: no GPU: {reason} ({test})");
        return None;
    }
    Some(Engine::new().expect("the probe found a GPU, so the engine must open it"))
}

/// A seed no earlier run used: nanoseconds of the clock (never 0, which is
/// the other seed).
fn fresh_seed() -> u64 {
    let ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_nanos();
    (ns as u64 ^ (ns >> 64) as u64).max(1)
}

/// The `*.py` files of `dir`, by name.
fn scripts(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "py"))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// What the outputs are filled with before the kernels run.
#[derive(Clone, Copy, Debug)]
enum Fill {
    /// `Prepared::run`: 0xFF bytes in every output and temporary.
    Ones,
    /// Temporaries 0xFF as above, outputs zero bytes.
    Zeros,
}

impl Fill {
    fn describe(self) -> &'static str {
        match self {
            Fill::Ones => "outputs filled with 0xFF",
            Fill::Zeros => "outputs filled with 0x00",
        }
    }
}

/// Runs the prepared fusion once with its outputs filled as `fill` says, and
/// brings the outputs back.
fn run_filled(p: &Prepared, f: &Fusion, inputs: &[Arg], fill: Fill) -> Result<Vec<Tensor>, String> {
    let byte = match fill {
        Fill::Ones => fusebench_engine::POISONS[0],
        Fill::Zeros => fusebench_engine::POISONS[1],
    };
    // An alias output changed its input in place: each run starts from the given inputs.
    p.reset_inputs(inputs).map_err(|e| e.to_string())?;
    p.run_poisoned(byte).map_err(|e| e.to_string())?;
    p.outputs(f, inputs).map_err(|e| e.to_string())
}

/// What the GPU's outputs are compared with.
#[derive(Clone, Copy)]
enum Against<'a> {
    /// The CPU reference on the same inputs, with the tolerance `fusebench
    /// check --device gpu` states for each dtype.
    Reference(&'a [Tensor]),
    /// nvFuser's outputs recorded on the same inputs.
    NvFuser(&'a [Tensor]),
}

impl Against<'_> {
    fn name(&self) -> &'static str {
        match self {
            Against::Reference(_) => "the CPU reference",
            Against::NvFuser(_) => "nvFuser's recorded outputs",
        }
    }

    fn outputs(&self) -> &[Tensor] {
        match self {
            Against::Reference(t) | Against::NvFuser(t) => t,
        }
    }
}

/// A mismatch in one line.
fn describe(c: &Comparison) -> String {
    if let Some(p) = &c.problem {
        return p.clone();
    }
    let mut s = format!(
        "{} of {} elements outside tolerance, max abs err {:.3e}, max rel err {:.3e}",
        c.mismatches, c.elements, c.max_abs_err, c.max_rel_err
    );
    if let Some((idx, got, want)) = &c.first_mismatch {
        s.push_str(&format!("; first at {idx:?}: GPU {got}, expected {want}"));
    }
    s
}

/// How much was checked, so a run that checks nothing cannot pass.
#[derive(Default)]
struct Tally {
    runs: usize,
    outputs: usize,
    failures: Vec<String>,
}

/// Runs `f` on `inputs` on the GPU, twice (each fill), and compares every
/// output with each of `against`; every mismatch goes into `tally`, labelled
/// with `label` (the file and which inputs).
fn check_on_gpu(
    engine: &Engine,
    f: &Fusion,
    inputs: &[Arg],
    against: &[Against],
    label: &str,
    tally: &mut Tally,
) {
    let p = match engine.prepare(f, inputs) {
        Ok(p) => p,
        Err(e) => {
            tally
                .failures
                .push(format!("{label}: preparing on the GPU: {e}"));
            return;
        }
    };
    for fill in [Fill::Ones, Fill::Zeros] {
        let got = match run_filled(&p, f, inputs, fill) {
            Ok(g) => g,
            Err(e) => {
                tally
                    .failures
                    .push(format!("{label}, {}: running: {e}", fill.describe()));
                continue;
            }
        };
        tally.runs += 1;
        compare_all(
            f,
            &got,
            against,
            &format!("{label}, {}", fill.describe()),
            tally,
        );
    }
}

/// Compares the outputs `got` with each of `against`; every mismatch goes
/// into `tally`, labelled with `label`.
fn compare_all(f: &Fusion, got: &[Tensor], against: &[Against], label: &str, tally: &mut Tally) {
    for a in against {
        let want = a.outputs();
        if got.len() != want.len() {
            tally.failures.push(format!(
                "{label}: {} outputs on the GPU, {} from {}",
                got.len(),
                want.len(),
                a.name()
            ));
            continue;
        }
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            tally.outputs += 1;
            let c = match a {
                Against::Reference(_) => compare(g, w),
                Against::NvFuser(_) => fusebench_reference::compare::compare_peers(g, w),
            };
            if !c.ok {
                let name = f
                    .outputs
                    .get(k)
                    .map_or_else(|| format!("#{k}"), |&v| f.value(v).name.clone());
                tally.failures.push(format!(
                    "{label}: output {name} ({}) against {}: {}",
                    w.dtype(),
                    a.name(),
                    describe(&c)
                ));
            }
        }
    }
}

/// Generated inputs with each seed, the GPU against the CPU reference.
fn check_generated(engine: &Engine, file: &str, f: &Fusion, seeds: &[u64], tally: &mut Tally) {
    for &seed in seeds {
        let label = format!("{file} (inputs of seed {seed})");
        let inputs = match generate_inputs(f, seed) {
            Ok(g) => g.inputs,
            Err(e) => {
                tally
                    .failures
                    .push(format!("{label}: generating inputs: {e}"));
                continue;
            }
        };
        let cpu = match fusebench_reference::run(f, &inputs) {
            Ok(o) => o,
            Err(e) => {
                tally.failures.push(format!("{label}: CPU reference: {e}"));
                continue;
            }
        };
        check_on_gpu(
            engine,
            f,
            &inputs,
            &[Against::Reference(&cpu)],
            &label,
            tally,
        );
    }
}

/// One file's checks, a panic in them (a bug in fusebench) kept as a failure
/// so that it does not hide the other files' results.
fn guarded(file: &str, tally: &mut Tally, check: impl FnOnce(&mut Tally)) {
    let mut inner = Tally::default();
    match catch_unwind(AssertUnwindSafe(|| check(&mut inner))) {
        Ok(()) => {}
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            inner.failures.push(format!("{file}: panicked: {msg}"));
        }
    }
    tally.runs += inner.runs;
    tally.outputs += inner.outputs;
    tally.failures.extend(inner.failures);
}

/// Ends the test: a summary on stderr, then every failure at once.
fn finish(test: &str, what: &str, tally: Tally, expected_runs: usize) {
    eprintln!(
        "{test}: {what}: {} GPU runs, {} output comparisons, {} mismatches",
        tally.runs,
        tally.outputs,
        tally.failures.len()
    );
    assert!(
        tally.failures.is_empty(),
        "{} mismatch(es) between the GPU and what it should give:\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
    // Every run that should have happened did: nothing was skipped quietly.
    assert_eq!(tally.runs, expected_runs, "{test}: GPU runs made");
    assert!(tally.outputs > 0, "{test}: no output was compared");
}

fusebench_testdata::needs_gpu! { and corpus;
#[test]
fn corpus_outputs_match_the_reference() {
    let test = "corpus_outputs_match_the_reference";
    let dir = shared_dir().join("corpus");
    let files = scripts(&dir);
    if !data_or_skip(test, !files.is_empty(), &dir) {
        return;
    }
    assert!(
        files.len() >= CORPUS_MIN,
        "{}: {} fusions, the shared corpus has 33: a partial copy?",
        dir.display(),
        files.len()
    );
    let Some(engine) = engine_or_skip(test) else {
        return;
    };
    if cfg!(debug_assertions) {
        // As crates/reference/tests/corpus.rs: the unoptimized CPU reference
        // takes minutes on the corpus.
        eprintln!("skipped {test}: the corpus runs in the release test command (cargo test --workspace --release)");
        return;
    }
    let seeds = [0, fresh_seed()];
    eprintln!(
        "{test}: seeds {seeds:?} (redo one with: fusebench check --device gpu --seed N FILE)"
    );
    let mut tally = Tally::default();
    for path in &files {
        let file = file_name(path);
        guarded(
            &file,
            &mut tally,
            |t| match fusebench_frontend::parse_file(path) {
                Ok(f) => check_generated(&engine, &file, &f, &seeds, t),
                Err(e) => t.failures.push(format!("{file}: parsing: {e}")),
            },
        );
    }
    let what = format!("{} fusions x {} seeds x 2 fills", files.len(), seeds.len());
    finish(test, &what, tally, files.len() * seeds.len() * 2);
}
}

fusebench_testdata::needs_gpu! { and golden;
#[test]
fn golden_outputs_match_the_reference_and_nvfuser() {
    let test = "golden_outputs_match_the_reference_and_nvfuser";
    let dir = shared_dir().join("golden");
    let manifest_path = dir.join("manifest.json");
    if !data_or_skip(test, manifest_path.is_file(), &manifest_path) {
        return;
    }
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&manifest_path)
            .unwrap_or_else(|e| panic!("{}: {e}", manifest_path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", manifest_path.display()));
    let cases = manifest
        .as_object()
        .unwrap_or_else(|| panic!("{}: not an object", manifest_path.display()));
    assert!(!cases.is_empty(), "{}: no cases", manifest_path.display());
    let Some(engine) = engine_or_skip(test) else {
        return;
    };
    let seeds = [0, fresh_seed()];
    eprintln!(
        "{test}: seeds {seeds:?} (redo one with: fusebench check --device gpu --seed N FILE)"
    );
    let mut tally = Tally::default();
    for (case, info) in cases {
        let file = format!("{case}.py");
        guarded(&file, &mut tally, |t| {
            let f = match fusebench_frontend::parse_file(&dir.join(&file)) {
                Ok(f) => f,
                Err(e) => {
                    t.failures.push(format!("{file}: parsing: {e}"));
                    return;
                }
            };
            // nvFuser's own inputs: the GPU against the CPU reference on them
            // and against what nvFuser gave.
            let label = format!("{file} (nvFuser's inputs)");
            match Case::read(&dir, case, info) {
                Ok(Case {
                    inputs,
                    outputs: nvfuser,
                    ..
                }) => match fusebench_reference::run(&f, &inputs) {
                    Ok(cpu) => check_on_gpu(
                        &engine,
                        &f,
                        &inputs,
                        &[Against::Reference(&cpu), Against::NvFuser(&nvfuser)],
                        &label,
                        t,
                    ),
                    Err(e) => t.failures.push(format!("{label}: CPU reference: {e}")),
                },
                Err(e) => t.failures.push(format!("{label}: reading: {e}")),
            }
            check_generated(&engine, &file, &f, &seeds, t);
        });
    }
    let what = format!(
        "{} cases x (nvFuser's inputs + {} seeds) x 2 fills",
        cases.len(),
        seeds.len()
    );
    finish(test, &what, tally, cases.len() * (1 + seeds.len()) * 2);
}
}

/// Golden-ops cases the GPU path cannot run or match yet, with why; a case
/// may also be in the reference's NOT_YET (skipped here while it is), so that
/// what the GPU is known not to do stays listed when the reference learns it.
/// Remove a case once it passes on the GPU.
#[rustfmt::skip]
const GPU_NOT_YET: &[(&str, &str)] = &[
];

/// One golden-ops case on the GPU (both fills) against nvFuser's outputs and
/// the CPU reference on nvFuser's inputs: `Err` says what differs.
fn golden_op_on_gpu(
    engine: &Engine,
    dir: &Path,
    case: &str,
    info: &serde_json::Value,
) -> Result<(), String> {
    let op = info["op"].as_str().unwrap_or("");
    let mut f = fusebench_frontend::parse_file(&dir.join(format!("{case}.py")))
        .map_err(|e| format!("parse: {e}"))?;
    golden_ops::seed_from_generator(&mut f, info)?;
    let g = Case::read(dir, case, info).map_err(|e| format!("read: {e}"))?;
    let cpu = fusebench_reference::run(&f, &g.inputs).map_err(|e| format!("CPU reference: {e}"))?;
    let p = engine
        .prepare(&f, &g.inputs)
        .map_err(|e| format!("preparing on the GPU: {e}"))?;
    let mut diffs = vec![];
    for fill in [Fill::Ones, Fill::Zeros] {
        let got = run_filled(&p, &f, &g.inputs, fill)
            .map_err(|e| format!("{}: running: {e}", fill.describe()))?;
        for d in golden_ops::differences(
            &f,
            &g,
            &got,
            op,
            fusebench_reference::compare::compare_peers,
        ) {
            diffs.push(format!("{}: against nvFuser: {d}", fill.describe()));
        }
        // An output in a stride order of its own (add_output(stride_order=),
        // fd.ops.stride_order) comes back in the strides nvFuser gave it.
        let orders = fusebench_codegen::layout::orders(&f);
        for (k, t) in got.iter().enumerate().filter(|_| f.aliases.is_empty()) {
            let want = info["outputs"][k]["stride"].as_array();
            let (Some(Some(_)), Some(want)) = (orders.get(k), want) else {
                continue;
            };
            let want: Vec<i64> = want.iter().filter_map(|v| v.as_i64()).collect();
            let differs = t
                .shape()
                .iter()
                .zip(t.strides().iter().zip(&want))
                .any(|(&e, (a, b))| e > 1 && a != b);
            if differs || want.len() != t.rank() {
                diffs.push(format!(
                    "{}: output {k} has strides {:?}, nvFuser's {want:?}",
                    fill.describe(),
                    t.strides()
                ));
            }
        }
        if got.len() != cpu.len() {
            diffs.push(format!(
                "{}: {} outputs, the CPU reference gives {}",
                fill.describe(),
                got.len(),
                cpu.len()
            ));
            continue;
        }
        for (k, (a, b)) in got.iter().zip(&cpu).enumerate() {
            let c = compare(a, b);
            if !c.ok {
                diffs.push(format!(
                    "{}: output {k} against the CPU reference: {}",
                    fill.describe(),
                    describe(&c)
                ));
            }
        }
        // The input buffer an alias output was written into, read back.
        let updated = p
            .updated_inputs(&g.inputs)
            .map_err(|e| format!("reading inputs back: {e}"))?;
        for (k, t) in updated {
            let c = compare(&t, &cpu[k]);
            if !c.ok {
                diffs.push(format!(
                    "{}: input updated in place by output {k} against the CPU reference: {}",
                    fill.describe(),
                    describe(&c)
                ));
            }
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("; "))
    }
}

fusebench_testdata::needs_gpu! {
#[test]
fn golden_ops_outputs_match_nvfuser() {
    let test = "golden_ops_outputs_match_nvfuser";
    let dir = golden_ops::fixtures_dir();
    let all = golden_ops::recorded_cases();
    assert!(
        all.len() > 1000,
        "{}: {} recorded cases",
        dir.display(),
        all.len()
    );
    // GOLDEN_OPS_ONLY=matmul,linear: only the cases whose names start so (a
    // GPU call with little time; the whole set takes minutes of CPU work).
    let only: Vec<String> = std::env::var("GOLDEN_OPS_ONLY")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let cases: Vec<_> = all
        .iter()
        .filter(|(c, _)| only.is_empty() || only.iter().any(|p| c.starts_with(p.as_str())))
        .cloned()
        .collect();
    let Some(engine) = engine_or_skip(test) else {
        return;
    };
    let cpu_not_yet: Vec<&str> = golden_ops_not_yet::NOT_YET
        .iter()
        .map(|&(c, _)| c)
        .collect();
    let mut problems = vec![];
    for &(case, _) in GPU_NOT_YET {
        if !all.iter().any(|(c, _)| c == case) {
            problems.push(format!("{case}: in GPU_NOT_YET but not a recorded case"));
        }
    }
    let (mut passed, mut not_yet, mut skipped) = (0, 0, 0);
    let mut failing = vec![];
    let print = std::env::var("GOLDEN_OPS_NOT_YET").is_ok_and(|v| v == "print");
    for (n, (case, info)) in cases.iter().enumerate() {
        if print && n % 100 == 0 {
            eprintln!(
                "{test}: case {n} of {}: {passed} passed so far",
                cases.len()
            );
        }
        if cpu_not_yet.contains(&case.as_str()) {
            skipped += 1;
            continue;
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            golden_op_on_gpu(&engine, &dir, case, info)
        }))
        .unwrap_or_else(|_| Err("panicked".to_string()));
        let listed = GPU_NOT_YET.iter().any(|&(c, _)| c == case);
        match (&r, listed) {
            (Ok(()), false) => passed += 1,
            (Ok(()), true) => problems.push(format!(
                "{case}: passes on the GPU now: remove it from GPU_NOT_YET"
            )),
            (Err(_), true) => not_yet += 1,
            (Err(why), false) => problems.push(format!("{case}: {why}")),
        }
        if let Err(why) = r {
            let line = why
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(100)
                .collect::<String>();
            let entry = format!(
                "    (\"{case}\", \"{}\"),",
                line.replace('\\', "\\\\").replace('"', "\\\"")
            );
            if print {
                // as it goes, so that a run cut short still says what it saw
                eprintln!("{entry}");
            }
            failing.push(entry);
        }
    }
    eprintln!(
        "{test}: {} recorded cases: {passed} pass on the GPU, {not_yet} not yet (GPU_NOT_YET), {skipped} left to the reference's NOT_YET",
        cases.len()
    );
    if print {
        println!(
            "#[rustfmt::skip]
const GPU_NOT_YET: &[(&str, &str)] = &[\n{}\n];",
            failing.join("\n")
        );
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
}
