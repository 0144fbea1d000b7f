//! Whether the two medians differ beyond their noise: their 95% intervals
//! overlap or not. What the estimated causes leave is judged against the same
//! intervals (`share.rs`).

use super::check::{Check, Ctx, Est};
use crate::record::Measurement;
use crate::stats::differ;

pub(super) const TITLE: &str = "noise (overlapping intervals)";

/// The same measurement on both sides: the same samples in the same order
/// (for results without samples, the same summary).
pub(super) fn same_samples(a: &Measurement, b: &Measurement) -> bool {
    let times = |m: &Measurement| m.samples.iter().map(|s| s.time_us).collect::<Vec<_>>();
    if a.samples.is_empty() && b.samples.is_empty() {
        a.summary == b.summary
    } else {
        times(a) == times(b)
    }
}

pub(super) fn check(ctx: &Ctx) -> Check {
    let (sa, sb) = (&ctx.a().summary, &ctx.b().summary);
    if same_samples(ctx.a(), ctx.b()) {
        return Check::ruled_out(format!(
            "the same {} samples on both sides: no difference",
            sa.n
        ));
    }
    let beyond = differ(sa, sb);
    let detail = format!(
        "95% intervals of the medians: A [{:.2}, {:.2}] us, B [{:.2}, {:.2}] us{}",
        sa.ci_low,
        sa.ci_high,
        sb.ci_low,
        sb.ci_high,
        if beyond {
            ", disjoint"
        } else {
            ", overlapping: the difference is within noise"
        }
    );
    if beyond {
        Check::ruled_out(detail)
    } else {
        Check::differs(detail, Est::None)
    }
}
