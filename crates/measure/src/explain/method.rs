//! How the time was taken. CUDA events around the launches hold the launch
//! processing and the gaps between kernels; CUPTI kernel records hold only the
//! kernels, and CUPTI itself slows some kernels. A record's sibling by the
//! other method (an events sibling of a CUPTI record is timed with CUPTI
//! paused) measures the effect on A's subject under A's policy: A's sibling
//! less A. Without one, the model: a CUPTI record that also timed each sample
//! by events gives the overhead per kernel o = (events median − CUPTI
//! median) / kernels, and the events side's time holds o for each kernel it
//! launches; it cannot see CUPTI's own slowdown of a kernel.

use super::check::{is_events, launches, Check, Ctx, Est, OVERHEAD_MODEL};
use super::Side;
use crate::record::Method;

pub(super) const TITLE: &str = "different timing method";

fn words(s: &Side) -> String {
    if let Some(t) = &s.timed_by {
        return t.clone();
    }
    match s.record.method {
        Method::Cupti => "CUPTI kernel records (the kernels' own start to end)",
        Method::CudaEvents => {
            "CUDA events around the launches (launch processing and gaps between kernels inside)"
        }
        Method::CudaEventsBatch => {
            "CUDA events around many launches back to back, divided by their count"
        }
        Method::HostClock => {
            "a host clock around the call (the call itself, the launches and the wait for the GPU)"
        }
    }
    .to_string()
}

pub(super) fn check(ctx: &Ctx) -> Check {
    let (a, b) = (ctx.a(), ctx.b());
    if a.method == b.method && ctx.a.timed_by == ctx.b.timed_by {
        return Check::ruled_out(format!("both {}", words(ctx.a)));
    }
    let detail = format!("A {} vs B {}", words(ctx.a), words(ctx.b));
    if a.method == b.method {
        // The same method by different tools: what each tool adds is not measured.
        return Check::differs(
            detail,
            Est::open("not estimated: the two tools' ways of taking it are not measured against each other"),
        );
    }
    let pair = [a.method, b.method];
    let cupti_vs_events = pair.contains(&Method::Cupti) && pair.contains(&Method::CudaEvents);
    if !cupti_vs_events {
        return Check::differs(
            detail,
            Est::open("not estimated: no record times the same samples both ways"),
        );
    }
    if let Some(step) = ctx.method_step() {
        return step.check(&detail);
    }
    // The events side is the slower one: its window holds the overhead.
    let (events, sign) = if is_events(b) { (b, 1.0) } else { (a, -1.0) };
    let Some(o) = ctx.overhead() else {
        let (low, high) = if sign > 0.0 {
            (0.0, f64::INFINITY)
        } else {
            (f64::NEG_INFINITY, 0.0)
        };
        return Check::differs(
            detail,
            Est::Open {
                why: "not estimated: no sibling by the other method, and neither record holds \
                      both methods' times of the same samples"
                    .into(),
                low,
                high,
            },
        );
    };
    let k = launches(events);
    let effect = sign * o.per_kernel_us * k as f64;
    Check::differs(
        format!(
            "{detail}; {} holds both times of its samples: events median {:.2} us − CUPTI median {:.2} us \
             over {} = {:.2} us per kernel; the events side launches {k}: {effect:+.2} us",
            o.from,
            o.events_us,
            o.cupti_us,
            crate::plural(o.kernels.max(1), "kernel"),
            o.per_kernel_us,
        ),
        Est::Model {
            us: effect,
            model: OVERHEAD_MODEL.into(),
        },
    )
}
