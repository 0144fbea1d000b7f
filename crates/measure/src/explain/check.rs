//! What a check returns, what it sees, and the models several checks share:
//! the launch overhead per kernel (method), the kernel time without it, the
//! copy ceilings' prediction (cache policy, working set) and the memory-bound
//! share of A (cache policy, clocks).

use super::{Cause, Side, Verdict};
use crate::record::{Measurement, Method};

/// One check's result, before shares are given.
pub(super) struct Check {
    pub verdict: Verdict,
    pub detail: String,
    pub estimate: Est,
    /// What this cause adds only together with the causes checked before it
    /// (its effect alone is in `estimate`).
    pub together_us: f64,
}

/// A check's estimate of its cause's effect on B − A, in µs.
pub(super) enum Est {
    /// Nothing to estimate: ruled out or unknown.
    None,
    Measured(f64),
    /// The effect belongs to `Cause` (checked earlier): the same mechanism, or
    /// this cause's source. A measured effect is moved there.
    CountedUnder(Cause, Option<f64>),
    /// Differs but the records do not measure it (`why`); it may take what the
    /// measured causes leave, within [low, high] (the signs it can have).
    Open {
        why: String,
        low: f64,
        high: f64,
    },
}

impl Est {
    pub fn open(why: impl Into<String>) -> Est {
        Est::Open {
            why: why.into(),
            low: f64::NEG_INFINITY,
            high: f64::INFINITY,
        }
    }
}

impl Check {
    pub fn ruled_out(detail: impl Into<String>) -> Check {
        Check::new(Verdict::RuledOut, detail, Est::None)
    }
    pub fn unknown(detail: impl Into<String>) -> Check {
        Check::new(Verdict::Unknown, detail, Est::None)
    }
    pub fn differs(detail: impl Into<String>, estimate: Est) -> Check {
        Check::new(Verdict::Differs, detail, estimate)
    }
    fn new(verdict: Verdict, detail: impl Into<String>, estimate: Est) -> Check {
        Check {
            verdict,
            detail: detail.into(),
            estimate,
            together_us: 0.0,
        }
    }
}

/// What a check sees: both sides, and the checks that ran before it.
pub(super) struct Ctx<'a> {
    pub a: &'a Side<'a>,
    pub b: &'a Side<'a>,
    pub done: &'a [(Cause, Check)],
}

/// The launch overhead the events method adds per kernel, from a record that
/// holds both methods' times of the same samples.
pub(super) struct Overhead {
    pub per_kernel_us: f64,
    /// "A" or "B": whose samples it comes from.
    pub from: &'static str,
    pub events_us: f64,
    pub cupti_us: f64,
    pub kernels: usize,
}

/// Whether the record's time holds the events method's launch overhead.
pub(super) fn is_events(m: &Measurement) -> bool {
    m.method == Method::CudaEvents
}

/// A record's kernel count for overheads: a record without its kernel list
/// counts as one launch.
pub(super) fn launches(m: &Measurement) -> usize {
    m.kernels.len().max(1)
}

pub(super) fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

impl<'a> Ctx<'a> {
    pub fn a(&self) -> &Measurement {
        &self.a.record
    }
    pub fn b(&self) -> &Measurement {
        &self.b.record
    }

    pub fn found(&self, c: Cause) -> Option<&Check> {
        self.done.iter().find(|(x, _)| *x == c).map(|(_, k)| k)
    }

    pub fn differs(&self, c: Cause) -> bool {
        self.found(c).is_some_and(|k| k.verdict == Verdict::Differs)
    }

    /// The effect a check before this one measured for its own cause.
    pub fn measured(&self, c: Cause) -> f64 {
        match self.found(c).map(|k| &k.estimate) {
            Some(Est::Measured(us)) => *us,
            _ => 0.0,
        }
    }

