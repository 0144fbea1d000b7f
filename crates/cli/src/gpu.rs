//! The GPU side of `check`: run on the device, compare with the CPU reference.

use fusebench_engine::Engine;
use fusebench_ir::Fusion;
use fusebench_reference::{compare::compare_with_slack, compare::Comparison, Arg, Tensor};
use serde::Serialize;

#[derive(Serialize, Default)]
pub struct GpuCheck {
    pub kernels: usize,
    pub compile_ms: f64,
    pub from_cache: bool,
    pub outputs: Vec<Comparison>,
    pub ok: bool,
    /// Per alias output (its position): the input it updated in place, read
    /// back from the device, against the CPU reference's value of the output.
    pub updated_inputs: Vec<(usize, Comparison)>,
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
    let mut updated: Vec<(usize, Comparison)> = Vec::new();
    for byte in fusebench_engine::POISONS {
        // An in-place update changed the inputs: each run starts from the given ones.
        p.reset_inputs(inputs)?;
        p.run_poisoned(byte)?;
        for (o, t) in p.updated_inputs(inputs)? {
            let c = compare_with_slack(&t, &cpu[o], slack[o].as_ref());
            match updated.iter_mut().find(|(k, _)| *k == o) {
                Some((_, prev)) if prev.ok && !c.ok => *prev = c,
                Some(_) => {}
                None => updated.push((o, c)),
            }
        }
        let outs = p.outputs(f, inputs)?;
        let these: Vec<Comparison> = outs
            .iter()
            .zip(cpu)
            .zip(&slack)
            .map(|((g, c), s)| compare_with_slack(g, c, s.as_ref()))
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
        ok: outputs.iter().all(|c| c.ok) && updated.iter().all(|(_, c)| c.ok),
        outputs,
        updated_inputs: updated,
        last,
    })
}
