//! The GPU side of `check`: run on the device, compare with the CPU reference.

use fusebench_engine::Engine;
use fusebench_ir::Fusion;
use fusebench_reference::{compare::compare_bounded, compare::Comparison, Arg, Tensor};
use serde::Serialize;

#[derive(Serialize, Default)]
pub struct GpuCheck {
    pub kernels: usize,
    pub compile_ms: f64,
    pub from_cache: bool,
    pub outputs: Vec<Comparison>,
    pub ok: bool,
    /// The outputs of the last run (for `check --data`).
    #[serde(skip)]
    pub last: Vec<Tensor>,
}

/// Runs `f` on the GPU once per poison (outputs filled with 0xFF bytes, then
/// with zero bytes, so that no unwritten element can pass) and compares every
/// output with `cpu`; an output is reported from the first fill it fails under.
pub fn check(
    engine: &Engine,
    f: &Fusion,
    inputs: &[Arg],
    cpu: &[Tensor],
) -> anyhow::Result<GpuCheck> {
    let p = engine.prepare(f, inputs)?;
    // Float sums may differ from the exact sum by their accumulation's rounding.
    let slack = fusebench_reference::sum_bound::sum_bounds(f, inputs);
    let mut outputs: Vec<Comparison> = Vec::new();
    let mut last = Vec::new();
    for byte in fusebench_engine::POISONS {
        p.run_poisoned(byte)?;
        let outs = p.outputs(f, inputs)?;
        let these: Vec<Comparison> = outs
            .iter()
            .zip(cpu)
            .zip(&slack)
            .map(|((g, c), s)| compare_bounded(g, c, s.as_ref()))
            .collect();
        if outputs.is_empty() {
            outputs = these;
        } else {
            for (o, t) in outputs.iter_mut().zip(these) {
                if o.ok && !t.ok {
                    *o = t;
                }
            }
        }
        last = outs;
    }
    Ok(GpuCheck {
        kernels: p.kernels.len(),
        compile_ms: p.module.compile_ms(),
        from_cache: p.module.from_cache(),
        ok: outputs.iter().all(|c| c.ok),
        outputs,
        last,
    })
}
