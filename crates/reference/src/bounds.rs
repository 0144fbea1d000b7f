//! Per-element error bounds for a fusion's outputs, and the comparison that
//! uses them (`fusebench fuzz`). Each element of each output gets its own
//! bound, derived from the ops that made it, never from the output's
//! largest value.
//!
//! The bound of every value is itself computed by the reference, as a
//! Double tensor built beside the fusion (a "shadow"), so every op's
//! semantics, broadcasting and indexing are the reference's own:
//!
//! - Inputs, literals, scalars and `full` are exact (bound 0).
//! - Elementwise ops (unary, binary, where, cast): the operands' bounds are
//!   propagated by evaluating the op in Double at the corners of each float
//!   operand's interval `x ± e` (first-order condition numbers, for any op in
//!   the enumerations), doubled for curvature; plus the op's own error: its
//!   accuracy in ulps of the compute dtype ([`ulps`]: 1 for correctly
//!   rounded ops, 2 for div/sqrt/reciprocal, 16 for pow, 8 for any other
//!   function) times |y|, plus one ulp of the output dtype times |y|, plus
//!   the smallest normal of the output and compute dtypes (flush to zero).
//!   Comparisons are uncertain (bound +inf) where |a − b| <= e_a + e_b, a
//!   quotient or reciprocal where the divisor's interval holds 0, and an
//!   integer or bool operand with a nonzero bound makes the result
//!   uncertain there.
//! - Sums over n elements: the sum of the terms' bounds plus the
//!   accumulation's rounding g·sum|x| (g from
//!   [`crate::sum_bound::accumulation_factor`], the one bound of a float
//!   sum, shared with `check`), plus the output's rounding; max/min: the
//!   largest bound of the terms; other reductions are exact-input only
//!   (else uncertain), with 2·n·eps·|y|.
//! - welford / var_mean: the mean as a sum; M2 = sum (x − mean)² by
//!   2·sum(|x| e + |mean| e + e²) + (g + 3u)·sum x² (each term's subtraction
//!   and square round, 3u; the accumulation g; sum (x − mean)² <= sum x²),
//!   var = M2 / (n − correction).
//! - Movement and gathers (broadcast, expand, reshape, permute, squeeze,
//!   slice, pad with 0, cat, index_select, gather, take_along_axis, select,
//!   triu, embedding_fwd's weight): the same op on the bounds; an index
//!   operand with a nonzero bound makes the output uncertain (embedding_fwd
//!   with max_norm is not checked: the row norms and the rescale decision
//!   are each executor's own). `iota`: the rounding of start + i·step.
//! - scatter: the bounds of x and src scattered the same way (the last
//!   duplicate wins on both executors). index_put_accumulate: the bounds
//!   accumulated the same way, plus eps of the accumulator (Float, Double)
//!   times the number of additions into the row times the accumulated
//!   magnitudes |acc| + sum |value| (the GPU adds atomically in any order),
//!   plus the output's rounding.
//! - cumsum: a sum over each prefix: the cumulative sum of the terms'
//!   bounds, plus n·eps(Double)·(cumulative sum of |x| + |init|) (both
//!   executors accumulate in double along the line), plus the output's
//!   rounding; integers add their terms' bounds, bools (a running OR) are
//!   uncertain from the first uncertain term on. cumprod: uncertain unless
//!   the input is exact, then n·eps(Double)·|y| plus the output's rounding.
//!   cummax/cummin: the cumulative max of the bounds.
//! - topk/argsort of an exact input: exact (equal values go by position on
//!   both executors, NaN above every number, -0 equal to +0). Of an inexact
//!   input: a value is bounded by its distance to the same topk of x − e and
//!   of x + e (order statistics are monotone); an index is exact where the
//!   row's bounds are all 0, or where its sorted value is farther than twice
//!   the row's largest bound from both sorted neighbours, else uncertain.
//! - Seeded and unseeded random ops: uniform bit-exact (the same Philox
//!   stream and arithmetic); normal 8 ulps of Float (Double for Double) of
//!   |y| + |mean| (log, sqrt, sin/cos, then n·std + mean), plus the output's
//!   rounding.
//! - matmul, linear and grouped_mm: the operands' bounds carried through the product
//!   (|A| e_B + e_A (|B| + e_B), a bias's bound added), plus k unit roundoffs
//!   (k + 1 with a bias) of the accumulator (Float, or Double for Double) and
//!   of Double (the reference's own sum) times sum_k |a b| (+ |bias|): a bound for any
//!   summation order, since a library's k loop is mostly a sequence, not a
//!   tree; plus the output's rounding. scaled_mm: its operands' and scales'
//!   bounds carried through (each factor at the top of its interval), plus
//!   (ceil(log2 k) + 1) 2^-13 sum_k |a b| |s1 s2| (FP8 tensor cores keep about
//!   14 bits, as `check` allows), plus the output's rounding.
//! - sdpfa_fwd with exact queries and keys: the output by (u + 4 ds + 2 S
//!   2^-24 + 2^-20) max_j (|v_j| + e_vj) + max_j e_vj, ds a score's Float
//!   error, u the 16-bit unit roundoff P is rounded to; the log-sum-exp by
//!   2 ds plus the Float sum's and logarithm's roundings
//!   (`bounds_attention.rs`); queries or keys with bounds: uncertain.
//! - Any other op: uncertain (+inf) outputs.
//!
//! - Complex values: each part has its own bound ([`complex`]'s module doc);
//!   a complex output reports the larger of its parts' bounds.
//!
//! [`compare_bounded`]: the dtypes must be equal (Int32 against Int64 is a
//! mismatch), NaN matches only NaN, an infinity only itself (or a value
//! beyond half the dtype's largest, where the bound is nonzero), and
//! integers and bools compare exactly unless their bound allows more; both
//! parts of a complex element must be within its bound. An
//! element whose bound is +inf or NaN is not checked, and counted.

