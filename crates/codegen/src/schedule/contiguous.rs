//! `contiguous` in the registry: a stored reduction over dims that hold the
//! dim fastest in memory (not the logically innermost), with enough results
//! to give each a group of lanes; before `grid`, which takes the rest.

use super::{Candidate, Reason, Schedule, Work};
use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::Kernel;

pub struct Contiguous;

/// Results per multiprocessor below which a group of lanes per result leaves
/// the GPU idle and `grid` splits each result over blocks instead.
const RESULTS_PER_SM: usize = 4;

impl Schedule for Contiguous {
    fn name(&self) -> &'static str {
        "contiguous"
    }

    fn takes(&self, work: &Work) -> bool {
        matches!(work, Work::Stored { .. })
    }

    fn fits(&self, c: &Candidate, cx: &Context, dev: &Device) -> Result<Reason, Reason> {
        let Ok((i, _)) = c.stored(self.name()) else {
            return Err("not a stored reduction".into());
        };
        let red = &c.reds[i];
        let min = dev.sm_count as usize * RESULTS_PER_SM;
        crate::contiguous::fits(c.f, &cx.layouts, red, min)?;
        let xs = c.f.value(red.x).shape.clone().unwrap_or_default();
        Ok(format!(
            "reduces dims {:?} of {xs:?}, which hold the dim fastest in memory, to {} results (at least {min}): a group of lanes per result, one kernel",
            red.dims,
            c.f.value(red.outputs[0]).numel()
        ))
    }

    fn build(
        &self,
        c: &Candidate,
        _dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError> {
        let (red, epilogue) = c.stored(self.name()).map_err(CodegenError::NoFit)?;
        let full = match &c.work {
            Work::Stored { full, .. } => full.as_slice(),
            _ => &[],
        };
        crate::contiguous::build(cx, &c.name, &c.reds[red], epilogue, full, out)
    }
}
