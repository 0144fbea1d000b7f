//! Working set vs L2: a policy that keeps L2 between samples (warm) reads a
//! working set that fits from L2, the cold policy from DRAM. The same
//! mechanism as the cache policy, measured the same way (a sibling under the
//! other policy, else the copy ceilings: a warm copy of bytes that fit in L2
//! is fast); when this differs, the effect is counted here and the cache
//! policy says so.

use super::check::{mb, Check, Ctx, Est};
use crate::record::{CachePolicy, Measurement};

pub(super) const TITLE: &str = "working set vs L2 size";

/// Whether the policy leaves earlier data in L2 (no flush, no rotation).
pub(super) fn keeps_l2(c: CachePolicy) -> bool {
    matches!(c, CachePolicy::Warm | CachePolicy::InProgram)
}

/// `Some(true)` when the working set fits in L2.
pub(super) fn fits_l2(m: &Measurement) -> Option<bool> {
    let bytes = m.bytes?;
    (m.environment.l2_bytes > 0).then_some(bytes <= m.environment.l2_bytes)
}

/// Whether the reads come from L2: the fusion runs back to back on a working
/// set that fits. In a program, L2 holds what ran before: not known to be its own.
fn from_l2(m: &Measurement) -> Option<bool> {
    match m.cache {
        CachePolicy::InProgram => None,
        c => fits_l2(m).map(|fits| fits && keeps_l2(c)),
    }
}

fn describe(m: &Measurement) -> String {
    let policy = m.cache.name();
    match (keeps_l2(m.cache), fits_l2(m), m.bytes) {
        (false, _, _) => format!("{policy} (L2 flushed or rotated)"),
        (true, _, _) if m.cache == CachePolicy::InProgram => {
            "in_program (L2 holds what the earlier fusions of the program left)".to_string()
        }
        (true, Some(true), Some(by)) => format!(
            "{policy} with a working set of {} that fits in the {} L2: reads come from L2 ({:.2} TB/s implied)",
            mb(by),
            mb(m.environment.l2_bytes),
            by as f64 / m.summary.median / 1e6
        ),
        (true, Some(false), Some(by)) => format!(
            "{policy} with a working set of {}, more than the {} L2",
            mb(by),
            mb(m.environment.l2_bytes)
        ),
        _ => format!("{policy} (working set not recorded)"),
    }
}

pub(super) fn check(ctx: &Ctx) -> Check {
    let (a, b) = (ctx.a(), ctx.b());
    let detail = format!("A: {}; B: {}", describe(a), describe(b));
    let (la, lb) = (from_l2(a), from_l2(b));
    let differs = match (la, lb) {
        (Some(x), Some(y)) => x != y,
        (Some(true), None) | (None, Some(true)) => true,
        _ if !keeps_l2(a.cache) && !keeps_l2(b.cache) => false,
        _ => return Check::unknown(detail),
    };
    if !differs {
        return Check::ruled_out(detail);
    }
    match ctx.policy_check(&detail) {
        Ok(c) => c,
        Err(why) => {
            // Reading from L2 can only make that side faster.
            let (low, high) = match (la, lb) {
                (Some(false), Some(true)) => (f64::NEG_INFINITY, 0.0),
                (Some(true), Some(false)) => (0.0, f64::INFINITY),
                _ => (f64::NEG_INFINITY, f64::INFINITY),
            };
            Check::differs(
                detail,
                Est::Open {
                    why: format!("not measured: {why}"),
                    low,
                    high,
                },
            )
        }
    }
}
