//! Ops nvFuser itself builds from other ops, read into the same ops nvFuser
//! builds (so their dtype rules and GPU lowering come with them; `print`
//! prints those ops): `add_alpha`, `sub_alpha`, `addcmul`
//! (csrc/ops/arith.cpp), `var` and the legacy `batch_norm`
//! (csrc/ops/normalization.cpp). This is their one home: a new composite op
//! is a name in [`COMPOSITES`], its output count in `outputs`, and a
//! function here called from `expanded`. Intermediate values are created in
//! the order the printed script creates them again, named after the assigned
//! name (`v__mean`) or left unnamed, so the printed script reads back the
//! same fusion.

use crate::error::{invalid, PResult, Span};
use crate::expr::ExprKind;
use crate::ops::{bind, Call};
use crate::parse::Body;
use fusebench_ir::infer::common_dtype;
use fusebench_ir::{BinaryOp, DType, Literal, Op, ReduceOp, UnaryOp, Value, ValueDef, ValueId};

/// Every `fd.ops` name read as a composition of other ops.
pub(crate) const COMPOSITES: &[&str] = &["add_alpha", "sub_alpha", "addcmul", "var", "batch_norm"];

pub(crate) fn is_composite(name: &str) -> bool {
    COMPOSITES.contains(&name)
}

/// How many values composite `name` returns.
fn outputs(name: &str) -> usize {
    if name == "batch_norm" {
        3
    } else {
        1
    }
}

impl Body<'_, '_> {
    fn emit(&mut self, span: Span, op: Op, name: &str) -> PResult<ValueId> {
        let outs = self.b.op(op, &[name]).map_err(|e| self.ir(span, e))?;
        Ok(outs[0])
    }

    fn bin(&mut self, span: Span, kind: BinaryOp, a: ValueId, b: ValueId, name: &str) -> PResult<ValueId> {
        self.emit(span, Op::Binary { kind, a, b }, name)
    }

    /// Extents of `x`, for the element counts nvFuser multiplies in as doubles.
    fn extents(&self, x: ValueId) -> Vec<usize> {
        self.b.fusion().value(x).shape.clone().unwrap_or_default()
    }

