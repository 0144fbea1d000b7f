//! The per-op golden cases of crates/reference/tests/fixtures/golden-ops
//! (recorded from nvFuser 0.2.36 by bench/record_goldens.py): where they are,
//! which ones ran in nvFuser, how an executor's outputs are matched with
//! nvFuser's (`out<k>`, and `post_in<i>` for inputs updated in place), and
//! which ops must match exactly. Shared by the reference's golden_ops test
//! and the engine's GPU test (`#[path]`-included there).

#![allow(dead_code)] // each including test uses part of it

use fusebench_reference::golden::Case;
use fusebench_ir::Fusion;
use fusebench_reference::compare::{compare, Comparison};
use fusebench_reference::Tensor;
use serde_json::Value;
use std::path::PathBuf;

/// The fixtures folder, from either crate that includes this file;
/// `GOLDEN_OPS_DIR` names another (a test binary carried to a GPU machine,
/// where the source tree is not; not a `FUSEBENCH_` name, since the engine
/// refuses `FUSEBENCH_` variables that are not its settings).
pub fn fixtures_dir() -> PathBuf {
    match std::env::var_os("GOLDEN_OPS_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reference/tests/fixtures/golden-ops")
        }
    }
}

/// The manifest's cases nvFuser ran (status `ok`), by name, in manifest order.
pub fn recorded_cases() -> Vec<(String, Value)> {
    let path = fixtures_dir().join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let manifest: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases = manifest
        .as_object()
        .unwrap_or_else(|| panic!("{}: not an object", path.display()));
    cases
        .iter()
        .filter(|(_, info)| info["status"] == "ok")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Ops whose result is exactly representable (data movement, selection,
/// comparisons, rounding to integers, casts, min/max): compared bit for bit
/// (NaN with NaN), not within a tolerance.
const EXACT_OPS: &[&str] = &[
    "abs",
    "argsort",
    "broadcast",
    "broadcast_in_dim",
    "cast",
    "cat",
    "ceil",
    "clamp",
    "cummax",
    "cummin",
    "embedding_fwd",
    "eq",
    "expand",
    "floor",
    "fmod",
    "frac",
    "full",
    "gather",
    "ge",
    "gt",
    "imag",
    "index_select",
    "isfinite",
    "isinf",
    "isnan",
    "isneginf",
    "isposinf",
    "isreal",
    "le",
    "lt",
    "max",
    "maximum",
    "min",
    "minimum",
    "ne",
    "neg",
    "nextafter",
    "pad",
    "permute",
    "real",
    "relu",
    "reshape",
    "round",
    "scatter",
    "select",
    "set",
    "sign",
    "signbit",
    "slice",
    "squeeze",
    "stride_order",
    "take_along_axis",
    "threshold",
    "topk",
    "triu",
    "trunc",
    "where",
];

pub fn is_exact(op: &str) -> bool {
    EXACT_OPS.contains(&op)
}

/// Equal element for element (NaN matches NaN), same shape and dtype.
fn compare_exact(got: &Tensor, want: &Tensor) -> Option<String> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        return Some(format!(
            "got {}{:?}, nvFuser {}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    if !want.dtype().is_float() {
        let c = compare(got, want); // integers and bools: exact, as i64
        return (!c.ok).then(|| describe(&c));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let bad: Vec<usize> = (0..w.len())
        .filter(|&i| !(g[i] == w[i] || (g[i].is_nan() && w[i].is_nan())))
        .collect();
    bad.first().map(|&i| {
        format!(
            "{} of {} elements differ (exact op); first at {i}: {}, nvFuser {}",
            bad.len(),
            w.len(),
            g[i],
            w[i]
        )
    })
}

pub fn describe(c: &Comparison) -> String {
    if let Some(p) = &c.problem {
        return p.clone();
    }
    let mut s = format!(
        "{} of {} elements outside tolerance, max abs err {:.3e}, max rel err {:.3e}",
        c.mismatches, c.elements, c.max_abs_err, c.max_rel_err
    );
    if let Some((idx, got, want)) = &c.first_mismatch {
        s.push_str(&format!("; first at {idx:?}: {got}, nvFuser {want}"));
    }
    s
}

/// Where each of nvFuser's results is among an executor's outputs `n_got`
/// (one per output of `f`, or only those `execute` returns): `outs[k]` for
/// nvFuser's `out<k>`, and for each `post_in<i>` the output written into
/// input `i`, if the executor gives it.
pub struct Placement {
    pub outs: Vec<usize>,
    pub post: Vec<(usize, Option<usize>)>,
}

/// Aliases as the fusion records them (`aliases: [{output, input, hidden}]`
/// in its JSON form), read through serde so that this compiles whether or not
/// the IR has them yet; none when it does not.
fn aliases(f: &Fusion) -> Vec<(usize, u64, bool)> {
    let j = serde_json::to_value(f).unwrap_or(Value::Null);
    j["aliases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            Some((
                a["output"].as_u64()? as usize,
                a["input"].as_u64()?,
                a["hidden"].as_bool().unwrap_or(false),
            ))
        })
        .collect()
}

