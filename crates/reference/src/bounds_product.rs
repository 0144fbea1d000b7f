//! Bounds of the matrix products `matmul`, `linear`, `grouped_mm` and
//! `scaled_mm` (the rules are listed in [`super`]'s module doc).
//!
//! A library's product sums its k terms in an accumulator (Float for Half,
//! BFloat16 and Float operands, Double for Double) in an order of its own: a
//! k loop per thread, tiles of k, sometimes k split across blocks and added
//! after. Unlike a reduction's tree, most of that order is a sequence, so the
//! bound is the one that holds for any order, k unit roundoffs of the
//! accumulator times the sum of the terms' magnitudes (k + 1 with a bias
//! added at the end), not the log2 k of [`crate::sum_bound::accumulation_factor`].
//! The reference sums in Double and adds the same with Double's unit roundoff.

use super::{Errs, Shadow};
use fusebench_ir::gemm::matmul_shape;
use fusebench_ir::{DType, GemmOp, IrError, Op, ValueId};

impl Shadow {
    /// `op` (a `matmul`, `linear` or `grouped_mm`) applied to `vs` in place
    /// of its operands (`None`: the operand kept; a linear's bias dropped).
    fn product_of(&mut self, op: &Op, vs: &[Option<ValueId>]) -> Result<ValueId, IrError> {
        let mut o = op.clone();
        let slots = o.operands_mut();
        for (slot, v) in slots.into_iter().zip(vs) {
            if let Some(v) = v {
                *slot = *v;
            }
        }
        if let (Op::Linear { bias, .. }, Some(None)) = (&mut o, vs.get(2)) {
            *bias = None;
        }
        Ok(self.fd.op(o, &[])?[0])
    }

    /// The terms each output element of the product sums.
    fn product_terms(&self, op: &Op) -> Result<usize, IrError> {
        Ok(match op {
            Op::Matmul { a, b } => {
                let (sa, sb) = (self.shape(*a).unwrap_or_default(), self.shape(*b).unwrap_or_default());
                matmul_shape(&sa, &sb)?.k
            }
            Op::Linear { a, bias, .. } => {
                let k = self.shape(*a).unwrap_or_default().last().copied().unwrap_or(1);
                k + usize::from(bias.is_some())
            }
            // Groups that cut k sum part of it: k bounds them all.
            Op::Gemm(GemmOp::GroupedMm { mat1, .. }) => self.shape(*mat1).unwrap_or_default().last().copied().unwrap_or(1),
            _ => unreachable!("product_terms of {}", op.name()),
        })
    }

    /// Bound of a product's output `y`: the operands' bounds carried through
    /// the product (|A| e_B + e_A (|B| + e_B), one operand at a time, each
    /// one's later operands at the top of their intervals; a bias's bound
    /// added), plus the accumulation's k (u + u_Double) sum |a b| (k + 1 and + |bias| with a bias),
    /// plus the output's rounding.
    pub(super) fn product(&mut self, op: &Op, y: ValueId, errs: &Errs) -> Result<Option<ValueId>, IrError> {
        let grouped = matches!(op, Op::Gemm(_));
        if grouped && errs[2].is_some() {
            // Offsets known only to a bound: any element may change group.
            return Ok(Some(self.infs(y)?));
        }
        // The factors and a linear's bias (a grouped product's offsets are kept).
        let operands: Vec<ValueId> = op.operands().into_iter().take(if grouped { 2 } else { 3 }).collect();
        let mut abs = vec![];
        for &v in &operands {
            abs.push(self.finite_abs(v)?);
        }
        let magnitude = self.product_of(op, &abs.iter().map(|&v| Some(v)).collect::<Vec<_>>())?;
        let u = if self.dtype(y) == DType::Double { 2f64.powi(-53) } else { 2f64.powi(-24) };
        let terms = self.product_terms(op)? as f64;
        let mut bound = Some(self.mulc(magnitude, terms * (u + 2f64.powi(-53)))?);
        // The factors (a, b / weight); a bias is a term of its own.
        let factors = operands.len().min(2);
        for i in 0..factors {
            let Some(e) = errs[i] else { continue };
            let mut vs: Vec<Option<ValueId>> = vec![None; operands.len()];
            for (j, slot) in vs.iter_mut().enumerate().take(factors) {
                *slot = Some(match j.cmp(&i) {
                    std::cmp::Ordering::Less => abs[j],
                    std::cmp::Ordering::Equal => e,
                    std::cmp::Ordering::Greater => match errs[j] {
                        Some(ej) => self.add(abs[j], ej)?,
                        None => abs[j],
                    },
                });
            }
            let carried = self.product_of(op, &vs)?;
            bound = self.sum_opt(bound, Some(carried))?;
        }
        if let (false, Some(&Some(e))) = (grouped, errs.get(2)) {
            // The bias's bound, broadcast as the product broadcasts the bias.
            let (za, zw) = (self.zeros(operands[0])?, self.zeros(operands[1])?);
            let carried = self.product_of(op, &[Some(za), Some(zw), Some(e)])?;
            bound = self.sum_opt(bound, Some(carried))?;
        }
        let local = self.local(y, 0.0)?;
        self.sum_opt(bound, local)
    }
}

