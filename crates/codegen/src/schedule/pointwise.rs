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
/// 16M elements reading two or more inputs of that size (H200, bf16: SiLU-mul
/// and GELU backward 2-5% faster at 2048x11008 and 32768x4096; at 2048x4096
/// and below, and with one large input, one vector was as fast or faster).
fn unroll(c: &Candidate, shape: &[usize], dev: &Device) -> u32 {
    if dev.pointwise_unroll > 0 {
        return dev.pointwise_unroll;
    }
    let n: usize = shape.iter().product();
    let large = c.f.inputs.iter().filter(|&&i| c.f.value(i).is_tensor() && c.f.value(i).numel() == n).count();
    if n >= 16 << 20 && large >= 2 {
        2
    } else {
        1
    }
}
