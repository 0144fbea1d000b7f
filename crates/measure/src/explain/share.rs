//! Each cause's share of B − A. Measured and modelled effects count where
//! they were taken, or under the cause they belong to; what the causes add
//! together is its own term for each check that measured it; of what is
//! left, a cause that differs but was not measured takes it when it is the
//! only one that can (its possible range holds what is left); the rest is
//! the remainder, judged against the noise the two intervals of the medians
//! allow.

use super::check::{Check, Est, Step};
use super::noise::same_samples;
use super::{Answer, Basis, Cause, Explanation, Finding, Together, Verdict};
use crate::record::Measurement;
use crate::stats::differ;

/// A cause that differs but was not measured, with the range it can take.
struct Open {
    index: usize,
    why: String,
    low: f64,
    high: f64,
}

pub(super) fn attribute(
    a: &Measurement,
    b: &Measurement,
    mut done: Vec<(Cause, Check)>,
    runs: Option<Step>,
) -> Explanation {
    let (sa, sb) = (&a.summary, &b.summary);
    let d = sb.median - sa.median;
    // The remainders the intervals allow: B − A can lie anywhere in
    // [B low − A high, B high − A low], so a remainder r is noise when
    // d − r lies there.
    let noise_low = -((sb.ci_high - sb.median) + (sa.median - sa.ci_low));
    let noise_high = (sb.median - sb.ci_low) + (sa.ci_high - sa.median);
    let mut together: Vec<Together> = done
        .iter_mut()
        .filter_map(|(cause, c)| {
            let j = c.together.take()?;
            Some(Together {
                cause: *cause,
                effect_us: j.us,
                share: (d != 0.0).then(|| j.us / d),
                low_us: j.range.map(|r| r.0),
                high_us: j.range.map(|r| r.1),
                detail: j.detail,
            })
        })
        .collect();
    // The largest first, by size, whichever way it pushes.
    together.sort_by(|x, y| y.effect_us.abs().total_cmp(&x.effect_us.abs()));
    let together_us: f64 = together.iter().map(|t| t.effect_us).sum();

    let mut findings = Vec::with_capacity(done.len());
    let mut moved = Vec::new();
    let mut open = Vec::new();
    for (i, (cause, c)) in done.into_iter().enumerate() {
        let (basis, effect_us) = match c.estimate {
            Est::None => (Basis::None, None),
            Est::Measured { us, from } => (Basis::Measured { from }, Some(us)),
            Est::Model { us, model } => (Basis::Model { model }, Some(us)),
            Est::CountedUnder(to, us) => {
                if let Some(us) = us {
                    moved.push((to, cause, us));
                }
                (Basis::CountedUnder { cause: to }, None)
            }
            Est::Open { why, low, high } => {
                open.push(Open {
                    index: i,
                    why: why.clone(),
                    low,
                    high,
                });
                (Basis::NotEstimated { why }, None)
            }
        };
        findings.push(Finding {
            cause,
            verdict: c.verdict,
            detail: c.detail,
            basis,
            effect_us,
            share: None,
        });
    }
    for (to, from, us) in moved {
        let f = findings
            .iter_mut()
            .find(|f| f.cause == to)
            .expect("every cause has a finding");
        f.effect_us = Some(f.effect_us.unwrap_or(0.0) + us);
        if matches!(f.basis, Basis::NotEstimated { .. }) {
            f.basis = Basis::Through { cause: from };
        }
    }
    // A cause that received its consequence's measured effect is measured now.
    open.retain(|o| matches!(findings[o.index].basis, Basis::NotEstimated { .. }));

    let explained: f64 = findings.iter().filter_map(|f| f.effect_us).sum();
    let mut remainder = d - explained - together_us;
    let in_noise = |r: f64| noise_low <= r && r <= noise_high;
    if !in_noise(remainder) {
        // Only a cause whose range can hold the remainder (within noise) may take it.
        let fits: Vec<&Open> = open
            .iter()
            .filter(|o| o.low <= remainder + noise_high && remainder + noise_low <= o.high)
            .collect();
        if let [o] = fits[..] {
            let take = remainder.clamp(o.low, o.high);
            let f = &mut findings[o.index];
            f.effect_us = Some(take);
            f.basis = Basis::Rest { why: o.why.clone() };
            remainder -= take;
        } else if fits.len() > 1 {
            let names: Vec<&str> = fits
                .iter()
                .map(|o| findings[o.index].cause.title())
                .collect();
            for o in &fits {
                findings[o.index].basis = Basis::NotEstimated {
                    why: format!(
                        "{}; what the measured causes leave lies with {} together, and is not split",
                        o.why,
                        names.join(", ")
                    ),
                };
            }
        }
    }
    if d != 0.0 {
        for f in &mut findings {
            f.share = f.effect_us.map(|e| e / d);
        }
    }

    let beyond_noise = differ(sa, sb);
    let differs = |c: Cause| {
        findings
            .iter()
            .any(|f| f.cause == c && f.verdict == Verdict::Differs)
    };
    let mut ranked: Vec<&Finding> = findings
        .iter()
        .filter(|f| {
            f.verdict == Verdict::Differs && !matches!(f.cause, Cause::Noise | Cause::SingleSample)
        })
        .collect();
    // Largest share first, then those without one, in check order.
    ranked.sort_by(|x, y| {
        let key = |f: &Finding| f.share.unwrap_or(f64::NEG_INFINITY);
        key(y).total_cmp(&key(x))
    });
    let within = in_noise(remainder);
    let remainder_share = (d != 0.0).then(|| remainder / d);
    // The steps measured from A reach A's sibling timed B's way; what is
    // left is then B against it, two runs, whose intervals say more than A's.
    let remainder_detail = runs
        .filter(|r| (r.us() - remainder).abs() <= 1e-9 * d.abs().max(1.0))
        .map(|r| {
            let (low, high) = (r.to.low - r.from.high, r.to.high - r.from.low);
            format!(
                "two runs of the same subject timed the same way: {}; {} (their intervals allow {low:+.2} to {high:+.2} us)",
                r.words(),
                if low <= 0.0 && 0.0 <= high {
                    "within their noise"
                } else {
                    "a difference between the runs beyond their intervals"
                }
            )
        });
    let (answer, causes) = if differs(Cause::SingleSample) {
        (Answer::SingleSample, vec![Cause::SingleSample])
    } else if ranked.is_empty() && same_samples(a, b) {
        (Answer::Same, Vec::new())
    } else if !beyond_noise {
        let mut c = vec![Cause::Noise];
        c.extend(ranked.iter().map(|f| f.cause));
        (Answer::WithinNoise, c)
    } else {
        let c: Vec<Cause> = ranked.iter().map(|f| f.cause).collect();
        let top = ranked.first().and_then(|f| Some((f.cause, f.share?)));
        let answer = match top {
            Some((cause, share)) if share > 0.5 => Answer::Cause { cause, share },
            _ if within && ranked.iter().any(|f| f.share.is_some_and(|s| s > 0.0)) => {
                Answer::Together
            }
            _ => Answer::Unexplained {
                share: remainder_share.unwrap_or(1.0),
            },
        };
        (answer, c)
    };
    Explanation {
        a_us: sa.median,
        b_us: sb.median,
        difference_us: d,
        ratio: sb.median / sa.median,
        ratio_low: sb.ci_low / sa.ci_high,
        ratio_high: sb.ci_high / sa.ci_low,
        beyond_noise,
        findings,
        causes,
        together,
        together_us,
        remainder_us: remainder,
        remainder_share,
        remainder_detail,
        noise_low_us: noise_low,
        noise_high_us: noise_high,
        remainder_within_noise: within,
        answer,
    }
}
