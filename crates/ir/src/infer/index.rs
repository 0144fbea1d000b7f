//! Shape and dtype rules of the indexing and ordering ops, read from nvFuser's
//! csrc/ops/indexing.cpp, arith.cpp (iota, topk, argsort) and composite.cpp
//! (triu, embedding_fwd), and from the ATen calls its evaluators make.

use super::{const_int, norm_dim, tensor, Graph, OutType};
use crate::op_index::IndexOp;
use crate::{DType, IrError, Value, ValueId};

fn integral_tensor<'a>(
    g: &'a Graph,
    op: &str,
    v: ValueId,
) -> Result<(&'a Value, &'a [usize]), IrError> {
    let (iv, is) = tensor(g, op, "index", v)?;
    if !iv.dtype.is_integral() {
        return Err(IrError::op(
            op,
            format!(
                "index {} must be an integer tensor, got {}",
                iv.name, iv.dtype
            ),
        ));
    }
    Ok((iv, is))
}

fn scalar<'a>(g: &'a Graph, op: &str, what: &str, v: ValueId) -> Result<&'a Value, IrError> {
    let val = g.get(op, v)?;
    if val.is_tensor() {
        return Err(IrError::op(
            op,
            format!("{what} must be a scalar, got tensor {}", val.name),
        ));
    }
    Ok(val)
}

fn same_rank(op: &str, a: &[usize], b: &[usize], what: &str) -> Result<(), IrError> {
    if a.len() != b.len() {
        return Err(IrError::op(
            op,
            format!("input and {what} must have the same number of dims, got {a:?} and {b:?}"),
        ));
    }
    Ok(())
}

