//! Bounds of flash attention's forward (`sdpfa_fwd`) for the fuzzer, where
//! queries and keys are exact (the fuzzer's draws, `ir::random`'s
//! attention): bounds on either would move the softmax weights P, which
//! these bounds do not follow, so they make both outputs uncertain.
//!
//! A flash kernel computes the scores s = scale q.k in Float from 16-bit
//! operands, exponentiates them against the running row maximum, rounds the
//! weights P to the operands' type before P V, and divides by the Float sum
//! of the weights; the reference does the same in Double and rounds once.
//! With M = max_j (|v_j| + e_vj) over the keys (the output is a convex
//! combination of V's rows, so it moves by at most what they do):
//! - a score errs by at most ds = |scale| (E + 4) 2^-23 max_j |q_i|.|k_j|
//!   (E products summed in Float, the scale and log2 e applied, with slack),
//!   which moves each weight relatively by 2 ds (the score and the row
//!   maximum) and the output by 4 ds M;
//! - the rounding of P moves the output by u M (u the operands' unit
//!   roundoff), its Float accumulation over S keys by 2 S 2^-24 M, the
//!   approximate exponentials and the division by 2^-20 M;
//! - V's own bounds pass through P: at most max_j e_vj;
//! - plus the output's rounding; a column of V holding an infinity or NaN
//!   makes the output's column uncertain (a kernel multiplies it by weights
//!   it rounded or masked to 0).
//!
//! The log-sum-exp errs by 2 ds, plus the Float sum of S weights
//! ((S + 4) 2^-23, relative to the sum, so absolute on its logarithm), plus
//! 2^-20 (1 + |lse| + |scale| max_j |q_i|.|k_j|) for the approximate
//! logarithm and the terms' magnitudes, plus its rounding.

use super::{eps, Errs, Shadow};
use fusebench_ir::{BinaryOp, DType, GemmOp, IrError, Op, ReduceOp, ValueId};

impl Shadow {
    /// Bounds of `sdpfa_fwd`'s outputs `outs` (output, log-sum-exp, and the
    /// Philox seed and offset, which are exact).
    pub(super) fn attention(&mut self, op: &Op, outs: &[ValueId], errs: &Errs) -> Result<Errs, IrError> {
        let Op::Gemm(GemmOp::SdpfaFwd { query, key, value, scale, .. }) = *op else {
            unreachable!("attention bound of {}", op.name())
        };
        let (o, lse) = (outs[0], outs[1]);
        let dq = self.dtype(query);
        let uncertain = |me: &mut Self| -> Result<Errs, IrError> { Ok(vec![Some(me.infs(o)?), Some(me.infs(lse)?), None, None]) };
        if !matches!(dq, DType::Half | DType::BFloat16) || errs[0].is_some() || errs[1].is_some() || errs[3..].iter().any(Option::is_some) {
            return uncertain(self);
        }
        let qs = self.shape(query).unwrap_or_default();
        let ks = self.shape(key).unwrap_or_default();
        let r = qs.len();
        let (e, s) = (qs[r - 1], ks[r - 2]);
        let sc = match scale {
            None => 1.0 / (e as f64).sqrt(),
            Some(v) => match self.fd.fusion().value(v).constant {
                Some(l) => l.as_f64(),
                None => return uncertain(self),
            },
        };
        // max_j |q_i|.|k_j|, per query row: kept [.., L, 1] for the output, [.., L] for the log-sum-exp.
        let (aq, ak) = (self.finite_abs(query)?, self.finite_abs(key)?);
        let mut dims: Vec<i64> = (0..r as i64).collect();
        dims.swap(r - 2, r - 1);
        let akt = self.fd.permute(ak, &dims)?;
        let qk = self.fd.op(Op::Matmul { a: aq, b: akt }, &[])?[0];
        let last = [r as i64 - 1];
        let qk_kept = self.fd.reduce(ReduceOp::Max, qk, &last, true)?;
        let qk_row = self.fd.reduce(ReduceOp::Max, qk, &last, false)?;
        let ds_factor = sc.abs() * (e as f64 + 4.0) * 2f64.powi(-23);

        // The output: (u + 2 S 2^-24 + 2^-20) M + 4 ds M + max_j e_v + its rounding.
        let (av, finite) = self.finite_abs_and_mask(value)?;
        let top = match errs[2] {
            Some(ev) => self.add(av, ev)?,
            None => av,
        };
        let keys = [r as i64 - 2];
        let m = self.fd.reduce(ReduceOp::Max, top, &keys, true)?;
        let u = eps(dq) / 2.0;
        let rel = self.mulc(qk_kept, 4.0 * ds_factor)?;
        let rel = self.add_c(rel, u + 2.0 * s as f64 * 2f64.powi(-24) + 2f64.powi(-20))?;
        let mut bo = Some(self.mul(rel, m)?);
        if let Some(ev) = errs[2] {
            let passed = self.fd.reduce(ReduceOp::Max, ev, &keys, true)?;
            bo = self.sum_opt(bo, Some(passed))?;
        }
        let local = self.local(o, 0.0)?;
        let bo = self.sum_opt(bo, local)?;
        // A V column holding an infinity or NaN: a kernel multiplies it by the
        // weights it rounded or masked to 0 (NaN) where the reference may skip
        // them (seed 1, fusion 71 of 2026-12-05), so that column is uncertain.
        let bo = match bo {
            Some(b) => {
                let (zero, one) = (self.lit(0.0), self.lit(1.0));
                let bad = self.fd.where_(finite, zero, one)?;
                let bad = self.fd.reduce(ReduceOp::Max, bad, &keys, true)?;
                let half = self.lit(0.5);
                let bad = self.bin(BinaryOp::Gt, bad, half)?;
                Some(self.where_c(bad, f64::INFINITY, b)?)
            }
            None => None,
        };

        // The log-sum-exp: 2 ds + (S + 4) 2^-23 + 2^-20 (1 + |lse| + |scale| max |q|.|k|) + its rounding.
        let ds2 = self.mulc(qk_row, 2.0 * ds_factor + 2f64.powi(-20) * sc.abs())?;
        let alse = self.finite_abs(lse)?;
        let mag = self.mulc(alse, 2f64.powi(-20))?;
        let bl = self.add(ds2, mag)?;
        let bl = self.add_c(bl, (s as f64 + 4.0) * 2f64.powi(-23) + 2f64.powi(-20))?;
        let local = self.local(lse, 0.0)?;
        let bl = self.sum_opt(Some(bl), local)?;
        Ok(vec![bo, bl, None, None])
    }

    /// `a + c` for a constant `c`.
    fn add_c(&mut self, a: ValueId, c: f64) -> Result<ValueId, IrError> {
        let c = self.lit(c);
        self.add(a, c)
    }
}
