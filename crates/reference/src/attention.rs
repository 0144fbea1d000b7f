//! `sdpfa_fwd` and `sdpfa_bwd` on the CPU, as PyTorch's flash attention
//! defines them (nvFuser's evaluator calls `_scaled_dot_product_flash_attention`
//! and its backward): scores `scale * q.k`, a top-left causal mask, softmax
//! through the log-sum-exp, everything in f64 and rounded once per output.
//!
//! Dropout is refused when `dropout_p > 0`: its mask comes from PyTorch's
//! Philox stream inside the flash kernel, which cannot be reproduced here.

use crate::index::Ctx;
use rayon::prelude::*;
use crate::tensor::Tensor;
use crate::ExecError;
use fusebench_ir::op_gemm::attention_dims;
use fusebench_ir::{DType, Literal, ValueId};

fn op_err(op: &str, cx: &Ctx, message: String) -> ExecError {
    ExecError::Op {
        op: op.into(),
        value: cx.outs[0].name.clone(),
        message,
    }
}

/// The flags every flash call shares: `(scale, causal)`, with dropout refused.
fn flags(
    op: &str,
    cx: &Ctx,
    dropout_p: Option<ValueId>,
    is_causal: Option<ValueId>,
    scale: Option<ValueId>,
    head_dim: usize,
    (l, s): (usize, usize),
) -> Result<(f64, bool), ExecError> {
    let p = dropout_p.map_or(0.0, |v| (cx.scalar)(v).as_f64());
    if p != 0.0 {
        return Err(op_err(
            op,
            cx,
            format!(
                "dropout_p = {p}: the dropout mask is drawn from PyTorch's flash-attention Philox stream, \
                 which the CPU reference cannot reproduce; only dropout_p = 0 runs"
            ),
        ));
    }
    let causal = is_causal.is_some_and(|v| (cx.scalar)(v).as_bool());
    if causal && l != s {
        return Err(op_err(
            op,
            cx,
            format!(
                "is_causal with {l} queries and {s} keys: PyTorch's attention kernels disagree on where a \
                 non-square causal mask starts; only equal lengths run"
            ),
        ));
    }
    // nvFuser's default: 1/sqrt of the last dim of the first operand.
    let scale = scale.map_or(1.0 / (head_dim as f64).sqrt(), |v| (cx.scalar)(v).as_f64());
    Ok((scale, causal))
}