pub(super) fn infer_index(g: &Graph, op: &IndexOp) -> Result<Vec<OutType>, IrError> {
    let name = op.name();
    Ok(match op {
        IndexOp::Iota {
            length,
            start,
            step,
            dtype,
        } => {
            let n = const_int(g, name, "length", *length)?;
            if !g.get(name, *length)?.dtype.is_integral() {
                return Err(IrError::op(name, "length must be an integer"));
            }
            if n < 0 {
                return Err(IrError::op(name, format!("length {n} is negative")));
            }
            if !(dtype.is_integral() || dtype.is_float()) {
                return Err(IrError::op(
                    name,
                    format!("dtype must be integral or floating point, got {dtype}"),
                ));
            }
            for (what, v) in [("start", start), ("step", step)] {
                let Some(v) = v else { continue };
                let sv = scalar(g, name, what, *v)?;
                // nvFuser: start and step must be of dtype's kind (integral or floating).
                if sv.dtype.is_integral() != dtype.is_integral()
                    || sv.dtype.is_float() != dtype.is_float()
                {
                    return Err(IrError::op(
                        name,
                        format!("{what} {} is {} but dtype is {dtype}", sv.name, sv.dtype),
                    ));
                }
                if let Some(c) = sv.constant {
                    let x = c.as_f64();
                    if !x.is_finite() {
                        return Err(IrError::op(name, format!("{what} must be finite, got {c}")));
                    }
                    if what == "step" && x == 0.0 {
                        return Err(IrError::op(name, "step must not be zero"));
                    }
                }
            }
            vec![OutType::tensor(*dtype, vec![n as usize])]
        }
        IndexOp::Triu { x, .. } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            if s.len() < 2 {
                return Err(IrError::op(
                    name,
                    format!("input must have 2 or more dims, got {}", s.len()),
                ));
            }
            vec![OutType::tensor(xv.dtype, s.to_vec())]
        }
        IndexOp::TakeAlongAxis { x, index, dim } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let (_, is) = integral_tensor(g, name, *index)?;
            same_rank(name, s, is, "index")?;
            if s.is_empty() {
                return Err(IrError::op(name, "cannot be applied to a 0-dim tensor"));
            }
            let d = norm_dim(name, *dim, s.len())?;
            // at::take_along_dim broadcasts input and index outside `dim`.
            let mut out = Vec::with_capacity(s.len());
            for i in 0..s.len() {
                out.push(if i == d || s[i] == 1 {
                    is[i]
                } else if is[i] == 1 || is[i] == s[i] {
                    s[i]
                } else {
                    return Err(IrError::op(
                        name,
                        format!("index of shape {is:?} does not broadcast against input {s:?} in dim {i}"),
                    ));
                });
            }
            vec![OutType::tensor(xv.dtype, out)]
        }
        IndexOp::Gather { x, index, dim } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let (_, is) = integral_tensor(g, name, *index)?;
            same_rank(name, s, is, "index")?;
            if s.is_empty() {
                return Err(IrError::op(name, "cannot be applied to a 0-dim tensor"));
            }
            let d = norm_dim(name, *dim, s.len())?;
            if let Some(i) = (0..s.len()).find(|&i| i != d && is[i] > s[i]) {
                return Err(IrError::op(
                    name,
                    format!(
                        "index extent {} exceeds the input's {} in dim {i}",
                        is[i], s[i]
                    ),
                ));
            }
            vec![OutType::tensor(xv.dtype, is.to_vec())]
        }
        IndexOp::Select { x, index, dim } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let iv = scalar(g, name, "index", *index)?;
            if !iv.dtype.is_integral() {
                return Err(IrError::op(
                    name,
                    format!("index must be an integer, got {}", iv.dtype),
                ));
            }
            if s.is_empty() {
                return Err(IrError::op(name, "cannot be applied to a 0-dim tensor"));
            }
            let d = norm_dim(name, *dim, s.len())?;
            if let Some(c) = iv.constant.and_then(|c| c.as_i64()) {
                if c < 0 || c as u64 >= s[d] as u64 {
                    return Err(IrError::op(
                        name,
                        format!("index {c} is outside [0, {}) of dim {d}", s[d]),
                    ));
                }
            }
            let mut out = s.to_vec();
            out.remove(d);
            vec![OutType::tensor(xv.dtype, out)]
        }
        IndexOp::Scatter { x, index, src, dim } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let (_, is) = integral_tensor(g, name, *index)?;
            same_rank(name, s, is, "index")?;
            if s.is_empty() {
                return Err(IrError::op(name, "cannot be applied to a 0-dim tensor"));
            }
            let d = norm_dim(name, *dim, s.len())?;
            if let Some(i) = (0..s.len()).find(|&i| i != d && is[i] > s[i]) {
                return Err(IrError::op(
                    name,
                    format!(
                        "index extent {} exceeds the input's {} in dim {i}",
                        is[i], s[i]
                    ),
                ));
            }
            let sv = g.get(name, *src)?;
            if let Some(ss) = &sv.shape {
                same_rank(name, s, ss, "src")?;
                if let Some(i) = (0..s.len()).find(|&i| is[i] > ss[i]) {
                    return Err(IrError::op(
                        name,
                        format!("index extent {} exceeds src's {} in dim {i}", is[i], ss[i]),
                    ));
                }
                // ATen's scatter requires src of the input's dtype.
                if sv.dtype != xv.dtype {
                    return Err(IrError::op(
                        name,
                        format!(
                            "src {} is {} but the input is {}",
                            sv.name, sv.dtype, xv.dtype
                        ),
                    ));
                }
            }
            vec![OutType::tensor(xv.dtype, s.to_vec())]
        }
        IndexOp::IndexPutAccumulate { acc, index, value } => {
            let (av, s) = tensor(g, name, "acc", *acc)?;
            let (_, is) = integral_tensor(g, name, *index)?;
            let (vv, vs) = tensor(g, name, "value", *value)?;
            if is.len() != 1 {
                return Err(IrError::op(
                    name,
                    format!("index must be 1-D, got shape {is:?}"),
                ));
            }
            if s.is_empty() {
                return Err(IrError::op(name, "acc must have at least one dim"));
            }
            same_rank(name, s, vs, "value")?;
            // at::index_put: value broadcasts to [len(index), acc.shape[1..]].
            let want: Vec<usize> = std::iter::once(is[0])
                .chain(s[1..].iter().copied())
                .collect();
            if vs.iter().zip(&want).any(|(&a, &b)| a != b && a != 1) {
                return Err(IrError::op(
                    name,
                    format!("value of shape {vs:?} does not broadcast to {want:?}"),
                ));
            }
            if vv.dtype != av.dtype {
                return Err(IrError::op(
                    name,
                    format!("value {} is {} but acc is {}", vv.name, vv.dtype, av.dtype),
                ));
            }
            vec![OutType::tensor(av.dtype, s.to_vec())]
        }
        IndexOp::Topk { x, k, dim, .. } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let kv = const_int(g, name, "k", *k)?;
            let kd = g.get(name, *k)?.dtype;
            if !kd.is_integral() {
                return Err(IrError::op(name, format!("k must be an integer, got {kd}")));
            }
            if xv.dtype.is_bool() {
                return Err(IrError::op(name, "Bool inputs are not supported"));
            }
            if s.is_empty() {
                if !(*dim == 0 || *dim == -1) || kv != 1 {
                    return Err(IrError::op(name, "a 0-dim input needs dim 0 or -1 and k 1"));
                }
                return Ok(vec![
                    OutType::tensor(xv.dtype, vec![]),
                    OutType::tensor(DType::Int, vec![]),
                ]);
            }
            let d = norm_dim(name, *dim, s.len())?;
            if kv < 0 || kv as u64 > s[d] as u64 {
                return Err(IrError::op(
                    name,
                    format!("k {kv} is outside [0, {}] (extent of dim {d})", s[d]),
                ));
            }
            let mut out = s.to_vec();
            out[d] = kv as usize;
            vec![
                OutType::tensor(xv.dtype, out.clone()),
                OutType::tensor(DType::Int, out),
            ]
        }
        IndexOp::Argsort { x, dim, .. } => {
            // Bool sorts as 0 < 1 (ATen's argsort takes it; its topk does not).
            let (_, s) = tensor(g, name, "input", *x)?;
            if !s.is_empty() {
                norm_dim(name, *dim, s.len())?;
            }
            vec![OutType::tensor(DType::Int, s.to_vec())]
        }
        IndexOp::EmbeddingFwd {
            input,
            weight,
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
        } => {
            let (_, is) = integral_tensor(g, name, *input)?;
            let (wv, ws) = tensor(g, name, "weight", *weight)?;
            if is.is_empty() {
                return Err(IrError::op(name, "input must have at least one dim"));
            }
            if ws.len() != 2 {
                return Err(IrError::op(
                    name,
                    format!("weight must be 2-D, got shape {ws:?}"),
                ));
            }
            if !wv.dtype.is_float() {
                return Err(IrError::op(
                    name,
                    format!("weight must be floating point, got {}", wv.dtype),
                ));
            }
            // An optional scalar argument and the dtypes it accepts.
            type Kind<'a> = (&'a str, &'a Option<ValueId>, fn(DType) -> bool);
            let kinds: [Kind; 5] = [
                ("padding_idx", padding_idx, DType::is_integral),
                ("max_norm", max_norm, |d| d.is_float() || d.is_integral()),
                ("norm_type", norm_type, |d| d.is_float() || d.is_integral()),
                ("scale_grad_by_freq", scale_grad_by_freq, DType::is_bool),
                ("sparse", sparse, DType::is_bool),
            ];
            for (what, v, ok) in kinds {
                let Some(v) = v else { continue };
                let sv = scalar(g, name, what, *v)?;
                if !ok(sv.dtype) {
                    return Err(IrError::op(
                        name,
                        format!("{what} has the wrong dtype {}", sv.dtype),
                    ));
                }
            }
            let mut out = is.to_vec();
            out.push(ws[1]);
            vec![OutType::tensor(wv.dtype, out)]
        }
    })
}
