//! `matmul` and `linear` on the CPU: each output element is its products summed
//! in f64 (bias included) and rounded once to the output dtype. A GPU library
//! accumulates in f32 and rounds once too, so the two agree within the dtype's
//! rounding for the extents fusions use.

use crate::tensor::Tensor;
use crate::ExecError;
use fusebench_ir::gemm::matmul_shape;
use fusebench_ir::DType;
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
