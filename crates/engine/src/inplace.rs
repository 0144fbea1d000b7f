//! `fd.add_output(out, alias_input)`: the output is written into the input's
//! own device buffer, as nvFuser does, so the caller's input holds the result
//! after a run. The kernels write the output's dense buffer as usual; then
//! a dense row-major input gets that buffer by a device-to-device copy, and
//! a strided one (transposed, sliced) gets each element at its own place by
//! the plan's last kernel (codegen's `alias_write`), the storage between its
//! elements untouched. Every kernel reads the input as it was given (the CPU
//! reference's meaning; nvFuser's segments may read it already updated).

use crate::EngineError;
use fusebench_codegen::plan::{OutputSource, Plan};
use fusebench_ir::Fusion;
use fusebench_host::{Arg, Tensor};

/// One in-place update: fusion output `output` into tensor input `input`
/// (positions), `bytes` long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InPlace {
    pub output: usize,
    pub input: usize,
    pub bytes: usize,
    /// Written by a kernel of the plan through the input's strides (no copy).
    pub by_kernel: bool,
}

/// The in-place updates of `f`, or why the GPU cannot make one.
pub fn plan(f: &Fusion, p: &Plan, inputs: &[Arg]) -> Result<Vec<InPlace>, EngineError> {
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
        let o = &p.outputs[a.output];
        if !matches!(o.source, OutputSource::Written) {
            return Err(refuse(
                "the output is a view, not written by a kernel".into(),
            ));
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
        let by_kernel = p.alias_writes.contains(&a.output);
        if o.strides.is_some() {
            return Err(refuse("the output has a stride order of its own".into()));
        }
        if !by_kernel && (!t.is_contiguous() || t.offset() != 0) {
            return Err(refuse(format!(
                "the input has strides {:?} and offset {} and the plan has no kernel writing through them",
                t.strides(),
                t.offset()
            )));
        }
        out.push(InPlace {
            output: a.output,
            input,
            bytes: t.numel() * t.dtype().size_bytes(),
            by_kernel,
        });
    }
    Ok(out)
}

/// The first storage element of `t`'s buffer outside its own elements whose
/// bytes differ between `given` and `now` (both the whole buffer), if any.
pub fn touched_gap(t: &Tensor, given: &[u8], now: &[u8]) -> Option<usize> {
    let size = t.dtype().size_bytes();
    let n = t.buffer().len();
    let mut mine = vec![false; n];
    let mut idx = vec![0usize; t.rank()];
    for _ in 0..t.numel() {
        if let Some(m) = mine.get_mut(t.storage_index(&idx)) {
            *m = true;
        }
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < t.shape()[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    (0..n).find(|&i| {
        !mine[i] && given.get(i * size..(i + 1) * size) != now.get(i * size..(i + 1) * size)
    })
}
