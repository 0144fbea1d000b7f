//! A Python callable as the harness measures it: a call that launches
//! whatever it launches on any stream of the process's CUDA context, named by
//! what it is, so that two different callables are never "the same definition".

use fusebench_harness::{HarnessError, Launch, Subject};
use fusebench_measure::InputLayout;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

pub struct Callable<'a, 'py> {
    pub func: &'a Bound<'py, PyAny>,
    pub args: &'a Bound<'py, PyTuple>,
    pub id: fusebench_measure::Subject,
    pub bytes: Option<u64>,
}

impl Subject for Callable<'_, '_> {
    fn identity(&self) -> fusebench_measure::Subject {
        self.id.clone()
    }

    fn launches(&self) -> Option<Vec<Launch>> {
        None
    }

    fn call(&self) -> Result<(), HarnessError> {
        self.func
            .call1(self.args.clone())
            .map(|_| ())
            .map_err(|e| HarnessError::Subject(Box::new(e)))
    }

    fn bytes(&self) -> Option<(u64, String)> {
        self.bytes.map(|b| (b, "given by the caller".to_string()))
    }
}

/// `module.qualname` of a callable (a bound method's owner class included in
/// its qualname), or its type's name.
pub fn qualified_name(func: &Bound<'_, PyAny>) -> String {
    let get = |attr: &str| func.getattr(attr).and_then(|v| v.extract::<String>()).ok();
    let module = get("__module__").unwrap_or_default();
    let name = get("__qualname__")
        .or_else(|| get("__name__"))
        .or_else(|| func.get_type().qualname().ok().map(|q| q.to_string()))
        .unwrap_or_else(|| "callable".into());
    if module.is_empty() || module == "builtins" {
        name
    } else {
        format!("{module}.{name}")
    }
}

/// The definition hash of a callable's records (see `definition_text`).
pub fn definition_hash(func: &Bound<'_, PyAny>, definition: Option<&str>) -> String {
    fusebench_harness::fingerprint::hash(&definition_text(func, definition))
}

/// What identifies a callable's work, as text to hash: its qualified name,
/// where its code is defined and the code itself, and for a bound method the
/// object it is bound to (its `repr`, unless that only names an address, in
/// which case the object's identity in this process: never the same as
/// another object's). `definition`, when the caller gives one, replaces all
/// of it.
fn definition_text(func: &Bound<'_, PyAny>, definition: Option<&str>) -> String {
    if let Some(d) = definition {
        return format!("given: {d}");
    }
    let mut text = format!("python {}", qualified_name(func));
    let code = func
        .getattr("__code__")
        .or_else(|_| func.getattr("__func__").and_then(|f| f.getattr("__code__")));
    if let Ok(code) = code {
        let attr = |a: &str| code.getattr(a).and_then(|v| v.str()).map(|s| s.to_string());
        if let (Ok(file), Ok(line)) = (attr("co_filename"), attr("co_firstlineno")) {
            text.push_str(&format!(" at {file}:{line}"));
        }
        if let Ok(bytes) = code.getattr("co_code").and_then(|b| b.extract::<Vec<u8>>()) {
            text.push_str(&format!(
                " code {}",
                fusebench_harness::fingerprint::hash_bytes(&bytes)
            ));
        }
    }
    if let Ok(owner) = func.getattr("__self__") {
        if !owner.is_instance_of::<pyo3::types::PyModule>() {
            let repr = owner.repr().map(|r| r.to_string()).unwrap_or_default();
            if repr.is_empty() || repr.contains(" at 0x") {
                text.push_str(&format!(" bound to object {:#x}", owner.as_ptr() as usize));
            } else {
                text.push_str(&format!(" bound to {repr}"));
            }
        }
    }
    text
}

/// Tensor-like arguments (anything with `data_ptr`, `shape`, `stride`,
/// `dtype`), also inside lists and tuples one level down.
pub fn layouts(args: &Bound<'_, PyTuple>) -> Vec<InputLayout> {
    fn one(x: &Bound<'_, PyAny>, out: &mut Vec<InputLayout>) {
        let get = || -> PyResult<InputLayout> {
            let ptr: u64 = x.call_method0("data_ptr")?.extract()?;
            let shape: Vec<usize> = x.getattr("shape")?.extract()?;
            let strides: Vec<i64> = x.call_method0("stride")?.extract()?;
            let dtype: String = x.getattr("dtype")?.str()?.extract()?;
            Ok(InputLayout {
                dtype: dtype.trim_start_matches("torch.").to_string(),
                shape,
                strides,
                byte_offset: (ptr % 256) as usize,
            })
        };
        if let Ok(l) = get() {
            out.push(l);
        }
    }
    let mut out = Vec::new();
    for a in args.iter() {
        if a.is_instance_of::<PyList>() || a.is_instance_of::<PyTuple>() {
            if let Ok(it) = a.try_iter() {
                for x in it.flatten() {
                    one(&x, &mut out);
                }
            }
        } else {
            one(&a, &mut out);
        }
    }
    out
}
