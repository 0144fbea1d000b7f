//! Bounds of the scans, the indexing and ordering ops and the random-number
//! ops (the rules are listed in [`super`]'s module doc).

use super::{eps, Errs, Shadow};
use fusebench_ir::{
    BinaryOp, DType, IndexOp, IrError, Literal, Op, ReduceOp, RngDist, ScanOp, UnaryOp, ValueId,
};

impl Shadow {
    /// `o` with its operand `k` replaced by `v`.
    fn with(&mut self, o: &IndexOp, k: usize, v: ValueId) -> Result<ValueId, IrError> {
        let mut o = o.clone();
        *o.operands_mut()[k] = v;
        Ok(self.fd.op(Op::Index(o), &[])?[0])
    }

    /// `e`, or zeros of `like`'s shape when exact.
    fn or_zeros(&mut self, e: Option<ValueId>, like: ValueId) -> Result<ValueId, IrError> {
        match e {
            Some(e) => Ok(e),
            None => self.zeros(like),
        }
    }

    /// A bound with NaN (uncertain) made +inf, so that a max over it stays uncertain.
    fn sane(&mut self, e: ValueId) -> Result<ValueId, IrError> {
        let big = self.lit(f64::MAX);
        let ok = self.bin(BinaryOp::Le, e, big)?;
        let inf = self.lit(f64::INFINITY);
        self.fd.where_(ok, e, inf)
    }

    pub(super) fn index_op(
        &mut self,
        o: &IndexOp,
        outs: &[ValueId],
        errs: &Errs,
    ) -> Result<Errs, IrError> {
        let y = outs[0];
        let exact = errs.iter().all(|e| e.is_none());
        match o {
            // start + i * step in double (an FMA or not), rounded once.
            IndexOp::Iota { .. } => Ok(vec![self.local(y, 1.0)?]),
            // max_norm rescales rows by a norm computed in each executor's own
            // precision, and a row near the limit may or may not be rescaled.
            IndexOp::EmbeddingFwd {
                max_norm: Some(_), ..
            } => Ok(vec![Some(self.infs(y)?)]),
            // Rounds where it adds, exact operands or not.
            IndexOp::IndexPutAccumulate { acc, value, .. } => {
                if errs[1].is_some() {
                    return Ok(vec![Some(self.infs(y)?)]);
                }
                Ok(vec![self.put_accumulate(o, *acc, *value, y, errs)?])
            }
            _ if exact => Ok(vec![None; outs.len()]),
            IndexOp::Triu { .. } | IndexOp::Select { .. } => Ok(vec![Some(self.with(o, 0, errs[0].unwrap())?)]),
            IndexOp::TakeAlongAxis { .. } | IndexOp::Gather { .. } => {
                if errs[1].is_some() {
                    return Ok(vec![Some(self.infs(y)?)]);
                }
                Ok(vec![Some(self.with(o, 0, errs[0].unwrap())?)])
            }
            IndexOp::EmbeddingFwd { .. } => {
                if errs[0].is_some() {
                    return Ok(vec![Some(self.infs(y)?)]);
                }
                Ok(vec![Some(self.with(o, 1, errs[1].unwrap())?)])
            }
            IndexOp::Scatter { x, src, .. } => {
                if errs[1].is_some() {
                    return Ok(vec![Some(self.infs(y)?)]);
                }
                let ex = self.or_zeros(errs[0], *x)?;
                let es = if self.shape(*src).is_some() {
                    self.or_zeros(errs[2], *src)?
                } else {
                    self.lit(0.0)
                };
                let mut g = o.clone();
                {
                    let mut ops = g.operands_mut();
                    *ops[0] = ex;
                    *ops[2] = es;
                }
                Ok(vec![Some(self.fd.op(Op::Index(g), &[])?[0])])
            }
            IndexOp::Topk { x, .. } | IndexOp::Argsort { x, .. } => {
                self.ordering(o, *x, outs, errs[0].unwrap())
            }
        }
    }