#[path = "bounds_index.rs"]
mod index_bounds;

use crate::compare::{Comparison, Tolerance};
use crate::{sum_bound, Arg, ExecError, Tensor};
use fusebench_ir::{BinaryOp, DType, Fusion, FusionBuilder, IrError, Literal, Op, ValueId};
use std::collections::HashMap;

#[path = "bounds_complex.rs"]
mod complex;

#[path = "bounds_product.rs"]
mod product;

#[path = "bounds_attention.rs"]
mod attention;

/// Runs `f` and returns its outputs with each output's per-element bound
/// (`None`: exact, bound 0).
pub fn run_with_bounds(
    f: &Fusion,
    inputs: &[Arg],
) -> Result<(Vec<Tensor>, Vec<Option<Tensor>>), ExecError> {
    let (g, which) = shadow(f)?;
    let mut outs = crate::run(&g, inputs)?;
    let extra = outs.split_off(f.outputs.len());
    let bounds = which.iter().map(|w| w.map(|k| extra[k].clone())).collect();
    Ok((outs, bounds))
}

/// `f` with the bound of each output added as extra outputs; for each of
/// `f`'s outputs, the position of its bound among the extra ones.
pub fn shadow(f: &Fusion) -> Result<(Fusion, Vec<Option<usize>>), IrError> {
    let mut s = Shadow {
        fd: FusionBuilder::extend(f.clone()),
        err: HashMap::new(),
        err_im: HashMap::new(),
        hi: HashMap::new(),
    };
    for node in &f.nodes {
        s.record(&node.op, &node.outputs)?;
    }
    let mut which = vec![];
    let mut k = 0;
    for &o in &f.outputs {
        match s.output_err(o)? {
            Some(e) => {
                s.fd.add_output(e)?;
                which.push(Some(k));
                k += 1;
            }
            None => which.push(None),
        }
    }
    Ok((s.fd.finish(), which))
}

/// Accuracy of an elementwise op on the GPU, in ulps of its compute dtype.
pub fn ulps(name: &str) -> f64 {
    match name {
        "add" | "sub" | "mul" | "neg" | "abs" | "where" | "cast" | "maximum" | "minimum" => 1.0,
        "div" | "reciprocal" | "sqrt" | "rsqrt" | "truediv" => 2.0,
        "pow" => 16.0,
        _ => 8.0,
    }
}

/// Where an elementwise op's result is not checked (bound +inf) beyond the
/// general rules: the one place for what is known of single ops.
#[derive(Clone, Copy)]
enum Unsure {
    /// Where the operand is NaN: the sign of a computed NaN is unspecified
    /// (the GPU's is +, x86's -).
    NanOperand,
    /// Where the operand's bound reaches this width: the corners miss a pole
    /// or a full turn inside a wide interval (tan of a Float near 3e7, only
    /// known to ±2: seed 1 fusion 1099).
    WideOperand(f64),
    /// Where the operand is inside (lo, hi), the bound checked even for exact
    /// operands: CUDA documents lgamma's error only outside (-23.0001,
    /// -2.2637) ("larger inside"), where it has roots (seed 1 fusion 4840).
    Inside(f64, f64),
    /// fmod/remainder of a divisor known to ±e where the quotient times e
    /// reaches half the divisor: the result may wrap anywhere in [0, |b|),
    /// which no corner shows (1 mod erf of a tiny value: seed 1 fusion 9654).
    WideQuotient,
}

fn unsure(op: &Op) -> Option<Unsure> {
    use fusebench_ir::UnaryOp::{Cos, Lgamma, Signbit, Sin, Tan};
    if let Op::Binary { kind: BinaryOp::Fmod | BinaryOp::Remainder | BinaryOp::Mod, .. } = op {
        return Some(Unsure::WideQuotient);
    }
    let Op::Unary { kind, .. } = op else { return None };
    Some(match kind {
        Signbit => Unsure::NanOperand,
        Sin | Cos | Tan => Unsure::WideOperand(std::f64::consts::FRAC_PI_4),
        Lgamma => Unsure::Inside(-23.0001, -2.2637),
        _ => return None,
    })
}

/// The distance between 1 and the next value of `d`.
pub fn eps(d: DType) -> f64 {
    if d == DType::Double {
        f64::EPSILON
    } else if d == DType::Float {
        f32::EPSILON as f64
    } else if d == DType::BFloat16 {
        2f64.powi(-7)
    } else if d == DType::Half {
        2f64.powi(-10)
    } else if d.size_bytes() == 1 {
        2f64.powi(-2)
    } else if d.size_bytes() >= 8 {
        f64::EPSILON
    } else {
        f32::EPSILON as f64
    }
}

