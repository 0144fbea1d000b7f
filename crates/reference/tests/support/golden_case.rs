//! Reading one golden case of shared/golden: nvFuser's inputs, in the layouts
//! it was given (the manifest's strides), and nvFuser's outputs, from the
//! case's safetensors. Shared by the reference's golden test and the engine's
//! GPU test (`#[path]`-included there).

use fusebench_ir::DType;
use fusebench_reference::{Arg, Tensor};
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

/// Golden data type names as the reference spells them.
fn dtype_of(d: Dtype) -> Result<DType, String> {
    Ok(match d {
        Dtype::BOOL => DType::Bool,
        Dtype::I32 => DType::Int32,
        Dtype::I64 => DType::Int,
        Dtype::F16 => DType::Half,
        Dtype::BF16 => DType::BFloat16,
        Dtype::F32 => DType::Float,
        Dtype::F64 => DType::Double,
        other => return Err(format!("dtype {other:?} is not one fusebench has")),
    })
}

/// Tensor `name` of a golden file (stored contiguous in logical order).
fn load(st: &SafeTensors, name: &str) -> Result<Tensor, String> {
    let v = st.tensor(name).map_err(|e| format!("{name}: {e}"))?;
    Tensor::from_le_bytes(dtype_of(v.dtype())?, v.shape(), v.data())
        .map_err(|e| format!("{name}: {e}"))
}

/// nvFuser's inputs (in the layouts it was given) and outputs of one case.
pub fn golden_case(
    dir: &Path,
    case: &str,
    info: &serde_json::Value,
) -> Result<(Vec<Arg>, Vec<Tensor>), String> {
    let path = dir.join(format!("{case}.safetensors"));
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let specs = info["inputs"]
        .as_array()
        .ok_or("manifest: no inputs list")?;
    let mut inputs = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        // A scalar input is in the manifest only.
        if let Some(x) = spec.get("scalar") {
            let l = match (x.as_i64(), x.as_f64(), x.as_bool()) {
                (Some(v), _, _) => fusebench_ir::Literal::Int(v),
                (_, Some(v), _) => fusebench_ir::Literal::Float(v),
                (_, _, Some(b)) => fusebench_ir::Literal::Bool(b),
                _ => return Err(format!("manifest: input {i} has a scalar of no known kind")),
            };
            inputs.push(Arg::Scalar(l));
            continue;
        }
        let t = load(&st, &format!("in{i}"))?;
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
    let n_out = info["outputs"]
        .as_array()
        .ok_or("manifest: no outputs list")?
        .len();
    let outputs = (0..n_out)
        .map(|k| load(&st, &format!("out{k}")))
        .collect::<Result<_, _>>()?;
    Ok((inputs, outputs))
}
