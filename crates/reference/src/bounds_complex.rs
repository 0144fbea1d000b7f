//! Bounds of complex values (part of [`super`]'s shadow program). Each part
//! of a complex value has its own bound: `err` holds the real part's,
//! `err_im` the imaginary part's (absent: exact).
//!
//! - Complex math (exp, log, trig, pow, div...) is built as the real ops of
//!   its formula, from `complex_math`'s [`Parts`] (the same text the
//!   reference evaluates), in the part dtype the GPU computes in, and the
//!   real rules bound each of those ops: every rounding inside the formula is
//!   bounded, cancellation included (asin of a large value loses digits in
//!   `z + sqrt(z² + 1)`), not only the result's last ulp.
//! - Predicates, comparisons and the ops nvFuser runs on complex values
//!   converted to bool are built the same way (the bool of a value within its
//!   bound of zero is uncertain).
//! - `where`, casts, `complex`/`real`/`imag`: part by part.
//! - sum: a real sum of each part; prod: exact inputs only, then a relative
//!   bound of its length.
//! - Movement, pad, cat, index_select: the real rule on each part's bound.
//! - Anything else: uncertain.

use super::{moves, Errs, Shadow};
use fusebench_ir::complex_math::{self as cm, Class, Complex, Parts, Test, R1, R2};
use fusebench_ir::dtype_ops::ComplexOp;
use fusebench_ir::{BinaryOp, DType, IrError, Literal, Op, ReduceOp, UnaryOp, ValueId};

/// The formulas' real arithmetic as ops of the shadow program, in `part`.
struct Lowering<'a> {
    s: &'a mut Shadow,
    part: DType,
    failed: Option<IrError>,
}

impl Lowering<'_> {
    fn emit(&mut self, op: Op, fallback: ValueId) -> ValueId {
        if self.failed.is_some() {
            return fallback;
        }
        match self.s.emit(op) {
            Ok(v) => v,
            Err(e) => {
                self.failed = Some(e);
                fallback
            }
        }
    }
}

impl Parts for Lowering<'_> {
    type V = ValueId;
    type B = ValueId;
    fn lit(&mut self, x: f64) -> ValueId {
        let l = self.s.fd.literal(Literal::Float(x));
        self.emit(Op::Cast { x: l, dtype: self.part }, l)
    }
    fn r1(&mut self, f: R1, x: ValueId) -> ValueId {
        let kind = match f {
            R1::Neg => UnaryOp::Neg,
            R1::Abs => UnaryOp::Abs,
            R1::Sqrt => UnaryOp::Sqrt,
            R1::Exp => UnaryOp::Exp,
            R1::Log => UnaryOp::Log,
            R1::Sin => UnaryOp::Sin,
            R1::Cos => UnaryOp::Cos,
            R1::Sinh => UnaryOp::Sinh,
            R1::Cosh => UnaryOp::Cosh,
        };
        self.emit(Op::Unary { kind, x }, x)
    }
    fn r2(&mut self, f: R2, a: ValueId, b: ValueId) -> ValueId {
        let kind = match f {
            R2::Add => BinaryOp::Add,
            R2::Sub => BinaryOp::Sub,
            R2::Mul => BinaryOp::Mul,
            R2::Div => BinaryOp::Div,
            R2::Atan2 => BinaryOp::Atan2,
        };
        self.emit(Op::Binary { kind, a, b }, a)
    }
    fn test(&mut self, t: Test, a: ValueId, b: ValueId) -> ValueId {
        let kind = match t {
            Test::Eq => BinaryOp::Eq,
            Test::Ne => BinaryOp::Ne,
            Test::Lt => BinaryOp::Lt,
            Test::Gt => BinaryOp::Gt,
        };
        self.emit(Op::Binary { kind, a, b }, a)
    }
    fn class(&mut self, c: Class, x: ValueId) -> ValueId {
        let kind = match c {
            Class::IsNan => UnaryOp::IsNan,
            Class::IsInf => UnaryOp::IsInf,
            Class::IsFinite => UnaryOp::IsFinite,
            Class::SignNegative => UnaryOp::Signbit,
        };
        self.emit(Op::Unary { kind, x }, x)
    }
    fn and(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.emit(Op::Binary { kind: BinaryOp::LogicalAnd, a, b }, a)
    }
    fn or(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.emit(Op::Binary { kind: BinaryOp::LogicalOr, a, b }, a)
    }
    fn truth(&mut self, t: bool) -> ValueId {
        self.s.fd.literal(Literal::Bool(t))
    }
    fn select(&mut self, cond: ValueId, a: ValueId, b: ValueId) -> ValueId {
        self.emit(Op::Where { cond, a, b }, a)
    }
}

