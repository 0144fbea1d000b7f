//! `fd.ops` calls of the op table's ternary kind: their parameter names.
//! (Ops nvFuser builds from table ops, such as `add_alpha`, are in
//! `ops_composite.rs`.)

use crate::error::PResult;
use crate::ops::{bind, Call};
use crate::parse::Body;
use fusebench_ir::{Op, TernaryOp};

/// Parameter names of a ternary op, in argument order.
fn params(kind: TernaryOp) -> &'static [&'static str] {
    match kind {
        TernaryOp::Lerp => &["start", "end", "weight"],
        TernaryOp::Clamp => &["arg", "min", "max"],
        TernaryOp::Threshold => &["arg", "threshold", "value"],
    }
}

impl Body<'_, '_> {
    /// `fd.ops.NAME(...)` for a table op of three operands.
    pub(crate) fn ternary(&mut self, kind: TernaryOp, callee: &str, call: &Call) -> PResult<Op> {
        let p = params(kind);
        let a = bind(callee, call, p, &[])?;
        let (x, y, z) = (a.req(p[0])?, a.req(p[1])?, a.req(p[2])?);
        let (a, b, c) = (self.operand(x)?, self.operand(y)?, self.operand(z)?);
        Ok(Op::Ternary { kind, a, b, c })
    }
}