/// The smallest normal value of `d`.
fn tiny(d: DType) -> f64 {
    if d == DType::Double {
        f64::MIN_POSITIVE
    } else if d == DType::Half {
        6.104e-5
    } else if d.size_bytes() == 1 {
        2f64.powi(-6)
    } else {
        f32::MIN_POSITIVE as f64
    }
}

/// The largest finite value of `d`.
fn max_finite(d: DType) -> f64 {
    if d == DType::Double {
        f64::MAX
    } else if d == DType::Half {
        65504.0
    } else if d.size_bytes() == 1 {
        448.0
    } else {
        f32::MAX as f64
    }
}

/// Ops that move or select elements of their first operand without
/// computing: the same op applied to its bound is the result's bound.
fn moves(op: &Op) -> bool {
    op.is_view()
}

struct Shadow {
    fd: FusionBuilder,
    /// Bound of each value that is not exact (of a complex value: of its
    /// real part).
    err: HashMap<ValueId, ValueId>,
    /// Bound of the imaginary part of each complex value that is not exact.
    err_im: HashMap<ValueId, ValueId>,
    /// Each value cast to Double.
    hi: HashMap<ValueId, ValueId>,
}

type Errs = Vec<Option<ValueId>>;

impl Shadow {
    fn dtype(&self, v: ValueId) -> DType {
        self.fd.fusion().value(v).dtype
    }
    fn shape(&self, v: ValueId) -> Option<Vec<usize>> {
        self.fd.fusion().value(v).shape.clone()
    }
    fn lit(&mut self, x: f64) -> ValueId {
        self.fd.literal(Literal::Float(x))
    }
    fn bin(&mut self, k: BinaryOp, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.fd.binary(k, a, b)
    }
    fn add(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.bin(BinaryOp::Add, a, b)
    }
    fn mul(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.bin(BinaryOp::Mul, a, b)
    }
    fn mulc(&mut self, a: ValueId, c: f64) -> Result<ValueId, IrError> {
        let c = self.lit(c);
        self.mul(a, c)
    }
    fn abs(&mut self, a: ValueId) -> Result<ValueId, IrError> {
        self.fd.unary(fusebench_ir::UnaryOp::Abs, a)
    }
    fn hi(&mut self, v: ValueId) -> Result<ValueId, IrError> {
        if self.dtype(v) == DType::Double {
            return Ok(v);
        }
        if let Some(&h) = self.hi.get(&v) {
            return Ok(h);
        }
        let h = self.fd.cast(v, DType::Double)?;
        self.hi.insert(v, h);
        Ok(h)
    }
    /// `value` where `cond`, else `b`.
    fn where_c(&mut self, cond: ValueId, value: f64, b: ValueId) -> Result<ValueId, IrError> {
        let l = self.lit(value);
        self.fd.where_(cond, l, b)
    }
    fn zeros(&mut self, like: ValueId) -> Result<ValueId, IrError> {
        let s: Vec<i64> = self
            .shape(like)
            .unwrap_or_default()
            .iter()
            .map(|&e| e as i64)
            .collect();
        self.fd.full(&s, Literal::Float(0.0), DType::Double)
    }
    fn infs(&mut self, like: ValueId) -> Result<ValueId, IrError> {
        let s: Vec<i64> = self
            .shape(like)
            .unwrap_or_default()
            .iter()
            .map(|&e| e as i64)
            .collect();
        self.fd
            .full(&s, Literal::Float(f64::INFINITY), DType::Double)
    }
    /// `e` broadcast to the shape of `v` (a bound may come out smaller when
    /// an operand was broadcast).
    fn fit(&mut self, e: ValueId, v: ValueId) -> Result<ValueId, IrError> {
        if self.shape(e) == self.shape(v) && self.dtype(e) == DType::Double {
            return Ok(e);
        }
        let z = self.zeros(v)?;
        self.add(e, z)
    }
    /// |v| in Double where finite, else 0.
    fn finite_abs(&mut self, v: ValueId) -> Result<ValueId, IrError> {
        Ok(self.finite_abs_and_mask(v)?.0)
    }
    /// [`Self::finite_abs`] of `v`, and where `v` is finite (not inf or NaN).
    fn finite_abs_and_mask(&mut self, v: ValueId) -> Result<(ValueId, ValueId), IrError> {
        let h = self.hi(v)?;
        let a = self.abs(h)?;
        let big = self.lit(f64::MAX);
        let ok = self.bin(BinaryOp::Le, a, big)?;
        let z = self.lit(0.0);
        Ok((self.fd.where_(ok, a, z)?, ok))
    }
    /// An op's own error at its output `y`: `k` ulps of the compute dtype
    /// plus one of the output dtype, relative to |y|, plus the flush-to-zero floor.
    fn local(&mut self, y: ValueId, k: f64) -> Result<Option<ValueId>, IrError> {
        let d = self.dtype(y);
        if !d.is_float() || self.shape(y).is_none() {
            return Ok(None);
        }
        let compute = if d == DType::Double {
            DType::Double
        } else {
            DType::Float
        };
        let a = self.finite_abs(y)?;
        let r = self.mulc(a, k * eps(compute) + eps(d))?;
        let floor = self.lit(tiny(d) + tiny(compute));
        Ok(Some(self.add(r, floor)?))
    }
    /// An elementwise op's own error at `y` ([`Self::local`]). A function
    /// (not one of the correctly rounded ops) may lose a result near the
    /// smallest normal to an intermediate that overflows or underflows
    /// (silu of -90 in Float: exp(90) is inf, so x / (1 + inf) is 0, not
    /// -7.5e-38; seed 1 fusion 362): its floor scales with its operands.
    fn op_local(&mut self, op: &Op, y: ValueId) -> Result<Option<ValueId>, IrError> {
        let k = ulps(op.name());
        let local = self.local(y, k)?;
        let d = self.dtype(y);
        if k < 8.0 || !d.is_float() || local.is_none() {
            return Ok(local);
        }
        let compute = if d == DType::Double { DType::Double } else { DType::Float };
        let mut mag = None;
        for &a in &op.operands() {
            if self.dtype(a).is_float() && self.shape(a).is_some() {
                let m = self.finite_abs(a)?;
                mag = self.sum_opt(mag, Some(m))?;
            }
        }
        let Some(mag) = mag else { return Ok(local) };
        let floor = self.mulc(mag, tiny(d) + tiny(compute))?;
        self.sum_opt(local, Some(floor))
    }
    /// |ys − yc| in Double; 0 where both are the same infinity or both NaN,
    /// NaN (uncertain) where only one is NaN.
    fn diff(&mut self, ys: ValueId, yc: ValueId) -> Result<ValueId, IrError> {
        let (ys, yc) = (self.hi(ys)?, self.hi(yc)?);
        let d = self.bin(BinaryOp::Sub, ys, yc)?;
        let d = self.abs(d)?;
        let same = self.bin(BinaryOp::Eq, ys, yc)?;
        let d = self.where_c(same, 0.0, d)?;
        let s_nan = self.bin(BinaryOp::Ne, ys, ys)?;
        let zero = self.lit(0.0);
        let nan = self.lit(f64::NAN);
        let both = self.fd.where_(s_nan, zero, nan)?;
        let c_nan = self.bin(BinaryOp::Ne, yc, yc)?;
        self.fd.where_(c_nan, both, d)
    }
    /// Adds optional bounds.
    fn sum_opt(
        &mut self,
        a: Option<ValueId>,
        b: Option<ValueId>,
    ) -> Result<Option<ValueId>, IrError> {
        Ok(match (a, b) {
            (Some(a), Some(b)) => Some(self.add(a, b)?),
            (a, None) => a,
            (None, b) => b,
        })
    }

