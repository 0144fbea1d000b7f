//! Clocks and throttling. Every sample carries the SM and memory clocks read
//! right after it. fusebench never changes the clocks, so no sibling runs at
//! the other side's clocks: this stays a model. The memory-bound part of A's time (m, from A's copy
//! ceiling) scales with the memory clock, the rest with the SM clock:
//! B/A = m × memA/memB + (1 − m) × smA/smB, applied to A's time under B's
//! cache policy. Without a ceiling m is unknown, and the effect lies between
//! the two ends (m = 0 and m = 1).

use super::check::{Check, Ctx, Est};
use super::Cause;
use crate::record::Measurement;
use crate::stats::median;

pub(super) const TITLE: &str = "clocks or throttling";

/// Median SM and memory clocks over the samples that carry a reading.
fn clocks(m: &Measurement) -> Option<(f64, f64)> {
    // A reading of 0 MHz is a failed reading, not a clock.
    let read: Vec<_> = m
        .samples
        .iter()
        .filter_map(|s| s.clocks.as_ref())
        .filter(|c| c.sm_mhz > 0 && c.mem_mhz > 0)
        .collect();
    if read.is_empty() {
        return None;
    }
    let sm: Vec<f64> = read.iter().map(|c| c.sm_mhz as f64).collect();
    let mem: Vec<f64> = read.iter().map(|c| c.mem_mhz as f64).collect();
    Some((median(&sm), median(&mem)))
}

pub(super) fn check(ctx: &Ctx) -> Check {
    let (a, b) = (ctx.a(), ctx.b());
    let (ca, cb) = (clocks(a), clocks(b));
    let text = |c: Option<(f64, f64)>| {
        c.map_or("not read".into(), |(sm, mem)| {
            format!("{sm:.0} MHz SM, {mem:.0} MHz memory")
        })
    };
    let detail = format!(
        "median clocks A {}, B {}; throttled samples A {} of {}, B {} of {}",
        text(ca),
        text(cb),
        a.throttled_samples,
        a.summary.n,
        b.throttled_samples,
        b.summary.n
    );
    let throttled = a.throttled_samples > 0 || b.throttled_samples > 0;
    let Some(((sma, mema), (smb, memb))) = ca.zip(cb) else {
        return if throttled {
            Check::differs(
                detail,
                Est::open("not estimated: one side has no clock readings"),
            )
        } else {
            Check::unknown(detail)
        };
    };
    if !throttled && sma == smb && mema == memb {
        return Check::ruled_out(detail);
    }
    // A's kernel time under B's cache policy, which the clocks then scale.
    let ka =
        ctx.kernel_us(a) + ctx.measured(Cause::WorkingSetVsL2) + ctx.measured(Cause::CachePolicy);
    let ratio = |m: f64| m * mema / memb + (1.0 - m) * sma / smb;
    match ctx.memory_share() {
        Ok(m) => {
            let effect = ka * (ratio(m) - 1.0);
            Check::differs(
                format!(
                    "{detail}; A's copy ceiling makes {:.0}% of its time memory-bound: B/A = {m:.2} × {mema:.0}/{memb:.0} + {:.2} × {sma:.0}/{smb:.0} = {:.3}, {effect:+.2} us",
                    100.0 * m,
                    1.0 - m,
                    ratio(m)
                ),
                Est::Model {
                    us: effect,
                    model: "model: A's memory-bound share (from its copy ceiling) scales with \
                            the memory clock, the rest with the SM clock"
                        .into(),
                },
            )
        }
        Err(why) => {
            let (x, y) = (ka * (ratio(0.0) - 1.0), ka * (ratio(1.0) - 1.0));
            Check::differs(
                format!(
                    "{detail}; between {:+.2} us (all SM-bound) and {:+.2} us (all memory-bound)",
                    x, y
                ),
                Est::Open {
                    why: format!(
                        "not measured: {why}, so the memory-bound share of its time is not known"
                    ),
                    low: x.min(y),
                    high: x.max(y),
                },
            )
        }
    }
}
