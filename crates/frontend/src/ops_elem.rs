//! `fd.ops` calls of the op table's ternary kind, and the compositions
//! nvFuser builds from table ops (csrc/ops/arith.cpp: `add_alpha`,
//! `sub_alpha`, `addcmul` are a mul and an add after casting every operand
//! to the operands' common dtype; nothing of theirs reaches its kernels).

use crate::error::PResult;
use crate::ops::{bind, Call};
use crate::parse::Body;
use fusebench_ir::infer::common_dtype;
use fusebench_ir::{BinaryOp, DType, Op, TernaryOp, ValueId};

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

    /// `add_alpha`, `sub_alpha` and `addcmul`, built as nvFuser builds them;
    /// `None` for other names.
    pub(crate) fn composite(&mut self, name: &str, callee: &str, call: &Call) -> PResult<Option<Op>> {
        let (params, outer): (&'static [&'static str], BinaryOp) = match name {
            "add_alpha" => (&["lhs", "rhs", "alpha"], BinaryOp::Add),
            "sub_alpha" => (&["lhs", "rhs", "alpha"], BinaryOp::Sub),
            "addcmul" => (&["arg", "tensor1", "tensor2", "value"], BinaryOp::Add),
            _ => return Ok(None),
        };
        let bound = bind(callee, call, params, &[])?;
        let mut vs = vec![];
        for p in params {
            let e = bound.req(p)?;
            vs.push(self.operand(e)?);
        }
        let span = call.span;
        let (scalar, tensors) = vs.split_last().expect("at least two operands");
        let vals = self.b.fusion().values.clone();
        if vals[scalar.index()].is_tensor() {
            return Err(crate::error::invalid(
                span,
                format!("{callee}: the last argument ({}) must be a scalar, as in nvFuser", params[params.len() - 1]),
            ));
        }
        let ops: Vec<&fusebench_ir::Value> = tensors.iter().map(|v| &vals[v.index()]).collect();
        let common = common_dtype(&ops, false, true);
        let mut cast = Vec::with_capacity(vs.len());
        for &v in &vs {
            cast.push(self.optional_cast(v, common, span)?);
        }
        // add_alpha: a + b * s; addcmul: a + b * (c * s).
        let product = if cast.len() == 3 {
            self.b.op(Op::Binary { kind: BinaryOp::Mul, a: cast[1], b: cast[2] }, &[])
        } else {
            let inner = self
                .b
                .op(Op::Binary { kind: BinaryOp::Mul, a: cast[2], b: cast[3] }, &[])
                .map_err(|e| self.ir(span, e))?[0];
            self.b.op(Op::Binary { kind: BinaryOp::Mul, a: cast[1], b: inner }, &[])
        }
        .map_err(|e| self.ir(span, e))?[0];
        Ok(Some(Op::Binary { kind: outer, a: cast[0], b: product }))
    }

    /// nvFuser's `optionalCast`: a cast to `d` unless `v` already is `d`, or
    /// is a scalar of the same category (a Double scalar stays Double for a Float op).
    fn optional_cast(&mut self, v: ValueId, d: DType, span: crate::error::Span) -> PResult<ValueId> {
        let val = &self.b.fusion().values[v.index()];
        let same_kind = !val.is_tensor()
            && ((d.is_float() && val.dtype.is_float()) || (d.is_integral() && val.dtype.is_integral()));
        if val.dtype == d || same_kind {
            return Ok(v);
        }
        Ok(self
            .b
            .op(Op::Cast { x: v, dtype: d }, &[])
            .map_err(|e| self.ir(span, e))?[0])
    }
}