    fn errs_of(&self, op: &Op) -> Errs {
        op.operands()
            .iter()
            .map(|v| self.err.get(v).copied())
            .collect()
    }

    /// Records the bounds of a node's outputs.
    fn record(&mut self, op: &Op, outs: &[ValueId]) -> Result<(), IrError> {
        let errs = self.node(op, outs)?;
        for (v, e) in outs.iter().zip(errs) {
            if let Some(e) = e {
                let e = self.fit(e, *v)?;
                self.err.insert(*v, e);
            }
        }
        Ok(())
    }

    /// Adds `op` to the shadow program with its outputs' bounds; its first output.
    fn emit(&mut self, op: Op) -> Result<ValueId, IrError> {
        let outs = self.fd.op(op.clone(), &[])?;
        self.record(&op, &outs)?;
        Ok(outs[0])
    }

    /// Bounds of a node's outputs.
    fn node(&mut self, op: &Op, outs: &[ValueId]) -> Result<Errs, IrError> {
        if self.shape(outs[0]).is_some() && self.touches_complex(op, outs) {
            return self.complex_node(op, outs);
        }
        self.real_node(op, outs)
    }

    /// Bounds of a node's outputs when no value is complex.
    fn real_node(&mut self, op: &Op, outs: &[ValueId]) -> Result<Errs, IrError> {
        let errs = self.errs_of(op);
        let exact = errs.iter().all(|e| e.is_none());
        let y = outs[0];
        if self.shape(y).is_none() {
            // Scalar arithmetic: constants and scalar inputs, computed in Double.
            return Ok(vec![None; outs.len()]);
        }
        match op {
            Op::Unary { .. } | Op::Binary { .. } | Op::Where { .. } | Op::Cast { .. } => {
                Ok(vec![self.elementwise(op, y, &errs, exact)?])
            }
            Op::Reduce {
                kind,
                x,
                dims,
                keepdim,
                ..
            } => {
                let r = self.reduce(kind.name(), *x, dims, *keepdim, y, errs[0])?;
                Ok(vec![r])
            }
            Op::Welford { x, dims } => {
                let (m, m2) = self.moments(*x, dims, false, outs[0], outs[1], 1.0, errs[0])?;
                Ok(vec![Some(m), Some(m2), None])
            }
            Op::VarMean {
                x,
                dims,
                correction,
                keepdim,
            } => {
                let n = self.count(*x, dims) as f64;
                let (m, var) = self.moments(
                    *x,
                    dims,
                    *keepdim,
                    outs[1],
                    outs[0],
                    n - *correction as f64,
                    errs[0],
                )?;
                Ok(vec![Some(var), Some(m)])
            }
            _ if moves(op) => match errs[0] {
                None => Ok(vec![None]),
                Some(e) => {
                    let mut o = op.clone();
                    *o.operands_mut()[0] = e;
                    Ok(vec![Some(self.fd.op(o, &[])?[0])])
                }
            },
            Op::Pad { x, widths, .. } => match errs[0] {
                None => Ok(vec![None]),
                Some(e) => {
                    let _ = x;
                    let zero = self.lit(0.0);
                    let o = Op::Pad {
                        x: e,
                        widths: widths.clone(),
                        value: Some(zero),
                    };
                    Ok(vec![Some(self.fd.op(o, &[])?[0])])
                }
            },
            Op::Cat {
                xs,
                dim,
                manual_padding,
            } if !exact => {
                let mut es = vec![];
                for (&x, e) in xs.iter().zip(&errs) {
                    es.push(match e {
                        Some(e) => *e,
                        None => self.zeros(x)?,
                    });
                }
                let o = Op::Cat {
                    xs: es,
                    dim: *dim,
                    manual_padding: *manual_padding,
                };
                Ok(vec![Some(self.fd.op(o, &[])?[0])])
            }
            Op::IndexSelect { index, dim, .. } if !exact => {
                if errs[1].is_some() {
                    return Ok(vec![Some(self.infs(y)?)]);
                }
                let o = Op::IndexSelect {
                    x: errs[0].unwrap(),
                    index: *index,
                    dim: *dim,
                };
                Ok(vec![Some(self.fd.op(o, &[])?[0])])
            }
            Op::Cat { .. } | Op::IndexSelect { .. } | Op::Full { .. } => Ok(vec![None]),
            Op::Index(o) => self.index_op(o, outs, &errs),
            Op::Scan { kind, x, dim, init } => {
                Ok(vec![self.scan(*kind, *x, *dim, *init, y, errs[0])?])
            }
            Op::Rng { .. } | Op::RngLike { .. } => Ok(vec![self.rng(op, y)?]),
            Op::Matmul { .. } | Op::Linear { .. } | Op::Gemm(fusebench_ir::GemmOp::GroupedMm { .. }) => {
                Ok(vec![self.product(op, y, &errs)?])
            }
            Op::Gemm(fusebench_ir::GemmOp::ScaledMm { .. }) => Ok(vec![self.scaled_product(op, y, &errs)?]),
            Op::Gemm(fusebench_ir::GemmOp::SdpfaFwd { .. }) => self.attention(op, outs, &errs),
            #[allow(unreachable_patterns)]
            _ => {
                let mut r = vec![];
                for &o in outs {
                    r.push(match self.shape(o) {
                        Some(_) => Some(self.infs(o)?),
                        None => None,
                    });
                }
                Ok(r)
            }
        }
    }

