//! `grid` in the registry: a stored reduction with fewer results than half
//! the multiprocessors, each over many elements, split over blocks.

use super::{Candidate, Reason, Schedule, Work};
use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::Kernel;

pub struct Grid;

impl Schedule for Grid {
    fn name(&self) -> &'static str {
        "grid"
    }

    fn takes(&self, work: &Work) -> bool {
        matches!(work, Work::Stored { .. })
    }

    fn fits(&self, c: &Candidate, cx: &Context, dev: &Device) -> Result<Reason, Reason> {
        let Ok((i, _)) = c.stored(self.name()) else {
            return Err("not a stored reduction".into());
        };
        let red = &c.reds[i];
        if crate::grid::down_columns(c.f, &cx.layouts, red) {
            let xs = c.f.value(red.x).shape.clone().unwrap_or_default();
            return Ok(format!(
                "reduces dims {:?} of {xs:?}, which hold the dim fastest in memory: blocks read each of the {} results' elements coalesced",
                red.dims,
                c.f.value(red.outputs[0]).numel()
            ));
        }
        let results = c.f.value(red.outputs[0]).numel();
        let each = red.count(c.f);
        let half = (dev.sm_count as usize / 2).max(1);
        let min = crate::grid::MIN_COUNT;
        if crate::grid::wanted(c.f, red, dev.sm_count) {
            Ok(format!(
                "{results} results (fewer than {half}, half of {} SMs), each over {each} elements (at least {min}): blocks split each result",
                dev.sm_count
            ))
        } else {
            Err(format!(
                "{results} results of {each} elements each: splitting a result over blocks needs fewer than {half} results of at least {min} elements"
            ))
        }
    }

    fn build(
        &self,
        c: &Candidate,
        _dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError> {
        let (red, epilogue) = c.stored(self.name()).map_err(CodegenError::NoFit)?;
        crate::grid::build(cx, &c.name, &c.reds[red], &c.siblings(), epilogue, out)
    }
}
