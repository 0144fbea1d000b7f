//! A program: prepared fusions run in order, as in one step of a model, and
//! timed inside it. `InProgram` leaves L2 and clocks as the earlier fusions
//! leave them; `Cold` flushes the L2 before each fusion (outside its time),
//! which makes each fusion's time independent of its neighbours. (Waiting
//! for the GPU to go idle before each flush, as standalone samples do, was
//! measured and made no difference; see BENCHMARKS.md.)

use crate::error::EngineError;
use crate::prepared::Prepared;
use crate::time::{between_events_us, err, kernel_records, median};
use cudarc::driver::sys::CUevent_flags;
use fusebench_measure::{CachePolicy, Run, Sample, Stop, StoppingRule};
use fusebench_runtime::{ClockReader, Cupti};
use std::time::Instant;

/// Every fusion's samples, each stopped by the rule on its own samples.
pub struct ProgramTimes {
    pub runs: Vec<Run>,
    pub per_kernel_median_us: Vec<Vec<f64>>,
    /// Whole program steps run, warm-up included.
    pub steps: usize,
}

/// Runs the program step after step; a fusion's sample is its kernels' time
/// in that step. The program keeps running unchanged until every fusion's
/// rule has stopped (fusions already stopped keep running, unsampled, so the
/// others see the same program).
pub fn time_program(
    fusions: &[&Prepared],
    cache: CachePolicy,
    warmup: usize,
    rule: &dyn StoppingRule,
    clocks: Option<&ClockReader>,
    cupti: Option<&Cupti>,
) -> Result<ProgramTimes, EngineError> {
    let cold = match cache {
        CachePolicy::Cold => true,
        CachePolicy::InProgram => false,
        other => {
            return Err(EngineError::Inputs(format!(
                "a program is timed in-program or cold, not {other:?}"
            )))
        }
    };
    let Some(first) = fusions.first() else {
        return Err(EngineError::Inputs("the program has no fusions".into()));
    };
    let gpu = &first.gpu;
    let ctx = gpu.cuda_context();
    let stream = gpu.cuda_stream();
    // One event before each kernel of each fusion and one after its last.
    let events = fusions
        .iter()
        .map(|p| {
            (0..=p.kernels.len())
                .map(|_| ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let launched: Vec<(String, [u32; 6])> = fusions.iter().flat_map(|p| p.launch_list()).collect();
    let n = fusions.len();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); n];
    let mut per_kernel: Vec<Vec<Vec<f64>>> = fusions
        .iter()
        .map(|p| vec![Vec::new(); p.kernels.len()])
        .collect();
    let mut stops: Vec<Option<Stop>> = vec![None; n];
    let sets = if cold {
        crate::time::cold_input_sets()
    } else {
        1
    };
    for p in fusions {
        p.make_input_copies(sets)?;
    }
    if let Some(c) = cupti {
        gpu.synchronize()?;
        c.take()?;
    }
    let start = Instant::now();
    let mut steps = 0usize;
    while stops.iter().any(Option::is_none) {
        for (i, p) in fusions.iter().enumerate() {
            if cold {
                p.use_input_set(steps);
                gpu.flush_l2()?;
            }
            events[i][0].record(stream).map_err(err)?;
            for k in 0..p.kernels.len() {
                p.launch(k)?;
                events[i][k + 1].record(stream).map_err(err)?;
            }
        }
        gpu.synchronize()?;
        steps += 1;
        // Kernel times of the whole step, split per fusion in launch order.
        let kernel_us: Vec<Vec<f64>> = match cupti {
            Some(c) => {
                let all = kernel_records(c, &launched)?;
                let mut it = all.into_iter();
                fusions
                    .iter()
                    .map(|p| it.by_ref().take(p.kernels.len()).collect())
                    .collect()
            }
            None => events
                .iter()
                .map(|ev| between_events_us(ev))
                .collect::<Result<_, _>>()?,
        };
        if steps <= warmup {
            continue;
        }
        let reading = crate::read_clocks(clocks);
        let elapsed = start.elapsed();
        for i in 0..n {
            if stops[i].is_some() {
                continue;
            }
            samples[i].push(Sample {
                time_us: kernel_us[i].iter().sum(),
                clocks: reading.clone(),
                events_us: None,
            });
            for (k, &us) in kernel_us[i].iter().enumerate() {
                per_kernel[i][k].push(us);
            }
            let times: Vec<f64> = samples[i].iter().map(|s| s.time_us).collect();
            stops[i] = rule.decide(&times, elapsed);
        }
    }
    for p in fusions {
        p.use_input_set(0);
    }
    let elapsed = start.elapsed();
    Ok(ProgramTimes {
        runs: samples
            .into_iter()
            .zip(stops)
            .map(|(samples, stop)| Run {
                samples,
                stop: stop.expect("every fusion stopped"),
                warmup,
                elapsed,
            })
            .collect(),
        per_kernel_median_us: per_kernel
            .iter_mut()
            .map(|ks| ks.iter_mut().map(|v| median(v)).collect())
            .collect(),
        steps,
    })
}
