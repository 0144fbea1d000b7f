//! What a check returns, what it sees, what several checks share: the times
//! the records hold at other conditions (a record's siblings: the same subject
//! timed right after under the other cache policy and by the other method),
//! the steps measured between them, and the models used where no sibling
//! holds the time (the launch overhead per kernel, the kernel time without
//! it, the copy ceilings' prediction and the memory-bound share of A).

use super::{Cause, Side, Verdict};
use crate::record::{CachePolicy, Measurement, Method};

/// One check's result, before shares are given.
pub(super) struct Check {
    pub verdict: Verdict,
    pub detail: String,
    pub estimate: Est,
    /// What this cause adds only together with the causes checked before it
    /// (its effect alone is in `estimate`).
    pub together: Option<Joint>,
}

/// What causes add acting together beyond their effects alone, in µs, with
/// the range the intervals of the medians it comes from allow (none when a
/// model predicted it).
pub(super) struct Joint {
    pub us: f64,
    pub range: Option<(f64, f64)>,
    pub detail: String,
}

/// A check's estimate of its cause's effect on B − A, in µs.
pub(super) enum Est {
    /// Nothing to estimate: ruled out or unknown.
    None,
    /// Taken from the two records' times (`from` says which: "A's sibling
    /// (warm, CUPTI) − A").
    Measured { us: f64, from: String },
    /// Predicted by a model where no measurement holds it (`model` names it
    /// and what it is known to get wrong).
    Model { us: f64, model: String },
    /// The effect belongs to `Cause` (checked earlier): the same mechanism, or
    /// this cause's source. A measured effect is moved there.
    CountedUnder(Cause, Option<f64>),
    /// Differs but the records do not measure it (`why`); it may take what the
    /// measured causes leave, within [low, high] (the signs it can have).
    Open { why: String, low: f64, high: f64 },
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
            together: None,
        }
    }
}

/// A median the records hold (a record's own or one of its siblings'), with
/// its 95% interval and what it is in words.
#[derive(Clone, Debug)]
pub(super) struct Timed {
    pub us: f64,
    pub low: f64,
    pub high: f64,
    pub what: String,
}

/// A change measured between two times: `to − from`, at one side's
/// conditions (`at`: "A's" or "B's").
#[derive(Clone, Debug)]
pub(super) struct Step {
    pub from: Timed,
    pub to: Timed,
    pub at: &'static str,
}

impl Step {
    pub fn us(&self) -> f64 {
        self.to.us - self.from.us
    }

    /// "A's sibling (warm, CUPTI) − A", as a basis names it.
    pub fn source(&self) -> String {
        format!("{} − {}", self.to.what, self.from.what)
    }

    /// A cause that differs, measured by this step: `detail` with the step's numbers.
    pub fn check(&self, detail: &str) -> Check {
        Check::differs(
            format!(
                "{detail}; measured at {} conditions: {}",
                self.at,
                self.words()
            ),
            Est::Measured {
                us: self.us(),
                from: self.source(),
            },
        )
    }

    /// The step with its numbers: "A's sibling (warm, CUPTI) 4.99 us − A 6.75 us = −1.76 us".
    pub fn words(&self) -> String {
        format!(
            "{} {:.2} us − {} {:.2} us = {:+.2} us",
            self.to.what,
            self.to.us,
            self.from.what,
            self.from.us,
            self.us()
        )
    }
}

/// `(x − y) − (z − w)` with the range the four intervals allow.
fn joint(x: &Timed, y: &Timed, z: &Timed, w: &Timed, detail: String) -> Joint {
    Joint {
        us: (x.us - y.us) - (z.us - w.us),
        range: Some((
            (x.low - y.high) - (z.high - w.low),
            (x.high - y.low) - (z.low - w.high),
        )),
        detail,
    }
}

