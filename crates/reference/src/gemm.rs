//! `matmul` and `linear` on the CPU: each output element is its products summed
//! in f64 (bias included) and rounded once to the output dtype. A GPU library
//! accumulates in f32 and rounds once too, so the two agree within the dtype's
//! rounding for the extents fusions use. `grouped_mm` and `scaled_mm` the
//! same way; attention in `attention.rs`.

use crate::index::Ctx;
use crate::tensor::Tensor;
use crate::ExecError;
use fusebench_ir::gemm::matmul_shape;
use fusebench_ir::{DType, GemmOp};
use rayon::prelude::*;

/// `t` seen as `shape` (a reshape of its logical order), broadcast to `to`,
/// as values in logical order.
fn values_as(t: &Tensor, shape: &[usize], to: &[usize]) -> Vec<f64> {
    t.reshape(shape).broadcast_to(to).to_f64_vec()
}

/// `torch.matmul` of `a` and `b` (shapes already checked by inference).
pub(crate) fn matmul(a: &Tensor, b: &Tensor, dtype: DType) -> Result<Tensor, ExecError> {
    let s = matmul_shape(a.shape(), b.shape()).map_err(ExecError::Ir)?;
    let (m, k, n) = (s.m, s.k, s.n);
    let with = |mut dims: Vec<usize>, tail: [usize; 2]| {
        dims.extend(tail);
        dims
    };
    let a_rows = if a.rank() == 1 {
        vec![1, k]
    } else {
        a.shape().to_vec()
    };
    let b_rows = if b.rank() == 1 {
        vec![k, 1]
    } else {
        b.shape().to_vec()
    };
    let av = values_as(a, &a_rows, &with(s.batch.clone(), [m, k]));
    let bv = values_as(b, &b_rows, &with(s.batch.clone(), [k, n]));
    let batches: usize = s.batch.iter().product();
    let mut out = vec![0f64; batches * m * n];
    out.par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(row, o)| {
            let (bi, i) = (row / m.max(1), row % m.max(1));
            let ar = &av[(bi * m + i) * k..][..k];
            let bm = &bv[bi * k * n..][..k * n];
            for (j, oj) in o.iter_mut().enumerate() {
                *oj = (0..k).map(|p| ar[p] * bm[p * n + j]).sum();
            }
        });
    Tensor::from_f64s(dtype, &s.out, &out)
}

/// `a @ weight^T + bias` with `weight` `[*w, n, k]` and the output
/// `[*w, *a_batch, n]` (shapes already checked by inference).
pub(crate) fn linear(
    a: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    dtype: DType,
    out_shape: &[usize],
) -> Result<Tensor, ExecError> {
    let ws = weight.shape();
    let (n, k) = (ws[ws.len() - 2], ws[ws.len() - 1]);
    let w_batch: usize = ws[..ws.len() - 2].iter().product();
    let rows = a.numel() / k.max(1);
    let av = values_as(a, &[rows, k], &[rows, k]);
    let wv = values_as(weight, &[w_batch, n, k], &[w_batch, n, k]);
    let bv = match bias {
        Some(b) if b.rank() == 1 => values_as(b, &[1, n], &[w_batch, n]),
        Some(b) => values_as(b, &[w_batch, n], &[w_batch, n]),
        None => vec![0.0; w_batch * n],
    };
    let mut out = vec![0f64; w_batch * rows * n];
    out.par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(row, o)| {
            let (wi, i) = (row / rows.max(1), row % rows.max(1));
            let ar = &av[i * k..][..k];
            for (j, oj) in o.iter_mut().enumerate() {
                let wr = &wv[(wi * n + j) * k..][..k];
                *oj = ar.iter().zip(wr).map(|(x, y)| x * y).sum::<f64>() + bv[wi * n + j];
            }
        });
    Tensor::from_f64s(dtype, out_shape, &out)
}

/// One [`GemmOp`] (shapes already checked by inference).
pub(crate) fn exec_gemm(o: &GemmOp, cx: &Ctx) -> Result<Vec<Tensor>, ExecError> {
    use crate::attention as at;
    Ok(match *o {
        GemmOp::SdpfaFwd {
            query,
            key,
            value,
            dropout_p,
            is_causal,
            scale,
        } => at::sdpfa_fwd(cx, (query, key, value), dropout_p, is_causal, scale)?,
        GemmOp::SdpfaBwd {
            grad_output,
            query,
            key,
            value,
            output,
            logsumexp,
            dropout_p,
            is_causal,
            scale,
            ..
        } => {
            let a = at::Bwd {
                grad_output,
                query,
                key,
                value,
                output,
                logsumexp,
                dropout_p,
                is_causal,
                scale,
            };
            at::sdpfa_bwd(cx, &a)?
        }
        GemmOp::GroupedMm { mat1, mat2, offsets } => {
            let offs = (cx.tensor)(offsets).to_i64_vec();
            vec![grouped_mm(&(cx.tensor)(mat1), &(cx.tensor)(mat2), &offs, cx)?]
        }
        GemmOp::ScaledMm {
            mat1,
            mat2,
            scale1,
            scale2,
            dtype,
        } => {
            let t = |v| (cx.tensor)(v);
            vec![scaled_mm(&t(mat1), &t(mat2), &t(scale1), &t(scale2), dtype)?]
        }
    })
}