    fn elementwise(
        &mut self,
        op: &Op,
        y: ValueId,
        errs: &Errs,
        exact: bool,
    ) -> Result<Option<ValueId>, IrError> {
        let rule = unsure(op);
        let b = if exact && !matches!(rule, Some(Unsure::Inside(..))) {
            self.op_local(op, y)?
        } else {
            self.elementwise_inner(op, y, errs)?
        };
        let Some(rule) = rule else { return Ok(b) };
        let x = self.hi(op.operands()[0])?;
        let off = match rule {
            Unsure::NanOperand => self.bin(BinaryOp::Ne, x, x)?,
            Unsure::WideOperand(w) => {
                let Some(e) = errs[0] else { return Ok(b) };
                let w = self.lit(w);
                self.bin(BinaryOp::Ge, e, w)?
            }
            Unsure::Inside(lo, hi) => {
                let (lo, hi) = (self.lit(lo), self.lit(hi));
                let above = self.bin(BinaryOp::Gt, x, lo)?;
                let below = self.bin(BinaryOp::Lt, x, hi)?;
                self.bin(BinaryOp::LogicalAnd, above, below)?
            }
            Unsure::WideQuotient => {
                let b_arg = op.operands()[1];
                let Some(eb) = errs[1] else { return Ok(b) };
                if !self.dtype(y).is_float() {
                    return Ok(b);
                }
                let bh = self.hi(b_arg)?;
                let (ax, ab) = (self.abs(x)?, self.abs(bh)?);
                let q = self.bin(BinaryOp::Div, ax, ab)?;
                let shift = self.mul(q, eb)?;
                let half = self.mulc(ab, 0.5)?;
                self.bin(BinaryOp::Ge, shift, half)?
            }
        };
        let b = match b {
            Some(b) => b,
            None => self.zeros(y)?,
        };
        Ok(Some(self.where_c(off, f64::INFINITY, b)?))
    }

