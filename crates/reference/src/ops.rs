//! Ops that move data into new storage: pad, cat, index_select. Each builds
//! its dense row-major output row by row, in parallel.

use crate::tensor::{build_rows, read_row, with_dtype, Elem, Tensor};
use fusebench_ir::Literal;

/// Storage offset of the start of the row at outer multi-index `outer`.
#[inline]
fn row_base(t: &Tensor, outer: &[usize]) -> i64 {
    let st = t.strides();
    outer
        .iter()
        .enumerate()
        .map(|(d, &i)| i as i64 * st[d])
        .sum::<i64>()
        + t.offset() as i64
}

fn inner_stride(t: &Tensor) -> i64 {
    t.strides().last().copied().unwrap_or(0)
}

/// `pad` with (before, after) per dim (negative widths crop); `fill` is cast
/// to the tensor's dtype.
pub(crate) fn pad(t: &Tensor, widths: &[(i64, i64)], fill: Literal) -> Tensor {
    let dtype = t.dtype();
    let in_shape = t.shape().to_vec();
    let rank = in_shape.len();
    let out_shape: Vec<usize> = in_shape
        .iter()
        .zip(widths)
        .map(|(&e, &(b, a))| (e as i64 + b + a) as usize)
        .collect();
    let c = fill.cast(dtype);
    let buf = with_dtype!(dtype, T => {
        let src = T::slice(t.buffer());
        let fv = if T::FLOAT { T::from_f64(c.as_f64()) } else { T::from_i64(c.as_i64().unwrap_or(0)) };
        let st = t.strides().to_vec();
        let v = build_rows::<T>(&out_shape, |outer, row| {
            let mut base = t.offset() as i64;
            for (d, &i) in outer.iter().enumerate() {
                let s = i as i64 - widths[d].0;
                if s < 0 || s >= in_shape[d] as i64 {
                    row.fill(fv);
                    return;
                }
                base += s * st[d];
            }
            if rank == 0 {
                read_row(src, base, 0, row);
                return;
            }
            let (before, e_in) = (widths[rank - 1].0, in_shape[rank - 1] as i64);
            let lo = before.max(0).min(row.len() as i64) as usize;
            let hi = (before + e_in).clamp(lo as i64, row.len() as i64) as usize;
            row[..lo].fill(fv);
            row[hi..].fill(fv);
            if hi > lo {
                let s0 = lo as i64 - before;
                read_row(src, base + s0 * st[rank - 1], st[rank - 1], &mut row[lo..hi]);
            }
        });
        T::wrap(v)
    });
    Tensor::from_buffer(dtype, out_shape, buf).expect("sizes agree")
}

/// Concatenation along `dim` of tensors already of the output dtype.
pub(crate) fn cat(ts: &[Tensor], dim: usize, out_shape: &[usize]) -> Tensor {
    let dtype = ts[0].dtype();
    let rank = out_shape.len();
    let mut starts = Vec::with_capacity(ts.len());
    let mut acc = 0usize;
    for t in ts {
        starts.push(acc);
        acc += t.shape()[dim];
    }
    let buf = with_dtype!(dtype, T => {
        let srcs: Vec<&[T]> = ts.iter().map(|t| T::slice(t.buffer())).collect();
        let v = build_rows::<T>(out_shape, |outer, row| {
            if dim == rank - 1 {
                for (k, t) in ts.iter().enumerate() {
                    let e = t.shape()[dim];
                    read_row(srcs[k], row_base(t, outer), inner_stride(t), &mut row[starts[k]..starts[k] + e]);
                }
            } else {
                let p = outer[dim];
                let k = starts.partition_point(|&s| s <= p) - 1;
                // Skip empty inputs that start at the same position.
                let k = (k..ts.len()).find(|&k| p < starts[k] + ts[k].shape()[dim]).unwrap_or(k);
                let t = &ts[k];
                let mut idx = outer.to_vec();
                idx[dim] = p - starts[k];
                read_row(srcs[k], row_base(t, &idx), inner_stride(t), row);
            }
        });
        T::wrap(v)
    });
    Tensor::from_buffer(dtype, out_shape.to_vec(), buf).expect("sizes agree")
}

/// `cat(..., manual_padding=True)`: every input has the output shape; a
/// position along `dim` takes the first input whose range covers it, or the
/// first input when none does.
pub(crate) fn cat_manual(ts: &[Tensor], dim: usize, ranges: &[(usize, usize)]) -> Tensor {
    let dtype = ts[0].dtype();
    let out_shape = ts[0].shape().to_vec();
    let rank = out_shape.len();
    let owner: Vec<usize> = (0..out_shape[dim])
        .map(|p| {
            ranges
                .iter()
                .position(|&(lo, hi)| lo <= p && p < hi)
                .unwrap_or(0)
        })
        .collect();
    let buf = with_dtype!(dtype, T => {
        let srcs: Vec<&[T]> = ts.iter().map(|t| T::slice(t.buffer())).collect();
        let v = build_rows::<T>(&out_shape, |outer, row| {
            if dim == rank - 1 {
                let mut j = 0;
                while j < row.len() {
                    let k = owner[j];
                    let mut e = j + 1;
                    while e < row.len() && owner[e] == k {
                        e += 1;
                    }
                    let t = &ts[k];
                    let is = inner_stride(t);
                    read_row(srcs[k], row_base(t, outer) + j as i64 * is, is, &mut row[j..e]);
                    j = e;
                }
            } else {
                let k = owner[outer[dim]];
                let t = &ts[k];
                read_row(srcs[k], row_base(t, outer), inner_stride(t), row);
            }
        });
        T::wrap(v)
    });
    Tensor::from_buffer(dtype, out_shape, buf).expect("sizes agree")
}

/// `index_select(x, index, dim)` with the index values already checked to
/// lie in `[0, x.shape[dim])`.
pub(crate) fn index_select(x: &Tensor, index: &[i64], dim: usize) -> Tensor {
    let dtype = x.dtype();
    let rank = x.rank();
    let mut out_shape = x.shape().to_vec();
    out_shape[dim] = index.len();
    let st = x.strides().to_vec();
    let buf = with_dtype!(dtype, T => {
        let src = T::slice(x.buffer());
        let v = build_rows::<T>(&out_shape, |outer, row| {
            if dim == rank - 1 {
                let base = row_base(x, outer);
                for (r, &i) in row.iter_mut().zip(index) {
                    *r = src[(base + i * st[dim]) as usize];
                }
            } else {
                let mut idx = outer.to_vec();
                idx[dim] = index[outer[dim]] as usize;
                read_row(src, row_base(x, &idx), st[rank - 1], row);
            }
        });
        T::wrap(v)
    });
    Tensor::from_buffer(dtype, out_shape, buf).expect("sizes agree")
}
