//! Reading recorded tensors: a safetensors file of a fusion's inputs
//! (`in<i>`, by input position), outputs (`out<k>`) and inputs after the run
//! (`post_in<i>`, where an alias output updated one in place), stored
//! contiguous in logical order, as ../shared/golden and nvFuser's golden-ops
//! cases hold them: what `fusebench check --data` reads. The golden tests
//! still read cases through tests/support/golden_case.rs (dtypes by the
//! manifest's names, complex tensors, scalar inputs); the two are to become one.

use crate::Tensor;
use fusebench_ir::DType;
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

/// A safetensors file read into memory.
pub struct DataFile {
    bytes: Vec<u8>,
    pub path: String,
}

/// The fusebench dtype of a safetensors dtype.
pub fn dtype_of(d: Dtype) -> Result<DType, String> {
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

impl DataFile {
    pub fn read(path: &Path) -> Result<DataFile, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let f = DataFile {
            bytes,
            path: path.display().to_string(),
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

    /// The shape of tensor `name`, if the file has it.
    pub fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.st().ok()?.tensor(name).ok().map(|v| v.shape().to_vec())
    }

    /// Tensor `name`, or `None` if the file has no tensor of that name.
    pub fn get(&self, name: &str) -> Result<Option<Tensor>, String> {
        let st = self.st()?;
        let Ok(v) = st.tensor(name) else {
            return Ok(None);
        };
        let d = dtype_of(v.dtype()).map_err(|e| format!("{}: {name}: {e}", self.path))?;
        Tensor::from_le_bytes(d, v.shape(), v.data())
            .map(Some)
            .map_err(|e| format!("{}: {name}: {e}", self.path))
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
}

/// The strides of input `i` in a manifest entry (`inputs[i].stride`), if given.
pub fn manifest_strides(info: &serde_json::Value, i: usize) -> Result<Option<Vec<i64>>, String> {
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