    /// An elementwise op's bound: its own error plus its operands' propagated.
    fn elementwise_inner(&mut self, op: &Op, y: ValueId, errs: &Errs) -> Result<Option<ValueId>, IrError> {
        let local = self.op_local(op, y)?;
        let args = op.operands();
        if let Op::Binary { kind, a, b } = op {
            if kind.is_comparison() {
                let (ah, bh) = (self.hi(*a)?, self.hi(*b)?);
                let d = self.bin(BinaryOp::Sub, ah, bh)?;
                let d = self.abs(d)?;
                let zero = self.lit(0.0);
                let room = self.sum_opt(errs[0], errs[1])?.unwrap_or(zero);
                let close = self.bin(BinaryOp::Le, d, room)?;
                let z = self.lit(0.0);
                return Ok(Some(self.where_c(close, f64::INFINITY, z)?));
            }
        }
        let floats: Vec<usize> = (0..args.len())
            .filter(|&i| errs[i].is_some() && self.dtype(args[i]).is_float())
            .collect();
        let mut bound = None;
        if !floats.is_empty() {
            let mut center = op.clone();
            for &i in &floats {
                let h = self.hi(args[i])?;
                *center.operands_mut()[i] = h;
            }
            let yc = self.fd.op(center.clone(), &[])?[0];
            let mut worst: Option<ValueId> = None;
            for corner in 0..(1usize << floats.len()) {
                let mut o = center.clone();
                for (bit, &i) in floats.iter().enumerate() {
                    let h = self.hi(args[i])?;
                    let k = if corner >> bit & 1 == 1 {
                        BinaryOp::Add
                    } else {
                        BinaryOp::Sub
                    };
                    let p = self.bin(k, h, errs[i].unwrap())?;
                    *o.operands_mut()[i] = p;
                }
                let ys = self.fd.op(o, &[])?[0];
                let d = self.diff(ys, yc)?;
                worst = Some(match worst {
                    None => d,
                    Some(w) => self.bin(BinaryOp::Maximum, w, d)?,
                });
            }
            let w = self.mulc(worst.unwrap(), 2.0)?;
            bound = Some(w);
        }
        let mut bound = self.sum_opt(bound, local)?;
        for i in 0..args.len() {
            let Some(e) = errs[i] else { continue };
            let b = match bound {
                Some(b) => b,
                None => self.zeros(y)?,
            };
            // An uncertain operand (bound +inf or NaN) makes the result uncertain:
            // its corners are NaN, and where the center is NaN too `diff` says 0
            // (seed 1 fusion 6652: fmod of an acosh whose operand crossed 1).
            // An integer or bool operand with any nonzero bound likewise.
            let z = self.lit(0.0);
            let off = if self.dtype(args[i]).is_float() {
                let big = self.lit(f64::MAX);
                let ok = self.bin(BinaryOp::Le, e, big)?;
                self.fd.unary(fusebench_ir::UnaryOp::LogicalNot, ok)?
            } else {
                self.bin(BinaryOp::Ne, e, z)?
            };
            bound = Some(self.where_c(off, f64::INFINITY, b)?);
        }
        if let Some(b) = bound {
            let b = self.pole(op, errs, b)?;
            bound = Some(self.domain_edge(op, y, errs, b)?);
        }
        Ok(bound)
    }

    /// `b`, or +inf where a divisor's interval holds 0: the corners are
    /// finite, but inside lie a pole and, where the dividend may be 0 too,
    /// 0 / 0 (seed 1, fusion 830 of 2026-12-05: x / x of a sigmoid that the
    /// GPU flushed to 0 from a subnormal, NaN against 1).
    fn pole(&mut self, op: &Op, errs: &Errs, b: ValueId) -> Result<ValueId, IrError> {
        use fusebench_ir::UnaryOp::Reciprocal;
        let (d, e) = match (op, errs.as_slice()) {
            (Op::Binary { kind: BinaryOp::Div | BinaryOp::Truediv, b: d, .. }, [_, Some(e)]) => (*d, *e),
            (Op::Unary { kind: Reciprocal, x }, [Some(e)]) => (*x, *e),
            _ => return Ok(b),
        };
        if !self.dtype(d).is_float() {
            return Ok(b);
        }
        let h = self.hi(d)?;
        let a = self.abs(h)?;
        let holds = self.bin(BinaryOp::Le, a, e)?;
        self.where_c(holds, f64::INFINITY, b)
    }