impl Shadow {
    /// Whether `op` reads or makes a complex value.
    pub(super) fn touches_complex(&self, op: &Op, outs: &[ValueId]) -> bool {
        op.operands().iter().chain(outs).any(|&v| self.dtype(v).is_complex())
    }

    /// The bound of a real operand, or of a complex operand's part.
    fn part_err(&self, v: ValueId, imag: bool) -> Option<ValueId> {
        match (imag, self.dtype(v).is_complex()) {
            (false, _) => self.err.get(&v).copied(),
            (true, true) => self.err_im.get(&v).copied(),
            (true, false) => None,
        }
    }

    /// Records the parts' bounds of the complex value `v`.
    fn set_parts(&mut self, v: ValueId, re: Option<ValueId>, im: Option<ValueId>) -> Result<(), IrError> {
        if let Some(e) = re {
            let e = self.fit(e, v)?;
            self.err.insert(v, e);
        }
        if let Some(e) = im {
            let e = self.fit(e, v)?;
            self.err_im.insert(v, e);
        }
        Ok(())
    }

    /// The bound of a complex output as the shadow reports it: the larger of
    /// its parts' (both parts are compared within it).
    pub(super) fn output_err(&mut self, v: ValueId) -> Result<Option<ValueId>, IrError> {
        if !self.dtype(v).is_complex() {
            return Ok(self.err.get(&v).copied());
        }
        Ok(match (self.err.get(&v).copied(), self.err_im.get(&v).copied()) {
            (Some(a), Some(b)) => Some(self.bin(BinaryOp::Maximum, a, b)?),
            (a, b) => a.or(b),
        })
    }

    /// `v`'s parts as values of `part` (a real `v` has an exact zero
    /// imaginary part), each with its bound recorded.
    fn parts_of(&mut self, v: ValueId, part: DType) -> Result<(ValueId, ValueId), IrError> {
        let d = self.dtype(v);
        let cast = |s: &mut Self, x: ValueId| -> Result<ValueId, IrError> {
            if s.dtype(x) == part {
                Ok(x)
            } else {
                s.emit(Op::Cast { x, dtype: part })
            }
        };
        if !d.is_complex() {
            let re = cast(self, v)?;
            let z = self.fd.literal(Literal::Float(0.0));
            let im = self.emit(Op::Cast { x: z, dtype: part })?;
            return Ok((re, im));
        }
        let re = self.emit(Op::Complex { kind: ComplexOp::Real, xs: vec![v] })?;
        let im = self.emit(Op::Complex { kind: ComplexOp::Imag, xs: vec![v] })?;
        Ok((cast(self, re)?, cast(self, im)?))
    }

    /// `x` as `to` (no op when it is already).
    fn cast_to(&mut self, x: ValueId, to: DType) -> Result<ValueId, IrError> {
        if self.dtype(x) == to {
            Ok(x)
        } else {
            self.emit(Op::Cast { x, dtype: to })
        }
    }

    /// Records the bound of `y` from the formula's result parts `(re, im)`
    /// (a real `y` takes the real part).
    fn finish(&mut self, y: ValueId, re: ValueId, im: ValueId) -> Result<Errs, IrError> {
        let d = self.dtype(y);
        match d.complex_part() {
            Some(p) => {
                let (re, im) = (self.cast_to(re, p)?, self.cast_to(im, p)?);
                let (a, b) = (self.err.get(&re).copied(), self.err.get(&im).copied());
                self.set_parts(y, a, b)?;
                Ok(vec![None])
            }
            None => {
                let r = self.cast_to(re, d)?;
                Ok(vec![self.err.get(&r).copied()])
            }
        }
    }

