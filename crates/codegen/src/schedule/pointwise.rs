//! `pointwise` in the registry: any elementwise outputs of one shape, a
//! vector of innermost elements per thread. Fits every elementwise
//! candidate, so it comes last: more specific schedules go before it.

use super::{Candidate, Reason, Schedule, Work};
use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::Kernel;

pub struct Pointwise;

impl Schedule for Pointwise {
    fn name(&self) -> &'static str {
        "pointwise"
    }

    fn takes(&self, work: &Work) -> bool {
        matches!(work, Work::Elementwise { .. })
    }

    fn fits(&self, c: &Candidate, _cx: &Context, dev: &Device) -> Result<Reason, Reason> {
        let Work::Elementwise { shape, outputs } = &c.work else {
            return Err("has reductions".into());
        };
        Ok(format!(
            "{} elementwise over {shape:?} ({} elements): a vector of innermost elements per thread, blocks of {}",
            super::count(outputs.len(), "output"),
            shape.iter().product::<usize>(),
            dev.pointwise_block
        ))
    }

    fn build(
        &self,
        c: &Candidate,
        dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError> {
        let Work::Elementwise { shape, outputs } = &c.work else {
            return Err(CodegenError::NoFit(format!(
                "pointwise: {} has reductions",
                c.name
            )));
        };
        out.push(crate::pointwise::build(cx, &c.name, shape, outputs, (dev.pointwise_block, unroll(c, shape, dev)))?);
        Ok(())
    }
}

/// Vectors per thread: the knob's when set; else two for kernels of at least
/// 16M elements reading two or more inputs of that size, all of 16-bit types
/// (H200, bf16: SiLU-mul and GELU backward 2-5% faster at 2048x11008 and
/// 32768x4096; at 2048x4096 and below, and with one large input, one vector
/// was as fast or faster). A 32-bit input keeps one: over 28 SiLU-mul, GELU
/// and SiLU-mul backward fusions of 16M-134M elements, f32 was 0.5-2.7%
/// faster with one vector in every case, row- and column-major and with a
/// broadcast input (round X), while bf16 went both ways (-3.7% to +4.8%).
/// An input broadcast over the rows counts at its logical size: with two
/// vectors bf16 SiLU-mul and GELU backward with a broadcast input were 2-5%
/// faster (round W).
fn unroll(c: &Candidate, shape: &[usize], dev: &Device) -> u32 {
    if dev.pointwise_unroll > 0 {
        return dev.pointwise_unroll;
    }
    let n: usize = shape.iter().product();
    let large: Vec<_> = c
        .f
        .inputs
        .iter()
        .map(|&i| c.f.value(i))
        .filter(|v| v.is_tensor() && v.numel() == n)
        .collect();
    if n >= 16 << 20 && large.len() >= 2 && large.iter().all(|v| v.dtype.size_bytes() <= 2) {
        2
    } else {
        1
    }
}
