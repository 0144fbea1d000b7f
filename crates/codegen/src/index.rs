//! The indexing ops in CUDA. Those whose every output element is one read of
//! their operands at a computed position (iota, triu, take_along_axis, gather,
//! select, embedding_fwd) are written where they are read, like any
//! elementwise op; index values are clamped into the indexed extent so a bad
//! index never reads outside its tensor (the CPU reference reports it instead).
//! The ops that need a kernel of their own (scatter, index_put_accumulate,
//! topk, argsort) are built by `index_kernels`.

use crate::ctype;
use crate::error::CodegenError;
use crate::ix::Ix;
use crate::lower::Lowerer;
use fusebench_ir::infer::norm_dim;
use fusebench_ir::{DType, IndexOp, Op, ValueId};

/// What lowering one op gave: an expression to bind, or a name already bound.
pub enum Lowered {
    Expr(String),
    Bound(String),
}

/// Whether `op` needs a kernel of its own rather than an expression.
pub fn is_special(op: &Op) -> bool {
    matches!(
        op,
        Op::Index(
            IndexOp::Scatter { .. }
                | IndexOp::IndexPutAccumulate { .. }
                | IndexOp::Topk { .. }
                | IndexOp::Argsort { .. }
        )
    )
}

impl Lowerer<'_> {
    /// Reads index `iv` (a register expression of dtype `d`) as a position in
    /// `[0, bound)`, clamped so it never leaves the tensor.
    fn clamped(&mut self, iv: &str, bound: usize) -> Ix {
        let g = self.fresh("g");
        let it = self.idx_type;
        let hi = bound.max(1) as i64 - 1;
        self.line(&format!(
            "const {it} {g} = ({it})min(max((long long)({iv}), 0LL), {hi}LL);"
        ));
        Ix::var(g)
    }

    fn dims_of(&self, v: ValueId) -> Vec<usize> {
        self.f.value(v).shape.clone().unwrap_or_default()
    }

    pub(crate) fn lower_index(
        &mut self,
        v: ValueId,
        op: &IndexOp,
        idx: &[Ix],
    ) -> Result<Lowered, CodegenError> {
        let f = self.f;
        let d = f.value(v).dtype;
        let name = op.name();
        let ok = |r: Result<usize, fusebench_ir::IrError>| r.expect("validated");
        Ok(match op {
            IndexOp::Iota { start, step, .. } => {
                let get = |lw: &mut Self,
                           s: &Option<ValueId>,
                           dflt: i64|
                 -> Result<String, CodegenError> {
                    match s {
                        Some(s) => {
                            let e = lw.value_at(*s, &[])?;
                            let sd = lw.f.value(*s).dtype;
                            let to = if d.is_float() {
                                DType::Double
                            } else {
                                DType::Int
                            };
                            Ok(ctype::convert(sd, to, &e))
                        }
                        None => Ok(if d.is_float() {
                            format!("{dflt}.0")
                        } else {
                            format!("{dflt}LL")
                        }),
                    }
                };
                let (a, s) = (get(self, start, 0)?, get(self, step, 1)?);
                let i = &idx[0];
                // Computed in double (or long long) and rounded once, as the CPU does.
                Lowered::Expr(if d.is_float() {
                    ctype::convert(DType::Double, d, &format!("({a} + (double)({i}) * {s})"))
                } else {
                    ctype::convert(DType::Int, d, &format!("({a} + (long long)({i}) * {s})"))
                })
            }
            IndexOp::Triu { x, diagonal } => {
                let r = idx.len();
                let xv = self.value_at(*x, idx)?;
                let zero = ctype::literal(d, fusebench_ir::Literal::Int(0));
                Lowered::Expr(format!(
                    "(((long long)({}) - (long long)({}) >= {diagonal}LL) ? {xv} : {zero})",
                    idx[r - 1],
                    idx[r - 2]
                ))
            }
            IndexOp::TakeAlongAxis { x, index, dim } | IndexOp::Gather { x, index, dim } => {
                let xs = self.dims_of(*x);
                let is = self.dims_of(*index);
                let dd = ok(norm_dim(name, *dim, xs.len()));
                let ii: Vec<Ix> = idx
                    .iter()
                    .zip(&is)
                    .map(|(i, &e)| if e == 1 { Ix::c(0) } else { i.clone() })
                    .collect();
                let iv = self.value_at(*index, &ii)?;
                let g = self.clamped(&iv, xs[dd]);
                let mut j: Vec<Ix> = idx
                    .iter()
                    .zip(&xs)
                    .map(|(i, &e)| if e == 1 { Ix::c(0) } else { i.clone() })
                    .collect();
                j[dd] = g;
                Lowered::Bound(self.value_at(*x, &j)?)
            }
            IndexOp::Select { x, index, dim } => {
                let xs = self.dims_of(*x);
                let dd = ok(norm_dim(name, *dim, xs.len()));
                let iv = self.value_at(*index, &[])?;
                let g = self.clamped(&iv, xs[dd]);
                let mut j = idx.to_vec();
                j.insert(dd, g);
                Lowered::Bound(self.value_at(*x, &j)?)
            }
            IndexOp::EmbeddingFwd {
                input,
                weight,
                max_norm,
                norm_type,
                ..
            } => {
                let n = idx.len();
                let ws = self.dims_of(*weight);
                let iv = self.value_at(*input, &idx[..n - 1])?;
                let g = self.clamped(&iv, ws[0]);
                let w = self.value_at(*weight, &[g.clone(), idx[n - 1].clone()])?;
                let wd = f.value(*weight).dtype;
                match max_norm {
                    None => Lowered::Bound(w),
                    Some(m) => {
                        let scale = self.row_scale(*weight, &g, ws[1], *m, *norm_type)?;
                        let e = format!(
                            "(double)({}) * {scale}",
                            ctype::convert(wd, DType::Double, &w)
                        );
                        Lowered::Expr(ctype::convert(DType::Double, d, &e))
                    }
                }
            }
            IndexOp::Scatter { .. }
            | IndexOp::IndexPutAccumulate { .. }
            | IndexOp::Topk { .. }
            | IndexOp::Argsort { .. } => {
                return Err(CodegenError::NoFit(format!(
                "{name} result {} is neither computed in this kernel nor stored by an earlier one",
                f.value(v).name
            )))
            }
        })
    }

    /// torch.embedding_renorm_'s factor for row `g` of `weight`: max_norm /
    /// (norm + 1e-7) when the row's norm exceeds max_norm, else 1. The norm is
    /// summed in double by one loop per element that reads the row.
    fn row_scale(
        &mut self,
        weight: ValueId,
        g: &Ix,
        cols: usize,
        max_norm: ValueId,
        norm_type: Option<ValueId>,
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let scalar = |lw: &mut Self, s: ValueId| -> Result<String, CodegenError> {
            let e = lw.value_at(s, &[])?;
            Ok(ctype::convert(lw.f.value(s).dtype, DType::Double, &e))
        };
        let m = scalar(self, max_norm)?;
        let p = match norm_type {
            Some(p) => scalar(self, p)?,
            None => "2.0".into(),
        };
        let (acc, sc, pp) = (self.fresh("nrm"), self.fresh("scl"), self.fresh("p"));
        self.line(&format!("const double {pp} = {p};"));
        self.line(&format!("double {acc} = 0.0;"));
        let j = self.fresh("j");
        self.open(&format!("for (int {j} = 0; {j} < {cols}; ++{j}) {{"));
        let wv = self.value_at(weight, &[g.clone(), Ix::var(j.clone())])?;
        let wv = ctype::convert(f.value(weight).dtype, DType::Double, &wv);
        self.line(&format!("const double a = fabs({wv});"));
        self.line(&format!(
            "if (isinf({pp})) {acc} = fmax({acc}, a); else if ({pp} == 0.0) {acc} += (a != 0.0); else if ({pp} == 1.0) {acc} += a; else if ({pp} == 2.0) {acc} += a * a; else {acc} += pow(a, {pp});"
        ));
        self.close("}");
        self.line(&format!(
            "if (!isinf({pp}) && {pp} != 0.0 && {pp} != 1.0) {acc} = ({pp} == 2.0) ? sqrt({acc}) : pow({acc}, 1.0 / {pp});"
        ));
        self.line(&format!(
            "const double {sc} = ({acc} > {m}) ? {m} / ({acc} + 1e-7) : 1.0;"
        ));
        Ok(sc)
    }
}
