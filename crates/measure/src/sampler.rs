//! The sampling loop: warm-up, then samples until the stopping rule says
//! stop. What a sample is (a CUPTI kernel time, an event pair, a host clock)
//! is the caller's: the loop only needs a number, and an error ends the run
//! without a result.

use crate::record::Sample;
use crate::stopping::{Stop, StoppingRule};
use std::time::{Duration, Instant};

/// The samples of one run and why it stopped.
#[derive(Clone, Debug)]
pub struct Run {
    pub samples: Vec<Sample>,
    pub stop: Stop,
    pub warmup: usize,
    pub elapsed: Duration,
}

/// Runs `take` `warmup` times (results ignored), then until `rule` stops it.
/// Any error stops the run and is returned: a failed sample is never padded
/// over, and nothing of a failed run is kept as if it were valid.
pub fn sample<E>(
    warmup: usize,
    rule: &dyn StoppingRule,
    mut take: impl FnMut() -> Result<Sample, E>,
) -> Result<Run, E> {
    for _ in 0..warmup {
        take()?;
    }
    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut times: Vec<f64> = Vec::new();
    loop {
        let s = take()?;
        times.push(s.time_us);
        samples.push(s);
        if let Some(stop) = rule.decide(&times, start.elapsed()) {
            return Ok(Run {
                samples,
                stop,
                warmup,
                elapsed: start.elapsed(),
            });
        }
    }
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
}
