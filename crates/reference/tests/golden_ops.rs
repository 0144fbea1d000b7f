//! Every per-op golden case nvFuser 0.2.36 ran (tests/fixtures/golden-ops,
//! recorded by bench/record_goldens.py: one op and one dtype per case, on
//! nvFuser's own inputs) run on the CPU reference: the case's repro script
//! parsed, its stored inputs fed in the layouts the manifest records, every
//! output and every input updated in place compared with nvFuser's (exact ops
//! bit for bit, the others within the dtype's tolerance of compare.rs).
//!
//! NOT_YET (tests/support/golden_ops_not_yet.rs, shared with the engine's GPU
//! test) lists the cases the reference cannot run or match yet, each with why.
//! The test fails when a case not listed fails, and when a listed case passes
//! (remove it from the list then), so the list stays true. Run with
//! `GOLDEN_OPS_NOT_YET=print` to print the failing cases in the list's form.

mod support {
    pub mod golden_ops;
    pub mod golden_ops_not_yet;
}

use fusebench_reference::compare::compare;
use fusebench_reference::golden::Case;
use fusebench_reference::run;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use support::golden_ops::{differences, fixtures_dir, recorded_cases, seed_from_generator};
use support::golden_ops_not_yet::NOT_YET;

/// The case on the CPU reference against nvFuser: `Err` says what differs.
fn check_case(dir: &Path, case: &str, info: &Value) -> Result<(), String> {
    let op = info["op"].as_str().unwrap_or("");
    let mut f = fusebench_frontend::parse_file(&dir.join(format!("{case}.py")))
        .map_err(|e| format!("parse: {e}"))?;
    seed_from_generator(&mut f, info)?;
    let g = Case::read(dir, case, info).map_err(|e| format!("read: {e}"))?;
    let got = run(&f, &g.inputs).map_err(|e| format!("run: {e}"))?;
    let diffs = differences(&f, &g, &got, op, compare);
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("; "))
    }
}

/// One line of the reason, without the script's path, at most 100 characters.
fn short_reason(e: &str) -> String {
    let line = e.lines().next().unwrap_or("");
    let line = match line.find(".py:") {
        Some(p) => {
            let rest = &line[p + 4..];
            // skip "LINE:COL: "
            let skip = rest.split(": ").next().map_or(0, |lc| lc.len() + 2);
            format!(
                "{}{}",
                &line[..line[..p].rfind(' ').map_or(0, |s| s + 1)],
                rest.get(skip..).unwrap_or(rest)
            )
        }
        None => line.to_string(),
    };
    let mut s: String = line.chars().take(100).collect();
    if s.len() < line.len() {
        s.push_str("...");
    }
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[test]
fn golden_ops_match_nvfuser() {
    let dir = fixtures_dir();
    let cases = recorded_cases();
    assert!(
        cases.len() > 1000,
        "{}: {} recorded cases, expected over 1000",
        dir.display(),
        cases.len()
    );
    let mut problems = vec![];
    let mut listed: HashMap<&str, &str> = HashMap::new();
    for &(case, why) in NOT_YET {
        if listed.insert(case, why).is_some() {
            problems.push(format!("{case}: listed twice in NOT_YET"));
        }
        if !cases.iter().any(|(c, _)| c == case) {
            problems.push(format!("{case}: in NOT_YET but not a recorded case"));
        }
    }
    // The reference's panics are results here (each becomes the case's
    // failure), not noise on stderr.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outcomes: Vec<(String, String, Result<(), String>)> = cases
        .iter()
        .map(|(case, info)| {
            let r = catch_unwind(AssertUnwindSafe(|| check_case(&dir, case, info))).unwrap_or_else(
                |p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Err(format!("panicked: {msg}"))
                },
            );
            (
                case.clone(),
                info["op"].as_str().unwrap_or("?").to_string(),
                r,
            )
        })
        .collect();
    std::panic::set_hook(hook);
    let mut by_op: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let (mut passed, mut not_yet) = (0, 0);
    let mut failing = vec![];
    for (case, op, r) in &outcomes {
        let e = by_op.entry(op).or_default();
        e.2 += 1;
        match (r, listed.contains_key(case.as_str())) {
            (Ok(()), false) => {
                passed += 1;
                e.0 += 1;
            }
            (Ok(()), true) => problems.push(format!("{case}: passes now: remove it from NOT_YET")),
            (Err(_), true) => {
                not_yet += 1;
                e.1 += 1;
            }
            (Err(why), false) => problems.push(format!("{case}: {why}")),
        }
        if let Err(why) = r {
            failing.push(format!("    (\"{case}\", \"{}\"),", short_reason(why)));
        }
    }
    eprintln!(
        "golden-ops: {} recorded cases: {passed} pass, {not_yet} not yet (NOT_YET)",
        outcomes.len()
    );
    for (op, (p, n, t)) in &by_op {
        eprintln!("  {op:<28} {p:>3} pass {n:>3} not yet of {t:>3}");
    }
    if std::env::var("GOLDEN_OPS_NOT_YET").is_ok_and(|v| v == "print") {
        println!(
            "pub const NOT_YET: &[(&str, &str)] = &[\n{}\n];",
            failing.join("\n")
        );
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(passed > 0, "no golden-ops case passes");
}