impl Shadow {
    /// Bound of `scaled_mm`'s output `y`, (A B) s1 s2 with FP8 A and B: the
    /// operands' and scales' bounds carried through it, plus
    /// (ceil(log2 k) + 1) 2^-13 sum_k |a b| |s1 s2| (Hopper's FP8 tensor cores
    /// keep about 14 bits between the library's promotions to Float: the bound
    /// `check` uses, `sum_bound::fp8_product_bound`), plus the output's rounding.
    pub(super) fn scaled_product(&mut self, op: &Op, y: ValueId, errs: &Errs) -> Result<Option<ValueId>, IrError> {
        let Op::Gemm(GemmOp::ScaledMm { mat1, mat2, scale1, scale2, .. }) = *op else {
            unreachable!("scaled_product of {}", op.name())
        };
        let k = self.shape(mat1).unwrap_or_default().last().copied().unwrap_or(1);
        let (a, b, s, t) = (self.finite_abs(mat1)?, self.finite_abs(mat2)?, self.finite_abs(scale1)?, self.finite_abs(scale2)?);
        // The product of Double magnitudes, scaled: `scales` as given, or each at the top of its interval.
        let top = |me: &mut Self, v: ValueId, e: Option<ValueId>| -> Result<ValueId, IrError> {
            match e {
                Some(e) => me.add(v, e),
                None => Ok(v),
            }
        };
        let scaled = |me: &mut Self, x: ValueId, y: ValueId, s: ValueId, t: ValueId| -> Result<ValueId, IrError> {
            let p = me.fd.op(Op::Matmul { a: x, b: y }, &[])?[0];
            let p = me.mul(p, s)?;
            me.mul(p, t)
        };
        let magnitude = scaled(self, a, b, s, t)?;
        let g = ((k.max(2) as f64).log2().ceil() + 1.0) * 2f64.powi(-13);
        let mut bound = Some(self.mulc(magnitude, g)?);
        if errs.iter().any(Option::is_some) {
            // Each factor at the top of its interval, minus the magnitude: what
            // the operands' and scales' bounds move the result by at most.
            let (ah, bh, sh, th) = (top(self, a, errs[0])?, top(self, b, errs[1])?, top(self, s, errs[2])?, top(self, t, errs[3])?);
            let high = scaled(self, ah, bh, sh, th)?;
            let moved = self.bin(fusebench_ir::BinaryOp::Sub, high, magnitude)?;
            bound = self.sum_opt(bound, Some(moved))?;
        }
        let local = self.local(y, 0.0)?;
        self.sum_opt(bound, local)
    }
}