    /// `b`, or +inf where the result is NaN from non-NaN operands whose
    /// intervals may still reach a point where the op is finite that no
    /// corner hits: a float operand known only to ±1 or worse can hold all of
    /// a bounded domain ([-1, 1] of asin, acos, atanh) between two NaN
    /// corners, and pow of a negative base is finite at the integer exponents
    /// inside any interval. Domains with one edge (acosh < 1, log, sqrt < 0)
    /// need nothing here: a corner past the edge is finite where the center is
    /// NaN, or NaN where it is finite, and `diff` makes either uncertain.
    fn domain_edge(&mut self, op: &Op, y: ValueId, errs: &Errs, b: ValueId) -> Result<ValueId, IrError> {
        if !self.dtype(y).is_float() {
            return Ok(b);
        }
        let args = op.operands();
        let reach = if matches!(op, Op::Binary { kind: BinaryOp::Pow, .. }) { 0.0 } else { 1.0 };
        let mut wide: Option<ValueId> = None;
        let mut any_nan: Option<ValueId> = None;
        for (i, &a) in args.iter().enumerate() {
            if !self.dtype(a).is_float() || self.shape(a).is_none() {
                continue;
            }
            let h = self.hi(a)?;
            let n = self.bin(BinaryOp::Ne, h, h)?;
            any_nan = Some(match any_nan {
                None => n,
                Some(m) => self.bin(BinaryOp::LogicalOr, m, n)?,
            });
            if let Some(e) = errs[i] {
                let r = self.lit(reach);
                let w = if reach == 0.0 {
                    self.bin(BinaryOp::Gt, e, r)?
                } else {
                    self.bin(BinaryOp::Ge, e, r)?
                };
                wide = Some(match wide {
                    None => w,
                    Some(v) => self.bin(BinaryOp::LogicalOr, v, w)?,
                });
            }
        }
        let Some(wide) = wide else { return Ok(b) };
        let h = self.hi(y)?;
        let nan = self.bin(BinaryOp::Ne, h, h)?;
        let mut cond = self.bin(BinaryOp::LogicalAnd, nan, wide)?;
        if let Some(m) = any_nan {
            let fresh = self.fd.unary(fusebench_ir::UnaryOp::LogicalNot, m)?;
            cond = self.bin(BinaryOp::LogicalAnd, cond, fresh)?;
        }
        self.where_c(cond, f64::INFINITY, b)
    }

    fn reduce(
        &mut self,
        kind: &str,
        x: ValueId,
        dims: &[i64],
        keep: bool,
        y: ValueId,
        e: Option<ValueId>,
    ) -> Result<Option<ValueId>, IrError> {
        let n = self.count(x, dims);
        let float = self.dtype(y).is_float();
        match kind {
            "sum" => {
                let prop = match e {
                    Some(e) => Some(self.fd.sum(e, dims, keep, None)?),
                    None => None,
                };
                let x_float = self.dtype(x).is_float();
                if !float && !x_float {
                    // Integer sums are exact; an uncertain term makes them uncertain.
                    return match prop {
                        None => Ok(None),
                        Some(p) => {
                            let z = self.lit(0.0);
                            // Ne: a NaN bound (uncertain) is not zero either.
                            let off = self.bin(BinaryOp::Ne, p, z)?;
                            let zero = self.zeros(y)?;
                            Ok(Some(self.where_c(off, f64::INFINITY, zero)?))
                        }
                    };
                }
                let g = sum_bound::accumulation_factor(n, self.dtype(x), self.dtype(y));
                let ax = self.finite_abs(x)?;
                let s = self.fd.sum(ax, dims, keep, None)?;
                let acc = self.mulc(s, g)?;
                let local = self.local(y, 1.0)?;
                let b = self.sum_opt(prop, Some(acc))?;
                let b = self.sum_opt(b, local)?;
                if float {
                    return Ok(b);
                }
                // Floats summed into an integer: truncation moves the result by at
                // most the float error plus one per term that may cross an integer.
                let turns = if prop.is_some() { n as f64 } else { 1.0 };
                let t = self.lit(turns);
                Ok(Some(self.add(b.unwrap(), t)?))
            }
            "max" | "min" | "amax" | "amin" => match e {
                None => Ok(None),
                Some(e) => Ok(Some(self.fd.reduce(
                    fusebench_ir::ReduceOp::Max,
                    e,
                    dims,
                    keep,
                )?)),
            },
            _ => match e {
                Some(_) => Ok(Some(self.infs(y)?)),
                None => self.local(y, 2.0 * n as f64),
            },
        }
    }

    /// Elements each output element of a reduction of `x` over `dims` combines.
    fn count(&self, x: ValueId, dims: &[i64]) -> usize {
        let s = self.shape(x).unwrap_or_default();
        let r = s.len() as i64;
        let mut seen = vec![false; s.len()];
        for &d in dims {
            let d = if d < 0 { d + r } else { d };
            if (0..r).contains(&d) {
                seen[d as usize] = true;
            }
        }
        s.iter()
            .zip(seen)
            .filter(|(_, k)| *k)
            .map(|(e, _)| *e)
            .product::<usize>()
            .max(1)
    }