    /// Events median minus CUPTI median of the same samples, per kernel, from
    /// A if it holds both, else from B.
    pub fn overhead(&self) -> Option<Overhead> {
        [(self.a(), "A"), (self.b(), "B")]
            .into_iter()
            .find_map(|(m, from)| {
                if m.method != Method::Cupti {
                    return None;
                }
                let events_us = m.events_median_us()?;
                let cupti_us = m.summary.median;
                Some(Overhead {
                    per_kernel_us: (events_us - cupti_us) / launches(m) as f64,
                    from,
                    events_us,
                    cupti_us,
                    kernels: m.kernels.len(),
                })
            })
    }

    /// The overhead per kernel to take out of `m`'s times: zero unless `m`
    /// was timed by events and the overhead is known.
    pub fn overhead_in(&self, m: &Measurement) -> f64 {
        match (is_events(m), self.overhead()) {
            (true, Some(o)) => o.per_kernel_us,
            _ => 0.0,
        }
    }

    /// The record's median without the events overhead: the kernels' own time.
    pub fn kernel_us(&self, m: &Measurement) -> f64 {
        m.summary.median - self.overhead_in(m) * launches(m) as f64
    }

    /// A's copy ceiling over A's kernel time (at most 1): the part of A's time
    /// a copy of the same bytes, timed the same way, would take.
    pub fn memory_share(&self) -> Result<f64, String> {
        let a = self.a();
        let c = a.ceiling.as_ref().ok_or("A has no copy ceiling")?;
        let copy = c.median_us - self.overhead_in(a);
        let bytes = a.bytes.unwrap_or(c.bytes) as f64;
        let m = copy * bytes / c.bytes as f64 / self.kernel_us(a);
        // A time no longer than the events overhead, or a copy of no bytes, says nothing.
        if !m.is_finite() || self.kernel_us(a) <= 0.0 {
            return Err("A's copy ceiling or time cannot give the memory-bound share".into());
        }
        Ok(m.clamp(0.0, 1.0))
    }

    /// The cache policies' effect on A's kernel time from the two copy
    /// ceilings: A × (1 − m + m × q), q the per-byte copy time under B's
    /// set-up over A's. Returns the effect and the model in words, or why not.
    pub fn cache_effect(&self) -> Result<(f64, String), String> {
        let (a, b) = (self.a(), self.b());
        let (ca, cb) = match (&a.ceiling, &b.ceiling) {
            (Some(x), Some(y)) => (x, y),
            (None, None) => return Err("neither record has a copy ceiling".into()),
            (None, _) => return Err("A has no copy ceiling".into()),
            (_, None) => return Err("B has no copy ceiling".into()),
        };
        if ca.bytes == 0 || cb.bytes == 0 {
            return Err("a copy ceiling of zero bytes".into());
        }
        let (oa, ob) = (self.overhead_in(a), self.overhead_in(b));
        let per_byte_a = (ca.median_us - oa) / ca.bytes as f64;
        let per_byte_b = (cb.median_us - ob) / cb.bytes as f64;
        if per_byte_a <= 0.0 || per_byte_b <= 0.0 {
            return Err("a copy ceiling no longer than the launch overhead".into());
        }
        let m = self.memory_share()?;
        let q = per_byte_b / per_byte_a;
        let ka = self.kernel_us(a);
        let effect = ka * m * (q - 1.0);
        let corrected = if oa > 0.0 || ob > 0.0 {
            format!(
                ", each less the {:.2} us per kernel the events method adds",
                oa.max(ob)
            )
        } else {
            String::new()
        };
        Ok((
            effect,
            format!(
                "the copy ceilings: {} copied in {:.2} us under A's set-up, {} in {:.2} us under B's{corrected}; \
                 per byte B/A = {q:.3}; the copy is {:.0}% of A's {ka:.2} us, so B's set-up predicts \
                 {ka:.2} × (1 − {m:.2} + {m:.2} × {q:.3}) = {:.2} us",
                mb(ca.bytes),
                ca.median_us - oa,
                mb(cb.bytes),
                cb.median_us - ob,
                100.0 * m,
                ka + effect
            ),
        ))
    }
}
