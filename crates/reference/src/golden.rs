//! The one reader of recorded tensors and golden cases: a safetensors file of
//! a fusion's inputs (`in<i>`, by input position), outputs (`out<k>`) and
//! inputs after the run (`post_in<i>`, where an alias output updated one in
//! place), stored contiguous in logical order, with the case's entry of the
//! `manifest.json` beside it when there is one (../shared/golden and the
//! golden-ops fixtures have one): the strides each input was given to
//! nvFuser with, scalar inputs, and the dtype of tensors safetensors cannot
//! name (a complex tensor is stored as its real view, a trailing dimension
//! of 2). `fusebench check --data` reads files through [`DataFile`]; the
//! golden tests (reference and engine) read whole cases through [`Case`].

use crate::{Arg, Tensor};
use fusebench_ir::{DType, Literal};
use safetensors::{Dtype, SafeTensors};
use serde_json::Value;
use std::path::Path;

/// A safetensors file read into memory, with its manifest entry if any.
pub struct DataFile {
    bytes: Vec<u8>,
    pub path: String,
    /// The case's manifest entry (`inputs`/`outputs`: shape, dtype, stride
    /// or scalar; `post_inputs`).
    info: Option<Value>,
}

/// The fusebench dtype of a safetensors dtype.
pub fn dtype_of(d: Dtype) -> Result<DType, String> {
    Ok(match d {
        Dtype::BOOL => DType::Bool,
        Dtype::I32 => DType::Int32,
        Dtype::I64 => DType::Int,
        Dtype::U64 => DType::UInt64,
        Dtype::F16 => DType::Half,
        Dtype::BF16 => DType::BFloat16,
        Dtype::F32 => DType::Float,
        Dtype::F64 => DType::Double,
        Dtype::F8_E4M3 => DType::Float8E4m3fn,
        Dtype::F8_E5M2 => DType::Float8E5m2,
        Dtype::F8_E8M0 => DType::Float8E8m0fnu,
        other => return Err(format!("dtype {other:?} is not one fusebench has")),
    })
}

/// The entry for `data`'s case (its file stem) in the `manifest.json` beside it.
fn manifest_entry(data: &Path) -> Option<Value> {
    let stem = data.file_stem()?.to_str()?;
    let text = std::fs::read_to_string(data.with_file_name("manifest.json")).ok()?;
    let m: Value = serde_json::from_str(&text).ok()?;
    m.get(stem).cloned()
}

impl DataFile {
    /// Reads `path`, with its entry of a `manifest.json` beside it if there is one.
    pub fn read(path: &Path) -> Result<DataFile, String> {
        DataFile::read_with(path, manifest_entry(path))
    }

    /// Reads `path` with `info` as its manifest entry (for a caller that has
    /// read the manifest already).
    pub fn read_with(path: &Path, info: Option<Value>) -> Result<DataFile, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let f = DataFile {
            bytes,
            path: path.display().to_string(),
            info,
        };
        f.st()?;
        Ok(f)
    }

    fn st(&self) -> Result<SafeTensors<'_>, String> {
        SafeTensors::deserialize(&self.bytes)
            .map_err(|e| format!("{}: not a safetensors file: {e}", self.path))
    }

    /// Every tensor's name, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut n: Vec<String> = self
            .st()
            .map(|s| s.names().into_iter().map(|n| n.to_string()).collect())
            .unwrap_or_default();
        n.sort();
        n
    }

    /// The manifest's entry for tensor `name` (`in<i>` and `post_in<i>`:
    /// input i's; `out<k>`: output k's).
    fn spec(&self, name: &str) -> Option<&Value> {
        let info = self.info.as_ref()?;
        let (list, i) = if let Some(k) = name.strip_prefix("out") {
            ("outputs", k)
        } else if let Some(i) = name.strip_prefix("post_in") {
            ("inputs", i)
        } else {
            ("inputs", name.strip_prefix("in")?)
        };
        info[list].get(i.parse::<usize>().ok()?)
    }

    /// The shape of tensor `name`, if the file has it.
    pub fn shape(&self, name: &str) -> Option<Vec<usize>> {
        let st = self.st().ok()?;
        let v = st.tensor(name).ok()?;
        self.typed(name, v.dtype(), v.shape()).ok().map(|(_, s)| s)
    }

    /// Tensor `name`, or `None` if the file has no tensor of that name.
    pub fn get(&self, name: &str) -> Result<Option<Tensor>, String> {
        let st = self.st()?;
        let Ok(v) = st.tensor(name) else {
            return Ok(None);
        };
        let (dtype, shape) = self.typed(name, v.dtype(), v.shape())?;
        Tensor::from_le_bytes(dtype, &shape, v.data())
            .map(Some)
            .map_err(|e| format!("{}: {name}: {e}", self.path))
    }

    /// The dtype and shape tensor `name` is read as: the file's; where the
    /// manifest names a complex dtype, the file's real view (its part dtype,
    /// a trailing dimension of 2) is read as that. A manifest that disagrees
    /// with the file is an error.
    fn typed(&self, name: &str, d: Dtype, shape: &[usize]) -> Result<(DType, Vec<usize>), String> {
        let bad = |e: String| format!("{}: {name}: {e}", self.path);
        let dtype = dtype_of(d).map_err(bad)?;
        let Some(spec) = self.spec(name).filter(|s| s.get("dtype").is_some()) else {
            return Ok((dtype, shape.to_vec()));
        };
        let named = spec["dtype"].as_str().unwrap_or("");
        let want = DType::from_torch_name(named)
            .ok_or_else(|| bad(format!("manifest: dtype {named} is not one fusebench has")))?;
        let want_shape = spec_shape(spec).map_err(bad)?;
        let real_view = want.complex_part() == Some(dtype)
            && shape.split_last() == Some((&2, want_shape.as_slice()));
        if (want, want_shape.as_slice()) == (dtype, shape) || real_view {
            Ok((want, want_shape))
        } else {
            Err(bad(format!(
                "the file holds {}{shape:?}, the manifest says {named}{want_shape:?}",
                dtype.torch_name()
            )))
        }
    }

    /// Tensor `name`, which must be present.
    pub fn load(&self, name: &str) -> Result<Tensor, String> {
        self.get(name)?.ok_or_else(|| {
            format!(
                "{}: no tensor `{name}` (it has: {})",
                self.path,
                self.names().join(", ")
            )
        })
    }

    /// The strides input `i` was given with (the manifest's `stride`), if given.
    pub fn strides(&self, i: usize) -> Result<Option<Vec<i64>>, String> {
        match &self.info {
            Some(info) => manifest_strides(info, i),
            None => Ok(None),
        }
    }

    /// Input `i`'s value when the manifest records it as a scalar.
    pub fn scalar(&self, i: usize) -> Result<Option<Literal>, String> {
        match self.info.as_ref().and_then(|info| info["inputs"].get(i)) {
            Some(spec) if spec.get("scalar").is_some() => scalar(spec, i).map(Some),
            _ => Ok(None),
        }
    }
}