/// Values of `t` broadcast to `batch + tail`, in logical order.
fn values(t: &Tensor, batch: &[usize], tail: &[usize]) -> Vec<f64> {
    let mut to = batch.to_vec();
    to.extend_from_slice(tail);
    t.broadcast_to(&to).to_f64_vec()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The scaled scores of query `i` against the `s` keys of one batch row,
/// `None` where masked.
fn row_scores(q: &[f64], k: &[f64], (i, s, e): (usize, usize, usize), scale: f64, causal: bool) -> Vec<Option<f64>> {
    (0..s)
        .map(|j| (!causal || j <= i).then(|| scale * dot(&q[i * e..][..e], &k[j * e..][..e])))
        .collect()
}

/// Outputs: attention, log-sum-exp, philox seed `[2]` and offset `[]`.
/// PyTorch leaves the philox tensors unwritten when dropout_p is 0, so their
/// values are unspecified; the reference writes zeros.
pub(crate) fn sdpfa_fwd(
    cx: &Ctx,
    (query, key, value): (ValueId, ValueId, ValueId),
    dropout_p: Option<ValueId>,
    is_causal: Option<ValueId>,
    scale: Option<ValueId>,
) -> Result<Vec<Tensor>, ExecError> {
    let op = "sdpfa_fwd";
    let (q, k, v) = ((cx.tensor)(query), (cx.tensor)(key), (cx.tensor)(value));
    let (batch, l, s, e, ev) = attention_dims(op, q.shape(), k.shape(), v.shape()).map_err(ExecError::Ir)?;
    let (scale, causal) = flags(op, cx, dropout_p, is_causal, scale, e, (l, s))?;
    let (qv, kv, vv) = (values(&q, &batch, &[l, e]), values(&k, &batch, &[s, e]), values(&v, &batch, &[s, ev]));
    let nb: usize = batch.iter().product();
    // Each query row on its own, in parallel (batch rows times queries).
    let rows: Vec<(Vec<f64>, f64)> = (0..nb * l)
        .into_par_iter()
        .map(|r| {
            let (b, i) = (r / l, r % l);
            let mut o = vec![0f64; ev];
            let row = row_scores(&qv[b * l * e..][..l * e], &kv[b * s * e..][..s * e], (i, s, e), scale, causal);
            let m = row.iter().flatten().fold(f64::NEG_INFINITY, |a, &x| a.max(x));
            let sum: f64 = row.iter().flatten().map(|&x| (x - m).exp()).sum();
            // flash-attn writes +inf for a row with nothing to attend to, and
            // zeros; a NaN among the scores makes the row NaN, as in its kernel
            // (the max passes over NaN, the sum does not).
            if sum == 0.0 {
                return (o, f64::INFINITY);
            }
            let li = m + sum.ln();
            for (j, x) in row.iter().enumerate() {
                if let Some(x) = x {
                    let p = (x - li).exp();
                    for (oc, vc) in o.iter_mut().zip(&vv[(b * s + j) * ev..][..ev]) {
                        *oc += p * vc;
                    }
                }
            }
            (o, li)
        })
        .collect();
    let out: Vec<f64> = rows.iter().flat_map(|(o, _)| o.iter().copied()).collect();
    let lse: Vec<f64> = rows.iter().map(|&(_, l)| l).collect();
    let with = |t: &[usize]| [batch.as_slice(), t].concat();
    Ok(vec![
        Tensor::from_f64s(q.dtype(), &with(&[l, ev]), &out)?,
        Tensor::from_f64s(DType::Float, &with(&[l]), &lse)?,
        Tensor::full(DType::UInt64, &[2], Literal::Int(0)),
        Tensor::full(DType::UInt64, &[], Literal::Int(0)),
    ])
}

/// The operands of `sdpfa_bwd`, in the binding's order.
pub(crate) struct Bwd {
    pub grad_output: ValueId,
    pub query: ValueId,
    pub key: ValueId,
    pub value: ValueId,
    pub output: ValueId,
    pub logsumexp: ValueId,
    pub dropout_p: Option<ValueId>,
    pub is_causal: Option<ValueId>,
    pub scale: Option<ValueId>,
}

/// grad_query, grad_key, grad_value from the forward's output and
/// log-sum-exp, as flash attention's backward computes them: P recomputed
/// from the log-sum-exp, `D = rowsum(dO * O)`, `dS = P * (dO.V - D)`.
pub(crate) fn sdpfa_bwd(cx: &Ctx, a: &Bwd) -> Result<Vec<Tensor>, ExecError> {
    let op = "sdpfa_bwd";
    let t = |v| (cx.tensor)(v);
    let (go, q, k, v, o, lse) = (t(a.grad_output), t(a.query), t(a.key), t(a.value), t(a.output), t(a.logsumexp));
    let (batch, l, s, e, ev) = attention_dims(op, q.shape(), k.shape(), v.shape()).map_err(ExecError::Ir)?;
    // nvFuser's default scale reads the last dim of grad_output (Ev).
    let (scale, causal) = flags(op, cx, a.dropout_p, a.is_causal, a.scale, ev, (l, s))?;
    let (qv, kv, vv) = (values(&q, &batch, &[l, e]), values(&k, &batch, &[s, e]), values(&v, &batch, &[s, ev]));
    let (gv, ov, lv) = (values(&go, &batch, &[l, ev]), values(&o, &batch, &[l, ev]), values(&lse, &batch, &[l]));
    let nb: usize = batch.iter().product();
    let g = Grads::new([&qv, &kv, &vv, &gv, &ov, &lv], (nb, l, s, e, ev), scale, causal);
    // dQ by queries, dK and dV by keys: each row written by one task.
    let dq: Vec<f64> = (0..nb * l)
        .into_par_iter()
        .flat_map_iter(|r| {
            let mut dq = vec![0f64; e];
            g.over_keys(r / l, r % l, |j, _, ds| {
                for (x, kc) in dq.iter_mut().zip(g.k(r / l, j)) {
                    *x += scale * ds * kc;
                }
            });
            dq
        })
        .collect();
    let (dk, dv): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (0..nb * s)
        .into_par_iter()
        .map(|r| {
            let (mut dk, mut dv) = (vec![0f64; e], vec![0f64; ev]);
            g.over_queries(r / s, r % s, |i, p, ds| {
                for (x, qc) in dk.iter_mut().zip(g.q(r / s, i)) {
                    *x += scale * ds * qc;
                }
                for (x, gc) in dv.iter_mut().zip(g.g(r / s, i)) {
                    *x += p * gc;
                }
            });
            (dk, dv)
        })
        .unzip();
    let (dk, dv): (Vec<f64>, Vec<f64>) = (dk.concat(), dv.concat());
    Ok(vec![
        Tensor::from_f64s(q.dtype(), q.shape(), &dq)?,
        Tensor::from_f64s(k.dtype(), k.shape(), &dk)?,
        Tensor::from_f64s(v.dtype(), v.shape(), &dv)?,
    ])
}

/// The backward's operands of all batch rows (dense, logical order) and
/// what it visits: each (query, key) pair's weight p = exp(s - lse) and dS
/// = p (dO.V - D), D = dO.O per query. Pairs are visited from a query's side
/// (for dQ) or a key's (for dK, dV), so that each side's rows are written
/// by one task.
struct Grads<'a> {
    q: &'a [f64],
    k: &'a [f64],
    v: &'a [f64],
    g: &'a [f64],
    lse: &'a [f64],
    d: Vec<f64>,
    dims: (usize, usize, usize, usize, usize),
    scale: f64,
    causal: bool,
}

