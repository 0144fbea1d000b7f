//! The fuzzer's regression scripts (crates/cli/tests/fixtures/fuzz-regressions,
//! fusions that once failed on the GPU) on the GPU: outputs poisoned each of
//! `POISONS` ways, each compared with the CPU reference within its
//! per-element bounds (`fusebench_reference::bounds`). Built without an
//! NVIDIA driver it is ignored with the reason (`needs_gpu!`); run without a
//! GPU (`--include-ignored`) it says it skipped.

use fusebench_engine::{Engine, EngineError, POISONS};
use fusebench_reference::bounds::{compare_bounded, run_with_bounds};
use std::path::Path;

fusebench_testdata::needs_gpu! {
#[test]
fn fuzz_regressions_match_the_reference_on_the_gpu() {
    if let Err(reason) = fusebench_runtime::probe() {
        eprintln!("skipped: no GPU: {reason}");
        return;
    }
    let engine = Engine::new().unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/fuzz-regressions");
    let mut bad = vec![];
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "py") {
            continue;
        }
        n += 1;
        let f = fusebench_frontend::parse_file(&p).unwrap();
        let inputs = fusebench_reference::generate_inputs(&f, 0).unwrap().inputs;
        let (want, bounds) = run_with_bounds(&f, &inputs).unwrap();
        let prep = match engine.prepare(&f, &inputs) {
            Ok(prep) => prep,
            Err(EngineError::Codegen(e)) => {
                eprintln!("{}: refused by the planner: {e}", p.display());
                continue;
            }
            Err(e) => panic!("{}: {e}", p.display()),
        };
        for byte in POISONS {
            prep.run_poisoned(byte).unwrap();
            let got = prep.outputs(&f, &inputs).unwrap();
            for (o, ((g, w), b)) in got.iter().zip(&want).zip(&bounds).enumerate() {
                let (c, _) = compare_bounded(g, w, b.as_ref());
                if !c.ok {
                    bad.push(format!(
                        "{} output {o} (poison {byte:#x}): {:?} {:?}",
                        p.display(),
                        c.problem,
                        c.first_mismatch
                    ));
                }
            }
        }
    }
    assert!(n > 0);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
}
