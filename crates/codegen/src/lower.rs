//! Lowering: the C statements that compute one value of the fusion at one
//! symbolic index, reading loads from global memory and values the kernel
//! already holds, with common subexpressions shared within a scope.

use crate::ctype;
use crate::error::CodegenError;
use crate::ix::Ix;
use crate::reduction;
use crate::view;
use fusebench_ir::infer::{self, common_dtype};
use fusebench_ir::{BinaryOp, DType, Fusion, Op, ReduceOp, UnaryOp, ValueDef, ValueId};
use std::collections::HashMap;

/// A tensor the kernel reads from global memory.
#[derive(Clone, Debug)]
pub struct Buffer {
    /// Name of the kernel parameter.
    pub param: String,
    pub dtype: DType,
    /// Strides in elements per logical dim.
    pub strides: Vec<i64>,
    pub offset: i64,
}

/// Vector lanes: lane `k` of a thread handles inner index `var + k`, and
/// `var` is a multiple of `width`.
#[derive(Clone, Debug)]
pub struct Lanes {
    pub var: String,
    pub width: usize,
    pub lane: usize,
}

/// A value the kernel holds in a register, valid at one index.
#[derive(Clone, Debug)]
pub struct Held {
    pub expr: String,
    pub index: Vec<Ix>,
}

pub struct Lowerer<'f> {
    pub f: &'f Fusion,
    pub code: String,
    indent: usize,
    scopes: Vec<HashMap<(ValueId, Vec<Ix>), String>>,
    next: usize,
    pub buffers: HashMap<ValueId, Buffer>,
    /// Values held in registers, each valid at one index.
    pub held: HashMap<ValueId, Vec<Held>>,
    pub scalar_params: HashMap<ValueId, String>,
    pub lanes: Option<Lanes>,
    /// Wide loads done so far: (buffer, offset of lane 0, branch path) -> array.
    vector_loads: HashMap<(ValueId, Ix, Vec<(ValueId, usize)>), String>,
    /// Scope depth at which vector loads are allowed (unconditional code).
    vector_depth: usize,
    /// The lane-uniform branches (cat/pad value, branch) the code being
    /// written is in: every lane of a thread takes the same branch there, so
    /// a wide load in lane 0's branch serves the other lanes' same branch.
    branch_path: Vec<(ValueId, usize)>,
    /// Where declarations of such loads' arrays go: before the outermost
    /// uniform branch, in unconditional code.
    hoist_at: Option<usize>,
    /// Non-uniform branches enclosing the current code (no wide loads there).
    scopes_block_vectors: usize,
    pub idx_type: &'static str,
}

fn unsupported(m: String) -> CodegenError {
    CodegenError::Unsupported(m)
}

impl<'f> Lowerer<'f> {
    pub fn new(f: &'f Fusion, idx_type: &'static str) -> Self {
        Lowerer {
            f,
            code: String::new(),
            indent: 1,
            scopes: vec![HashMap::new()],
            next: 0,
            buffers: HashMap::new(),
            held: HashMap::new(),
            scalar_params: HashMap::new(),
            lanes: None,
            vector_loads: HashMap::new(),
            vector_depth: 1,
            branch_path: Vec::new(),
            hoist_at: None,
            scopes_block_vectors: 0,
            idx_type,
        }
    }

