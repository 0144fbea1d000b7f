//! In a program or standalone: what ran before the fusion. Timed inside a
//! program, its cache policy is `in_program` (L2 holds what the earlier
//! fusions left), so against a standalone record the context is the cache
//! policy's mechanism and counted there. Otherwise it is a change of the
//! subject, measured as one (`Ctx::subject_check`) where siblings allow.

use super::check::{Check, Ctx, Est};
use super::Cause;
use crate::record::CachePolicy;

pub(super) const TITLE: &str = "different context (what ran before)";

pub(super) fn check(ctx: &Ctx) -> Check {
    let name = |c: &Option<String>| c.clone().unwrap_or_else(|| "standalone".into());
    let (ca, cb) = (name(&ctx.a().context), name(&ctx.b().context));
    let detail = format!("A {ca}; B {cb}");
    if ca == cb {
        return Check::ruled_out(detail);
    }
    let in_program = [ctx.a().cache, ctx.b().cache]
        .iter()
        .filter(|&&c| c == CachePolicy::InProgram)
        .count()
        == 1;
    let holder = [Cause::WorkingSetVsL2, Cause::CachePolicy]
        .into_iter()
        .find(|&c| ctx.differs(c));
    match holder {
        Some(c) if in_program => Check::differs(
            format!("{detail}; what ran before is what the in-program policy keeps in L2: counted under {}", c.title()),
            Est::CountedUnder(c, None),
        ),
        _ => ctx
            .subject_check(Cause::Context, &detail)
            .unwrap_or_else(|| Check::differs(detail, Est::open("not measured separately"))),
    }
}
