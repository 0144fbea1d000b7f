//! CUPTI kernel records: a sample is the sum of the subject's kernel
//! durations (gaps between kernels, the flush and the harness's own kernels
//! excluded), after checking that the records are exactly the launches
//! (`complete`). One CUPTI session per process.

use super::{window, Method, Step, Times};
use crate::complete::check;
use crate::HarnessError;
use fusebench_runtime::Cupti;

pub struct CuptiMethod(Cupti);

impl CuptiMethod {
    pub fn start() -> Result<CuptiMethod, HarnessError> {
        Ok(CuptiMethod(Cupti::start()?))
    }
}

impl Method for CuptiMethod {
    fn kind(&self) -> fusebench_measure::Method {
        fusebench_measure::Method::Cupti
    }

    fn times_calls(&self) -> bool {
        true
    }

    fn discard(&self) -> Result<(), HarnessError> {
        self.0.take()?;
        Ok(())
    }

    fn pause(&self) -> Result<(), HarnessError> {
        Ok(self.0.pause()?)
    }

    fn resume(&self) -> Result<(), HarnessError> {
        Ok(self.0.resume()?)
    }

    fn collect(&self, step: &Step) -> Result<Vec<Times>, HarnessError> {
        let records = self.0.take()?;
        // With every launch known, the whole step is checked at once, then split.
        let known: Option<Vec<_>> = step.expected.iter().cloned().collect();
        let all = check(&records, known.as_ref().map(|v| v.concat()).as_deref())
            .map_err(HarnessError::Incomplete)?;
        if known.is_none() {
            // A call: the harness measures it on its own, so the step is its alone.
            return Ok(vec![times(all, None)]);
        }
        let mut it = all.into_iter();
        step.expected
            .iter()
            .zip(step.events)
            .map(|(expected, events)| {
                let n = expected.as_ref().map_or(0, |e| e.len());
                let mine: Vec<_> = it.by_ref().take(n).collect();
                let events_us = if events.is_empty() { None } else { Some(window(events)?) };
                Ok(times(mine, events_us))
            })
            .collect()
    }
}

fn times(kernels: Vec<(crate::subject::Launch, f64, crate::KernelFacts)>, events_us: Option<f64>) -> Times {
    let mut t = Times {
        time_us: 0.0,
        launches: Vec::with_capacity(kernels.len()),
        kernels_us: Vec::with_capacity(kernels.len()),
        events_us,
        facts: Vec::with_capacity(kernels.len()),
    };
    for (l, us, facts) in kernels {
        t.launches.push(l);
        t.kernels_us.push(us);
        t.facts.push(facts);
    }
    t.time_us = t.kernels_us.iter().sum();
    t
}
