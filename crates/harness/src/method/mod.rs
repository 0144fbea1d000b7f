//! How a sample is timed. Each method is one file here and one arm in
//! [`start`]. Events are recorded around every kernel of a subject that
//! launches on the harness's stream whatever the method, so a CUPTI sample
//! also carries what CUDA events would have said (`events_us`), which is how
//! `explain` knows the events overhead of those very kernels.

mod cupti;
mod events;

pub(crate) use cupti::CuptiMethod;
pub(crate) use events::Events;

use crate::subject::Launch;
use crate::HarnessError;
use cudarc::driver::CudaEvent;

/// One subject's part of a step, as the method read it.
pub struct Times {
    /// The kernels in the order they ran.
    pub launches: Vec<Launch>,
    pub kernels_us: Vec<f64>,
    /// The sample: what this method calls the subject's time in the step.
    pub time_us: f64,
    /// The events window around the subject's launches, when the method is not events.
    pub events_us: Option<f64>,
    /// Per kernel, what CUPTI recorded of its launch (registers, shared
    /// memory); empty when the method does not see launches.
    pub facts: Vec<crate::KernelFacts>,
}

/// What the harness hands a method after a step: per subject, its launches
/// when known in advance and the events around its kernels (empty for a call).
pub struct Step<'a> {
    pub expected: &'a [Option<Vec<Launch>>],
    pub events: &'a [Vec<CudaEvent>],
}

pub trait Method: Send {
    fn kind(&self) -> fusebench_measure::Method;
    /// Whether it can time a call that launches on streams the harness does not own.
    fn times_calls(&self) -> bool;
    /// Forgets whatever it holds of work before now (the GPU is idle).
    fn discard(&self) -> Result<(), HarnessError> {
        Ok(())
    }
    /// The step's times per subject, after checking that they are complete.
    fn collect(&self, step: &Step) -> Result<Vec<Times>, HarnessError>;
    /// Stops whatever it does to the process while another method times (CUPTI's tracing).
    fn pause(&self) -> Result<(), HarnessError> {
        Ok(())
    }
    fn resume(&self) -> Result<(), HarnessError> {
        Ok(())
    }
}

/// Which method a command asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// CUPTI where it starts, else CUDA events (with a note saying why).
    Auto,
    Cupti,
    Events,
}

/// The method asked for, and a note when `Auto` fell back to events.
pub fn start(choice: Choice) -> Result<(Box<dyn Method>, Option<String>), HarnessError> {
    match choice {
        Choice::Events => Ok((Box::new(events::Events), None)),
        Choice::Cupti => Ok((Box::new(cupti::CuptiMethod::start()?), None)),
        Choice::Auto => match cupti::CuptiMethod::start() {
            Ok(m) => Ok((Box::new(m), None)),
            Err(e) => Ok((
                Box::new(events::Events),
                Some(format!(
                    "timing with CUDA events, CUPTI is unavailable: {e}"
                )),
            )),
        },
    }
}

/// Microseconds between each event and the next: one time per kernel bracketed.
pub(crate) fn between(events: &[CudaEvent]) -> Result<Vec<f64>, HarnessError> {
    events
        .windows(2)
        .map(|w| {
            w[0].elapsed_ms(&w[1])
                .map(|ms| ms as f64 * 1e3)
                .map_err(|e| HarnessError::driver("cuEventElapsedTime", e))
        })
        .collect()
}

/// The window from the first event to the last.
pub(crate) fn window(events: &[CudaEvent]) -> Result<f64, HarnessError> {
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Err(HarnessError::Usage("no events around the subject".into()));
    };
    first
        .elapsed_ms(last)
        .map(|ms| ms as f64 * 1e3)
        .map_err(|e| HarnessError::driver("cuEventElapsedTime", e))
}
