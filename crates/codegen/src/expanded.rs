//! Expanded broadcasts computed once. A dim of extent above 1 with stride 0
//! (an input given as `x.expand(...)`, contiguity `None`) or made by
//! `broadcast_in_dim`/`expand` holds one value repeated. nvFuser keeps such a
//! dim a broadcast through every elementwise op whose tensor operands are all
//! broadcast along it, so it computes an output that is broadcast along a dim
//! once per index of the other dims and returns it expanded (stride 0); a sum
//! over such a dim is one element times the dim's extent. Computing every
//! repeat instead made a GELU of one row expanded over 2048 rows write 2048
//! rows where nvFuser writes one (25x slower).
//!
//! The fusion is rebuilt with each such value "small": extent 1 along its
//! broadcast dims. A consumer that needs the full value reads an `expand` of
//! the small one (an index map, nothing is copied). An output that is
//! broadcast becomes the expand of a hidden output appended after the
//! fusion's own (`Plan::hidden_outputs`), so it comes back as a view of it
//! with stride 0, as nvFuser returns it. A fusion without such an output or
//! sum is returned as it is, so its kernels do not change.

use crate::CodegenError;
use fusebench_ir::infer::{norm_dim, norm_dims};
use fusebench_ir::{DType, Fusion, FusionBuilder, Literal, Op, ReduceOp, ValueDef, ValueId};
use std::borrow::Cow;

/// `f` with its broadcast outputs and sums computed once, and how many hidden
/// outputs it appended; `f` itself (and 0) when there are none.
pub fn apply<'a>(
    f: &'a Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
) -> Result<(Cow<'a, Fusion>, usize), CodegenError> {
    let masks = masks(f, layouts);
    let any = |v: ValueId| masks[v.index()].iter().any(|&m| m);
    let wanted = f.outputs.iter().any(|&v| any(v) && f.producer(v).is_some())
        || f.nodes.iter().any(|n| summed_repeats(f, &masks, &n.op).is_some());
    // In-place updates and declared output layouts keep their plans.
    if !wanted || !f.aliases.is_empty() || !f.output_layouts.is_empty() {
        return Ok((Cow::Borrowed(f), 0));
    }
    let mut r = Rebuild {
        b: FusionBuilder::extend(Fusion {
            script: f.script.clone(),
            recipe: f.recipe.clone(),
            input_facts: f.input_facts.clone(),
            ..Fusion::default()
        }),
        full: vec![None; f.values.len()],
        small: vec![None; f.values.len()],
        masks: &masks,
        f,
    };
    for (i, v) in f.values.iter().enumerate() {
        match v.def {
            ValueDef::Node { node, index: 0 } => r.node(node)?,
            ValueDef::Node { .. } => {}
            _ => {
                // Inputs, scalars and literals are copied as they are.
                let mut g = std::mem::replace(&mut r.b, FusionBuilder::new()).finish();
                g.values.push(v.clone());
                r.full[i] = Some(ValueId(g.values.len() as u32 - 1));
                r.b = FusionBuilder::extend(g);
            }
        }
    }
    let mut hidden: Vec<ValueId> = vec![];
    let mut outputs = vec![];
    for &v in &f.outputs {
        if any(v) && f.producer(v).is_some() {
            let s = r.small_of(v)?;
            if !hidden.contains(&s) {
                hidden.push(s);
            }
        }
        outputs.push(r.full_of(v)?);
    }
    let mut g = r.b.finish();
    g.inputs = f.inputs.iter().map(|&v| r.full[v.index()].unwrap()).collect();
    let n = hidden.len();
    g.outputs = outputs.into_iter().chain(hidden).collect();
    Ok((Cow::Owned(g), n))
}

