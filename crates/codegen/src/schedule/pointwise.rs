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
        out.push(crate::pointwise::build(cx, &c.name, shape, outputs, (dev.pointwise_block, dev.pointwise_unroll))?);
        Ok(())
    }
}
