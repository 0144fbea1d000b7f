//! Cache policies: what is in L2 (and the SMs' caches) when a sample starts.
//! Each policy is one file here and one arm in [`of`]; the policy decides how
//! many placements of a subject's inputs a run cycles through, what runs
//! before each step and before each subject, and what the record says of it.

mod cold;
mod in_program;
mod rotate;
mod warm;

pub use rotate::rotation_copies;

use crate::subject::Subject;
use crate::HarnessError;
use fusebench_measure::CachePolicy;
use fusebench_runtime::Gpu;

pub trait Policy: Sync {
    fn kind(&self) -> CachePolicy;
    /// Makes the placements of `subject`'s inputs a run cycles through; returns how many.
    fn placements(&self, gpu: &Gpu, subject: &dyn Subject) -> Result<usize, HarnessError> {
        let _ = (gpu, subject);
        Ok(1)
    }
    /// Before each step (every subject once), outside any subject's time.
    fn before_step(&self, gpu: &Gpu) -> Result<(), HarnessError> {
        let _ = gpu;
        Ok(())
    }
    /// Before `subject` in step `step` (counted from 0, warm-up included).
    fn before_subject(
        &self,
        gpu: &Gpu,
        subject: &dyn Subject,
        step: usize,
    ) -> Result<(), HarnessError> {
        let _ = (gpu, subject, step);
        Ok(())
    }
    /// What runs before a sample, for the record, given the placements made.
    fn setup(&self, gpu: &Gpu, placements: usize) -> Result<Option<String>, HarnessError> {
        let _ = (gpu, placements);
        Ok(None)
    }
}

/// The policy of a kind; a cold one flushes by `flush` (FUSEBENCH_FLUSH's where `None`).
pub fn of(kind: CachePolicy, flush: Option<fusebench_knobs::Flush>) -> &'static dyn Policy {
    use fusebench_knobs::Flush;
    match kind {
        CachePolicy::Cold => match flush {
            None => &cold::Cold(None),
            Some(Flush::Read) => &cold::Cold(Some(Flush::Read)),
            Some(Flush::Write) => &cold::Cold(Some(Flush::Write)),
        },
        CachePolicy::Warm => &warm::Warm,
        CachePolicy::Rotate => &rotate::Rotate,
        CachePolicy::InProgram => &in_program::InProgram,
    }
}

/// The policies a record's siblings are measured under: the subject's time moves
/// between cold and warm, which is what `explain` splits a difference by.
pub fn siblings(kind: CachePolicy) -> &'static [CachePolicy] {
    match kind {
        CachePolicy::Cold => &[CachePolicy::Warm],
        CachePolicy::Warm | CachePolicy::Rotate => &[CachePolicy::Cold],
        // In a program the other fusions are the context: its cold run is the sibling.
        CachePolicy::InProgram => &[],
    }
}

/// About 100 us at the H200's 1980 MHz, longer at idle clocks: a kernel that keeps the
/// GPU busy, touching no memory, while the host enqueues the timed launches, so launch
/// latency stays out of an events window (as with nvbench's blocking kernel). Measured
/// on the H200: 25 us covered a plain launch but not one under CUPTI, whose events
/// window then read 13 us more than the kernel and its launch gap.
pub(crate) fn spin(gpu: &Gpu) -> Result<(), HarnessError> {
    Ok(gpu.spin(200_000)?)
}
