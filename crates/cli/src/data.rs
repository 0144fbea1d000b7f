//! `fusebench check SCRIPT --data FILE.safetensors`: the fusion run on the
//! file's inputs (`in<i>`, by input position; scalars from the script unless
//! the file has them) and every output compared with the file's (`out<k>`
//! for the outputs nvFuser's `execute` returns, `post_in<i>` for an input an
//! alias output updated in place), on the CPU reference and, with
//! `--device gpu`, on the GPU.

use fusebench_ir::{DType, Fusion, Literal, ValueDef};
use fusebench_reference::compare::{compare_within, Comparison, Dtypes, Tolerance};
use fusebench_reference::golden::DataFile;
use fusebench_reference::{Arg, Tensor};
use serde::Serialize;
use std::path::Path;

/// One tensor of the file compared with the fusion's.
#[derive(Serialize)]
pub struct DataRow {
    /// `out0`, `post_in1`, ...
    pub tensor: String,
    /// The fusion's value it is compared with.
    pub value: String,
    pub dtype: String,
    pub shape: Vec<usize>,
    pub cpu: Comparison,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Comparison>,
}

#[derive(Serialize)]
pub struct DataCheck {
    pub file: String,
    pub rows: Vec<DataRow>,
    pub ok: bool,
}

/// The shapes of the file's `in<i>` for binding symbolic extents.
pub fn given_shapes(file: &DataFile) -> Vec<Option<Vec<usize>>> {
    let n = file
        .names()
        .iter()
        .filter_map(|n| n.strip_prefix("in")?.parse::<usize>().ok())
        .map(|i| i + 1)
        .max()
        .unwrap_or(0);
    (0..n).map(|i| file.shape(&format!("in{i}"))).collect()
}