impl<'a> Grads<'a> {
    fn new(t: [&'a [f64]; 6], dims: (usize, usize, usize, usize, usize), scale: f64, causal: bool) -> Self {
        let [q, k, v, g, o, lse] = t;
        let (nb, l, _, _, ev) = dims;
        let d = (0..nb * l).map(|r| dot(&g[r * ev..][..ev], &o[r * ev..][..ev])).collect();
        Grads { q, k, v, g, lse, d, dims, scale, causal }
    }

    fn q(&self, b: usize, i: usize) -> &'a [f64] {
        let (_, l, _, e, _) = self.dims;
        &self.q[(b * l + i) * e..][..e]
    }
    fn k(&self, b: usize, j: usize) -> &'a [f64] {
        let (_, _, s, e, _) = self.dims;
        &self.k[(b * s + j) * e..][..e]
    }
    fn v(&self, b: usize, j: usize) -> &'a [f64] {
        let (_, _, s, _, ev) = self.dims;
        &self.v[(b * s + j) * ev..][..ev]
    }
    fn g(&self, b: usize, i: usize) -> &'a [f64] {
        let (_, l, _, _, ev) = self.dims;
        &self.g[(b * l + i) * ev..][..ev]
    }

    /// p and dS of query `i` and key `j` of batch row `b`; `None` where masked.
    fn pair(&self, b: usize, i: usize, j: usize) -> Option<(f64, f64)> {
        if self.causal && j > i {
            return None;
        }
        let l = self.dims.1;
        let li = self.lse[b * l + i];
        // exp(s - lse) as it is: 0 for a row with nothing to attend to (lse
        // +inf), NaN for a NaN, as flash kernels compute it.
        let p = (self.scale * dot(self.q(b, i), self.k(b, j)) - li).exp();
        Some((p, p * (dot(self.g(b, i), self.v(b, j)) - self.d[b * l + i])))
    }

    fn over_keys(&self, b: usize, i: usize, mut f: impl FnMut(usize, f64, f64)) {
        for j in 0..self.dims.2 {
            if let Some((p, ds)) = self.pair(b, i, j) {
                f(j, p, ds);
            }
        }
    }

    fn over_queries(&self, b: usize, j: usize, mut f: impl FnMut(usize, f64, f64)) {
        for i in 0..self.dims.1 {
            if let Some((p, ds)) = self.pair(b, i, j) {
                f(i, p, ds);
            }
        }
    }
}

