//! The fusion's definition. A definition declares its inputs' layouts, so
//! when the layouts differ too, the more specific cause (the layout) holds
//! the effect. Otherwise, when the two were timed differently, B's sibling at
//! A's conditions less A measures it (`Ctx::subject_check`); else it is not
//! measured on its own and takes what the measured causes leave (or the
//! kernels' difference, `kernels.rs`).

use super::check::{Check, Ctx, Est};
use super::Cause;

pub(super) const TITLE: &str = "different fusion definition";

pub(super) fn check(ctx: &Ctx) -> Check {
    let (sa, sb) = (&ctx.a().subject, &ctx.b().subject);
    if sa.definition_hash == sb.definition_hash {
        return Check::ruled_out(format!("same definition ({})", sa.definition_hash));
    }
    let detail = format!(
        "definitions differ ({} vs {}): {} vs {}",
        sa.definition_hash, sb.definition_hash, sa.name, sb.name
    );
    if let Some(c) = ctx.subject_check(Cause::Fusion, &detail) {
        return c;
    }
    if ctx.differs(Cause::InputLayout) {
        return Check::differs(
            format!("{detail}; the inputs' layouts, which a definition declares, differ too: counted under input layout"),
            Est::CountedUnder(Cause::InputLayout, None),
        );
    }
    Check::differs(detail, Est::open("not measured separately"))
}