/// Whether a cold set-up matters for `cache`: only a cold sample is prepared.
fn setup_of(cache: CachePolicy, setup: Option<&str>) -> Option<&str> {
    (cache == CachePolicy::Cold).then_some(setup).flatten()
}

/// The same cache policy: the policy and, for cold, the set-up.
pub(super) fn same_policy(a: &Measurement, b: &Measurement) -> bool {
    a.cache == b.cache
        && setup_of(a.cache, a.cold_setup.as_deref()) == setup_of(b.cache, b.cold_setup.as_deref())
}

/// A method as a sibling's label says it.
fn short(m: Method) -> &'static str {
    match m {
        Method::Cupti => "CUPTI",
        other => other.words(),
    }
}

/// `m`'s time under `policy`'s cache policy and set-up, by `method`: `m`
/// itself when those are its own, else its sibling taken that way. `tag`
/// names the record ("A").
pub(super) fn timed(
    m: &Measurement,
    tag: &str,
    policy: &Measurement,
    method: Method,
) -> Option<Timed> {
    if same_policy(m, policy) && m.method == method {
        return Some(Timed {
            us: m.summary.median,
            low: m.summary.ci_low,
            high: m.summary.ci_high,
            what: tag.to_string(),
        });
    }
    let want = setup_of(policy.cache, policy.cold_setup.as_deref());
    m.siblings
        .iter()
        .find(|s| {
            s.cache == policy.cache
                && s.method == method
                && setup_of(s.cache, s.cold_setup.as_deref()) == want
        })
        .map(|s| Timed {
            us: s.median_us,
            low: s.ci_low_us,
            high: s.ci_high_us,
            what: format!("{tag}'s sibling ({}, {})", s.cache.name(), short(s.method)),
        })
}

/// What a check sees: both sides, and the checks that ran before it.
pub(super) struct Ctx<'a> {
    pub a: &'a Side<'a>,
    pub b: &'a Side<'a>,
    pub done: &'a [(Cause, Check)],
}

/// The causes that change the subject itself rather than how it was timed,
/// in check order. One sibling measures their change together; the first of
/// them that differs holds it.
const SUBJECT: [Cause; 6] = [
    Cause::Gpu,
    Cause::Toolchain,
    Cause::InputLayout,
    Cause::Fusion,
    Cause::Kernels,
    Cause::Context,
];

/// Two fields of the records differ only where both say: an older record or
/// another tool's file may leave one empty.
pub(super) fn known_differ(x: &str, y: &str) -> bool {
    !x.is_empty() && !y.is_empty() && x != y
}

/// The model of the cache policy's effect, with what it is known to get wrong.
pub(super) const COPY_MODEL: &str =
    "model: the copy ceilings (a copy of the same bytes under each \
     set-up); it overstates the effect for kernels that cannot use L2's bandwidth as a copy does \
     (1.6-1.9x for the RMSNorm on the H200)";

