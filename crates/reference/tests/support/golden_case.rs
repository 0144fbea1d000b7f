//! Reading one golden case (shared/golden, or the per-op cases of
//! crates/reference/tests/fixtures/golden-ops): nvFuser's inputs in the
//! layouts it was given (the manifest's strides), scalar inputs, nvFuser's
//! outputs, and the inputs an alias output updated in place. Shared by the
//! reference's golden tests and the engine's GPU test (`#[path]`-included
//! there).
//!
//! Tensors are rebuilt from their bytes with the dtype and shape the manifest
//! names (`torch` spelling), so a dtype fusebench learns is read without a
//! change here; complex tensors, stored as their real view (a trailing
//! dimension of 2), come back as the complex dtype's interleaved bytes.

#![allow(dead_code)] // each including test uses part of it

use fusebench_ir::{DType, Literal};
use fusebench_reference::{Arg, Tensor};
use safetensors::SafeTensors;
use serde_json::Value;
use std::path::Path;

/// nvFuser's side of one case.
pub struct Golden {
    /// In the fusion's input order, tensors in nvFuser's layouts.
    pub inputs: Vec<Arg>,
    /// What `fd.execute` returned, in order.
    pub outputs: Vec<Tensor>,
    /// (input position, its value after the run) for each input an alias
    /// output (`fd.add_output(out, alias_input)`) wrote into.
    pub post_inputs: Vec<(usize, Tensor)>,
}

fn dtype_named(name: &str) -> Result<DType, String> {
    DType::from_torch_name(name).ok_or_else(|| format!("dtype {name} is not one fusebench has"))
}

/// Tensor `name` of the case's safetensors, as `spec` (`shape`, `dtype`) says.
fn load(st: &SafeTensors, name: &str, spec: &Value) -> Result<Tensor, String> {
    let v = st.tensor(name).map_err(|e| format!("{name}: {e}"))?;
    let dtype = dtype_named(
        spec["dtype"]
            .as_str()
            .ok_or_else(|| format!("manifest: {name} has no dtype"))?,
    )?;
    let shape: Vec<usize> = spec["shape"]
        .as_array()
        .ok_or_else(|| format!("manifest: {name} has no shape"))?
        .iter()
        .map(|d| {
            d.as_u64()
                .map(|d| d as usize)
                .ok_or("manifest: a dim that is not a size")
        })
        .collect::<Result<_, _>>()?;
    Tensor::from_le_bytes(dtype, &shape, v.data()).map_err(|e| format!("{name}: {e}"))
}

/// A scalar input: `{"scalar": v, "dtype": "int64" | "float64" | "bool"}`,
/// non-finite floats written as "inf", "-inf", "nan".
fn scalar(spec: &Value, i: usize) -> Result<Literal, String> {
    let v = &spec["scalar"];
    let bad = || {
        format!(
            "manifest: scalar input {i} ({v}) is not a {}",
            spec["dtype"]
        )
    };
    Ok(match spec["dtype"].as_str().unwrap_or("") {
        "bool" => Literal::Bool(v.as_bool().ok_or_else(bad)?),
        "int64" => Literal::Int(v.as_i64().ok_or_else(bad)?),
        "float64" => Literal::Float(match v {
            Value::String(s) => s.parse::<f64>().map_err(|_| bad())?,
            _ => v.as_f64().ok_or_else(bad)?,
        }),
        other => {
            return Err(format!(
                "scalar input {i}: dtype {other} is not one fusebench has"
            ))
        }
    })
}

/// Reads case `case` of `dir` as its manifest entry `info` describes it.
pub fn read_golden(dir: &Path, case: &str, info: &Value) -> Result<Golden, String> {
    let path = dir.join(format!("{case}.safetensors"));
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let specs = info["inputs"]
        .as_array()
        .ok_or("manifest: no inputs list")?;
    let mut inputs = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        if spec.get("scalar").is_some() {
            inputs.push(Arg::Scalar(scalar(spec, i)?));
            continue;
        }
        let t = load(&st, &format!("in{i}"), spec)?;
        let strides: Vec<i64> = spec["stride"]
            .as_array()
            .ok_or_else(|| format!("manifest: input {i} has no strides"))?
            .iter()
            .map(|s| {
                s.as_i64()
                    .ok_or("manifest: a stride that is not an integer")
            })
            .collect::<Result<_, _>>()?;
        inputs.push(Arg::Tensor(t.relaid(&strides).map_err(|e| e.to_string())?));
    }
    let outputs = info["outputs"]
        .as_array()
        .ok_or("manifest: no outputs list")?
        .iter()
        .enumerate()
        .map(|(k, spec)| load(&st, &format!("out{k}"), spec))
        .collect::<Result<_, _>>()?;
    let mut post_inputs = Vec::new();
    for i in info["post_inputs"].as_array().into_iter().flatten() {
        let i = i
            .as_u64()
            .ok_or("manifest: a post_inputs entry that is not an index")? as usize;
        let spec = specs
            .get(i)
            .ok_or_else(|| format!("manifest: post_inputs names input {i}, which is not there"))?;
        post_inputs.push((i, load(&st, &format!("post_in{i}"), spec)?));
    }
    Ok(Golden {
        inputs,
        outputs,
        post_inputs,
    })
}

/// nvFuser's inputs (in the layouts it was given) and outputs of one case.
pub fn golden_case(
    dir: &Path,
    case: &str,
    info: &Value,
) -> Result<(Vec<Arg>, Vec<Tensor>), String> {
    let g = read_golden(dir, case, info)?;
    Ok((g.inputs, g.outputs))
}
