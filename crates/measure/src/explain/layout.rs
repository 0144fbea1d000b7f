//! The inputs' dtypes, shapes, strides and alignment. When the two were timed
//! differently, B's sibling at A's conditions less A measures the change of
//! the subject, and the layout holds it unless the GPU differs too
//! (`Ctx::subject_check`). Otherwise another layout usually gets other
//! kernels, whose own time difference is then counted here (`kernels.rs`);
//! with the same kernels it takes what the measured causes leave.

use super::check::{Check, Ctx, Est};
use super::Cause;

pub(super) const TITLE: &str = "different input layout or alignment";

pub(super) fn check(ctx: &Ctx) -> Check {
    let (ia, ib) = (&ctx.a().subject.inputs, &ctx.b().subject.inputs);
    if ia.is_empty() != ib.is_empty() {
        return Check::unknown(format!(
            "A records {}, B {}: a record without its inputs cannot be compared",
            crate::plural(ia.len(), "input"),
            ib.len()
        ));
    }
    let mut d = Vec::new();
    if ia.len() != ib.len() {
        d.push(format!("{} inputs vs {}", ia.len(), ib.len()));
    }
    for (i, (x, y)) in ia.iter().zip(ib).enumerate() {
        if x.dtype != y.dtype {
            d.push(format!("input {i}: {} vs {}", x.dtype, y.dtype));
        }
        if x.shape != y.shape {
            d.push(format!("input {i}: shape {:?} vs {:?}", x.shape, y.shape));
        } else if x.strides != y.strides {
            let mut xs = x.strides.clone();
            let mut ys = y.strides.clone();
            xs.sort_unstable();
            ys.sort_unstable();
            let kind = if xs == ys {
                "the same strides in another order (a transposed layout)"
            } else {
                "another layout"
            };
            d.push(format!(
                "input {i}: strides {:?} vs {:?}, {kind}",
                x.strides, y.strides
            ));
        }
        if x.byte_offset != y.byte_offset {
            d.push(format!(
                "input {i}: starts {} vs {} bytes past a 256-byte boundary (alignment)",
                x.byte_offset, y.byte_offset
            ));
        }
    }
    if d.is_empty() {
        Check::ruled_out(format!(
            "{} inputs with the same dtypes, shapes, strides and alignment",
            ia.len()
        ))
    } else {
        let detail = d.join("; ");
        ctx.subject_check(Cause::InputLayout, &detail)
            .unwrap_or_else(|| Check::differs(detail, Est::open("not measured separately")))
    }
}