pub fn place(f: &Fusion, g: &Case, n_got: usize) -> Result<Placement, String> {
    let al = aliases(f);
    let visible: Vec<usize> = (0..f.outputs.len())
        .filter(|o| !al.iter().any(|&(ao, _, hidden)| ao == *o && hidden))
        .collect();
    let all = n_got == f.outputs.len();
    if !all && n_got != visible.len() {
        return Err(format!(
            "{n_got} outputs, the fusion has {} ({} returned by nvFuser)",
            f.outputs.len(),
            visible.len()
        ));
    }
    let outs = if all {
        visible.clone()
    } else {
        (0..visible.len()).collect()
    };
    if outs.len() != g.outputs.len() {
        return Err(format!(
            "{} outputs returned, nvFuser returned {}",
            outs.len(),
            g.outputs.len()
        ));
    }
    let post = g
        .post_inputs
        .iter()
        .map(|&(i, _)| {
            let input = f.inputs.get(i).map(|v| v.0 as u64);
            let o = al
                .iter()
                .find(|&&(_, inp, _)| Some(inp) == input)
                .map(|&(o, _, _)| o);
            (i, o.filter(|_| all))
        })
        .collect();
    Ok(Placement { outs, post })
}

/// Every difference between an executor's outputs `got` and nvFuser's, with
/// `cmp` for inexact ops and exactly for the exact ones.
pub fn differences(
    f: &Fusion,
    g: &Case,
    got: &[Tensor],
    op: &str,
    cmp: fn(&Tensor, &Tensor) -> Comparison,
) -> Vec<String> {
    let p = match place(f, g, got.len()) {
        Ok(p) => p,
        Err(e) => return vec![e],
    };
    // |z| of a complex value is CUDA's hypot (2-3 ulp, not correctly
    // rounded; fusebench's is): within the tolerance of its dtype.
    let complex_abs = op == "abs" && f.inputs.iter().any(|&v| f.value(v).dtype.is_complex());
    let check = |a: &Tensor, b: &Tensor| -> Option<String> {
        if is_exact(op) && !complex_abs {
            compare_exact(a, b)
        } else {
            let c = cmp(a, b);
            (!c.ok).then(|| describe(&c))
        }
    };
    let mut diffs = vec![];
    for (k, &o) in p.outs.iter().enumerate() {
        if let Some(d) = check(&got[o], &g.outputs[k]) {
            diffs.push(format!("out{k}: {d}"));
        }
    }
    for (&(i, o), (_, want)) in p.post.iter().zip(&g.post_inputs) {
        match o {
            None => diffs.push(format!(
                "post_in{i}: no output written into input {i} to compare (alias outputs)"
            )),
            Some(o) => {
                if let Some(d) = check(&got[o], want) {
                    diffs.push(format!("post_in{i}: {d}"));
                }
            }
        }
    }
    diffs
}

/// A case whose random ops drew from PyTorch's CUDA generator (manifest
/// `rng.torch_generator`): gives each unseeded `uniform`/`normal` the seed
/// and offset nvFuser took from it (csrc/rng.cpp: the generator's seed, its
/// offset / 4 plus the op's number among the unseeded ops), so the values
/// are checked as the seeded cases' are. fusebench's own unseeded rule
/// assumes the state right after torch.manual_seed(0).
pub fn seed_from_generator(f: &mut Fusion, info: &Value) -> Result<(), String> {
    use fusebench_ir::{DType, Literal, Op, Value as IrValue, ValueDef, ValueId};
    let rng = &info["rng"];
    if rng["torch_generator"] != Value::Bool(true) {
        return Ok(());
    }
    let (Some(seed), Some(before)) = (rng["seed"].as_u64(), rng["offset_before"].as_u64()) else {
        return Err("manifest: rng has no seed or offset_before".into());
    };
    let unseeded: Vec<usize> =
        (0..f.nodes.len()).filter(|&n| fusebench_ir::rng::is_unseeded(&f.nodes[n].op)).collect();
    // The literals go first (a node may read only values defined before it):
    // every value id moves up by their number.
    let shift = 2 * unseeded.len() as u32;
    let moved = |v: &mut ValueId| v.0 += shift;
    for n in &mut f.nodes {
        n.op.operands_mut().into_iter().for_each(moved);
        n.outputs.iter_mut().for_each(moved);
    }
    f.inputs.iter_mut().for_each(moved);
    f.outputs.iter_mut().for_each(moved);
    f.aliases.iter_mut().for_each(|a| moved(&mut a.input));
    let lit = |name: String, v: u64| IrValue {
        name,
        dtype: DType::Int,
        shape: None,
        def: ValueDef::Literal,
        constant: Some(Literal::Int(v as i64)),
    };
    for (k, &n) in unseeded.iter().enumerate() {
        let (s, o) = (ValueId(2 * k as u32), ValueId(2 * k as u32 + 1));
        f.values.insert(2 * k, lit(format!("gen_seed{k}"), seed));
        f.values.insert(2 * k + 1, lit(format!("gen_offset{k}"), before / 4 + k as u64));
        match &mut f.nodes[n].op {
            Op::Rng {
                seed: sd,
                offset: off,
                ..
            } => (*sd, *off) = (Some(s), Some(o)),
            other => return Err(format!("{} draws from the generator and has no seed to give", other.name())),
        }
    }
    Ok(())
}
