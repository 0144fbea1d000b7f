//! Ops that nvFuser itself builds from other ops (csrc/ops/normalization.cpp):
//! `var` and the legacy `batch_norm`. They are read into the same ops nvFuser
//! builds, so the dtype rules (a bf16 sum rounded to bf16 before the mean, an
//! integer input giving a Double variance) and the GPU lowering come with
//! them; `print` then prints those ops. Intermediate values are named after
//! the assigned name (`v__mean`), so the printed script reads back the same.

use crate::error::{invalid, PResult, Span};
use crate::ops::{bind, Call};
use crate::parse::Body;
use fusebench_ir::{BinaryOp, Literal, Op, ReduceOp, UnaryOp, ValueId};

pub(crate) fn is_composite(name: &str) -> bool {
    matches!(name, "var" | "batch_norm")
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

    /// Reads `fd.ops.var` or `fd.ops.batch_norm` assigned to `targets`.
    pub(crate) fn expanded(&mut self, name: &str, call: &Call, targets: &[String]) -> PResult<()> {
        let callee = format!("fd.ops.{name}");
        let want = if name == "var" { 1 } else { 3 };
        if targets.len() != want {
            return Err(invalid(
                call.span,
                format!("{callee} returns {want} value{}; assign {}", if want == 1 { "" } else { "s" },
                    if want == 1 { "it to one name" } else { "them as `y, mean, invstd = ...`" }),
            ));
        }
        let outs = if name == "var" {
            vec![self.var(&callee, call, &targets[0])?]
        } else {
            self.batch_norm(&callee, call, targets)?
        };
        for (t, v) in targets.iter().zip(outs) {
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

/// The running statistics of a training `batch_norm` and what updates them.
struct Running {
    mean: ValueId,
    var: ValueId,
    momentum: ValueId,
    n: f64,
}
