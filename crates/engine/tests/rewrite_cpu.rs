//! The planner's rewrites (`fusebench_codegen::rewrite`: complex sums as sums
//! of the parts, integer welford / var_mean as the first element and fulls)
//! compute what the ops they replace compute. No GPU: the CPU reference runs
//! each fusion as written and as rewritten, on the same inputs, and every
//! output agrees in dtype and shape, integers exactly, floats within their
//! dtype's tolerance, NaN where NaN.

use fusebench_codegen::rewrite;
use fusebench_reference::compare::compare;
use fusebench_reference::{generate_inputs, run};
use std::borrow::Cow;
use std::path::Path;

const FIXTURES: &[&str] = &[
    "complex/sum_cf.py",
    "complex/sum_cd.py",
    "complex/sum_all_1m_cf.py",
    "reduce/welford_int.py",
    "reduce/welford_int_used.py",
];

#[test]
fn rewritten_fusions_compute_what_the_originals_compute() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/ops");
    for file in FIXTURES {
        let f = fusebench_frontend::parse_file(&dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let Cow::Owned(g) = rewrite::apply(&f).unwrap_or_else(|e| panic!("{file}: {e}")) else {
            panic!("{file}: nothing rewritten")
        };
        g.validate().unwrap_or_else(|e| panic!("{file}: rewritten fusion invalid: {e}"));
        for seed in 0..3 {
            let inputs = generate_inputs(&f, seed).unwrap().inputs;
            let want = run(&f, &inputs).unwrap_or_else(|e| panic!("{file}: {e}"));
            let got = run(&g, &inputs).unwrap_or_else(|e| panic!("{file} rewritten: {e}"));
            assert_eq!(want.len(), got.len(), "{file}");
            for (k, (w, o)) in want.iter().zip(&got).enumerate() {
                let name = &f.value(f.outputs[k]).name;
                assert_eq!((w.dtype(), w.shape()), (o.dtype(), o.shape()), "{file}: {name}");
                let c = compare(o, w);
                assert!(c.ok, "{file} seed {seed}: {name}: {c:?}");
            }
        }
    }
}
