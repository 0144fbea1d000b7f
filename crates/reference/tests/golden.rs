//! Every golden case of shared/golden: nvFuser's own repro script, its exact
//! inputs and nvFuser's outputs (run on an H200). The reference must match
//! exactly where the math is exact and within rounding of the dtype
//! elsewhere. Ignored, with the reason, when shared/golden is absent (fusebench-testdata).

use fusebench_ir::DType;
use fusebench_reference::run;
use std::path::PathBuf;

use fusebench_reference::golden::Case;

/// The shared golden cases; a test reaching here without them fails naming the path.
fn golden_dir() -> PathBuf {
    fusebench_testdata::require("golden/manifest.json");
    fusebench_testdata::shared_dir().join("golden")
}

/// (relative, absolute) tolerance for comparing floats of a dtype.
fn tolerance(d: DType) -> (f64, f64) {
    match d {
        DType::BFloat16 => (1.6e-2, 1e-2),
        DType::Half => (2e-3, 1e-3),
        DType::Float => (2e-5, 1e-5),
        DType::Double => (1e-12, 1e-12),
        _ => (0.0, 0.0),
    }
}

fusebench_testdata::needs_golden! {
#[test]
fn golden_cases_match_nvfuser() {
    let dir = golden_dir();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let mut report = vec![];
    let mut failures = vec![];
    for (case, info) in manifest.as_object().unwrap() {
        let f = fusebench_frontend::parse_file(&dir.join(format!("{case}.py")))
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let Case {
            inputs,
            outputs: wanted,
            ..
        } = Case::read(&dir, case, info).unwrap_or_else(|e| panic!("{case}: {e}"));
        let outs = run(&f, &inputs).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(outs.len(), wanted.len(), "{case}: output count");
        for (k, (got, want)) in outs.iter().zip(&wanted).enumerate() {
            let gd = got.dtype();
            if want.dtype() != gd || want.shape() != got.shape() {
                failures.push(format!(
                    "{case} out{k}: got {gd}{:?}, nvFuser {}{:?}",
                    got.shape(),
                    want.dtype(),
                    want.shape()
                ));
                continue;
            }
            let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
            let (rtol, atol) = tolerance(gd);
            let mut exact = 0;
            let mut worst = (0.0f64, 0usize);
            for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
                if a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || a == b {
                    exact += 1;
                    continue;
                }
                let err = (a - b).abs() / (atol + rtol * b.abs());
                if err.is_nan() || err > worst.0 {
                    worst = (if err.is_nan() { f64::INFINITY } else { err }, i);
                }
            }
            report.push(format!(
                "{case} out{k} {gd}: {exact}/{} exact, worst {:.3} of tolerance",
                g.len(),
                worst.0
            ));
            if worst.0 > 1.0 {
                let i = worst.1;
                failures.push(format!(
                    "{case} out{k}: element {i} is {} where nvFuser gives {}",
                    g[i], w[i]
                ));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
}
