//! CUDA events: an event before a subject's first kernel and after each of
//! its kernels; the sample is the window from the first to the last. It adds
//! the launch processing and the gaps between kernels (about 2 us per kernel
//! on an H200), and cannot time a call on streams the harness does not own.

use super::{between, window, Method, Step, Times};
use crate::HarnessError;

pub struct Events;

impl Method for Events {
    fn kind(&self) -> fusebench_measure::Method {
        fusebench_measure::Method::CudaEvents
    }

    fn times_calls(&self) -> bool {
        false
    }

    fn collect(&self, step: &Step) -> Result<Vec<Times>, HarnessError> {
        step.expected
            .iter()
            .zip(step.events)
            .map(|(expected, events)| {
                let launches = expected.clone().ok_or_else(|| {
                    HarnessError::Usage(
                        "CUDA events time only kernels launched on fusebench's stream; use CUPTI"
                            .into(),
                    )
                })?;
                Ok(Times {
                    launches,
                    kernels_us: between(events)?,
                    time_us: window(events)?,
                    events_us: None,
                    facts: Vec::new(),
                })
            })
            .collect()
    }
}