fn spec_shape(spec: &Value) -> Result<Vec<usize>, String> {
    spec["shape"]
        .as_array()
        .ok_or("manifest: no shape")?
        .iter()
        .map(|d| {
            d.as_u64()
                .map(|d| d as usize)
                .ok_or_else(|| "manifest: a dim that is not a size".to_string())
        })
        .collect()
}

/// The strides of input `i` in a manifest entry (`inputs[i].stride`), if given.
pub fn manifest_strides(info: &Value, i: usize) -> Result<Option<Vec<i64>>, String> {
    let Some(s) = info["inputs"].get(i).and_then(|x| x.get("stride")) else {
        return Ok(None);
    };
    let s = s
        .as_array()
        .ok_or_else(|| format!("manifest: input {i}'s stride is not a list"))?;
    s.iter()
        .map(|x| {
            x.as_i64()
                .ok_or_else(|| "manifest: a stride that is not an integer".to_string())
        })
        .collect::<Result<_, _>>()
        .map(Some)
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

/// nvFuser's side of one golden case.
pub struct Case {
    /// In the fusion's input order, tensors in nvFuser's layouts.
    pub inputs: Vec<Arg>,
    /// What `fd.execute` returned, in order.
    pub outputs: Vec<Tensor>,
    /// (input position, its value after the run) for each input an alias
    /// output (`fd.add_output(out, alias_input)`) wrote into.
    pub post_inputs: Vec<(usize, Tensor)>,
}

impl Case {
    /// Reads case `case` of `dir` (`CASE.safetensors`) as its manifest entry
    /// `info` describes it: every input is a scalar or a tensor with strides.
    pub fn read(dir: &Path, case: &str, info: &Value) -> Result<Case, String> {
        let file = DataFile::read_with(
            &dir.join(format!("{case}.safetensors")),
            Some(info.clone()),
        )?;
        let n_in = info["inputs"]
            .as_array()
            .ok_or("manifest: no inputs list")?
            .len();
        let mut inputs = Vec::with_capacity(n_in);
        for i in 0..n_in {
            if let Some(s) = file.scalar(i)? {
                inputs.push(Arg::Scalar(s));
                continue;
            }
            let t = file.load(&format!("in{i}"))?;
            let strides = file
                .strides(i)?
                .ok_or_else(|| format!("manifest: input {i} has no strides"))?;
            inputs.push(Arg::Tensor(t.relaid(&strides).map_err(|e| e.to_string())?));
        }
        let n_out = info["outputs"]
            .as_array()
            .ok_or("manifest: no outputs list")?
            .len();
        let outputs = (0..n_out)
            .map(|k| file.load(&format!("out{k}")))
            .collect::<Result<_, _>>()?;
        let mut post_inputs = Vec::new();
        for i in info["post_inputs"].as_array().into_iter().flatten() {
            let i = i
                .as_u64()
                .ok_or("manifest: a post_inputs entry that is not an index")?
                as usize;
            if i >= n_in {
                return Err(format!(
                    "manifest: post_inputs names input {i}, which is not there"
                ));
            }
            post_inputs.push((i, file.load(&format!("post_in{i}"))?));
        }
        Ok(Case {
            inputs,
            outputs,
            post_inputs,
        })
    }
}