/// The model of the method's effect, with what it is known to get wrong.
pub(super) const OVERHEAD_MODEL: &str = "model: the events overhead per kernel, from the record \
     holding both methods' times of its samples; CUPTI slows some kernels itself, which this does \
     not see (the seed RMSNorm's unrolled-once kernel: 1.3 us on the H200)";

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

    /// The effect a check before this one measured or modelled for its own cause.
    pub fn measured(&self, c: Cause) -> f64 {
        match self.found(c).map(|k| &k.estimate) {
            Some(Est::Measured { us, .. } | Est::Model { us, .. }) => *us,
            _ => 0.0,
        }
    }

    /// A under `policy`'s cache policy, by `method`.
    pub fn a_at(&self, policy: &Measurement, method: Method) -> Option<Timed> {
        timed(self.a(), "A", policy, method)
    }

    /// B under `policy`'s cache policy, by `method`.
    pub fn b_at(&self, policy: &Measurement, method: Method) -> Option<Timed> {
        timed(self.b(), "B", policy, method)
    }

    fn a_self(&self) -> Timed {
        timed(self.a(), "A", self.a(), self.a().method).expect("a record is at its own conditions")
    }

    fn b_self(&self) -> Timed {
        timed(self.b(), "B", self.b(), self.b().method).expect("a record is at its own conditions")
    }

    /// Whether the two were timed the same way: the same policy, set-up and method.
    pub fn same_conditions(&self) -> bool {
        same_policy(self.a(), self.b()) && self.a().method == self.b().method
    }

    /// The method's effect, measured: at A's conditions (A's sibling by B's
    /// method, less A), which is what a run changing only the method
    /// measures; else at B's (B less B's sibling by A's method).
    pub fn method_step(&self) -> Option<Step> {
        let (a, b) = (self.a(), self.b());
        if a.method == b.method {
            return None;
        }
        self.at_a_else_b(self.a_at(a, b.method), || self.b_at(b, a.method))
    }

    /// The cache policy's effect, measured: at A's conditions (A's sibling
    /// under B's policy, less A), else at B's.
    pub fn policy_step(&self) -> Option<Step> {
        let (a, b) = (self.a(), self.b());
        if same_policy(a, b) {
            return None;
        }
        self.at_a_else_b(self.a_at(b, a.method), || self.b_at(a, b.method))
    }

    /// A change measured at A's conditions (`with_change`: A's sibling with
    /// it, less A) where A's siblings hold it, else at B's (`without`: B less
    /// B's sibling without it).
    fn at_a_else_b(
        &self,
        with_change: Option<Timed>,
        without: impl FnOnce() -> Option<Timed>,
    ) -> Option<Step> {
        if let Some(to) = with_change {
            return Some(Step {
                from: self.a_self(),
                to,
                at: "A's",
            });
        }
        without().map(|from| Step {
            from,
            to: self.b_self(),
            at: "B's",
        })
    }

    /// What the method and the cache policy add acting together on A's
    /// subject, beyond each alone: A(B's policy, B's method) − A(B's policy,
    /// A's method) − A(A's policy, B's method) + A, all from A's siblings.
    pub fn policy_method_joint(&self) -> Option<Joint> {
        let (a, b) = (self.a(), self.b());
        if same_policy(a, b) || a.method == b.method {
            return None;
        }
        let both = self.a_at(b, b.method)?;
        let policy = self.a_at(b, a.method)?;
        let method = self.a_at(a, b.method)?;
        let base = self.a_self();
        let j = joint(
            &both,
            &policy,
            &method,
            &base,
            format!(
                "B's method ({}) changes A by {:+.2} us under A's policy ({}: {} − A) and by {:+.2} us under B's ({}: {} − {})",
                short(b.method),
                method.us - base.us,
                a.cache.name(),
                method.what,
                both.us - policy.us,
                b.cache.name(),
                both.what,
                policy.what
            ),
        );
        Some(j)
    }

    /// The subject's own change (kernels, layout, definition, GPU), measured:
    /// at A's conditions, B's time under A's policy by A's method (B's sibling)
    /// less A, which is what a run changing only the subject measures; else at
    /// B's, B less A's time under B's policy and method (A's sibling). `None`
    /// when the two were timed the same way: then B − A is the subject's change
    /// and the noise and clocks between the runs together, and the kernels'
    /// own medians say more (`kernels.rs`).
    pub fn subject_step(&self) -> Option<Step> {
        if self.same_conditions() {
            return None;
        }
        let (a, b) = (self.a(), self.b());
        if let Some(to) = self.b_at(a, a.method) {
            return Some(Step {
                from: self.a_self(),
                to,
                at: "A's",
            });
        }
        self.a_at(b, b.method).map(|from| Step {
            from,
            to: self.b_self(),
            at: "B's",
        })
    }

    /// The check of a cause that changes the subject (`SUBJECT`) when the
    /// siblings measure that change (`subject_step`): the first such cause
    /// that differs holds the effect, less the clocks' estimate (the two
    /// sides of the step ran at their own clocks), with what the change adds
    /// together with the policy and method (`subject_joint`); the others
    /// count theirs under it. `None` when the siblings do not measure it.
    pub fn subject_check(&self, cause: Cause, detail: &str) -> Option<Check> {
        let step = self.subject_step()?;
        if let Some(first) = SUBJECT
            .into_iter()
            .take_while(|&c| c != cause)
            .find(|&c| self.differs(c))
        {
            return Some(Check::differs(
                format!(
                    "{detail}; one measurement holds every change of the subject: counted under {}",
                    first.title()
                ),
                Est::CountedUnder(first, None),
            ));
        }
        let clocks = self.measured(Cause::Clocks);
        let less_clocks = if clocks != 0.0 {
            format!(", less the clocks' {clocks:+.2} us")
        } else {
            String::new()
        };
        let mut c = Check::differs(
            format!(
                "{detail}; measured at {} conditions (cache policy, set-up and method): {}{less_clocks}",
                step.at,
                step.words()
            ),
            Est::Measured {
                us: step.us() - clocks,
                from: step.source(),
            },
        );
        c.together = self.subject_joint();
        Some(c)
    }

    /// When nothing about the subject differs and A's siblings hold A timed
    /// B's way: B against that sibling, two runs of the same subject timed
    /// the same way, which is what the measured steps from A leave.
    pub fn runs_step(&self) -> Option<Step> {
        if self.same_conditions() || SUBJECT.into_iter().any(|c| self.differs(c)) {
            return None;
        }
        self.a_at(self.b(), self.b().method).map(|from| Step {
            from,
            to: self.b_self(),
            at: "B's",
        })
    }

    /// What the subject's change and the environment (policy, method) add
    /// together: how much going from A's conditions to B's moves B's subject
    /// (B − B's sibling at A's conditions) against how much it moves A's (A's
    /// sibling at B's conditions − A). Needs both siblings.
    pub fn subject_joint(&self) -> Option<Joint> {
        if self.same_conditions() {
            return None;
        }
        let (a, b) = (self.a(), self.b());
        let b_at_a = self.b_at(a, a.method)?;
        let a_at_b = self.a_at(b, b.method)?;
        let (bs, as_) = (self.b_self(), self.a_self());
        let mut change = Vec::new();
        if !same_policy(a, b) {
            change.push(format!("cache policy ({})", b.cache.name()));
        }
        if a.method != b.method {
            change.push(format!("method ({})", short(b.method)));
        }
        let j = joint(
            &bs,
            &b_at_a,
            &a_at_b,
            &as_,
            format!(
                "B's {} changes A's kernels by {:+.2} us ({} − A) and B's by {:+.2} us (B − {})",
                change.join(" and "),
                a_at_b.us - as_.us,
                a_at_b.what,
                bs.us - b_at_a.us,
                b_at_a.what
            ),
        );
        Some(j)
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

    /// The cache policy's effect: measured by a sibling under the other
    /// policy (`policy_step`), with what the policy and the method add
    /// together when A's siblings hold that too; else the copy ceilings' model
    /// (`cache_effect`). The check with `detail` prefixed, or why neither.
    pub fn policy_check(&self, detail: &str) -> Result<Check, String> {
        if let Some(step) = self.policy_step() {
            let mut c = step.check(detail);
            c.together = self.policy_method_joint();
            return Ok(c);
        }
        let (a, b) = (self.a(), self.b());
        let (us, model) = self.cache_effect().map_err(|why| {
            if a.cache == b.cache {
                // Two cold set-ups: no sibling differs by its set-up.
                why
            } else {
                format!("no sibling under the other policy, and {why}")
            }
        })?;
        Ok(Check::differs(
            format!("{detail}; no sibling under the other policy, estimated from {model}"),
            Est::Model {
                us,
                model: COPY_MODEL.into(),
            },
        ))
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
