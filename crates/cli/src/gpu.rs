//! The GPU side of `check`: run on the device, compare with the CPU reference.

use fusebench_engine::Engine;
use fusebench_ir::Fusion;
use fusebench_reference::{compare::compare, compare::Comparison, Arg, Tensor};
use serde::Serialize;

#[derive(Serialize, Default)]
pub struct GpuCheck {
    pub kernels: usize,
    pub compile_ms: f64,
    pub from_cache: bool,
    pub outputs: Vec<Comparison>,
    pub ok: bool,
}

/// Runs `f` on the GPU (outputs poisoned first) and compares every output with `cpu`.
pub fn check(
    engine: &Engine,
    f: &Fusion,
    inputs: &[Arg],
    cpu: &[Tensor],
) -> anyhow::Result<GpuCheck> {
    let p = engine.prepare(f, inputs)?;
    p.run()?;
    let outs = p.outputs(f, inputs)?;
    let outputs: Vec<Comparison> = outs.iter().zip(cpu).map(|(g, c)| compare(g, c)).collect();
    Ok(GpuCheck {
        kernels: p.kernels.len(),
        compile_ms: p.module.compile_ms(),
        from_cache: p.module.from_cache(),
        ok: outputs.iter().all(|c| c.ok),
        outputs,
    })
}