    /// Bounds of a node that reads or makes complex values; complex outputs'
    /// bounds are recorded here (their entries in the result are `None`).
    pub(super) fn complex_node(&mut self, op: &Op, outs: &[ValueId]) -> Result<Errs, IrError> {
        let y = outs[0];
        match op {
            Op::Complex { kind, xs } => match kind {
                ComplexOp::Complex => {
                    let (a, b) = (self.part_err(xs[0], false), self.part_err(xs[1], false));
                    self.set_parts(y, a, b)?;
                    Ok(vec![None])
                }
                ComplexOp::Real => Ok(vec![self.part_err(xs[0], false)]),
                ComplexOp::Imag => Ok(vec![self.part_err(xs[0], true)]),
            },
            Op::Where { cond, .. } if self.dtype(*cond).is_complex() => {
                let e = self.infs(y)?;
                self.finish_uncertain(y, e)
            }
            Op::Where { cond, a, b } => {
                let p = self.dtype(y).complex_part().unwrap_or(DType::Double);
                let (ar, ai) = self.parts_of(*a, p)?;
                let (br, bi) = self.parts_of(*b, p)?;
                let re = self.emit(Op::Where { cond: *cond, a: ar, b: br })?;
                let im = self.emit(Op::Where { cond: *cond, a: ai, b: bi })?;
                self.finish(y, re, im)
            }
            Op::Cast { x, dtype } => {
                let from = self.dtype(*x);
                let p = from.complex_part().or(dtype.complex_part()).unwrap_or(*dtype);
                let (re, im) = self.parts_of(*x, p)?;
                if *dtype == DType::Bool {
                    let mut l = Lowering { s: self, part: p, failed: None };
                    let b = cm::truth(&mut l, (re, im));
                    if let Some(e) = l.failed {
                        return Err(e);
                    }
                    return Ok(vec![self.err.get(&b).copied()]);
                }
                self.finish(y, re, im)
            }
            Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } => self.complex_math(op, y),
            Op::Reduce { kind, x, dims, keepdim, .. } if self.dtype(*x).is_complex() => {
                self.complex_reduce(*kind, *x, dims, *keepdim, y)
            }
            _ if (moves(op) || matches!(op, Op::Pad { .. } | Op::Cat { .. } | Op::Full { .. }))
                && outs.len() == 1
                && self.dtype(y).is_complex() =>
            {
                self.part_by_part(op, y)
            }
            _ => {
                let mut r = vec![];
                for &o in outs {
                    if self.shape(o).is_none() {
                        r.push(None);
                    } else if self.dtype(o).is_complex() {
                        let (a, b) = (self.infs(o)?, self.infs(o)?);
                        self.set_parts(o, Some(a), Some(b))?;
                        r.push(None);
                    } else {
                        r.push(Some(self.infs(o)?));
                    }
                }
                Ok(r)
            }
        }
    }

    /// A movement or gather op: the real rule on each part's bound (a real
    /// operand of a complex cat has an exact imaginary part).
    fn part_by_part(&mut self, op: &Op, y: ValueId) -> Result<Errs, IrError> {
        let vs = op.operands();
        let saved: Vec<Option<ValueId>> = vs.iter().map(|v| self.err.get(v).copied()).collect();
        let re = self.real_node(op, &[y])?[0];
        for &v in &vs {
            match self.part_err(v, true) {
                Some(e) => self.err.insert(v, e),
                None => self.err.remove(&v),
            };
        }
        let im = self.real_node(op, &[y]);
        for (&v, e) in vs.iter().zip(saved) {
            match e {
                Some(e) => self.err.insert(v, e),
                None => self.err.remove(&v),
            };
        }
        self.set_parts(y, re, im?[0])?;
        Ok(vec![None])
    }

    /// Complex math, predicates and bool-converted ops, built from their formulas.
    fn complex_math(&mut self, op: &Op, y: ValueId) -> Result<Errs, IrError> {
        let t = fusebench_ir::elementwise::op_typing(op, &self.fd.fusion().values)
            .expect("a table op")?;
        let part = t.compute.complex_part().unwrap_or(t.compute);
        let part = if part.is_float() { part } else { DType::Double };
        let vs = op.operands();
        let mut zs = vec![];
        for (&v, &c) in vs.iter().zip(&t.casts) {
            let p = c.complex_part().unwrap_or(part);
            let p = if p.is_float() { p } else { part };
            zs.push(self.parts_of(v, p)?);
        }
        let sem = match op {
            Op::Unary { kind, .. } => cm::unary::<Lowering>(*kind),
            Op::Binary { kind, .. } => cm::binary::<Lowering>(*kind),
            Op::Ternary { kind, .. } => cm::ternary::<Lowering>(*kind),
            _ => None,
        };
        let Some(sem) = sem else {
            let e = self.infs(y)?;
            return self.finish_uncertain(y, e);
        };
        let mut l = Lowering { s: self, part, failed: None };
        enum Got {
            Z(ValueId, ValueId),
            B(ValueId),
        }
        let got = match sem {
            Complex::Unary(f) => {
                let z = f(&mut l, zs[0]);
                Got::Z(z.0, z.1)
            }
            Complex::Binary(f) => {
                let z = f(&mut l, zs[0], zs[1]);
                Got::Z(z.0, z.1)
            }
            Complex::Ternary(f) => {
                let z = f(&mut l, zs[0], zs[1], zs[2]);
                Got::Z(z.0, z.1)
            }
            Complex::Pred(f) => Got::B(f(&mut l, zs[0])),
            Complex::Compare(f) => Got::B(f(&mut l, zs[0], zs[1])),
            Complex::Bools => {
                // The op's integer form on each operand's bool, as 0 or 1.
                let mut ints = vec![];
                for z in &zs {
                    let b = cm::truth(&mut l, *z);
                    ints.push(l.emit(Op::Cast { x: b, dtype: DType::Int }, b));
                }
                let mut o = op.clone();
                for (slot, i) in o.operands_mut().into_iter().zip(ints) {
                    *slot = i;
                }
                Got::B(l.emit(o, y))
            }
        };
        if let Some(e) = l.failed {
            return Err(e);
        }
        match got {
            Got::Z(re, im) => self.finish(y, re, im),
            // A bool or 0/1 result: a complex output's imaginary part is an exact 0.
            Got::B(b) => {
                let d = self.dtype(y);
                let r = self.cast_to(b, d.complex_part().unwrap_or(d))?;
                let e = self.err.get(&r).copied();
                if d.is_complex() {
                    self.set_parts(y, e, None)?;
                    return Ok(vec![None]);
                }
                Ok(vec![e])
            }
        }
    }

    fn finish_uncertain(&mut self, y: ValueId, e: ValueId) -> Result<Errs, IrError> {
        if self.dtype(y).is_complex() {
            self.set_parts(y, Some(e), Some(e))?;
            Ok(vec![None])
        } else {
            Ok(vec![Some(e)])
        }
    }

    /// sum: each part summed as a real sum; prod: exact inputs only.
    fn complex_reduce(
        &mut self,
        kind: ReduceOp,
        x: ValueId,
        dims: &[i64],
        keep: bool,
        y: ValueId,
    ) -> Result<Errs, IrError> {
        let d = self.dtype(y);
        let Some(part) = d.complex_part() else {
            // A real dtype: each element converted first, then a real reduction.
            let c = self.emit(Op::Cast { x, dtype: d })?;
            let e = self.err.get(&c).copied();
            return Ok(vec![self.reduce(kind.name(), c, dims, keep, y, e)?]);
        };
        let (xr, xi) = self.parts_of(x, part)?;
        let (yr, yi) = self.parts_of(y, part)?;
        match kind {
            ReduceOp::Sum => {
                let (er, ei) = (self.err.get(&xr).copied(), self.err.get(&xi).copied());
                let re = self.reduce("sum", xr, dims, keep, yr, er)?;
                let im = self.reduce("sum", xi, dims, keep, yi, ei)?;
                self.set_parts(y, re, im)?;
                Ok(vec![None])
            }
            ReduceOp::Prod if self.part_err(x, false).is_none() && self.part_err(x, true).is_none() => {
                // Each product rounds its parts relative to |y| (a part may
                // cancel); |re| + |im| >= |y| and does not overflow as hypot's
                // squares would.
                let n = self.count(x, dims) as f64;
                let (hr, hi) = (self.hi(yr)?, self.hi(yi)?);
                let (ar, ai) = (self.finite_abs(hr)?, self.finite_abs(hi)?);
                let h = self.add(ar, ai)?;
                let r = self.mulc(h, (4.0 * n + 1.0) * super::eps(part))?;
                let floor = self.lit(2.0 * super::tiny(part));
                let b = Some(self.add(r, floor)?);
                self.set_parts(y, b, b)?;
                Ok(vec![None])
            }
            _ => {
                let e = self.infs(y)?;
                self.finish_uncertain(y, e)
            }
        }
    }
}