/// Per value, per dim: whether it is an expanded broadcast (extent above 1,
/// one value repeated). Scalars have no dims.
fn masks(f: &Fusion, layouts: &[Option<(Vec<i64>, i64)>]) -> Vec<Vec<bool>> {
    let mut m: Vec<Vec<bool>> = f.values.iter().map(|v| vec![false; v.rank()]).collect();
    for (pos, &v) in f.inputs.iter().enumerate() {
        if let (Some(shape), Some(Some((strides, _)))) = (&f.value(v).shape, layouts.get(pos)) {
            m[v.index()] = shape.iter().zip(strides).map(|(&e, &s)| e > 1 && s == 0).collect();
        }
    }
    let shape = |v: ValueId| f.value(v).shape.clone().unwrap_or_default();
    for n in &f.nodes {
        let out = n.outputs[0];
        let os = shape(out);
        // Whether operand `u` repeats one value along output dim `d`.
        let repeats = |u: ValueId, d: usize, m: &[Vec<bool>]| {
            let us = shape(u);
            let Some(du) = (d + us.len()).checked_sub(os.len()) else { return true };
            us[du] == 1 || m[u.index()][du]
        };
        let mask: Vec<bool> = match &n.op {
            Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } | Op::Where { .. } | Op::Cast { .. } => {
                let ops: Vec<ValueId> = n.op.operands().into_iter().filter(|&u| f.value(u).is_tensor()).collect();
                (0..os.len()).map(|d| os[d] > 1 && ops.iter().all(|&u| repeats(u, d, &m))).collect()
            }
            Op::Expand { x, .. } => (0..os.len()).map(|d| os[d] > 1 && repeats(*x, d, &m)).collect(),
            Op::BroadcastInDim { x, broadcast_dims, .. } => {
                let mut mask: Vec<bool> = os.iter().map(|&e| e > 1).collect();
                let xs = shape(*x);
                for (i, &bd) in broadcast_dims.iter().enumerate() {
                    if let Ok(od) = norm_dim("broadcast_in_dim", bd, os.len()) {
                        mask[od] = os[od] > 1 && (xs[i] == 1 || m[x.index()][i]);
                    }
                }
                mask
            }
            Op::Broadcast { x, is_broadcast_dim } => {
                let mut it = m[x.index()].iter();
                is_broadcast_dim.iter().map(|&b| !b && *it.next().unwrap_or(&false)).collect()
            }
            Op::Reduce { kind: ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, x, dims, keepdim, dtype } => {
                match (norm_dims("reduce", dims, shape(*x).len()), reduced_dtype_ok(f, *x, *dtype)) {
                    (Ok(rd), true) => {
                        let kept = m[x.index()].iter().enumerate();
                        if *keepdim {
                            kept.map(|(d, &b)| b && !rd.contains(&d)).collect()
                        } else {
                            kept.filter(|(d, _)| !rd.contains(d)).map(|(_, &b)| b).collect()
                        }
                    }
                    _ => vec![false; os.len()],
                }
            }
            _ => vec![false; os.len()],
        };
        m[out.index()] = mask;
    }
    m
}

/// A sum, max or min is computed small when its result dtype is at least 32
/// bits (a sum times the extent is then rounded once, as the sum is).
fn reduced_dtype_ok(f: &Fusion, x: ValueId, dtype: Option<DType>) -> bool {
    matches!(
        dtype.unwrap_or(f.value(x).dtype),
        DType::Float | DType::Double | DType::Int | DType::Int32
    )
}

/// For a sum over repeated dims: how many times each element repeats.
fn summed_repeats(f: &Fusion, m: &[Vec<bool>], op: &Op) -> Option<usize> {
    let Op::Reduce { kind: ReduceOp::Sum, x, dims, dtype, .. } = op else { return None };
    let xs = f.value(*x).shape.as_ref()?;
    let rd = norm_dims("sum", dims, xs.len()).ok()?;
    let n: usize = rd.iter().filter(|&&d| m[x.index()][d]).map(|&d| xs[d]).product();
    (n > 1 && reduced_dtype_ok(f, *x, *dtype)).then_some(n)
}

struct Rebuild<'a> {
    f: &'a Fusion,
    b: FusionBuilder,
    masks: &'a [Vec<bool>],
    /// Per value of `f`: its full-shape value in the new fusion.
    full: Vec<Option<ValueId>>,
    /// Per broadcast value of `f`: its small value in the new fusion.
    small: Vec<Option<ValueId>>,
}