/// Group `g` covers `[start(g), offs[g])`: offsets are cumulative group ends
/// (nvFuser's evaluator splits by their differences, so the last must be the
/// extent they cut).
fn group_ranges(offs: &[i64], extent: usize, what: &str, cx: &Ctx) -> Result<Vec<(usize, usize)>, ExecError> {
    let mut start = 0i64;
    let mut out = vec![];
    for (g, &end) in offs.iter().enumerate() {
        if end < start || end > extent as i64 {
            return Err(ExecError::Op {
                op: "grouped_mm".into(),
                value: cx.outs[0].name.clone(),
                message: format!(
                    "offsets {offs:?} must be nondecreasing group ends within [0, {extent}] ({what}); offset {g} is {end}"
                ),
            });
        }
        out.push((start as usize, end as usize));
        start = end;
    }
    if start != extent as i64 {
        return Err(ExecError::Op {
            op: "grouped_mm".into(),
            value: cx.outs[0].name.clone(),
            message: format!("offsets {offs:?} must end at {extent}, the extent of {what} they cut into groups"),
        });
    }
    Ok(out)
}

/// `grouped_mm`: `[m,k] x [k,n] -> [g,m,n]` (groups cut k), `[g,m,k] x [k,n]
/// -> [m,n]` (groups cut n), `[m,k] x [g,k,n] -> [m,n]` (groups cut m).
fn grouped_mm(a: &Tensor, b: &Tensor, offs: &[i64], cx: &Ctx) -> Result<Tensor, ExecError> {
    let (av, bv) = (a.to_f64_vec(), b.to_f64_vec());
    let (sa, sb) = (a.shape(), b.shape());
    let (k, n) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    let m = sa[sa.len() - 2];
    let dot = |arow: &[f64], bmat: &[f64], j: usize, ks: (usize, usize)| -> f64 {
        (ks.0..ks.1).map(|p| arow[p] * bmat[p * n + j]).sum()
    };
    let (shape, out) = match (sa.len(), sb.len()) {
        (2, 2) => {
            let groups = group_ranges(offs, k, "k", cx)?;
            let mut out = vec![0f64; groups.len() * m * n];
            for (g, &ks) in groups.iter().enumerate() {
                for i in 0..m {
                    for j in 0..n {
                        out[(g * m + i) * n + j] = dot(&av[i * k..][..k], &bv, j, ks);
                    }
                }
            }
            (vec![groups.len(), m, n], out)
        }
        (3, 2) => {
            let groups = group_ranges(offs, n, "n", cx)?;
            let mut out = vec![0f64; m * n];
            for (g, &(j0, j1)) in groups.iter().enumerate() {
                for i in 0..m {
                    for j in j0..j1 {
                        out[i * n + j] = dot(&av[(g * m + i) * k..][..k], &bv, j, (0, k));
                    }
                }
            }
            (vec![m, n], out)
        }
        _ => {
            let groups = group_ranges(offs, m, "m", cx)?;
            let mut out = vec![0f64; m * n];
            for (g, &(i0, i1)) in groups.iter().enumerate() {
                for i in i0..i1 {
                    for j in 0..n {
                        out[i * n + j] = dot(&av[i * k..][..k], &bv[g * k * n..], j, (0, k));
                    }
                }
            }
            (vec![m, n], out)
        }
    };
    Tensor::from_f64s(a.dtype(), &shape, &out)
}

/// `torch._scaled_mm` with tensorwise (one element each) or rowwise
/// (`[m,1]`, `[1,n]`) scales: `sum_k a*b * s1[i] * s2[j]`, rounded once.
fn scaled_mm(a: &Tensor, b: &Tensor, s1: &Tensor, s2: &Tensor, dtype: DType) -> Result<Tensor, ExecError> {
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let (av, bv) = (a.to_f64_vec(), b.to_f64_vec());
    let (s1, s2) = (s1.to_f64_vec(), s2.to_f64_vec());
    let mut out = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let acc: f64 = (0..k).map(|p| av[i * k + p] * bv[p * n + j]).sum();
            out[i * n + j] = acc * s1[if s1.len() == 1 { 0 } else { i }] * s2[if s2.len() == 1 { 0 } else { j }];
        }
    }
    Tensor::from_f64s(dtype, &[m, n], &out)
}
