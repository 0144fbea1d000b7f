//! The sampling loop: warm-up, then samples until the stopping rule says
//! stop. One loop for one subject and for a program of several (a step runs
//! every subject once; each subject stops on its own samples, and a stopped
//! subject keeps running, unsampled, so the others see the same program).
//! What a sample is (a CUPTI kernel time, an event pair, a host clock) is the
//! caller's: the loop only needs numbers, and an error ends the run without a
//! result.

use crate::record::Sample;
use crate::stopping::{Stop, StoppingRule};
use std::time::{Duration, Instant};

/// One subject's part of one step: its sample and each of its kernels' times.
#[derive(Clone, Debug)]
pub struct Taken {
    pub sample: Sample,
    pub kernels_us: Vec<f64>,
}

impl Taken {
    pub fn time(sample: Sample) -> Taken {
        Taken {
            sample,
            kernels_us: Vec::new(),
        }
    }
}

/// The samples of one subject's run and why it stopped.
#[derive(Clone, Debug)]
pub struct Run {
    pub samples: Vec<Sample>,
    /// Per kernel, its time in each kept sample.
    pub kernels_us: Vec<Vec<f64>>,
    pub stop: Stop,
    pub warmup: usize,
    /// Time from the first kept step to the last.
    pub elapsed: Duration,
}

/// Runs `step` `warmup` times (results ignored), then until `rule` has
/// stopped every one of `subjects` subjects. `step(i)` runs step `i` (warm-up
/// steps included, counted from 0) and returns one `Taken` per subject. Any
/// error stops the run and is returned: a failed sample is never padded over,
/// and nothing of a failed run is kept as if it were valid.
pub fn sample_steps<E>(
    subjects: usize,
    warmup: usize,
    rule: &dyn StoppingRule,
    mut step: impl FnMut(usize) -> Result<Vec<Taken>, E>,
) -> Result<Vec<Run>, E> {
    for i in 0..warmup {
        step(i)?;
    }
    let start = Instant::now();
    // Per subject: kept samples, each kernel's kept times, the sample times, and why it stopped.
    type Sampling = (Vec<Sample>, Vec<Vec<f64>>, Vec<f64>, Option<Stop>);
    let mut runs: Vec<Sampling> = (0..subjects).map(|_| Default::default()).collect();
    let mut i = warmup;
    while runs.iter().any(|r| r.3.is_none()) {
        let taken = step(i)?;
        i += 1;
        let elapsed = start.elapsed();
        for ((samples, kernels, times, stop), t) in runs.iter_mut().zip(taken) {
            if stop.is_some() {
                continue;
            }
            if kernels.is_empty() {
                kernels.resize(t.kernels_us.len(), Vec::new());
            }
            for (k, us) in kernels.iter_mut().zip(&t.kernels_us) {
                k.push(*us);
            }
            times.push(t.sample.time_us);
            samples.push(t.sample);
            *stop = rule.decide(times, elapsed);
        }
    }
    let elapsed = start.elapsed();
    Ok(runs
        .into_iter()
        .map(|(samples, kernels_us, _, stop)| Run {
            samples,
            kernels_us,
            stop: stop.expect("every subject stopped"),
            warmup,
            elapsed,
        })
        .collect())
}

/// One subject whose sample is a single number.
pub fn sample<E>(
    warmup: usize,
    rule: &dyn StoppingRule,
    mut take: impl FnMut() -> Result<Sample, E>,
) -> Result<Run, E> {
    let mut runs = sample_steps(1, warmup, rule, |_| Ok(vec![Taken::time(take()?)]))?;
    Ok(runs.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stopping::{FixedCount, NoiseTarget};

    #[test]
    fn warmup_is_not_kept_and_errors_end_the_run() {
        let mut calls = 0;
        let run = sample::<()>(3, &FixedCount(5), || {
            calls += 1;
            Ok(Sample::time(calls as f64))
        })
        .unwrap();
        assert_eq!(calls, 8);
        assert_eq!(
            run.samples.iter().map(|s| s.time_us).collect::<Vec<_>>(),
            vec![4.0, 5.0, 6.0, 7.0, 8.0]
        );
        let mut n = 0;
        let err = sample(0, &FixedCount(10), || {
            n += 1;
            if n == 4 {
                Err("kernel record missing")
            } else {
                Ok(Sample::time(1.0))
            }
        });
        assert_eq!(err.unwrap_err(), "kernel record missing");
    }

    #[test]
    fn noise_target_converges_on_quiet_samples() {
        let rule = NoiseTarget {
            min_time: Duration::ZERO,
            ..Default::default()
        };
        let mut i = 0u64;
        let run = sample::<()>(0, &rule, || {
            i += 1;
            // +-0.5% of deterministic jitter around 100 us.
            Ok(Sample::time(100.0 + ((i * 7919) % 11) as f64 * 0.1 - 0.5))
        })
        .unwrap();
        assert!(matches!(run.stop, Stop::Converged { .. }), "{:?}", run.stop);
        assert!(run.samples.len() >= 10);
    }

    #[test]
    fn each_subject_stops_on_its_own_and_keeps_its_kernel_times() {
        // Subject 0 is steady and converges; subject 1 alternates and runs to the sample budget.
        let rule = NoiseTarget {
            min_time: Duration::ZERO,
            max_samples: 40,
            ..Default::default()
        };
        let mut steps = Vec::new();
        let runs = sample_steps::<()>(2, 2, &rule, |i| {
            steps.push(i);
            let noisy = if i % 2 == 0 { 10.0 } else { 20.0 };
            Ok(vec![
                Taken {
                    sample: Sample::time(5.0),
                    kernels_us: vec![2.0, 3.0],
                },
                Taken {
                    sample: Sample::time(noisy),
                    kernels_us: vec![noisy],
                },
            ])
        })
        .unwrap();
        assert_eq!(steps[..3], [0, 1, 2], "warm-up steps are counted from 0");
        assert!(matches!(runs[0].stop, Stop::Converged { .. }));
        assert_eq!(runs[0].samples.len(), 10);
        assert_eq!(runs[0].kernels_us, vec![vec![2.0; 10], vec![3.0; 10]]);
        assert!(matches!(runs[1].stop, Stop::SampleBudget { .. }));
        assert_eq!(runs[1].samples.len(), 40);
        assert_eq!(
            steps.len(),
            42,
            "the program ran until the last subject stopped"
        );
    }
}