impl Rebuild<'_> {
    fn broadcast(&self, v: ValueId) -> bool {
        self.masks[v.index()].iter().any(|&m| m)
    }

    fn add(&mut self, op: Op, name: String) -> Result<ValueId, CodegenError> {
        let what = op.name().to_string();
        let ids = self.b.op(op, &[&name]).map_err(|e| {
            CodegenError::Unsupported(format!("computing the broadcast `{what}` once: {e}"))
        })?;
        Ok(ids[0])
    }

    /// `v` at full shape: itself, or the expand of its small value.
    fn full_of(&mut self, v: ValueId) -> Result<ValueId, CodegenError> {
        if let Some(id) = self.full[v.index()] {
            return Ok(id);
        }
        let small = self.small_of(v)?;
        let shape = self.f.value(v).shape.clone().unwrap_or_default();
        let id = self.add(
            Op::Expand { x: small, shape: shape.iter().map(|&e| e as i64).collect() },
            self.f.value(v).name.clone(),
        )?;
        self.full[v.index()] = Some(id);
        Ok(id)
    }

    /// `v` at extent 1 along its broadcast dims (an input: its first element there).
    fn small_of(&mut self, v: ValueId) -> Result<ValueId, CodegenError> {
        if let Some(id) = self.small[v.index()] {
            return Ok(id);
        }
        let full = self.full[v.index()].expect("a value with no small form is built full");
        let shape = self.f.value(v).shape.clone().unwrap_or_default();
        let mask = &self.masks[v.index()];
        let op = Op::Slice {
            x: full,
            start: vec![0; shape.len()],
            end: shape.iter().zip(mask).map(|(&e, &b)| if b { 1 } else { e as i64 }).collect(),
            strides: vec![1; shape.len()],
            manual_normalization: false,
        };
        let id = self.add(op, format!("{}_once", self.f.value(v).name))?;
        self.small[v.index()] = Some(id);
        Ok(id)
    }

    /// Rebuilds node `node`: small when its output is broadcast, else as it
    /// was with full operands.
    fn node(&mut self, node: usize) -> Result<(), CodegenError> {
        let n = &self.f.nodes[node];
        let out = n.outputs[0];
        if n.outputs.len() > 1 || !self.broadcast(out) && summed_repeats(self.f, self.masks, &n.op).is_none() {
            let mut op = n.op.clone();
            for r in op.operands_mut() {
                *r = self.full_of(*r)?;
            }
            let names: Vec<&str> = n.outputs.iter().map(|&o| self.f.value(o).name.as_str()).collect();
            let ids = self.b.op(op, &names).map_err(|e| CodegenError::Unsupported(e.to_string()))?;
            for (&o, id) in n.outputs.iter().zip(ids) {
                self.full[o.index()] = Some(id);
            }
            return Ok(());
        }
        let mut op = n.op.clone();
        for r in op.operands_mut() {
            *r = if self.broadcast(*r) { self.small_of(*r)? } else { self.full_of(*r)? };
        }
        let mask = &self.masks[out.index()];
        match &mut op {
            Op::Expand { shape, .. } | Op::BroadcastInDim { shape, .. } => {
                for (e, &b) in shape.iter_mut().zip(mask) {
                    if b {
                        *e = 1;
                    }
                }
            }
            _ => {}
        }
        let name = self.f.value(out).name.clone();
        let repeats = summed_repeats(self.f, self.masks, &n.op);
        let id = match repeats {
            None => self.add(op, format!("{name}_once"))?,
            Some(k) => {
                // One element times how often it repeats, in the sum's dtype.
                let s = self.add(op, format!("{name}_one"))?;
                let dtype = self.b.fusion().value(s).dtype;
                let lit = if dtype.is_integral() { Literal::Int(k as i64) } else { Literal::Float(k as f64) };
                let k = self.b.literal(lit);
                let p = self.add(Op::Binary { kind: fusebench_ir::BinaryOp::Mul, a: s, b: k }, format!("{name}_times"))?;
                if self.b.fusion().value(p).dtype == dtype {
                    p
                } else {
                    self.add(Op::Cast { x: p, dtype }, format!("{name}_once"))?
                }
            }
        };
        if self.broadcast(out) {
            self.small[out.index()] = Some(id);
        } else {
            self.full[out.index()] = Some(id);
        }
        Ok(())
    }
}
