//! The explanation as text: the two times, every check with its estimate,
//! the shares, and the answer.

use super::{Answer, Basis, Explanation, Finding, Verdict};
use crate::record::Measurement;

fn pct(share: f64) -> String {
    // Rounded first, so that a tiny negative share prints as 0%, not -0%.
    let p = (100.0 * share).round();
    format!("{}%", if p == 0.0 { 0.0 } else { p })
}

/// The effect line under a finding, or none.
fn effect(f: &Finding) -> Option<String> {
    let us = |f: &Finding| {
        let e = f.effect_us.unwrap_or(0.0);
        match f.share {
            Some(s) => format!("{e:+.2} us, {} of the difference", pct(s)),
            None => format!("{e:+.2} us"),
        }
    };
    Some(match &f.basis {
        Basis::None => return None,
        Basis::Measured { from } => format!("effect {}; measured: {from}", us(f)),
        Basis::Model { model } => format!("effect {}; {model}", us(f)),
        Basis::Through { cause } => format!("effect {}, measured as the {}", us(f), cause.title()),
        Basis::CountedUnder { cause } => format!("counted under {}", cause.title()),
        Basis::Rest { why } => format!(
            "effect {}: the rest, as the one cause left that differs ({why})",
            us(f)
        ),
        Basis::NotEstimated { why } => why.clone(),
    })
}

impl Explanation {
    /// The answer in one line.
    pub fn answer_text(&self) -> String {
        match &self.answer {
            Answer::Same => "Same: A and B are the same measurement; nothing differs.".into(),
            Answer::SingleSample => {
                "A single sample: noise cannot be told from a change; take more samples.".into()
            }
            Answer::WithinNoise => "Within noise: the intervals of the medians overlap.".into(),
            Answer::Cause { cause, share } => format!(
                "Most likely cause: {}. Share: {} of the difference{}.",
                cause.title(),
                pct(*share),
                // A share above the whole: other causes, what they do together or the
                // remainder undid part of it.
                if *share > 1.0 {
                    " (more than all of it: what else differs pulled the other way)"
                } else {
                    ""
                }
            ),
            Answer::Together => {
                "No single cause accounts for most of the difference; together the causes above account for it within noise.".into()
            }
            Answer::Unexplained { share } => {
                format!("No cause accounts for it: unexplained: {} of the difference.", pct(*share))
            }
        }
    }

    /// The report as text: the two times, then every check, then the answer.
    pub fn render(&self, a: &Measurement, b: &Measurement) -> String {
        let line = |tag: &str, m: &Measurement| {
            format!(
                "{tag}: {}  {}  {}  median {:.2} us [{:.2}, {:.2}], n={}\n",
                m.subject.name,
                m.cache.name(),
                m.method.name(),
                m.summary.median,
                m.summary.ci_low,
                m.summary.ci_high,
                m.summary.n
            )
        };
        let mut s = line("A", a) + &line("B", b);
        s += &format!(
            "B − A = {:+.2} us; B/A = {:.3} (the intervals allow {:.3} to {:.3}): {}\n\n",
            self.difference_us,
            self.ratio,
            self.ratio_low,
            self.ratio_high,
            if self.beyond_noise {
                "a difference beyond noise"
            } else {
                "within noise"
            }
        );
        for f in &self.findings {
            let v = match f.verdict {
                Verdict::Differs => "DIFFERS  ",
                Verdict::RuledOut => "ruled out",
                Verdict::Unknown => "unknown  ",
            };
            s += &format!("  {v}  {}: {}\n", f.cause.title(), f.detail);
            if let Some(e) = effect(f) {
                s += &format!("             {e}\n");
            }
        }
        s += "\n";
        if self.beyond_noise {
            let parts: Vec<String> = self
                .causes
                .iter()
                .filter_map(|c| self.findings.iter().find(|f| f.cause == *c))
                .filter_map(|f| {
                    let share = f.share?;
                    Some(format!("{} {}", f.cause.title(), pct(share)))
                })
                .collect();
            if !parts.is_empty() {
                s += &format!("Shares of B − A: {}.\n", parts.join("; "));
            }
            for t in &self.together {
                let noise = match (t.low_us, t.high_us) {
                    (Some(lo), Some(hi)) => format!(
                        "; {} (the intervals allow {lo:+.2} to {hi:+.2} us)",
                        if lo <= 0.0 && 0.0 <= hi {
                            "within noise"
                        } else {
                            "beyond noise"
                        }
                    ),
                    _ => String::new(),
                };
                s += &format!(
                    "Together: {:+.2} us ({}) beyond the causes' effects alone: {}{noise}.\n",
                    t.effect_us,
                    t.share.map_or("–".into(), pct),
                    t.detail
                );
            }
            s += &format!(
                "Remainder: {:+.2} us ({}), {} (the intervals allow {:+.2} to {:+.2} us){}.\n",
                self.remainder_us,
                self.remainder_share.map_or("–".into(), pct),
                if self.remainder_within_noise {
                    "within noise"
                } else {
                    "beyond noise"
                },
                self.noise_low_us,
                self.noise_high_us,
                self.remainder_detail
                    .as_ref()
                    .map_or(String::new(), |d| format!(": {d}"))
            );
        }
        s += &self.answer_text();
        s += "\n";
        let named = match &self.answer {
            Answer::Cause { cause, .. } => Some(*cause),
            _ => None,
        };
        let others: Vec<&str> = self
            .causes
            .iter()
            .filter(|c| Some(**c) != named && !matches!(c, super::Cause::Noise))
            .map(|c| c.title())
            .collect();
        if !others.is_empty() {
            s += &format!("Also differing: {}.\n", others.join("; "));
        }
        s
    }
}