    pub fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.code.push_str("    ");
        }
        self.code.push_str(s);
        self.code.push('\n');
    }

    pub fn open(&mut self, s: &str) {
        self.line(s);
        self.indent += 1;
        self.scopes.push(HashMap::new());
    }

    pub fn close(&mut self, s: &str) {
        self.indent -= 1;
        self.scopes.pop();
        self.line(s);
    }

    /// Marks the current scope as unconditional code where vector loads may go.
    pub fn allow_vector_loads_here(&mut self) {
        self.vector_depth = self.scopes.len();
        self.vector_loads.clear();
    }

    /// Makes `v` available in a register at `h.index`.
    pub fn hold(&mut self, v: ValueId, h: Held) {
        self.held.entry(v).or_default().push(h);
    }

    pub fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn lookup(&self, key: &(ValueId, Vec<Ix>)) -> Option<String> {
        self.scopes.iter().rev().find_map(|s| s.get(key).cloned())
    }

    fn remember(&mut self, key: (ValueId, Vec<Ix>), name: String) {
        self.scopes.last_mut().unwrap().insert(key, name);
    }

    /// Binds `expr` to a fresh register variable of `v`'s type.
    fn bind(&mut self, v: ValueId, idx: &[Ix], expr: String) -> String {
        let name = self.fresh("v");
        let ty = ctype::reg(self.f.value(v).dtype);
        self.line(&format!("const {ty} {name} = {expr};"));
        self.remember((v, idx.to_vec()), name.clone());
        name
    }

    fn shape(&self, v: ValueId) -> &'f [usize] {
        self.f.value(v).shape.as_deref().unwrap_or(&[])
    }

    /// Offset expression of element `idx` of a buffer.
    pub fn offset(b: &Buffer, idx: &[Ix]) -> Ix {
        idx.iter()
            .zip(&b.strides)
            .fold(Ix::c(b.offset), |acc, (i, &s)| acc.add(i.clone().mul(s)))
    }

    /// The value of `v` at `idx`, as a C expression of its register type.
    pub fn value_at(&mut self, v: ValueId, idx: &[Ix]) -> Result<String, CodegenError> {
        let pulled: Vec<Ix>;
        let idx = match &self.lanes {
            Some(l) => {
                pulled = idx
                    .iter()
                    .map(|i| i.pull_lanes(&l.var, l.width as i64))
                    .collect();
                &pulled[..]
            }
            None => idx,
        };
        let val = self.f.value(v);
        if let Some(c) = val.constant {
            return Ok(ctype::literal(val.dtype, c));
        }
        if let Some(p) = self.scalar_params.get(&v) {
            return Ok(p.clone());
        }
        let key = (v, idx.to_vec());
        if let Some(n) = self.lookup(&key) {
            return Ok(n);
        }
        if let Some(hs) = self.held.get(&v) {
            let scalar = self.shape(v).is_empty();
            if let Some(h) = hs.iter().find(|h| scalar || h.index == idx) {
                return Ok(h.expr.clone());
            }
            return Err(CodegenError::NoFit(format!(
                "{} is held for {:?} but read at {:?}",
                val.name,
                hs.iter()
                    .map(|h| h.index.iter().map(|i| i.to_string()).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
                idx.iter().map(|i| i.to_string()).collect::<Vec<_>>()
            )));
        }
        if let Some(b) = self.buffers.get(&v).cloned() {
            return Ok(self.load(v, &b, idx));
        }
        match &val.def {
            ValueDef::Node { node, index } => {
                let op = self.f.nodes[*node].op.clone();
                self.lower_op(v, &op, *index, idx)
            }
            ValueDef::TensorInput(_) => Err(unsupported(format!(
                "input {} has no buffer in this kernel",
                val.name
            ))),
            ValueDef::ScalarInput => Err(unsupported(format!(
                "scalar input {} has no parameter",
                val.name
            ))),
            ValueDef::DefineScalar | ValueDef::Literal => {
                Err(unsupported(format!("scalar {} has no value", val.name)))
            }
        }
    }

    fn load(&mut self, v: ValueId, b: &Buffer, idx: &[Ix]) -> String {
        let off = Self::offset(b, idx);
        if let Some(l) = self.lanes.clone() {
            if self.scopes_block_vectors == 0
                && self.scopes.len() == self.vector_depth + self.branch_path.len()
            {
                if let Some(e) = self.vector_load(v, b, &off, &l) {
                    self.remember((v, idx.to_vec()), e.clone());
                    return e;
                }
            }
        }
        let e = ctype::from_storage(b.dtype, &format!("__ldg(&{}[{off}])", b.param));
        let e = if b.dtype == DType::Bool {
            format!("({}[{off}] != 0)", b.param)
        } else {
            e
        };
        self.bind(v, idx, e)
    }

    /// A load whose lanes read consecutive aligned elements becomes one wide
    /// load shared by every lane.
    fn vector_load(&mut self, v: ValueId, b: &Buffer, off: &Ix, l: &Lanes) -> Option<String> {
        let elem = b.dtype.size_bytes();
        let size = elem * l.width;
        if l.width < 2
            || !(size == 4 || size == 8 || size.is_multiple_of(16))
            || b.dtype == DType::Bool
        {
            return None;
        }
        let w = l.width as i64;
        if off.lane_step(&l.var, w)? != 1 {
            return None;
        }
        let (rest, k) = off.pull_lanes(&l.var, w).split_const();
        if !rest.multiple_of(w, &[&l.var]) || k.rem_euclid(w) != l.lane as i64 {
            return None;
        }
        // Lane 0's element: aligned to the width, so one wide load serves all lanes.
        let base = rest.add(Ix::c(k - l.lane as i64));
        let key = (v, base.clone(), self.branch_path.clone());
        let arr = match self.vector_loads.get(&key) {
            Some(a) => a.clone(),
            None => {
                let a = self.fresh("w");
                let st = ctype::storage(b.dtype);
                let (word, wbytes) = match size {
                    4 => ("unsigned int", 4),
                    8 => ("uint2", 8),
                    _ => ("uint4", 16),
                };
                let decl = format!("__align__(16) {st} {a}[{}];", l.width);
                match (self.branch_path.is_empty(), self.hoist_at) {
                    (false, Some(at)) => {
                        let pad = "    ".repeat(self.vector_depth);
                        self.code.insert_str(at, &format!("{pad}{decl}\n"));
                    }
                    _ => self.line(&decl),
                }
                let per = wbytes / elem;
                for c in 0..(size / wbytes) {
                    let at = base.clone().add(Ix::c((c * per) as i64));
                    self.line(&format!(
                        "*reinterpret_cast<{word}*>(&{a}[{}]) = __ldg(reinterpret_cast<const {word}*>(&{}[{at}]));",
                        c * per,
                        b.param
                    ));
                }
                self.vector_loads.insert(key, a.clone());
                a
            }
        };
        Some(ctype::from_storage(b.dtype, &format!("{arr}[{}]", l.lane)))
    }

    /// Whether comparing `i` with the constants `bounds` gives the same answer
    /// for every lane of a thread: `i` is the lane index (a multiple of the
    /// width plus the lane) and every bound is a multiple of the width.
    fn lane_uniform(&self, i: &Ix, bounds: &[i64]) -> bool {
        let Some(l) = &self.lanes else { return true };
        let w = l.width as i64;
        match i.lane_step(&l.var, w) {
            Some(0) => true,
            Some(1) => {
                let (rest, k) = i.pull_lanes(&l.var, w).split_const();
                rest.multiple_of(w, &[&l.var])
                    && k.rem_euclid(w) == l.lane as i64
                    && bounds.iter().all(|b| b % w == 0)
            }
            _ => false,
        }
    }

    /// Opens branch `k` of the value `v`'s if-chain; in a lane-uniform chain,
    /// loads inside may be wide.
    fn open_branch(&mut self, header: &str, v: ValueId, k: usize, uniform: bool) {
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

    fn close_branch(&mut self, s: &str) {
        if self.branch_path.pop().is_some_and(|(_, k)| k == usize::MAX) {
            self.scopes_block_vectors -= 1;
        }
        self.close(s);
    }

    /// Marks where hoisted array declarations go, if this is the outermost branch.
    fn mark_hoist(&mut self) -> bool {
        if self.branch_path.is_empty() && self.scopes.len() == self.vector_depth {
            self.hoist_at = Some(self.code.len());
            true
        } else {
            false
        }
    }

    fn lower_op(
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
        let expr = match op {
            Op::Unary { kind, x } => {
                let xi = operand_idx(self, *x);
                let xv = self.value_at(*x, &xi)?;
                let xv = ctype::convert(f.value(*x).dtype, d, &xv);
                ctype::round_reduced(d, &unary(*kind, d, &xv)?)
            }
            Op::Binary { kind, a, b } => {
                let c = common_dtype(&[f.value(*a), f.value(*b)], false, true);
                let (ai, bi) = (operand_idx(self, *a), operand_idx(self, *b));
                let av = self.value_at(*a, &ai)?;
                let bv = self.value_at(*b, &bi)?;
                let av = ctype::convert(f.value(*a).dtype, c, &av);
                let bv = ctype::convert(f.value(*b).dtype, c, &bv);
                let e = match (kind, f.value(*b).constant) {
                    // Small constant powers as products, as nvFuser does: exact and cheap.
                    (BinaryOp::Pow, Some(p)) if !c.is_integral() && p.as_f64() == 2.0 => {
                        format!("({av} * {av})")
                    }
                    (BinaryOp::Pow, Some(p)) if !c.is_integral() && p.as_f64() == 3.0 => {
                        format!("({av} * {av} * {av})")
                    }
                    (BinaryOp::Pow, Some(p)) if !c.is_integral() && p.as_f64() == 1.0 => av.clone(),
                    _ => binary(*kind, c, &av, &bv),
                };
                if kind.is_comparison() {
                    e
                } else {
                    ctype::round_reduced(d, &e)
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
            // Copies: the element of `x` at the same index. (A stride_order's
            // layout is its allocation, not its values.)
            Op::Set { x, .. } | Op::StrideOrder { x, .. } => return self.value_at(*x, idx),
            Op::Size { .. } => {
                return Err(CodegenError::NoFit(format!(
                    "size {} is a constant and is never lowered",
                    f.value(v).name
                )))
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
    fn lower_inline_reduction(
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
        let acc = crate::kernel::acc_dtype(d);
        let combine = match kind {
            ReduceOp::Sum => reduction::Combine::Sum,
            ReduceOp::Max => reduction::Combine::Max,
            ReduceOp::Min => reduction::Combine::Min,
        };
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

    fn declare(&mut self, v: ValueId) -> (String, &'static str) {
        let name = self.fresh("v");
        let ty = ctype::reg(self.f.value(v).dtype);
        self.line(&format!("{ty} {name};"));
        (name, ty)
    }

    fn lower_pad(
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

    fn lower_cat(
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
    fn all_lanes(&self, uniform: bool, idx: &[Ix]) -> Vec<Vec<Ix>> {
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
    fn value_in_lane(&mut self, k: usize, v: ValueId, idx: &[Ix]) -> Result<String, CodegenError> {
        let saved = self.lanes.clone();
        if let Some(l) = &mut self.lanes {
            l.lane += k;
        }
        let r = self.value_at(v, idx);
        self.lanes = saved;
        r
    }

    /// A register for a branch chain's value, an array when it holds every lane.
    fn declare_lanes(&mut self, v: ValueId, n: usize) -> (String, &'static str) {
        if n == 1 {
            return self.declare(v);
        }
        let name = self.fresh("v");
        let ty = ctype::reg(self.f.value(v).dtype);
        self.line(&format!("{ty} {name}[{n}];"));
        (name, ty)
    }

    fn remember_lanes(&mut self, v: ValueId, name: &str, lanes: &[Vec<Ix>]) -> String {
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

pub fn unary(kind: UnaryOp, d: DType, x: &str) -> Result<String, CodegenError> {
    let t = ctype::reg(d);
    Ok(match (t, kind) {
        (_, UnaryOp::Neg) => format!("(-{x})"),
        ("float", UnaryOp::Abs) => format!("fabsf({x})"),
        ("double", UnaryOp::Abs) => format!("fabs({x})"),
        ("bool", UnaryOp::Abs) => x.to_string(),
        (_, UnaryOp::Abs) => format!("({x} < 0 ? -{x} : {x})"),
        ("float", k) => {
            let fun = match k {
                UnaryOp::Reciprocal => return Ok(format!("(1.0f / {x})")),
                UnaryOp::Rsqrt => "rsqrtf",
                UnaryOp::Sqrt => "sqrtf",
                UnaryOp::Exp => "expf",
                UnaryOp::Log => "logf",
                UnaryOp::Tanh => "tanhf",
                UnaryOp::Erf => "erff",
                UnaryOp::Sigmoid => "fb_sigmoidf",
                UnaryOp::Neg | UnaryOp::Abs => unreachable!(),
            };
            format!("{fun}({x})")
        }
        ("double", k) => {
            let fun = match k {
                UnaryOp::Reciprocal => return Ok(format!("(1.0 / {x})")),
                UnaryOp::Rsqrt => "rsqrt",
                UnaryOp::Sqrt => "sqrt",
                UnaryOp::Exp => "exp",
                UnaryOp::Log => "log",
                UnaryOp::Tanh => "tanh",
                UnaryOp::Erf => "erf",
                UnaryOp::Sigmoid => "fb_sigmoidd",
                UnaryOp::Neg | UnaryOp::Abs => unreachable!(),
            };
            format!("{fun}({x})")
        }
        (t, k) => return Err(unsupported(format!("{} on {t} values", k.name()))),
    })
}

pub fn binary(kind: BinaryOp, c: DType, a: &str, b: &str) -> String {
    let t = ctype::reg(c);
    let int = !matches!(t, "float" | "double");
    match kind {
        BinaryOp::Add => format!("({a} + {b})"),
        BinaryOp::Sub => format!("({a} - {b})"),
        BinaryOp::Mul => format!("({a} * {b})"),
        BinaryOp::Div if int => format!("({b} == 0 ? ({t})0 : ({t})({a} / {b}))"),
        BinaryOp::Div => format!("({a} / {b})"),
        BinaryOp::Pow if t == "float" => format!("powf({a}, {b})"),
        BinaryOp::Pow if t == "double" => format!("pow({a}, {b})"),
        BinaryOp::Pow => format!("({t})pow((double)({a}), (double)({b}))"),
        BinaryOp::Maximum | BinaryOp::Minimum => {
            let max = kind == BinaryOp::Maximum;
            match t {
                "float" => format!("{}({a}, {b})", if max { "fb_maxf" } else { "fb_minf" }),
                "double" => format!("{}({a}, {b})", if max { "fb_maxd" } else { "fb_mind" }),
                _ => format!("({a} {} {b} ? {a} : {b})", if max { ">" } else { "<" }),
            }
        }
        BinaryOp::Eq => format!("({a} == {b})"),
        BinaryOp::Ne => format!("({a} != {b})"),
        BinaryOp::Lt => format!("({a} < {b})"),
        BinaryOp::Le => format!("({a} <= {b})"),
        BinaryOp::Gt => format!("({a} > {b})"),
        BinaryOp::Ge => format!("({a} >= {b})"),
    }
}

fn node_of(f: &Fusion, v: ValueId) -> usize {
    match f.value(v).def {
        ValueDef::Node { node, .. } => node,
        _ => unreachable!("an op output"),
    }
}
