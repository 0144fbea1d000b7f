//! `fd.ops` calls of the op table's ternary kind, and the compositions
//! nvFuser builds from table ops (csrc/ops/arith.cpp: `add_alpha`,
//! `sub_alpha`, `addcmul` are a mul and an add after casting every operand
//! to the operands' common dtype; nothing of theirs reaches its kernels).

use crate::error::PResult;
use crate::ops::{bind, Call};
use crate::parse::Body;
use fusebench_ir::infer::common_dtype;
use crate::error::invalid;
use crate::expr::ExprKind;
use fusebench_ir::{BinaryOp, DType, Op, TernaryOp, Value, ValueDef, ValueId};

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
    /// `None` for other names. Values are created in the order the printed
    /// script creates them again (a literal at the first op that reads it),
    /// so that printing and reading back gives the same fusion.
    pub(crate) fn composite(&mut self, name: &str, callee: &str, call: &Call) -> PResult<Option<Op>> {
        let (params, outer): (&'static [&'static str], BinaryOp) = match name {
            "add_alpha" => (&["lhs", "rhs", "alpha"], BinaryOp::Add),
            "sub_alpha" => (&["lhs", "rhs", "alpha"], BinaryOp::Sub),
            "addcmul" => (&["arg", "tensor1", "tensor2", "value"], BinaryOp::Add),
            _ => return Ok(None),
        };
        let bound = bind(callee, call, params, &[])?;
        let exprs = params.iter().map(|p| bound.req(p)).collect::<PResult<Vec<_>>>()?;
        let span = call.span;
        // What each operand is, without creating literal values yet.
        let mut kinds: Vec<Value> = vec![];
        for e in &exprs {
            let v = match &e.kind {
                ExprKind::Name(n) => self.b.fusion().value(self.lookup(n, e.span)?).clone(),
                _ => match e.literal() {
                    Some(l) => {
                        let l = l?;
                        Value { name: String::new(), dtype: l.natural_dtype(), shape: None, def: ValueDef::Literal, constant: Some(l) }
                    }
                    None => return Err(self.operand(e).expect_err("neither a name nor a literal")),
                },
            };
            kinds.push(v);
        }
        let last = kinds.len() - 1;
        if kinds[last].is_tensor() {
            return Err(invalid(
                span,
                format!("{callee}: the last argument ({}) must be a scalar, as in nvFuser", params[last]),
            ));
        }
        let refs: Vec<&Value> = kinds[..last].iter().collect();
        let common = common_dtype(&refs, false, true);
        // Operands needing a cast get it now, in order (their cast nodes print first).
        let mut vals: Vec<Option<ValueId>> = vec![None; exprs.len()];
        for (k, e) in exprs.iter().enumerate() {
            if needs_cast(&kinds[k], common) {
                let v = self.operand(e)?;
                let c = self.b.op(Op::Cast { x: v, dtype: common }, &[]).map_err(|er| self.ir(span, er))?[0];
                vals[k] = Some(c);
            }
        }
        let mut get = |this: &mut Self, k: usize| -> PResult<ValueId> {
            match vals[k] {
                Some(v) => Ok(v),
                None => {
                    let v = this.operand(exprs[k])?;
                    vals[k] = Some(v);
                    Ok(v)
                }
            }
        };
        let mul = |this: &mut Self, a: ValueId, b: ValueId| -> PResult<ValueId> {
            Ok(this.b.op(Op::Binary { kind: BinaryOp::Mul, a, b }, &[]).map_err(|e| this.ir(span, e))?[0])
        };
        // add_alpha: a + b * s; addcmul: a + b * (c * s).
        let product = if exprs.len() == 3 {
            let (b, s) = (get(self, 1)?, get(self, 2)?);
            mul(self, b, s)?
        } else {
            let (c, s) = (get(self, 2)?, get(self, 3)?);
            let inner = mul(self, c, s)?;
            let b = get(self, 1)?;
            mul(self, b, inner)?
        };
        let a = get(self, 0)?;
        Ok(Some(Op::Binary { kind: outer, a, b: product }))
    }
}

/// nvFuser's `optionalCast`: a cast to `d` unless `v` already is `d`, or is a
/// scalar of the same category (a Double scalar stays Double for a Float op).
fn needs_cast(v: &Value, d: DType) -> bool {
    let same_kind = !v.is_tensor()
        && ((d.is_float() && v.dtype.is_float()) || (d.is_integral() && v.dtype.is_integral()));
    !(v.dtype == d || same_kind)
}
