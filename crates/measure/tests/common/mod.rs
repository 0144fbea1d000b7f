//! What the explain tests share: reading a recorded measurement, finding a
//! cause's finding, and checking that the parts of an explanation add up.
#![allow(dead_code)] // each test file uses its own part of this

use fusebench_measure::{Cause, Explanation, Finding, Measurement};

/// A record from `tests/fixtures/explain/DIR/NAME.json` (DIR may be empty).
pub fn load_from(dir: &str, name: &str) -> Measurement {
    let path = format!(
        "{}/tests/fixtures/explain/{dir}/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Measurement::from_json(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn finding(e: &Explanation, c: Cause) -> &Finding {
    e.findings.iter().find(|f| f.cause == c).unwrap()
}

pub fn close(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-9 * y.abs().max(1.0)
}

pub fn effect(e: &Explanation, c: Cause) -> f64 {
    finding(e, c)
        .effect_us
        .unwrap_or_else(|| panic!("{c:?} has no effect: {:#?}", finding(e, c)))
}

/// The causes' effects, what they do together and the remainder make B − A,
/// and their shares make the whole.
pub fn adds_up(e: &Explanation) {
    let d = e.b_us - e.a_us;
    let parts: f64 = e.findings.iter().filter_map(|f| f.effect_us).sum();
    assert!(
        close(parts + e.together_us + e.remainder_us, d),
        "{parts} + {} + {} != {d}",
        e.together_us,
        e.remainder_us
    );
    let shares: f64 = e.findings.iter().filter_map(|f| f.share).sum::<f64>()
        + e.together.iter().filter_map(|t| t.share).sum::<f64>();
    assert!(close(shares + e.remainder_share.unwrap(), 1.0));
    assert!(close(
        e.together_us,
        e.together.iter().map(|t| t.effect_us).sum()
    ));
}