/// Reads the script at `path` with symbolic extents bound from the file.
pub fn load(path: &Path, file: &DataFile) -> anyhow::Result<Fusion> {
    if path.extension().and_then(|e| e.to_str()) == Some("json") {
        return crate::files::load(path);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    fusebench_frontend::parse_script_with_shapes(&path.display().to_string(), &text, &given_shapes(file))
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The fusion's inputs from the file: each tensor input's `in<i>`, checked
/// against its definition's dtype and shape and laid out as the manifest
/// beside the file says (as ../shared/golden and the golden-ops fixtures
/// have one) or as the definition declares; scalars from the manifest, else
/// a 0-dim `in<i>`, else `script_args`.
pub fn inputs(f: &Fusion, file: &DataFile, script_args: &[Arg]) -> Result<Vec<Arg>, String> {
    let mut out = Vec::with_capacity(f.inputs.len());
    for (i, &v) in f.inputs.iter().enumerate() {
        let val = f.value(v);
        let name = format!("in{i}");
        let ValueDef::TensorInput(decl) = &val.def else {
            if let Some(s) = file.scalar(i)? {
                out.push(Arg::Scalar(s.cast(val.dtype)));
                continue;
            }
            let t = file.get(&name)?;
            out.push(match t {
                Some(t) if t.rank() == 0 => Arg::Scalar(scalar_of(&t, val.dtype)),
                Some(t) => {
                    return Err(format!(
                        "{name} has shape {:?}, but input {i} ({}) is a scalar",
                        t.shape(),
                        val.name
                    ))
                }
                None => script_args
                    .get(i)
                    .cloned()
                    .ok_or_else(|| format!("no value for scalar input {i} ({})", val.name))?,
            });
            continue;
        };
        let t = file
            .get(&name)?
            .ok_or_else(|| format!("{}: no tensor `{name}` for input {i} ({}); it has: {}", file.path, val.name, file.names().join(", ")))?;
        let shape = val.shape.clone().unwrap_or_default();
        let t = as_complex(t, val.dtype);
        if t.dtype() != val.dtype {
            return Err(format!(
                "{name} is {}, but input {i} ({}) is defined as {}",
                t.dtype().torch_name(),
                val.name,
                val.dtype.torch_name()
            ));
        }
        if t.shape() != shape.as_slice() {
            return Err(format!(
                "{name} has shape {:?}, but input {i} ({}) is defined with shape {shape:?}",
                t.shape(),
                val.name
            ));
        }
        let strides = match file.strides(i)? {
            Some(s) => s,
            None => decl.dense_strides(&shape),
        };
        out.push(Arg::Tensor(t.relaid(&strides).map_err(|e| format!("{name}: {e}"))?));
    }
    Ok(out)
}

/// nvFuser's results and fusebench's are each within their dtype's
/// tolerance of the exact one; dtypes must be equal (int32 is not int64).
fn against_file(got: &Tensor, want: &Tensor, peers: bool) -> Comparison {
    let one = Tolerance::for_dtype(want.dtype());
    let k = if peers { 2.0 } else { 1.0 };
    let tol = Tolerance {
        rtol: k * one.rtol,
        atol: k * one.atol,
    };
    compare_within(got, want, tol, Dtypes::Equal)
}

/// Compares the CPU's outputs (and the GPU's, when given; both in the order
/// of `f.outputs`) with the file's tensors.
pub fn compare(
    f: &Fusion,
    file: &DataFile,
    cpu: &[Tensor],
    gpu: Option<&[Tensor]>,
) -> Result<DataCheck, String> {
    let mut rows = Vec::new();
    let mut add = |tensor: String, o: usize, want: &Tensor| {
        let (c, g) = (&cpu[o], gpu.map(|g| &g[o]));
        rows.push(DataRow {
            value: f.value(f.outputs[o]).name.clone(),
            dtype: want.dtype().torch_name().into(),
            shape: want.shape().to_vec(),
            cpu: against_file(c, want, false),
            gpu: g.map(|g| against_file(g, want, true)),
            tensor,
        });
    };
    let visible = f.visible_outputs();
    for (k, &o) in visible.iter().enumerate() {
        let name = format!("out{k}");
        let want = file.get(&name)?.ok_or_else(|| {
            format!(
                "{}: no tensor `{name}` for output {k} ({}); it has: {}",
                file.path,
                f.value(f.outputs[o]).name,
                file.names().join(", ")
            )
        })?;
        add(name, o, &as_complex(want, f.value(f.outputs[o]).dtype));
    }
    let extra = format!("out{}", visible.len());
    if file.get(&extra)?.is_some() {
        return Err(format!(
            "{}: `{extra}` has no output to compare with: the fusion returns {} outputs",
            file.path,
            visible.len()
        ));
    }
    for a in &f.aliases {
        let pos = f.inputs.iter().position(|&i| i == a.input).unwrap_or(0);
        let name = format!("post_in{pos}");
        if let Some(want) = file.get(&name)? {
            add(name, a.output, &as_complex(want, f.value(f.outputs[a.output]).dtype));
        }
    }
    let ok = rows
        .iter()
        .all(|r| r.cpu.ok && r.gpu.as_ref().is_none_or(|g| g.ok));
    Ok(DataCheck {
        file: file.path.clone(),
        rows,
        ok,
    })
}

pub fn print(d: &DataCheck) {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    let gpu = d.rows.iter().any(|r| r.gpu.is_some());
    let mut header = vec!["data", "value", "dtype", "shape", "CPU vs data"];
    if gpu {
        header.push("GPU vs data");
    }
    t.set_header(header);
    let cell = |c: &Comparison| {
        let mut s = format!(
            "{} (max abs err {:.2e}, {} of {} outside)",
            if c.ok { "ok" } else { "MISMATCH" },
            c.max_abs_err,
            c.mismatches,
            c.elements
        );
        if let Some(p) = &c.problem {
            s.push_str(&format!(": {p}"));
        }
        if let Some((idx, got, want)) = &c.first_mismatch {
            s.push_str(&format!("; first at {idx:?}: {got} vs {want}"));
        }
        s
    };
    for r in &d.rows {
        let mut row = vec![
            r.tensor.clone(),
            r.value.clone(),
            r.dtype.clone(),
            format!("{:?}", r.shape),
            cell(&r.cpu),
        ];
        if let Some(g) = &r.gpu {
            row.push(cell(g));
        }
        t.add_row(row);
    }
    outln!("   data {}: {}", d.file, if d.ok { "every tensor matches" } else { "MISMATCH" });
    outln!("{t}");
}

/// The value of a 0-dim tensor as a scalar of `d`.
fn scalar_of(t: &Tensor, d: DType) -> Literal {
    if t.dtype().is_float() {
        Literal::Float(t.to_f64_vec()[0]).cast(d)
    } else {
        Literal::Int(t.to_i64_vec()[0]).cast(d)
    }
}

/// A complex tensor stored as its real view (parts dtype, a trailing
/// dimension of 2: how the golden files hold complex64/complex128) read back
/// as `want`; any other tensor as it is.
fn as_complex(t: Tensor, want: DType) -> Tensor {
    match (want.complex_part(), t.shape().split_last()) {
        (Some(p), Some((2, shape))) if t.dtype() == p => {
            Tensor::from_le_bytes(want, shape, &t.to_le_bytes()).unwrap_or(t)
        }
        _ => t,
    }
}
