//! `fd.add_output(out, alias_input)`: the output is written into the input's
//! own device buffer, as nvFuser does, so the caller's input holds the result
//! after a run. The kernels write the output's dense buffer as usual and a
//! device-to-device copy follows the last kernel: every kernel reads the
//! input as it was given (the CPU reference's meaning; nvFuser's segments
//! may read it already updated). Refused where the input's buffer is not
//! the output's dense row-major layout, so no run is silently different.

use crate::EngineError;
use fusebench_codegen::plan::{OutputPlan, OutputSource};
use fusebench_ir::Fusion;
use fusebench_host::Arg;

/// One in-place update: fusion output `output` into tensor input `input`
/// (positions), `bytes` long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InPlace {
    pub output: usize,
    pub input: usize,
    pub bytes: usize,
}

/// The in-place updates of `f`, or why the GPU cannot make one.
pub fn plan(f: &Fusion, outputs: &[OutputPlan], inputs: &[Arg]) -> Result<Vec<InPlace>, EngineError> {
    let mut out = vec![];
    for a in &f.aliases {
        let oname = &f.value(f.outputs[a.output]).name;
        let iname = &f.value(a.input).name;
        let refuse = |why: String| {
            EngineError::Inputs(format!(
                "output {oname} updates input {iname} in place (add_output alias), which the GPU cannot do here: {why}"
            ))
        };
        let Some(input) = f.inputs.iter().position(|&i| i == a.input) else {
            return Err(refuse("it is not an input of the fusion".into()));
        };
        let Arg::Tensor(t) = &inputs[input] else {
            return Err(refuse("the input is a scalar".into()));
        };
        let o = &outputs[a.output];
        if !matches!(o.source, OutputSource::Written) {
            return Err(refuse("the output is a view, not written by a kernel".into()));
        }
        if o.dtype != t.dtype() || o.shape != t.shape() {
            return Err(refuse(format!(
                "the output is {} {:?} and the input {} {:?}",
                o.dtype,
                o.shape,
                t.dtype(),
                t.shape()
            )));
        }
        if !t.is_contiguous() || t.offset() != 0 {
            return Err(refuse(format!(
                "the input has strides {:?} and offset {}; the kernels write outputs dense row-major",
                t.strides(),
                t.offset()
            )));
        }
        out.push(InPlace {
            output: a.output,
            input,
            bytes: t.numel() * t.dtype().size_bytes(),
        });
    }
    Ok(out)
}
