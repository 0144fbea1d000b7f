//! `outer` in the registry: a stored reduction over dims other than the
//! innermost, a thread per result and the reduced extent split over blocks.

use super::{Candidate, Reason, Schedule, Work};
use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::Kernel;

pub struct Outer;

impl Schedule for Outer {
    fn name(&self) -> &'static str {
        "outer"
    }

    fn takes(&self, work: &Work) -> bool {
        matches!(work, Work::Stored { .. })
    }

    fn fits(&self, c: &Candidate, cx: &Context, _dev: &Device) -> Result<Reason, Reason> {
        let Ok((i, _)) = c.stored(self.name()) else {
            return Err("not a stored reduction".into());
        };
        let red = &c.reds[i];
        let xs = c.f.value(red.x).shape.clone().unwrap_or_default();
        // Logically inner but laid out with a kept dim fastest (column-major):
        // a thread per result reads coalesced.
        if red.is_inner(c.f) && c.reduces_fastest(cx, i) != Some(false) {
            return Err(format!(
                "reduces the innermost dims {:?} of {xs:?}: a thread per result would read across rows",
                red.dims
            ));
        }
        let results = c.f.value(red.outputs[0]).numel();
        Ok(format!(
            "reduces dims {:?} of {xs:?}: a thread per result ({results} results), the {} reduced elements split over blocks",
            red.dims,
            red.count(c.f)
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
        crate::outer::build(cx, &c.name, &c.reds[red], &c.siblings(), epilogue, out)
    }
}