    /// Reads composite `fd.ops.NAME(...)` assigned to `targets`.
    pub(crate) fn expanded(&mut self, name: &str, call: &Call, targets: &[String]) -> PResult<()> {
        let callee = format!("fd.ops.{name}");
        let want = outputs(name);
        if targets.len() != want {
            return Err(invalid(
                call.span,
                format!("{callee} returns {want} value{}; assign {}", if want == 1 { "" } else { "s" },
                    if want == 1 { "it to one name" } else { "them as `y, mean, invstd = ...`" }),
            ));
        }
        // The script binds the targets after the call, as Python does (the
        // last of a name given twice wins), but the composite's ops define its
        // outputs among them: an output named by a target that is given twice
        // or already bound (an operand of the call among them) is built under
        // a name of its own, so that no op of the composite reads a name its
        // own output took before it (printing then reads back equal).
        let built: Vec<String> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if targets[i + 1..].contains(t) || self.names.contains_key(t) || self.vectors.contains_key(t) {
                    format!("{t}__shadowed{i}")
                } else {
                    t.clone()
                }
            })
            .collect();
        let outs = match name {
            "var" => vec![self.var(&callee, call, &built[0])?],
            "batch_norm" => self.batch_norm(&callee, call, &built)?,
            "add_alpha" | "sub_alpha" | "addcmul" => vec![self.scaled(name, &callee, call, &built[0])?],
            _ => return Err(invalid(call.span, format!("{callee}: listed in COMPOSITES but built nowhere"))),
        };
        for (t, v) in targets.iter().zip(outs) {
            self.vectors.remove(t);
            self.names.insert(t.clone(), v);
        }
        Ok(())
    }

    /// nvFuser's `variance`: mean = sum(x, keepdim) / n, then
    /// sum((x - mean)^2) * 1 / max(n - correction, 0).
    fn var(&mut self, callee: &str, call: &Call, t: &str) -> PResult<ValueId> {
        let a = bind(callee, call, &["arg", "dims", "correction", "keepdim"], &[("axes", "dims"), ("dim", "dims")])?;
        let x = self.operand(a.req("arg")?)?;
        let dims = self.ints(a.req("dims")?, "dims")?;
        let correction = a.opt("correction").map(|e| self.int(e, "correction")).transpose()?.unwrap_or(1);
        let keepdim = a.get("keepdim").map(|e| self.boolean(e, "keepdim")).transpose()?.unwrap_or(false);
        if correction < 0 {
            return Err(invalid(call.span, format!("{callee}: correction must be non-negative, got {correction}")));
        }
        let s = self.extents(x);
        let rd = fusebench_ir::infer::norm_dims("var", &dims, s.len()).map_err(|e| self.ir(call.span, e))?;
        let n: f64 = rd.iter().map(|&d| s[d] as f64).product();
        let sp = call.span;
        let sum = |dims: &Vec<i64>, x, keepdim| Op::Reduce { kind: ReduceOp::Sum, x, dims: dims.clone(), keepdim, dtype: None };
        let total = self.emit(sp, sum(&dims, x, true), &format!("{t}__sum"))?;
        let nf = self.b.literal(Literal::Float(n));
        let mean = self.bin(sp, BinaryOp::Div, total, nf, &format!("{t}__mean"))?;
        let dev = self.bin(sp, BinaryOp::Sub, x, mean, &format!("{t}__dev"))?;
        let sq = self.bin(sp, BinaryOp::Mul, dev, dev, &format!("{t}__sq"))?;
        let ssq = self.emit(sp, sum(&dims, sq, keepdim), &format!("{t}__ssq"))?;
        let denom = (n - correction as f64).max(0.0);
        let r = self.b.literal(Literal::Float(1.0 / denom));
        self.bin(sp, BinaryOp::Mul, ssq, r, t)
    }

    /// Legacy `batch_norm` (nvFuser's `batch_norm` in normalization.cpp):
    /// statistics over every dim but the channels (dim 1, or the last with
    /// `channels_last`), from the batch (welford) when training or without
    /// running stats, else from the running stats.
    fn batch_norm(&mut self, callee: &str, call: &Call, t: &[String]) -> PResult<Vec<ValueId>> {
        let a = bind(
            callee,
            call,
            &["arg", "weight", "bias", "running_mean", "running_var", "momentum", "eps", "training", "channels_last"],
            &[],
        )?;
        let x = self.operand(a.req("arg")?)?;
        let mut opt = |p: &str| -> PResult<Option<ValueId>> { a.opt(p).map(|e| self.operand(e)).transpose() };
        let (weight, bias) = (opt("weight")?, opt("bias")?);
        let (rmean, rvar) = (opt("running_mean")?, opt("running_var")?);
        let momentum = self.operand(a.req("momentum")?)?;
        let eps = self.operand(a.req("eps")?)?;
        let training = self.boolean(a.req("training")?, "training")?;
        let channels_last = a.get("channels_last").map(|e| self.boolean(e, "channels_last")).transpose()?.unwrap_or(false);
        if rmean.is_some() != rvar.is_some() {
            return Err(invalid(call.span, format!("{callee}: running_mean and running_var come in pairs")));
        }
        let s = self.extents(x);
        if s.len() < 2 {
            return Err(invalid(call.span, format!("{callee} needs an input of rank 2 or more")));
        }
        let c = if channels_last { s.len() - 1 } else { 1 };
        let axes: Vec<i64> = (0..s.len()).filter(|&d| d != c).map(|d| d as i64).collect();
        let mask: Vec<bool> = (0..s.len()).map(|d| d != c).collect();
        let n: f64 = axes.iter().map(|&d| s[d as usize] as f64).product();
        let sp = call.span;
        let y = &t[0];
        let bcast = |this: &mut Self, v: ValueId, name: String| {
            this.emit(sp, Op::Broadcast { x: v, is_broadcast_dim: mask.clone() }, &name)
        };
        let (mean, invstd, xs) = match (rmean, rvar) {
            (Some(rm), Some(rv)) if !training => {
                let rmb = bcast(self, rm, format!("{y}__rmean"))?;
                let xs = self.bin(sp, BinaryOp::Sub, x, rmb, &format!("{y}__xs"))?;
                let ve = self.bin(sp, BinaryOp::Add, rv, eps, &format!("{y}__var_eps"))?;
                let inv = self.emit(sp, Op::Unary { kind: UnaryOp::Rsqrt, x: ve }, &t[2])?;
                (rm, inv, xs)
            }
            _ => {
                let names = [t[1].clone(), format!("{y}__m2"), format!("{y}__n")];
                let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
                let w = self.b.op(Op::Welford { x, dims: axes.clone() }, &names).map_err(|e| self.ir(sp, e))?;
                let mb = bcast(self, w[0], format!("{y}__meanb"))?;
                let xs = self.bin(sp, BinaryOp::Sub, x, mb, &format!("{y}__xs"))?;
                let r = self.b.literal(Literal::Float(1.0 / n));
                let var = self.bin(sp, BinaryOp::Mul, w[1], r, &format!("{y}__var"))?;
                let ve = self.bin(sp, BinaryOp::Add, var, eps, &format!("{y}__var_eps"))?;
                let inv = self.emit(sp, Op::Unary { kind: UnaryOp::Rsqrt, x: ve }, &t[2])?;
                if let (Some(rm), Some(rv)) = (rmean, rvar) {
                    let running = Running { mean: rm, var: rv, momentum, n };
                    self.update_running_stats(callee, sp, y, running, w[0], w[1])?;
                }
                (w[0], inv, xs)
            }
        };
        let ib = bcast(self, invstd, format!("{y}__invstdb"))?;
        let last = weight.is_none() && bias.is_none();
        let (norm, scaled) = (format!("{y}__norm"), format!("{y}__scaled"));
        let mut out = self.bin(sp, BinaryOp::Mul, xs, ib, if last { y } else { &norm })?;
        if let Some(w) = weight {
            let wb = bcast(self, w, format!("{y}__wb"))?;
            out = self.bin(sp, BinaryOp::Mul, out, wb, if bias.is_none() { y } else { &scaled })?;
        }
        if let Some(b) = bias {
            let bb = bcast(self, b, format!("{y}__bb"))?;
            out = self.bin(sp, BinaryOp::Add, out, bb, y)?;
        }
        Ok(vec![out, mean, invstd])
    }

    /// nvFuser's `add_alpha` (a + b * s), `sub_alpha` (a - b * s) and
    /// `addcmul` (a + b * (c * s)), csrc/ops/arith.cpp: every operand is cast
    /// to the operands' common dtype first (`optionalCast`), so nothing of
    /// theirs reaches a kernel. Values are created in the order the printed
    /// script creates them again (a literal at the first op that reads it),
    /// so that printing and reading back gives the same fusion; the last op
    /// is named `t`.
    fn scaled(&mut self, name: &str, callee: &str, call: &Call, t: &str) -> PResult<ValueId> {
        let (params, outer): (&'static [&'static str], BinaryOp) = match name {
            "add_alpha" => (&["lhs", "rhs", "alpha"], BinaryOp::Add),
            "sub_alpha" => (&["lhs", "rhs", "alpha"], BinaryOp::Sub),
            _ => (&["arg", "tensor1", "tensor2", "value"], BinaryOp::Add),
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
        self.bin(span, outer, a, product, t)
    }

    /// Training with running stats: nvFuser writes
    /// `running * (1 - momentum) + batch * momentum` back into running_mean and
    /// running_var (the batch variance unbiased: var_sum / (n - 1)), as outputs
    /// aliased to those inputs. A running stat the script cast first is
    /// written back into the input it was cast from, in that input's dtype.
    fn update_running_stats(
        &mut self,
        callee: &str,
        sp: Span,
        y: &str,
        r: Running,
        mean: ValueId,
        var_sum: ValueId,
    ) -> PResult<()> {
        let one = self.b.literal(Literal::Float(1.0));
        let rev = self.bin(sp, BinaryOp::Sub, one, r.momentum, &format!("{y}__rev_momentum"))?;
        let unbiased = self.b.literal(Literal::Float(1.0 / (r.n - 1.0)));
        let var = self.bin(sp, BinaryOp::Mul, var_sum, unbiased, &format!("{y}__unbiased_var"))?;
        for (stat, batch, what) in [(r.mean, mean, "mean"), (r.var, var, "var")] {
            let cur = self.bin(sp, BinaryOp::Mul, batch, r.momentum, &format!("{y}__cur_{what}"))?;
            let old = self.bin(sp, BinaryOp::Mul, stat, rev, &format!("{y}__old_{what}"))?;
            let new = self.bin(sp, BinaryOp::Add, old, cur, &format!("{y}__new_{what}"))?;
            let f = self.b.fusion();
            let target = if f.inputs.contains(&stat) {
                stat
            } else {
                match f.producer(stat).map(|n| &n.op) {
                    Some(Op::Cast { x, .. }) if f.inputs.contains(x) => *x,
                    _ => {
                        return Err(invalid(
                            sp,
                            format!("{callee}: running_{what} must be a fusion input (or a cast of one), as nvFuser updates it in place"),
                        ))
                    }
                }
            };
            let (want, have) = (f.value(target).dtype, f.value(new).dtype);
            let new = if want == have {
                new
            } else {
                self.emit(sp, Op::Cast { x: new, dtype: want }, &format!("{y}__new_{what}_cast"))?
            };
            self.b.add_output_alias(new, target).map_err(|e| self.ir(sp, e))?;
        }
        Ok(())
    }
}

/// nvFuser's `optionalCast`: a cast to `d` unless `v` already is `d`, or is a
/// scalar of the same category (a Double scalar stays Double for a Float op).
fn needs_cast(v: &Value, d: DType) -> bool {
    let same_kind = !v.is_tensor()
        && ((d.is_float() && v.dtype.is_float()) || (d.is_integral() && v.dtype.is_integral()));
    !(v.dtype == d || same_kind)
}

/// The running statistics of a training `batch_norm` and what updates them.
struct Running {
    mean: ValueId,
    var: ValueId,
    momentum: ValueId,
    n: f64,
}
