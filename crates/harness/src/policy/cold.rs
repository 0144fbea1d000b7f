//! Cold: before every sample the SMs' instruction caches are evicted and L2 is
//! flushed (by a write or a read, FUSEBENCH_FLUSH), and the inputs cycle over
//! FUSEBENCH_COLD_SETS placements so that a median is not one allocation's luck
//! (on the H200 one placement of a fusion's inputs ran 2-3% slower than another).

use super::Policy;
use crate::subject::Subject;
use crate::HarnessError;
use fusebench_measure::CachePolicy;
use fusebench_knobs::Flush;
use fusebench_runtime::Gpu;

/// The flush: FUSEBENCH_FLUSH's where `None` (`Options::flush`).
pub struct Cold(pub Option<Flush>);

impl Policy for Cold {
    fn kind(&self) -> CachePolicy {
        CachePolicy::Cold
    }

    fn placements(&self, _: &Gpu, subject: &dyn Subject) -> Result<usize, HarnessError> {
        subject.make_placements(fusebench_knobs::get()?.cold_sets)
    }

    fn before_subject(
        &self,
        gpu: &Gpu,
        subject: &dyn Subject,
        step: usize,
    ) -> Result<(), HarnessError> {
        subject.use_placement(step);
        gpu.flush_l2_as(self.0)?;
        // FUSEBENCH_COLD_WAIT: the GPU idle between the flush and the
        // measured kernels, as it is before a Python callable's sample.
        if fusebench_knobs::get()?.cold_wait {
            gpu.synchronize()?;
        }
        Ok(())
    }

    fn setup(&self, gpu: &Gpu, placements: usize) -> Result<Option<String>, HarnessError> {
        let s = if placements == 1 { "" } else { "s" };
        let wait = if fusebench_knobs::get()?.cold_wait { ", the host waiting for it before the kernels" } else { "" };
        Ok(Some(format!(
            "{}{wait}, inputs in {placements} placement{s}",
            gpu.flush_description_as(self.0)?
        )))
    }
}
