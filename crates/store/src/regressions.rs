//! Regressions in a history: each record against the latest earlier record of
//! the same benchmark measured the same way on the same GPU.

use crate::Stored;
use fusebench_measure::Measurement;
use std::collections::HashMap;

/// A measurement slower than the previous one of its identity beyond both
/// their noise and the threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Regression {
    /// The earlier record it was compared with.
    pub before: i64,
    pub after: i64,
    /// after median / before median.
    pub ratio: f64,
}

/// What must match for two records to be compared: the benchmark
/// (`what`: definition, input dtypes and shapes, cache policy, context), how
/// it was timed (`how`: method, cold set-up) and the GPU. A CUPTI time against
/// an events time, or a warm time against a cold one, differs by the method,
/// not by a change in the code.
fn identity(m: &Measurement) -> (String, String, &str) {
    (m.what(), m.how(), m.environment.gpu_uuid.as_str())
}

/// Every record slower than the latest earlier record of its identity, where
/// their intervals of the median do not overlap and the ratio of medians is
/// above `1 + threshold` (0.02 = 2%). Records are taken in time order
/// (`taken_at`, then id), whatever the order of `history`; the result is in
/// that order too.
pub fn regressions(history: &[Stored], threshold: f64) -> Vec<Regression> {
    let mut order: Vec<&Stored> = history.iter().collect();
    order.sort_by_key(|s| (s.measurement.taken_at, s.id));
    let mut latest: HashMap<_, &Stored> = HashMap::new();
    let mut out = Vec::new();
    for s in order {
        let Some(before) = latest.insert(identity(&s.measurement), s) else {
            continue;
        };
        let (a, b) = (&before.measurement.summary, &s.measurement.summary);
        let ratio = b.median / a.median;
        if fusebench_measure::differ(a, b) && ratio > 1.0 + threshold {
            out.push(Regression {
                before: before.id,
                after: s.id,
                ratio,
            });
        }
    }
    out
}
