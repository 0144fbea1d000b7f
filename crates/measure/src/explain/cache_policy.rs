//! The cache policy (cold, warm, rotate, in-program) and, for two cold
//! records, how each sample was prepared (a write or a read flush, code
//! eviction, input placements). Measured by a sibling under the other policy
//! (`Ctx::policy_check`). Siblings differ from their record by the policy
//! only, never by the set-up, so two cold set-ups, and a record without
//! siblings, are estimated from the two copy ceilings, each timed under its
//! record's policy and set-up (`Ctx::cache_effect`).

use super::check::{Check, Ctx, Est};
use super::working_set::fits_l2;
use super::Cause;

pub(super) const TITLE: &str = "different cache policy";

pub(super) fn check(ctx: &Ctx) -> Check {
    let (a, b) = (ctx.a(), ctx.b());
    let setups_differ = a.cache == b.cache
        && matches!((&a.cold_setup, &b.cold_setup), (Some(x), Some(y)) if x != y);
    if a.cache == b.cache && a.cold_setup.is_some() != b.cold_setup.is_some() {
        let (which, other) = if a.cold_setup.is_none() {
            ("A", b)
        } else {
            ("B", a)
        };
        return Check::unknown(format!(
            "both {}; {which}'s set-up is not recorded, the other's is {}",
            a.cache.name(),
            other.cold_setup.as_deref().unwrap_or("")
        ));
    }
    if a.cache == b.cache && !setups_differ {
        return Check::ruled_out(format!("both {}", a.cache.name()));
    }
    let detail = if setups_differ {
        format!(
            "both {}, but prepared differently: A {} vs B {} (a read flush leaves no dirty lines, warm instruction caches speed the first blocks)",
            a.cache.name(),
            a.cold_setup.as_deref().unwrap_or(""),
            b.cold_setup.as_deref().unwrap_or("")
        )
    } else {
        format!(
            "A {} vs B {}: {}",
            a.cache.name(),
            b.cache.name(),
            if fits_l2(a) == Some(true) || fits_l2(b) == Some(true) {
                "the working set fits in L2, so the policy that keeps L2 reads from L2"
            } else {
                "the working set exceeds L2, so the policies differ by what the flush leaves (dirty lines, cold TLBs)"
            }
        )
    };
    if ctx.differs(Cause::WorkingSetVsL2) {
        return Check::differs(
            format!("{detail}; its effect is counted under working set vs L2 (the same mechanism)"),
            Est::CountedUnder(Cause::WorkingSetVsL2, None),
        );
    }
    match ctx.policy_check(&detail) {
        Ok(c) => c,
        Err(why) => Check::differs(detail, Est::open(format!("not measured: {why}"))),
    }
}
