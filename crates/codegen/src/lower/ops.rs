//! Ops lowered at one index: elementwise ops through the op table, casts,
//! where-chains as branches (lane-uniform ones computing every lane), inline
//! reductions, pads and concatenations.

use super::*;

impl<'f> Lowerer<'f> {
    /// Opens branch `k` of the value `v`'s if-chain; in a lane-uniform chain,
    /// loads inside may be wide.
    pub(super) fn open_branch(&mut self, header: &str, v: ValueId, k: usize, uniform: bool) {
        if uniform
            && self.lanes.is_some()
            && self.scopes.len() == self.vector_depth + self.branch_path.len()
        {
            self.open(header);
            self.branch_path.push((v, k));
        } else {
            self.open(header);
            self.branch_path.push((v, usize::MAX));
            // A branch that is not uniform ends the wide loads below it.
            self.scopes_block_vectors += 1;
        }
    }

    pub(super) fn close_branch(&mut self, s: &str) {
        if self.branch_path.pop().is_some_and(|(_, k)| k == usize::MAX) {
            self.scopes_block_vectors -= 1;
        }
        self.close(s);
    }

    /// Marks where hoisted array declarations go, if this is the outermost branch.
    pub(super) fn mark_hoist(&mut self) -> bool {
        if self.branch_path.is_empty() && self.scopes.len() == self.vector_depth {
            self.hoist_at = Some(self.code.len());
            true
        } else {
            false
        }
    }

