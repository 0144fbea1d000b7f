//! Fusions the `check_pipeline` fuzz target (fuzz/) found the planner
//! panicking on: each must plan or be refused with an error, never panic.

use std::path::Path;

#[test]
fn every_found_fusion_plans_or_is_refused() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz-found");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let f = fusebench_frontend::parse_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let layouts = vec![None; f.inputs.len()];
        // Ok or Err are both fine; a panic fails the test.
        let _ = fusebench_codegen::plan(&f, &layouts, fusebench_codegen::Device::default());
        n += 1;
    }
    assert!(n >= 1, "no fixtures in {}", dir.display());
}