    /// index_put_accumulate: the bounds accumulated the same way, plus the
    /// rounding of the additions into each row (the GPU adds atomically in
    /// any order in Float, or Double, or exactly in integers): per element,
    /// eps of the accumulator times the number of additions times the sum of
    /// the magnitudes added, plus the output's rounding.
    fn put_accumulate(
        &mut self,
        o: &IndexOp,
        acc: ValueId,
        value: ValueId,
        y: ValueId,
        errs: &Errs,
    ) -> Result<Option<ValueId>, IrError> {
        let put = |s: &mut Shadow, a: ValueId, v: ValueId| -> Result<ValueId, IrError> {
            let mut g = o.clone();
            {
                let mut ops = g.operands_mut();
                *ops[0] = a;
                *ops[2] = v;
            }
            Ok(s.fd.op(Op::Index(g), &[])?[0])
        };
        let prop = if errs[0].is_some() || errs[2].is_some() {
            let ea = self.or_zeros(errs[0], acc)?;
            let ev = self.or_zeros(errs[2], value)?;
            Some(put(self, ea, ev)?)
        } else {
            None
        };
        let d = self.dtype(y);
        if !d.is_float() {
            return Ok(prop);
        }
        let (aa, av) = (self.finite_abs(acc)?, self.finite_abs(value)?);
        let mag = put(self, aa, av)?;
        let za = self.zeros(acc)?;
        let zv = self.zeros(value)?;
        let one = self.lit(1.0);
        let ones = self.add(zv, one)?;
        let count = put(self, za, ones)?;
        let u = eps(if d == DType::Double {
            DType::Double
        } else {
            DType::Float
        });
        let r = self.mul(mag, count)?;
        let r = self.mulc(r, u)?;
        let local = self.local(y, 0.0)?;
        let b = self.sum_opt(prop, Some(r))?;
        self.sum_opt(b, local)
    }

    /// topk and argsort of an inexact `x` (bound `e`). Values: the k-th
    /// largest of numbers each known to within its bound lies between the
    /// k-th largest of the lower ends and of the upper ends (order statistics
    /// are monotone), so the bound is the larger distance to those. Indices:
    /// exact where the row's values are all exact (ties then go by position
    /// on both executors), or where the sorted value is farther than twice
    /// the row's largest bound from both its sorted neighbours (no other
    /// element can cross it); else uncertain (+inf).
    fn ordering(
        &mut self,
        o: &IndexOp,
        x: ValueId,
        outs: &[ValueId],
        e: ValueId,
    ) -> Result<Errs, IrError> {
        let s = self.shape(x).unwrap_or_default();
        let e = self.sane(e)?;
        let xh = self.hi(x)?;
        let mut r = vec![];
        if let IndexOp::Topk { .. } = o {
            let v = outs[0];
            let lo = self.bin(BinaryOp::Sub, xh, e)?;
            let hi = self.bin(BinaryOp::Add, xh, e)?;
            let tl = self.with(o, 0, lo)?;
            let th = self.with(o, 0, hi)?;
            let dl = self.diff(tl, v)?;
            let dh = self.diff(th, v)?;
            r.push(Some(self.bin(BinaryOp::Maximum, dl, dh)?));
        }
        let idx = *outs.last().unwrap();
        if s.is_empty() {
            r.push(None);
            return Ok(r);
        }
        let (dim, desc) = match o {
            IndexOp::Topk { dim, largest, .. } => (*dim, *largest),
            IndexOp::Argsort {
                dim, descending, ..
            } => (*dim, *descending),
            _ => unreachable!("ordering of {}", o.name()),
        };
        let r_ = s.len() as i64;
        let d = (if dim < 0 { dim + r_ } else { dim }) as usize;
        let n = s[d];
        // The whole row sorted in the op's direction.
        let k = self.fd.literal(Literal::Int(n as i64));
        let full = IndexOp::Topk {
            x: xh,
            k,
            dim,
            largest: desc,
            sorted: true,
        };
        let sv = self.fd.op(Op::Index(full), &[])?[0];
        let gap = if n == 1 {
            self.infs(sv)?
        } else {
            let ext: Vec<i64> = s.iter().map(|&e| e as i64).collect();
            let part = |sh: &mut Shadow, a: i64, b: i64| -> Result<ValueId, IrError> {
                let start: Vec<i64> = (0..s.len()).map(|i| if i == d { a } else { 0 }).collect();
                let mut end = ext.clone();
                end[d] = b;
                sh.fd.slice(sv, &start, &end)
            };
            let later = part(self, 1, n as i64)?;
            let earlier = part(self, 0, n as i64 - 1)?;
            let dd = self.bin(BinaryOp::Sub, later, earlier)?;
            let dd = self.abs(dd)?;
            // pad widths: pairs from the last dim back.
            let pad = |sh: &mut Shadow, left: bool| -> Result<ValueId, IrError> {
                let mut w = vec![0i64; 2 * (s.len() - d)];
                let at = 2 * (s.len() - 1 - d);
                w[at + usize::from(!left)] = 1;
                sh.fd.pad(dd, &w, Some(Literal::Float(f64::INFINITY)))
            };
            let before = pad(self, true)?;
            let after = pad(self, false)?;
            self.bin(BinaryOp::Minimum, before, after)?
        };
        let big = self.fd.reduce(ReduceOp::Max, e, &[dim], true)?;
        let zero = self.lit(0.0);
        let all_exact = self.bin(BinaryOp::Eq, big, zero)?;
        let twice = self.mulc(big, 2.0)?;
        let apart = self.bin(BinaryOp::Gt, gap, twice)?;
        let sure = self.bin(BinaryOp::LogicalOr, all_exact, apart)?;
        let z = self.zeros(sv)?;
        let not_sure = self.fd.unary(UnaryOp::LogicalNot, sure)?;
        let b = self.where_c(not_sure, f64::INFINITY, z)?;
        let kk = self.shape(idx).unwrap_or_default()[d];
        let b = if kk == n {
            b
        } else {
            let start = vec![0i64; s.len()];
            let mut end: Vec<i64> = s.iter().map(|&e| e as i64).collect();
            end[d] = kk as i64;
            self.fd.slice(b, &start, &end)?
        };
        r.push(Some(b));
        Ok(r)
    }

