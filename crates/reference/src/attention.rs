//! `sdpfa_fwd` and `sdpfa_bwd` on the CPU, as PyTorch's flash attention
//! defines them (nvFuser's evaluator calls `_scaled_dot_product_flash_attention`
//! and its backward): scores `scale * q.k`, a top-left causal mask, softmax
//! through the log-sum-exp, everything in f64 and rounded once per output.
//!
//! Dropout is refused when `dropout_p > 0`: its mask comes from PyTorch's
//! Philox stream inside the flash kernel, which cannot be reproduced here.

use crate::index::Ctx;
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

/// `[*batch, l, s]` scaled scores of one batch row, `None` where masked.
fn scores(q: &[f64], k: &[f64], (l, s, e): (usize, usize, usize), scale: f64, causal: bool) -> Vec<Option<f64>> {
    let mut out = Vec::with_capacity(l * s);
    for i in 0..l {
        for j in 0..s {
            let keep = !causal || j <= i;
            out.push(keep.then(|| scale * dot(&q[i * e..][..e], &k[j * e..][..e])));
        }
    }
    out
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
    let mut out = vec![0f64; nb * l * ev];
    let mut lse = vec![0f64; nb * l];
    for b in 0..nb {
        let sc = scores(&qv[b * l * e..][..l * e], &kv[b * s * e..][..s * e], (l, s, e), scale, causal);
        for i in 0..l {
            let row = &sc[i * s..][..s];
            let m = row.iter().flatten().fold(f64::NEG_INFINITY, |a, &x| a.max(x));
            let sum: f64 = row.iter().flatten().map(|&x| (x - m).exp()).sum();
            // flash-attn writes +inf for a row with nothing to attend to, and zeros.
            if sum == 0.0 || !sum.is_finite() {
                lse[b * l + i] = f64::INFINITY;
                continue;
            }
            let li = m + sum.ln();
            lse[b * l + i] = li;
            let o = &mut out[(b * l + i) * ev..][..ev];
            for (j, x) in row.iter().enumerate() {
                if let Some(x) = x {
                    let p = (x - li).exp();
                    for (oc, vc) in o.iter_mut().zip(&vv[(b * s + j) * ev..][..ev]) {
                        *oc += p * vc;
                    }
                }
            }
        }
    }
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
    let (mut dq, mut dk, mut dv) = (vec![0f64; nb * l * e], vec![0f64; nb * s * e], vec![0f64; nb * s * ev]);
    for b in 0..nb {
        let (qb, kb, vb) = (&qv[b * l * e..][..l * e], &kv[b * s * e..][..s * e], &vv[b * s * ev..][..s * ev]);
        let sc = scores(qb, kb, (l, s, e), scale, causal);
        for i in 0..l {
            let (gi, oi) = (&gv[(b * l + i) * ev..][..ev], &ov[(b * l + i) * ev..][..ev]);
            let d = dot(gi, oi);
            let li = lv[b * l + i];
            for j in 0..s {
                let Some(x) = sc[i * s + j] else { continue };
                let p = if li.is_finite() { (x - li).exp() } else { 0.0 };
                let ds = p * (dot(gi, &vb[j * ev..][..ev]) - d);
                for c in 0..ev {
                    dv[(b * s + j) * ev + c] += p * gi[c];
                }
                for c in 0..e {
                    dq[(b * l + i) * e + c] += scale * ds * kb[j * e + c];
                    dk[(b * s + j) * e + c] += scale * ds * qb[i * e + c];
                }
            }
        }
    }
    Ok(vec![
        Tensor::from_f64s(q.dtype(), q.shape(), &dq)?,
        Tensor::from_f64s(k.dtype(), k.shape(), &dk)?,
        Tensor::from_f64s(v.dtype(), v.shape(), &dv)?,
    ])
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
    let g = crate::sum_bound::accumulation_factor(ev.max(e), DType::Float, DType::Float);
    let f32_unit = 2f64.powi(-24);
    let (qv, kv, vv) = (q.to_f64_vec(), k.to_f64_vec(), v.to_f64_vec());
    let (gv, ov, lv) = (go.to_f64_vec(), o.to_f64_vec(), lse.to_f64_vec());
    let (mut bq, mut bk, mut bv) = (vec![0f64; nb * l * e], vec![0f64; nb * s * e], vec![0f64; nb * s * ev]);
    let (mut dq, mut dk, mut dv) = (vec![0f64; nb * l * e], vec![0f64; nb * s * e], vec![0f64; nb * s * ev]);
    let abs_dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum::<f64>();
    for b in 0..nb {
        let (qb, kb, vb) = (&qv[b * l * e..][..l * e], &kv[b * s * e..][..s * e], &vv[b * s * ev..][..s * ev]);
        let sc = scores(qb, kb, (l, s, e), scale, causal);
        for i in 0..l {
            let (gi, oi) = (&gv[(b * l + i) * ev..][..ev], &ov[(b * l + i) * ev..][..ev]);
            let (d, d_abs) = (dot(gi, oi), abs_dot(gi, oi));
            let li = lv[b * l + i];
            let p_of = |j: usize| sc[i * s + j].map(|x| if li.is_finite() { (x - li).exp() } else { 0.0 });
            // How far another executor's o may be, and so D.
            let d_err = if computed {
                let mut o_err: Vec<f64> = oi.iter().map(|x| 2.0 * u * x.abs()).collect();
                for j in 0..s {
                    if let Some(p) = p_of(j) {
                        for (c, oe) in o_err.iter_mut().enumerate() {
                            *oe += u * p * vb[j * ev + c].abs();
                        }
                    }
                }
                abs_dot(gi, &o_err)
            } else {
                0.0
            };
            let lse_units = 16.0 * f32_unit * li.abs();
            for j in 0..s {
                let Some(p) = p_of(j) else { continue };
                let vj = &vb[j * ev..][..ev];
                let ds = p * (dot(gi, vj) - d);
                let e_ds = (u + lse_units) * ds.abs() + p * (g * (abs_dot(gi, vj) + d_abs) + d_err);
                for c in 0..ev {
                    bv[(b * s + j) * ev + c] += u * p * gi[c].abs();
                    dv[(b * s + j) * ev + c] += p * gi[c];
                }
                for c in 0..e {
                    bq[(b * l + i) * e + c] += scale.abs() * e_ds * kb[j * e + c].abs();
                    bk[(b * s + j) * e + c] += scale.abs() * e_ds * qb[i * e + c].abs();
                    dq[(b * l + i) * e + c] += scale * ds * kb[j * e + c];
                    dk[(b * s + j) * e + c] += scale * ds * qb[i * e + c];
                }
            }
        }
    }
    Ok((
        [
            Tensor::from_f64s(DType::Double, q.shape(), &bq)?,
            Tensor::from_f64s(DType::Double, k.shape(), &bk)?,
            Tensor::from_f64s(DType::Double, v.shape(), &bv)?,
        ],
        [dq, dk, dv],
    ))
}