    /// Bounds of the mean and of M2 / `divisor` of `x` over `dims`.
    #[allow(clippy::too_many_arguments)]
    fn moments(
        &mut self,
        x: ValueId,
        dims: &[i64],
        keep: bool,
        mean: ValueId,
        m2: ValueId,
        divisor: f64,
        e: Option<ValueId>,
    ) -> Result<(ValueId, ValueId), IrError> {
        let count = self.count(x, dims);
        let n = count as f64;
        let (xd, md) = (self.dtype(x), self.dtype(mean));
        let g = sum_bound::accumulation_factor(count, xd, md);
        let u = sum_bound::accumulator_roundoff(xd, md);
        let ax = self.finite_abs(x)?;
        let s1 = self.fd.sum(ax, dims, keep, None)?;
        let sq = self.mul(ax, ax)?;
        let s2 = self.fd.sum(sq, dims, keep, None)?;
        let mut bm = self.mulc(s1, g / n)?;
        let mut bm2 = self.mulc(s2, g + 3.0 * u)?;
        if let Some(e) = e {
            let se = self.fd.sum(e, dims, keep, None)?;
            let t = self.mulc(se, 1.0 / n)?;
            bm = self.add(bm, t)?;
            let xe = self.mul(ax, e)?;
            let sxe = self.fd.sum(xe, dims, keep, None)?;
            let ee = self.mul(e, e)?;
            let see = self.fd.sum(ee, dims, keep, None)?;
            let am = self.finite_abs(mean)?;
            let me = self.mul(am, se)?;
            let p = self.add(sxe, see)?;
            let p = self.add(p, me)?;
            let p = self.mulc(p, 2.0)?;
            bm2 = self.add(bm2, p)?;
        }
        let bm2 = self.mulc(bm2, 1.0 / divisor)?;
        let lm = self.local(mean, 1.0)?;
        let bm = self.sum_opt(Some(bm), lm)?.unwrap();
        let lv = self.local(m2, 1.0)?;
        let bm2 = self.sum_opt(Some(bm2), lv)?.unwrap();
        Ok((bm, bm2))
    }
}

/// Compares `got` with the reference `want` element by element within
/// `bound` (`None`: exact). Returns the comparison and the number of
/// elements not checked (bound +inf or NaN).
pub fn compare_bounded(got: &Tensor, want: &Tensor, bound: Option<&Tensor>) -> (Comparison, usize) {
    let d = want.dtype();
    let mut c = Comparison {
        ok: false,
        elements: want.numel(),
        mismatches: 0,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        ref_abs_max: 0.0,
        tolerance: Tolerance {
            rtol: 0.0,
            atol: 0.0,
        },
        first_mismatch: None,
        problem: None,
        by_bound: 0,
    };
    if got.shape() != want.shape() {
        c.problem = Some(format!(
            "shape {:?}, expected {:?}",
            got.shape(),
            want.shape()
        ));
        return (c, 0);
    }
    if got.dtype() != d {
        c.problem = Some(format!("dtype {}, expected {}", got.dtype(), d));
        return (c, 0);
    }
    if d.is_complex() {
        // Both parts within the element's bound (the larger of its parts').
        let (Ok((gr, gi)), Ok((wr, wi))) = (crate::complex::parts(got), crate::complex::parts(want)) else {
            c.problem = Some("complex values could not be split into parts".into());
            return (c, 0);
        };
        let (mut re, unchecked) = compare_bounded(&gr, &wr, bound);
        let (im, _) = compare_bounded(&gi, &wi, bound);
        re.ok &= im.ok;
        re.mismatches += im.mismatches;
        re.max_abs_err = re.max_abs_err.max(im.max_abs_err);
        re.max_rel_err = re.max_rel_err.max(im.max_rel_err);
        re.ref_abs_max = re.ref_abs_max.max(im.ref_abs_max);
        re.first_mismatch = re.first_mismatch.or(im.first_mismatch);
        re.problem = re.problem.or(im.problem);
        return (re, unchecked);
    }
    let b = bound.map(|b| b.to_f64_vec());
    let bound_at = |i: usize| b.as_ref().map_or(0.0, |b| b[i]);
    let mut unchecked = 0;
    let bad = |c: &mut Comparison, i: usize, a: f64, w: f64| {
        c.mismatches += 1;
        if c.first_mismatch.is_none() {
            c.first_mismatch = Some((unravel(i, want.shape()), a, w));
        }
    };
    if !d.is_float() {
        for (i, (&a, &w)) in got.to_i64_vec().iter().zip(&want.to_i64_vec()).enumerate() {
            let e = (a as i128 - w as i128).unsigned_abs() as f64;
            let bi = bound_at(i);
            if !bi.is_finite() {
                unchecked += 1;
                continue;
            }
            if e > bi {
                c.max_abs_err = c.max_abs_err.max(e);
                bad(&mut c, i, a as f64, w as f64);
            }
        }
    } else {
        let big = max_finite(d) / 2.0;
        for (i, (&a, &w)) in got.to_f64_vec().iter().zip(&want.to_f64_vec()).enumerate() {
            let bi = bound_at(i);
            if !bi.is_finite() {
                unchecked += 1;
                continue;
            }
            let near_inf = |x: f64, y: f64| bi > 0.0 && x.signum() == y.signum() && x.abs() >= big;
            let ok = if w.is_nan() || a.is_nan() {
                w.is_nan() && a.is_nan()
            } else if w.is_infinite() {
                a == w || near_inf(a, w)
            } else if a.is_infinite() {
                w.abs() + bi >= big && a.signum() == w.signum()
            } else {
                let e = (a - w).abs();
                c.max_abs_err = c.max_abs_err.max(e);
                if w != 0.0 {
                    c.max_rel_err = c.max_rel_err.max(e / w.abs());
                }
                e <= bi
            };
            if w.is_finite() {
                c.ref_abs_max = c.ref_abs_max.max(w.abs());
            }
            if !ok {
                bad(&mut c, i, a, w);
            }
        }
    }
    c.ok = c.mismatches == 0;
    (c, unchecked)
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d].max(1);
        i /= shape[d].max(1);
    }
    idx
}
