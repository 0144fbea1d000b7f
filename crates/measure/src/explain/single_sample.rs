//! A single sample has no interval: a change cannot be told from noise.

use super::check::{Check, Ctx, Est};

pub(super) const TITLE: &str = "a single sample";

pub(super) fn check(ctx: &Ctx) -> Check {
    let (na, nb) = (ctx.a().summary.n, ctx.b().summary.n);
    if na < 2 || nb < 2 {
        Check::differs(
            format!(
                "A has {}, B {nb}: one sample has no interval, so noise cannot be told from a change",
                crate::plural(na, "sample")
            ),
            Est::None,
        )
    } else {
        Check::ruled_out(format!("{na} and {nb} samples"))
    }
}