    /// Scans: cumsum as a sum over the prefix, cumprod exact-input only,
    /// cummax/cummin the running largest bound.
    pub(super) fn scan(
        &mut self,
        kind: ScanOp,
        x: ValueId,
        dim: i64,
        init: Option<ValueId>,
        y: ValueId,
        e: Option<ValueId>,
    ) -> Result<Option<ValueId>, IrError> {
        let s = self.shape(x).unwrap_or_default();
        let r = s.len() as i64;
        let n = s[(if dim < 0 { dim + r } else { dim }) as usize] as f64;
        let d = self.dtype(y);
        let scan = |sh: &mut Shadow, k: ScanOp, v: ValueId, init: Option<ValueId>| {
            Ok::<_, IrError>(sh.fd.op(Op::Scan { kind: k, x: v, dim, init }, &[])?[0])
        };
        match kind {
            ScanOp::Cumsum => {
                let prop = match e {
                    Some(e) => Some(scan(self, ScanOp::Cumsum, e, None)?),
                    None => None,
                };
                if d.is_bool() {
                    // A running OR: uncertain from the first uncertain term on.
                    return match prop {
                        None => Ok(None),
                        Some(p) => {
                            let z = self.lit(0.0);
                            let off = self.bin(BinaryOp::Gt, p, z)?;
                            let zero = self.zeros(y)?;
                            Ok(Some(self.where_c(off, f64::INFINITY, zero)?))
                        }
                    };
                }
                if !d.is_float() {
                    // Integers add exactly: the terms' errors add.
                    return Ok(prop);
                }
                // Both executors accumulate in double along the line and round
                // each prefix once: n additions of at most the running sum of |x|.
                let ax = self.finite_abs(x)?;
                let mut mag = scan(self, ScanOp::Cumsum, ax, None)?;
                if let Some(i) = init {
                    let ih = self.fd.cast(i, DType::Double)?;
                    let ia = self.abs(ih)?;
                    mag = self.add(mag, ia)?;
                }
                let acc = self.mulc(mag, n * eps(DType::Double))?;
                let local = self.local(y, 0.0)?;
                let b = self.sum_opt(prop, Some(acc))?;
                self.sum_opt(b, local)
            }
            ScanOp::Cumprod => match e {
                Some(_) => Ok(Some(self.infs(y)?)),
                None if d.is_float() => {
                    let a = self.finite_abs(y)?;
                    let rel = self.mulc(a, n * eps(DType::Double))?;
                    let local = self.local(y, 0.0)?;
                    self.sum_opt(Some(rel), local)
                }
                None => Ok(None),
            },
            ScanOp::Cummax | ScanOp::Cummin => match e {
                Some(e) => Ok(Some(scan(self, ScanOp::Cummax, e, None)?)),
                None => Ok(None),
            },
        }
    }

    /// Seeded or unseeded random values: the same Philox stream on both
    /// executors, so uniform values are bit-exact; normal values go through
    /// log, sqrt and sin/cos (CUDA's are within a few ulps), then
    /// `n * std + mean`: 8 ulps of the compute dtype of |n * std| <= |y| +
    /// |mean|, plus the output's rounding.
    pub(super) fn rng(&mut self, op: &Op, y: ValueId) -> Result<Option<ValueId>, IrError> {
        let (dist, mean) = match op {
            Op::Rng { dist, a, .. } => (*dist, Some(*a)),
            Op::RngLike { dist, .. } => (*dist, None),
            _ => unreachable!("rng bound of {}", op.name()),
        };
        if dist == RngDist::Uniform {
            return Ok(None);
        }
        let d = self.dtype(y);
        let compute = if d == DType::Double {
            DType::Double
        } else {
            DType::Float
        };
        let mut mag = self.finite_abs(y)?;
        if let Some(m) = mean {
            let mh = self.fd.cast(m, DType::Double)?;
            let ma = self.abs(mh)?;
            mag = self.add(mag, ma)?;
        }
        let r = self.mulc(mag, 8.0 * eps(compute))?;
        let local = self.local(y, 0.0)?;
        self.sum_opt(Some(r), local)
    }
}
