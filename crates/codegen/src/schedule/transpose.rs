//! `transpose` in the registry: elementwise outputs of one shape where an
//! input is read across the outputs' innermost dim (a column-major input of
//! a row-major output, an output in a stride order of its own, a written
//! permute). Goes before `pointwise`, which takes what this refuses.

use super::{Candidate, Reason, Schedule, Work};
use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::Kernel;

pub struct Transpose;

impl Schedule for Transpose {
    fn name(&self) -> &'static str {
        "transpose"
    }

    fn takes(&self, work: &Work) -> bool {
        matches!(work, Work::Elementwise { .. })
    }

    fn fits(&self, c: &Candidate, cx: &Context, _dev: &Device) -> Result<Reason, Reason> {
        let Work::Elementwise { shape, outputs } = &c.work else {
            return Err("has reductions".into());
        };
        crate::transpose::fits(cx, shape, outputs)
    }

    fn build(
        &self,
        c: &Candidate,
        _dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError> {
        let Work::Elementwise { shape, outputs } = &c.work else {
            return Err(CodegenError::NoFit(format!("transpose: {} has reductions", c.name)));
        };
        out.push(crate::transpose::build(cx, &c.name, shape, outputs)?);
        Ok(())
    }
}