/// Per element of grad_query, grad_key and grad_value, how far a flash
/// kernel's result may be from the exact one, and the exact gradients: it
/// rounds P to the operands' type (unit roundoff `u`) before dV = P^T dO,
/// and dS = P (dP - D) before dQ = scale dS K and dK = scale dS^T Q, with P,
/// dP and D themselves in f32 (their sums' rounding, `g` of the head dims,
/// moves dS by up to p (g sum|dO||V| + g sum|dO||O|), and the log-sum-exp's
/// rounding moves P by |lse| units of f32). Where `computed`, o and lse came
/// from a forward in the same fusion, which another executor rounds its own
/// way: o by one unit of its type plus the forward's weights' rounding (u
/// sum_j p |v|), which moves D by sum_c |dO| that much. So: dV <= u sum_i p
/// |dO|, dQ <= scale sum_j e_dS |K|, dK <= scale sum_i e_dS |Q|, with e_dS =
/// u |dS| + p (f32 sums + dD) + |dS| lse's units. Operands as `sdpfa_bwd`
/// takes them (batch dims equal, no broadcast).
pub(crate) fn bwd_bounds(
    t: [&Tensor; 6],
    causal: bool,
    scale: Option<f64>,
    u: f64,
    computed: bool,
) -> Result<([Tensor; 3], [Vec<f64>; 3]), ExecError> {
    let [go, q, k, v, o, lse] = t;
    let (batch, l, s, e, ev) =
        attention_dims("sdpfa_bwd", q.shape(), k.shape(), v.shape()).map_err(ExecError::Ir)?;
    let nb: usize = batch.iter().product();
    let want = |t: &Tensor, n: usize| t.numel() == n;
    if !(want(q, nb * l * e) && want(k, nb * s * e) && want(v, nb * s * ev) && want(go, nb * l * ev) && want(o, nb * l * ev) && want(lse, nb * l)) {
        return Err(ExecError::Op {
            op: "sdpfa_bwd".into(),
            value: "bounds".into(),
            message: "operands broadcast over batch dims".into(),
        });
    }
    let scale = scale.unwrap_or(1.0 / (ev as f64).sqrt());
    let gamma = crate::sum_bound::accumulation_factor(ev.max(e), DType::Float, DType::Float);
    let f32_unit = crate::bounds::eps(DType::Float) / 2.0;
    let (qv, kv, vv) = (q.to_f64_vec(), k.to_f64_vec(), v.to_f64_vec());
    let (gv, ov, lv) = (go.to_f64_vec(), o.to_f64_vec(), lse.to_f64_vec());
    let gr = Grads::new([&qv, &kv, &vv, &gv, &ov, &lv], (nb, l, s, e, ev), scale, causal);
    let abs_dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum::<f64>();
    // Per query: sum|dO||O|, and how far another executor's o may move D.
    let per_query: Vec<(f64, f64)> = (0..nb * l)
        .into_par_iter()
        .map(|r| {
            let (b, i) = (r / l, r % l);
            let (gi, oi) = (gr.g(b, i), &ov[r * ev..][..ev]);
            let d_err = if computed {
                let mut o_err: Vec<f64> = oi.iter().map(|x| 2.0 * u * x.abs()).collect();
                gr.over_keys(b, i, |j, p, _| {
                    for (oe, vc) in o_err.iter_mut().zip(gr.v(b, j)) {
                        *oe += u * p * vc.abs();
                    }
                });
                abs_dot(gi, &o_err)
            } else {
                0.0
            };
            (abs_dot(gi, oi), d_err)
        })
        .collect();
    // How far dS of a pair may be.
    let e_ds = |b: usize, i: usize, j: usize, p: f64, ds: f64| {
        let (d_abs, d_err) = per_query[b * l + i];
        let lse_units = 16.0 * f32_unit * lv[b * l + i].abs();
        (u + lse_units) * ds.abs() + p * (gamma * (abs_dot(gr.g(b, i), gr.v(b, j)) + d_abs) + d_err)
    };
    let (bq, dq): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (0..nb * l)
        .into_par_iter()
        .map(|r| {
            let (b, i) = (r / l, r % l);
            let (mut bq, mut dq) = (vec![0f64; e], vec![0f64; e]);
            gr.over_keys(b, i, |j, p, ds| {
                let err = e_ds(b, i, j, p, ds);
                for ((x, y), kc) in bq.iter_mut().zip(dq.iter_mut()).zip(gr.k(b, j)) {
                    *x += scale.abs() * err * kc.abs();
                    *y += scale * ds * kc;
                }
            });
            (bq, dq)
        })
        .unzip();
    type Four = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);
    let by_key: Vec<Four> = (0..nb * s)
        .into_par_iter()
        .map(|r| {
            let (b, j) = (r / s, r % s);
            let (mut bk, mut dk, mut bv, mut dv) = (vec![0f64; e], vec![0f64; e], vec![0f64; ev], vec![0f64; ev]);
            gr.over_queries(b, j, |i, p, ds| {
                let err = e_ds(b, i, j, p, ds);
                for ((x, y), qc) in bk.iter_mut().zip(dk.iter_mut()).zip(gr.q(b, i)) {
                    *x += scale.abs() * err * qc.abs();
                    *y += scale * ds * qc;
                }
                for ((x, y), gc) in bv.iter_mut().zip(dv.iter_mut()).zip(gr.g(b, i)) {
                    *x += u * p * gc.abs();
                    *y += p * gc;
                }
            });
            (bk, dk, bv, dv)
        })
        .collect();
    let cat = |f: fn(&Four) -> &Vec<f64>| by_key.iter().flat_map(|x| f(x).iter().copied()).collect::<Vec<f64>>();
    let (bk, dk, bv, dv) = (cat(|x| &x.0), cat(|x| &x.1), cat(|x| &x.2), cat(|x| &x.3));
    let (bq, dq) = (bq.concat(), dq.concat());
    Ok((
        [
            Tensor::from_f64s(DType::Double, q.shape(), &bq)?,
            Tensor::from_f64s(DType::Double, k.shape(), &bk)?,
            Tensor::from_f64s(DType::Double, v.shape(), &bv)?,
        ],
        [dq, dk, dv],
    ))
}