    pub(super) fn lower_op(
        &mut self,
        v: ValueId,
        op: &Op,
        out_index: usize,
        idx: &[Ix],
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let d = f.value(v).dtype;
        let out_shape: Vec<usize> = self.shape(v).to_vec();
        let operand_idx = |this: &Self, x: ValueId| -> Vec<Ix> {
            let s = this.shape(x);
            if this.f.value(x).is_tensor() {
                view::broadcast_operand(idx, s)
            } else {
                vec![]
            }
        };
        if crate::complex::involved(f, op) {
            let mut vals = vec![];
            for x in op.operands() {
                let xi = operand_idx(self, x);
                vals.push((self.value_at(x, &xi)?, f.value(x).dtype));
            }
            let e = crate::complex::lower(f, op, d, &vals).map_err(unsupported)?;
            return Ok(self.bind(v, idx, e));
        }
        let expr = match op {
            Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } => {
                let t = elementwise::op_typing(op, &f.values)
                    .expect("a table op")
                    .map_err(|e| unsupported(e.to_string()))?;
                let mut args = vec![];
                for (k, x) in op.operands().into_iter().enumerate() {
                    let xi = operand_idx(self, x);
                    let xv = self.value_at(x, &xi)?;
                    args.push(ctype::convert(f.value(x).dtype, t.casts[k], &xv));
                }
                let e = match op {
                    Op::Unary { kind, .. } => table_expr(kind.name(), kind.cuda(), t.compute, &args)?,
                    Op::Ternary { kind, .. } => table_expr(kind.name(), kind.cuda(), t.compute, &args)?,
                    Op::Binary { kind, b, .. } => match (kind, f.value(*b).constant) {
                        // Small constant powers as products, as nvFuser does: exact and cheap.
                        (BinaryOp::Pow, Some(p)) if t.compute.is_float() && p.as_f64() == 2.0 => {
                            format!("({} * {})", args[0], args[0])
                        }
                        (BinaryOp::Pow, Some(p)) if t.compute.is_float() && p.as_f64() == 3.0 => {
                            format!("({} * {} * {})", args[0], args[0], args[0])
                        }
                        (BinaryOp::Pow, Some(p)) if t.compute.is_float() && p.as_f64() == 1.0 => {
                            args[0].clone()
                        }
                        _ => table_expr(kind.name(), kind.cuda(), t.compute, &args)?,
                    },
                    _ => unreachable!(),
                };
                if t.out.is_bool() {
                    e
                } else if t.compute == t.out {
                    ctype::round_reduced(t.out, &e)
                } else {
                    ctype::convert(t.compute, t.out, &e)
                }
            }
            Op::Where { cond, a, b } => {
                let (ci, ai, bi) = (
                    operand_idx(self, *cond),
                    operand_idx(self, *a),
                    operand_idx(self, *b),
                );
                let cv = self.value_at(*cond, &ci)?;
                let av = self.value_at(*a, &ai)?;
                let bv = self.value_at(*b, &bi)?;
                let av = ctype::convert(f.value(*a).dtype, d, &av);
                let bv = ctype::convert(f.value(*b).dtype, d, &bv);
                format!("({cv} ? {av} : {bv})")
            }
            Op::Cast { x, dtype } => {
                let xi = operand_idx(self, *x);
                let xv = self.value_at(*x, &xi)?;
                ctype::convert(f.value(*x).dtype, *dtype, &xv)
            }
            Op::Full { fill, .. } => {
                let fv = self.value_at(*fill, &[])?;
                ctype::convert(f.value(*fill).dtype, d, &fv)
            }
            Op::Rng { .. } | Op::RngLike { .. } => self.lower_rng(v, op, idx)?,
            Op::Broadcast {
                x,
                is_broadcast_dim,
            } => {
                let j: Vec<Ix> = idx
                    .iter()
                    .zip(is_broadcast_dim)
                    .filter(|(_, b)| !**b)
                    .map(|(i, _)| i.clone())
                    .collect();
                return self.value_at(*x, &j);
            }
            Op::BroadcastInDim {
                x, broadcast_dims, ..
            } => {
                let xs = self.shape(*x);
                let n = out_shape.len();
                let j = broadcast_dims
                    .iter()
                    .enumerate()
                    .map(|(i, &bd)| {
                        let od = infer::norm_dim("broadcast_in_dim", bd, n).expect("validated");
                        if xs[i] == 1 {
                            Ix::c(0)
                        } else {
                            idx[od].clone()
                        }
                    })
                    .collect::<Vec<_>>();
                return self.value_at(*x, &j);
            }
            Op::Expand { x, .. } => {
                let xs = self.shape(*x);
                let j = xs
                    .iter()
                    .zip(idx)
                    .map(|(&e, i)| if e == 1 { Ix::c(0) } else { i.clone() })
                    .collect::<Vec<_>>();
                return self.value_at(*x, &j);
            }
            Op::Reshape { x, .. } => {
                let j = view::reshape_input_index(idx, self.shape(*x), &out_shape);
                return self.value_at(*x, &j);
            }
            Op::Permute { x, dims } => {
                let n = idx.len();
                let mut j = vec![Ix::c(0); n];
                for (i, &dd) in dims.iter().enumerate() {
                    j[infer::norm_dim("permute", dd, n).expect("validated")] = idx[i].clone();
                }
                return self.value_at(*x, &j);
            }
            Op::Squeeze { x, dims } => {
                let xs = self.shape(*x);
                let sq = infer::norm_dims("squeeze", dims, xs.len()).expect("validated");
                let mut it = idx.iter();
                let j = (0..xs.len())
                    .map(|d| {
                        if sq.contains(&d) {
                            Ix::c(0)
                        } else {
                            it.next().unwrap().clone()
                        }
                    })
                    .collect::<Vec<_>>();
                return self.value_at(*x, &j);
            }
            Op::Slice {
                x,
                start,
                end,
                strides,
                manual_normalization,
            } => {
                let (_, starts, steps) = infer::slice_bounds(
                    "slice",
                    self.shape(*x),
                    start,
                    end,
                    strides,
                    *manual_normalization,
                )
                .expect("validated");
                let j = idx
                    .iter()
                    .enumerate()
                    .map(|(d, i)| i.clone().mul(steps[d] as i64).add(Ix::c(starts[d] as i64)))
                    .collect::<Vec<_>>();
                return self.value_at(*x, &j);
            }
            Op::Complex { .. } => unreachable!("lowered by complex.rs above"),
            Op::Pad { x, widths, value } => return self.lower_pad(v, *x, widths, *value, idx),
            Op::Cat {
                xs,
                dim,
                manual_padding,
            } => return self.lower_cat(v, xs, *dim, *manual_padding, idx),
            Op::IndexSelect { x, index, dim } => {
                let xs = self.shape(*x);
                let d = infer::norm_dim("index_select", *dim, xs.len()).expect("validated");
                let is = self.shape(*index);
                let ii: Vec<Ix> = if is.len() == 1 {
                    vec![idx[d].clone()]
                } else {
                    (0..is.len())
                        .map(|k| if k == d { idx[d].clone() } else { Ix::c(0) })
                        .collect()
                };
                let iv = self.value_at(*index, &ii)?;
                let g = self.fresh("g");
                self.line(&format!(
                    "const {} {g} = ({})({iv});",
                    self.idx_type, self.idx_type
                ));
                let mut j = idx.to_vec();
                j[d] = Ix::var(g);
                return self.value_at(*x, &j);
            }
            Op::Index(o) => match self.lower_index(v, o, idx)? {
                crate::index::Lowered::Expr(e) => e,
                // The gathered element is remembered at this index too, so a
                // second read (a per-row value read early, then used) reuses it.
                crate::index::Lowered::Bound(n) => {
                    self.remember((v, idx.to_vec()), n.clone());
                    return Ok(n);
                }
            },
            // Copies: the element of `x` at the same index. (A stride_order's
            // layout is its allocation, not its values.)
            Op::Set { x, .. } | Op::StrideOrder { x, .. } => return self.value_at(*x, idx),
            Op::Size { .. } => {
                return Err(CodegenError::NoFit(format!(
                    "size {} is a constant and is never lowered",
                    f.value(v).name
                )))
            }
            // Refused before planning (refuse.rs); never reached.
            Op::Matmul { .. } | Op::Linear { .. } | Op::Gemm(_) => {
                return Err(unsupported(format!("{} has no GPU kernel", op.name())))
            }
            Op::Welford { x, dims } if out_index == 2 => {
                let xs = self.shape(*x);
                let dims = infer::norm_dims("welford", dims, xs.len()).expect("validated");
                let n: usize = dims.iter().map(|&d| xs[d]).product();
                return Ok(ctype::literal(d, fusebench_ir::Literal::Int(n as i64)));
            }
            Op::Reduce { x, dims, kind, .. }
                if reduction::Reduction::of(f, node_of(f, v)).is_some_and(|r| r.inline(f)) =>
            {
                return self.lower_inline_reduction(v, *x, dims, *kind, idx);
            }
            Op::Scan { kind, .. } => {
                return Err(CodegenError::Unsupported(format!(
                    "{} result {} is not stored by an earlier kernel",
                    kind.name(),
                    f.value(v).name
                )));
            }
            Op::Reduce { .. } | Op::Welford { .. } | Op::VarMean { .. } => {
                return Err(CodegenError::NoFit(format!(
                    "reduction result {} is neither computed in this kernel nor stored by an earlier one",
                    f.value(v).name
                )));
            }
        };
        Ok(self.bind(v, idx, expr))
    }

    /// A small reduction computed where it is read: a loop over the reduced
    /// elements, accumulating in the reduction's accumulator type.
    pub(super) fn lower_inline_reduction(
        &mut self,
        v: ValueId,
        x: ValueId,
        dims: &[i64],
        kind: ReduceOp,
        idx: &[Ix],
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let xs = self.shape(x).to_vec();
        let rd = infer::norm_dims("reduce", dims, xs.len()).expect("validated");
        let d = f.value(v).dtype;
        let combine = match kind {
            ReduceOp::Sum => reduction::Combine::Sum,
            ReduceOp::Max => reduction::Combine::Max,
            ReduceOp::Min => reduction::Combine::Min,
            ReduceOp::Prod => reduction::Combine::Prod,
        };
        let acc = reduction::acc_for(&combine, d);
        let a = self.fresh("a");
        self.line(&format!(
            "{} {a} = {};",
            ctype::reg(acc),
            reduction::init(&combine, acc)
        ));
        let red_shape: Vec<usize> = rd.iter().map(|&dd| xs[dd]).collect();
        let count: usize = red_shape.iter().product();
        // Unrolled in the source (count is at most INLINE_MAX), so the loads
        // stay in straight-line code where they can be wide.
        let keep = idx.len() == xs.len();
        for r in 0..count {
            let red_idx = view::delinearize(Ix::c(r as i64), &red_shape);
            let mut kept = idx.iter();
            let mut ri = red_idx.into_iter();
            let j: Vec<Ix> = (0..xs.len())
                .map(|dd| {
                    if rd.contains(&dd) {
                        if keep {
                            kept.next();
                        }
                        ri.next().unwrap()
                    } else {
                        kept.next().unwrap().clone()
                    }
                })
                .collect();
            let xv = self.value_at(x, &j)?;
            let xv = ctype::convert(f.value(x).dtype, d, &xv);
            let xv = ctype::convert(d, acc, &xv);
            self.line(&reduction::step(&combine, acc, &a, &xv));
        }
        Ok(self.bind(v, idx, ctype::convert(acc, d, &a)))
    }

    pub(super) fn declare(&mut self, v: ValueId) -> (String, &'static str) {
        let name = self.fresh("v");
        let ty = ctype::reg(self.f.value(v).dtype);
        self.line(&format!("{ty} {name};"));
        (name, ty)
    }

    pub(super) fn lower_pad(
        &mut self,
        v: ValueId,
        x: ValueId,
        widths: &[ValueId],
        value: Option<ValueId>,
        idx: &[Ix],
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let xs = self.shape(x).to_vec();
        let w = infer::pad_widths(&f.graph(), "pad", widths, xs.len())
            .map_err(|e| unsupported(e.to_string()))?;
        let d = f.value(v).dtype;
        let pad_value = match value {
            Some(pv) => {
                let e = self.value_at(pv, &[])?;
                ctype::convert(f.value(pv).dtype, d, &e)
            }
            None => ctype::literal(d, fusebench_ir::Literal::Int(0)),
        };
        // An empty source (a `full` of extent 0 padded out, as Thunder writes
        // a rotary half): every element is padding, with no branch whose
        // source side could never run.
        if xs.contains(&0) {
            return Ok(pad_value);
        }
        let mut j = idx.to_vec();
        let mut conds = Vec::new();
        for (dim, &(before, after)) in w.iter().enumerate() {
            if before == 0 && after == 0 {
                continue;
            }
            j[dim] = idx[dim].clone().add(Ix::c(-before));
            if before > 0 {
                conds.push(format!("{} >= {before}", idx[dim]));
            }
            if after > 0 {
                conds.push(format!("{} < {}", idx[dim], before + xs[dim] as i64));
            }
        }
        if conds.is_empty() {
            return self.value_at(x, &j);
        }
        let uniform = w.iter().enumerate().all(|(dim, &(before, _))| {
            (w[dim] == (0, 0)) || self.lane_uniform(&idx[dim], &[before, before + xs[dim] as i64])
        });
        let lanes = self.all_lanes(uniform, idx);
        self.mark_hoist();
        let (name, _) = self.declare_lanes(v, lanes.len());
        self.open_branch(&format!("if ({}) {{", conds.join(" && ")), v, 0, uniform);
        for (k, li) in lanes.iter().enumerate() {
            let mut j = li.clone();
            for (dim, &(before, _)) in w.iter().enumerate() {
                j[dim] = li[dim].clone().add(Ix::c(-before));
            }
            let inner = self.value_in_lane(k, x, &j)?;
            let inner = ctype::convert(f.value(x).dtype, d, &inner);
            self.line(&format!("{} = {inner};", lane_slot(&name, &lanes, k)));
        }
        self.close_branch("}");
        self.open_branch("else {", v, 1, uniform);
        for k in 0..lanes.len() {
            self.line(&format!("{} = {pad_value};", lane_slot(&name, &lanes, k)));
        }
        self.close_branch("}");
        Ok(self.remember_lanes(v, &name, &lanes))
    }

    pub(super) fn lower_cat(
        &mut self,
        v: ValueId,
        xs: &[ValueId],
        dim: i64,
        manual: bool,
        idx: &[Ix],
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let d = f.value(v).dtype;
        let n = idx.len();
        let dd = infer::norm_dim("cat", dim, n).expect("validated");
        // (source value, first position it owns, end, shift of index)
        let mut parts: Vec<(ValueId, i64, i64)> = Vec::new();
        if manual {
            let ranges = infer::cat_owner_ranges(&f.graph(), "cat", xs, dd)
                .map_err(|e| unsupported(e.to_string()))?;
            for (&x, (s, e)) in xs.iter().zip(ranges) {
                let Some(node) = f.producer(x) else {
                    unreachable!("validated")
                };
                let Op::Pad { x: src, .. } = &node.op else {
                    unreachable!("validated")
                };
                parts.push((*src, s as i64, e as i64));
            }
        } else {
            let mut s = 0i64;
            for &x in xs {
                let e = s + self.shape(x)[dd] as i64;
                parts.push((x, s, e));
                s = e;
            }
        }
        let bounds: Vec<i64> = parts.iter().flat_map(|&(_, s, e)| [s, e]).collect();
        let uniform = self.lane_uniform(&idx[dd], &bounds);
        let lanes = self.all_lanes(uniform, idx);
        self.mark_hoist();
        let (name, _) = self.declare_lanes(v, lanes.len());
        for (k, &(src, s, e)) in parts.iter().enumerate() {
            let mut conds = Vec::new();
            if manual || k > 0 {
                conds.push(format!("{} >= {s}", idx[dd]));
            }
            conds.push(format!("{} < {e}", idx[dd]));
            let kw = if k == 0 { "if" } else { "else if" };
            self.open_branch(&format!("{kw} ({}) {{", conds.join(" && ")), v, k, uniform);
            for (lane, li) in lanes.iter().enumerate() {
                let mut j = li.clone();
                j[dd] = li[dd].clone().add(Ix::c(-s));
                let e = self.value_in_lane(lane, src, &j)?;
                let e = ctype::convert(f.value(src).dtype, d, &e);
                self.line(&format!("{} = {e};", lane_slot(&name, &lanes, lane)));
            }
            self.close_branch("}");
        }
        self.open_branch("else {", v, parts.len(), uniform);
        // Positions no input owns (a manual cat with gaps) read the first input, as the reference does.
        for (lane, li) in lanes.iter().enumerate() {
            let first = self.value_in_lane(lane, xs[0], li)?;
            let first = ctype::convert(f.value(xs[0]).dtype, d, &first);
            self.line(&format!("{} = {first};", lane_slot(&name, &lanes, lane)));
        }
        self.close_branch("}");
        Ok(self.remember_lanes(v, &name, &lanes))
    }

    /// The indices at which a lane-uniform branch computes values: at lane 0
    /// of a vector, every lane's index, so that each branch computes all lanes
    /// at once (its wide loads serve every lane and end with the branch);
    /// otherwise only the current index.
    pub(super) fn all_lanes(&self, uniform: bool, idx: &[Ix]) -> Vec<Vec<Ix>> {
        match &self.lanes {
            Some(l) if uniform && l.lane == 0 && l.width > 1 => (0..l.width)
                .map(|k| {
                    let at = Ix::var(l.var.clone()).add(Ix::c(k as i64));
                    idx.iter()
                        .map(|i| i.subst(&l.var, &at).pull_lanes(&l.var, l.width as i64))
                        .collect()
                })
                .collect(),
            _ => vec![idx.to_vec()],
        }
    }

    /// `value_at` as lane `k` of the lanes `all_lanes` gave.
    pub(super) fn value_in_lane(&mut self, k: usize, v: ValueId, idx: &[Ix]) -> Result<String, CodegenError> {
        let saved = self.lanes.clone();
        if let Some(l) = &mut self.lanes {
            l.lane += k;
        }
        let r = self.value_at(v, idx);
        self.lanes = saved;
        r
    }

    /// A register for a branch chain's value, an array when it holds every lane.
    pub(super) fn declare_lanes(&mut self, v: ValueId, n: usize) -> (String, &'static str) {
        if n == 1 {
            return self.declare(v);
        }
        let name = self.fresh("v");
        let ty = ctype::reg(self.f.value(v).dtype);
        self.line(&format!("{ty} {name}[{n}];"));
        (name, ty)
    }

    pub(super) fn remember_lanes(&mut self, v: ValueId, name: &str, lanes: &[Vec<Ix>]) -> String {
        for (k, li) in lanes.iter().enumerate() {
            self.remember((v, li.clone()), lane_slot(name, lanes, k));
        }
        lane_slot(name, lanes, 0)
    }
}


fn lane_slot(name: &str, lanes: &[Vec<Ix>], k: usize) -> String {
    if lanes.len() == 1 {
        name.to_string()
    } else {
        format!("{name}[{k}]")
    }
}

/// An op table row's CUDA spelling for compute dtype `c`, or a plan-time
/// error naming the op when the row has none.
pub fn table_expr(name: &str, t: [&'static str; 3], c: DType, args: &[String]) -> Result<String, CodegenError> {
    let tmpl = elementwise::cuda_for(t, c);
    if tmpl.is_empty() {
        return Err(unsupported(format!("{name} on {c} values has no CUDA lowering")));
    }
    let args: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    Ok(elementwise::fill_cuda(tmpl, &args, ctype::reg(c)))
}

fn node_of(f: &Fusion, v: ValueId) -> usize {
    match f.value(v).def {
        ValueDef::Node { node, .. } => node,
        _ => unreachable!("an op output"),
    }
}
