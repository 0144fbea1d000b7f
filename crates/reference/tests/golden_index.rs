//! The index family's golden cases recorded from nvFuser 0.2.36 on an H200
//! (tests/fixtures/golden-ops): the reference must give nvFuser's outputs
//! (exactly: these ops only move values, except embedding's renorm).

use fusebench_reference::run;
use std::path::Path;

mod support {
    pub mod golden_case;
}
use support::golden_case::golden_case;

const OPS: &[&str] = &[
    "iota",
    "triu",
    "take_along_axis",
    "gather",
    "select",
    "scatter",
    "index_put_accumulate",
    "topk",
    "argsort",
    "embedding_fwd",
];

/// Cases the reference cannot run yet, with the reason.
const NOT_YET: &[(&str, &str)] = &[
    (
        "iota_scalar_inputs",
        "iota's length is a fusion input: fusebench needs extents known when the fusion is built",
    ),
    ("triu_c64", "complex dtypes are another helper's"),
    // nvFuser prints triu as iota(length=fd.ops.size(...)) ... where: `size` is another helper's.
    ("triu_f32", "needs fd.ops.size"),
    ("triu_int64", "needs fd.ops.size"),
    ("triu_bool", "needs fd.ops.size"),
    ("triu_bf16", "needs fd.ops.size"),
    ("triu_diag2_f32", "needs fd.ops.size"),
    ("triu_diag-1_f32", "needs fd.ops.size"),
];

/// The script with each `define_tensor(shape=[-1, ...]` given the recorded
/// input's shape (symbolic extents are another helper's).
fn concrete(src: &str, info: &serde_json::Value) -> String {
    let shapes: Vec<String> = info["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i.get("shape"))
        .map(|s| s.to_string().replace(',', ", "))
        .collect();
    let key = "define_tensor(shape=[";
    let mut out = String::new();
    let mut rest = src;
    let mut k = 0;
    while let Some(p) = rest.find(key) {
        out.push_str(&rest[..p]);
        let after = &rest[p + key.len() - 1..];
        let end = after.find(']').unwrap() + 1;
        out.push_str("define_tensor(shape=");
        out.push_str(shapes.get(k).map_or(&after[..end], |s| s.as_str()));
        k += 1;
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn index_family_matches_nvfuser() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden-ops");
    let Ok(text) = std::fs::read_to_string(dir.join("manifest.json")) else {
        eprintln!("no golden-ops manifest; skipping");
        return;
    };
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut failures = vec![];
    let mut ran = 0;
    for (case, info) in manifest.as_object().unwrap() {
        let op = info["op"].as_str().unwrap_or("");
        if !OPS.contains(&op) || info["status"] != "ok" || NOT_YET.iter().any(|(c, _)| c == case) {
            continue;
        }
        let text = std::fs::read_to_string(dir.join(format!("{case}.py"))).unwrap();
        let f = match fusebench_frontend::parse_script(case, &concrete(&text, info)) {
            Ok(f) => f,
            Err(e) => {
                failures.push(format!("{case}: {e}"));
                continue;
            }
        };
        let (inputs, wanted) = match golden_case(&dir, case, info) {
            Ok(x) => x,
            Err(e) => {
                failures.push(format!("{case}: {e}"));
                continue;
            }
        };
        let outs = match run(&f, &inputs) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("{case}: {e}"));
                continue;
            }
        };
        ran += 1;
        for (k, (got, want)) in outs.iter().zip(&wanted).enumerate() {
            if got.dtype() != want.dtype() || got.shape() != want.shape() {
                failures.push(format!(
                    "{case} out{k}: got {}{:?}, nvFuser {}{:?}",
                    got.dtype(),
                    got.shape(),
                    want.dtype(),
                    want.shape()
                ));
                continue;
            }
            let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
            let bad = g.iter().zip(&w).position(|(a, b)| {
                !(a == b
                    || (a.is_nan() && b.is_nan())
                    || (op == "embedding_fwd" && (a - b).abs() <= 1e-6 * b.abs().max(1.0)))
            });
            if let Some(i) = bad {
                failures.push(format!(
                    "{case} out{k}[{i}]: got {}, nvFuser {}",
                    g[i], w[i]
                ));
            }
        }
    }
    eprintln!("{ran} golden cases of the index family ran");
    assert!(ran >= 35, "only {ran} cases ran: {failures:#?}");
    assert!(failures.is_empty(), "{failures:#?}");
}
