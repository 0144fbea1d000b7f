//! Every fusion of shared/corpus: inputs generated, run, outputs finite.
//! About 10 s in a release build (the README's test command); a debug build
//! skips it with a message, since unoptimized it takes minutes.

use fusebench_reference::{generate_inputs, run, stats};

fusebench_testdata::needs_corpus! {
#[test]
fn whole_corpus_runs() {
    if cfg!(debug_assertions) {
        eprintln!("skipped: the whole corpus runs in the release test command (cargo test --workspace --release)");
        return;
    }
    let files = fusebench_testdata::scripts("corpus");
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
}
