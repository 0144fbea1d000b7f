//! Every fusion of shared/corpus: inputs generated, run, outputs finite.
//! Slow in a debug build; run it with
//! `cargo test --release -p fusebench-reference --test corpus -- --ignored`.

use fusebench_reference::{generate_inputs, run, stats};
use std::path::Path;

#[test]
#[ignore = "runs the whole corpus (~10 s in release, much longer in debug)"]
fn whole_corpus_runs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("shared/corpus not found; skipping");
        return;
    };
    let mut files: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "{} files", files.len());
    for p in files {
        let f = fusebench_frontend::parse_file(&p).unwrap_or_else(|e| panic!("{e}"));
        let g = generate_inputs(&f, 0).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let out = run(&f, &g.inputs).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(out.len(), f.outputs.len());
        for (k, t) in out.iter().enumerate() {
            let s = stats(t);
            assert_eq!(
                (s.nan_count, s.inf_count),
                (0, 0),
                "{} output {k}: {s:?}",
                p.display()
            );
        }
    }
}
