//! Attention and the grouped/scaled matrix products of nvFuser
//! (`sdpfa_fwd`, `sdpfa_bwd`, `grouped_mm`, `scaled_mm`): one sub-enum so
//! each shared `match` over [`crate::Op`] needs one arm for the family, and
//! their shape/dtype rules, read from nvFuser's csrc/ops/composite.cpp
//! (`sdpfa_fwd`, `sdpfa_bwd`, `scaled_mm`), csrc/ops/arith.cpp
//! (`createGroupedMmaOutput`) and the ATen calls of csrc/ir/composite_nodes.cpp.

use crate::infer::{broadcast_shapes, tensor, Graph, OutType};
use crate::{DType, IrError, ValueId};
use serde::{Deserialize, Serialize};

/// Scalars (`dropout_p`, `is_causal`, `scale`) are values (constants or
/// scalar inputs); `None` is nvFuser's default (0.0, False, 1/sqrt(E)).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(tag = "gemm_op", rename_all = "snake_case")]
pub enum GemmOp {
    /// Flash attention forward. Outputs: attention `[*N, H, L, Ev]` (query's
    /// dtype), log-sum-exp `[*N, H, L]` (Float), philox seed `[2]` and
    /// offset `[]` (UInt64: PyTorch's rng_state since torch 2.7).
    SdpfaFwd {
        query: ValueId,
        key: ValueId,
        value: ValueId,
        dropout_p: Option<ValueId>,
        is_causal: Option<ValueId>,
        scale: Option<ValueId>,
    },
    /// Flash attention backward. Outputs: grad_query, grad_key, grad_value.
    SdpfaBwd {
        grad_output: ValueId,
        query: ValueId,
        key: ValueId,
        value: ValueId,
        output: ValueId,
        logsumexp: ValueId,
        dropout_p: Option<ValueId>,
        is_causal: Option<ValueId>,
        philox_seed: ValueId,
        philox_offset: ValueId,
        scale: Option<ValueId>,
    },
    /// Products over groups cut by `offsets` (Int32, cumulative group ends):
    /// `[m,k] x [k,n] -> [g,m,n]` (groups cut k), `[g,m,k] x [k,n] -> [m,n]`
    /// (groups cut n), `[m,k] x [g,k,n] -> [m,n]` (groups cut m).
    GroupedMm {
        mat1: ValueId,
        mat2: ValueId,
        offsets: ValueId,
    },
    /// `torch._scaled_mm`: `(mat1 @ mat2) * scale1 * scale2` in `dtype`;
    /// scales are tensorwise (one element) or rowwise (`[m,1]`, `[1,n]`).
    /// nvFuser's Python call returns three values, the last two None.
    ScaledMm {
        mat1: ValueId,
        mat2: ValueId,
        scale1: ValueId,
        scale2: ValueId,
        dtype: DType,
    },
}

impl GemmOp {
    pub const NAMES: [&'static str; 4] = ["sdpfa_fwd", "sdpfa_bwd", "grouped_mm", "scaled_mm"];

    pub fn name(&self) -> &'static str {
        match self {
            GemmOp::SdpfaFwd { .. } => "sdpfa_fwd",
            GemmOp::SdpfaBwd { .. } => "sdpfa_bwd",
            GemmOp::GroupedMm { .. } => "grouped_mm",
            GemmOp::ScaledMm { .. } => "scaled_mm",
        }
    }

    /// Operands in the bindings' argument order.
    pub fn operands_mut(&mut self) -> Vec<&mut ValueId> {
        match self {
            GemmOp::SdpfaFwd {
                query,
                key,
                value,
                dropout_p,
                is_causal,
                scale,
            } => {
                let mut v = vec![query, key, value];
                v.extend(dropout_p.iter_mut().chain(is_causal.iter_mut()).chain(scale.iter_mut()));
                v
            }
            GemmOp::SdpfaBwd {
                grad_output,
                query,
                key,
                value,
                output,
                logsumexp,
                dropout_p,
                is_causal,
                philox_seed,
                philox_offset,
                scale,
            } => {
                let mut v = vec![grad_output, query, key, value, output, logsumexp];
                v.extend(dropout_p.iter_mut().chain(is_causal.iter_mut()));
                v.extend([philox_seed, philox_offset]);
                v.extend(scale.iter_mut());
                v
            }
            GemmOp::GroupedMm { mat1, mat2, offsets } => vec![mat1, mat2, offsets],
            GemmOp::ScaledMm {
                mat1,
                mat2,
                scale1,
                scale2,
                ..
            } => vec![mat1, mat2, scale1, scale2],
        }
    }

    pub fn num_outputs(&self) -> usize {
        match self {
            GemmOp::SdpfaFwd { .. } => 4,
            GemmOp::SdpfaBwd { .. } => 3,
            GemmOp::GroupedMm { .. } | GemmOp::ScaledMm { .. } => 1,
        }
    }

    /// How many values the Python call returns: `scaled_mm` returns
    /// `(out, None, None)` when no output scales are asked for.
    pub fn python_returns(&self) -> usize {
        match self {
            GemmOp::ScaledMm { .. } => 3,
            _ => self.num_outputs(),
        }
    }
}

fn err(op: &str, m: impl Into<String>) -> IrError {
    IrError::op(op, m.into())
}

/// Flash attention's operands: Half or BFloat16, all the same, head dims a
/// multiple of 8 (nvFuser's evaluator checks the last one; PyTorch's kernel
/// takes only these dtypes).
fn flash_dtype(op: &str, what: &[(&str, DType)]) -> Result<DType, IrError> {
    let d = what[0].1;
    if let Some((n, o)) = what.iter().find(|(_, o)| *o != d) {
        return Err(err(op, format!("{n} has dtype {o}, {} has {d}: all must match", what[0].0)));
    }
    if !matches!(d, DType::Half | DType::BFloat16) {
        return Err(err(op, format!("flash attention takes Half or BFloat16 operands, got {d}")));
    }
    Ok(d)
}

fn scalar_arg(g: &Graph, op: &str, what: &str, v: Option<ValueId>, want_bool: bool) -> Result<(), IrError> {
    let Some(v) = v else { return Ok(()) };
    let val = g.get(op, v)?;
    if val.is_tensor() {
        return Err(err(op, format!("{what} must be a scalar, got tensor {}", val.name)));
    }
    let ok = if want_bool {
        val.dtype.is_bool()
    } else {
        val.dtype.is_float() || val.dtype.is_integral()
    };
    if !ok {
        let want = if want_bool { "a Bool scalar" } else { "a real-valued scalar" };
        return Err(err(op, format!("{what} must be {want}, got {}", val.dtype)));
    }
    Ok(())
}

/// `[*N, H, L, E]`, `[*N, H, S, E]`, `[*N, H, S, Ev]` -> (batch, L, S, E, Ev).
pub fn attention_dims(
    op: &str,
    q: &[usize],
    k: &[usize],
    v: &[usize],
) -> Result<(Vec<usize>, usize, usize, usize, usize), IrError> {
    let r = q.len();
    if r < 4 || k.len() != r || v.len() != r {
        return Err(err(
            op,
            format!("query, key and value must have the same rank, at least 4 ([*N, H, L, E]); got {q:?}, {k:?}, {v:?}"),
        ));
    }
    let (l, e, s, ek, sv, ev) = (q[r - 2], q[r - 1], k[r - 2], k[r - 1], v[r - 2], v[r - 1]);
    if e != ek || s != sv {
        return Err(err(
            op,
            format!("query [.., L, E], key [.., S, E] and value [.., S, Ev] disagree: {q:?}, {k:?}, {v:?}"),
        ));
    }
    if e % 8 != 0 || ev % 8 != 0 {
        return Err(err(op, format!("flash attention needs head dims that are multiples of 8, got E={e}, Ev={ev}")));
    }
    let batch = broadcast_shapes(op, &[&q[..r - 2], &k[..r - 2], &v[..r - 2]])?;
    Ok((batch, l, s, e, ev))
}

fn with(mut dims: Vec<usize>, tail: &[usize]) -> Vec<usize> {
    dims.extend_from_slice(tail);
    dims
}

/// The output types of `op`.
pub fn infer(g: &Graph, op: &GemmOp) -> Result<Vec<OutType>, IrError> {
    let name = op.name();
    let t = |what: &str, v: ValueId| tensor(g, name, what, v).map(|(val, s)| (val.dtype, s.to_vec()));
    Ok(match *op {
        GemmOp::SdpfaFwd {
            query,
            key,
            value,
            dropout_p,
            is_causal,
            scale,
        } => {
            let ((dq, q), (dk, k), (dv, v)) = (t("query", query)?, t("key", key)?, t("value", value)?);
            let d = flash_dtype(name, &[("query", dq), ("key", dk), ("value", dv)])?;
            let (batch, l, _, _, ev) = attention_dims(name, &q, &k, &v)?;
            scalar_arg(g, name, "dropout_p", dropout_p, false)?;
            scalar_arg(g, name, "is_causal", is_causal, true)?;
            scalar_arg(g, name, "scale", scale, false)?;
            vec![
                OutType::tensor(d, with(batch.clone(), &[l, ev])),
                OutType::tensor(DType::Float, with(batch, &[l])),
                OutType::tensor(DType::UInt64, vec![2]),
                OutType::tensor(DType::UInt64, vec![]),
            ]
        }
        GemmOp::SdpfaBwd {
            grad_output,
            query,
            key,
            value,
            output,
            logsumexp,
            dropout_p,
            is_causal,
            philox_seed,
            philox_offset,
            scale,
        } => {
            let (dg, go) = t("grad_output", grad_output)?;
            let ((dq, q), (dk, k), (dv, v)) = (t("query", query)?, t("key", key)?, t("value", value)?);
            let (dout, o) = t("output", output)?;
            let (dl, lse) = t("logsumexp", logsumexp)?;
            t("philox_seed", philox_seed)?;
            t("philox_offset", philox_offset)?;
            let what = [("grad_output", dg), ("query", dq), ("key", dk), ("value", dv), ("output", dout)];
            flash_dtype(name, &what)?;
            if q.len() != 4 {
                return Err(err(name, format!("query, key and value must be 4-D [N, H, L, E], got {q:?}")));
            }
            if k[..2] != q[..2] || v[..2] != q[..2] {
                return Err(err(name, format!("query, key and value must share [N, H], got {q:?}, {k:?}, {v:?}")));
            }
            let (batch, l, _, _, ev) = attention_dims(name, &q, &k, &v)?;
            let o_shape = with(batch.clone(), &[l, ev]);
            if go != o_shape || o != o_shape {
                return Err(err(
                    name,
                    format!("grad_output {go:?} and output {o:?} must have the attention's shape {o_shape:?}"),
                ));
            }
            if lse != with(batch, &[l]) || dl != DType::Float {
                return Err(err(name, format!("logsumexp must be Float [N, H, L] = {:?}, got {dl} {lse:?}", &o_shape[..3])));
            }
            scalar_arg(g, name, "dropout_p", dropout_p, false)?;
            scalar_arg(g, name, "is_causal", is_causal, true)?;
            scalar_arg(g, name, "scale", scale, false)?;
            vec![OutType::tensor(dq, q), OutType::tensor(dk, k), OutType::tensor(dv, v)]
        }
        GemmOp::GroupedMm { mat1, mat2, offsets } => {
            let ((d1, a), (d2, b), (doff, off)) = (t("mat1", mat1)?, t("mat2", mat2)?, t("offsets", offsets)?);
            if d1 != d2 || !d1.is_float() || d1.is_float8() {
                return Err(err(name, format!("mat1 and mat2 must have the same float dtype, got {d1} and {d2}")));
            }
            if doff != DType::Int32 || off.len() != 1 {
                return Err(err(name, format!("offsets must be a 1-D Int32 tensor, got {doff} {off:?}")));
            }
            let out = grouped_mm_shape(&a, &b, off[0])?;
            vec![OutType::tensor(d1, out)]
        }
        GemmOp::ScaledMm {
            mat1,
            mat2,
            scale1,
            scale2,
            dtype,
        } => {
            let ((d1, a), (d2, b)) = (t("mat1", mat1)?, t("mat2", mat2)?);
            let ((ds1, s1), (ds2, s2)) = (t("scale1", scale1)?, t("scale2", scale2)?);
            if !d1.is_float8() || !d2.is_float8() || d1 == DType::Float8E8m0fnu || d2 == DType::Float8E8m0fnu {
                return Err(err(name, format!("mat1 and mat2 must be Float8_e4m3fn or Float8_e5m2, got {d1} and {d2}")));
            }
            if a.len() != 2 || b.len() != 2 || a[1] != b[0] {
                return Err(err(name, format!("operands must be [m, k] and [k, n], got {a:?} and {b:?}")));
            }
            if ds1 != DType::Float || ds2 != DType::Float {
                return Err(err(name, format!("scales must be Float, got {ds1} and {ds2}")));
            }
            let one = |s: &[usize]| s.iter().product::<usize>() == 1;
            let (m, n) = (a[0], b[1]);
            let tensorwise = one(&s1) && one(&s2);
            let rowwise = s1 == [m, 1] && s2 == [1, n];
            if !(tensorwise || rowwise) {
                return Err(err(
                    name,
                    format!("scales must both hold one element (tensorwise) or be [{m}, 1] and [1, {n}] (rowwise), got {s1:?} and {s2:?}"),
                ));
            }
            if !matches!(dtype, DType::BFloat16 | DType::Half | DType::Float) {
                return Err(err(name, format!("output dtype must be BFloat16, Half or Float, got {dtype}")));
            }
            vec![OutType::tensor(dtype, vec![m, n])]
        }
    })
}

/// Which extent `grouped_mm`'s groups cut, as 0 (m: `[m,k] x [g,k,n]`), 1
/// (n: `[g,m,k] x [k,n]`) or 2 (k: `[m,k] x [k,n]`), and the product's m, n
/// and k, for operand shapes `a` and `b` that `grouped_mm_shape` accepts.
pub fn grouped_mm_dims(a: &[usize], b: &[usize]) -> (usize, usize, usize, usize) {
    match (a.len(), b.len()) {
        (2, 3) => (0, a[0], b[2], a[1]),
        (3, 2) => (1, a[1], b[1], a[2]),
        _ => (2, a[0], b[1], a[1]),
    }
}

/// The output shape of `grouped_mm` for ranks <2,2>, <3,2>, <2,3> and `g`
/// groups.
pub fn grouped_mm_shape(a: &[usize], b: &[usize], g: usize) -> Result<Vec<usize>, IrError> {
    let op = "grouped_mm";
    let ka = a.last().copied().unwrap_or(0);
    let kb = if b.len() >= 2 { b[b.len() - 2] } else { 0 };
    if a.len() < 2 || b.len() < 2 || ka != kb {
        return Err(err(op, format!("mat1 [.., k] and mat2 [.., k, n] disagree on k: {a:?} and {b:?}")));
    }
    match (a.len(), b.len()) {
        (2, 2) => Ok(vec![g, a[0], b[1]]),
        (3, 2) | (2, 3) => {
            let groups = if a.len() == 3 { a[0] } else { b[0] };
            if groups != g {
                return Err(err(op, format!("the 3-D operand has {groups} groups, offsets has {g}")));
            }
            Ok(vec![a[a.len() - 2], b[b.len() - 1]])
        }
        _ => Err(err(
            op,
            format!("operand ranks must be <2, 2>, <3, 2> or <2, 3> (use matmul for batched products), got {a:?} and {b:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attention_dims_check_the_layout() {
        let (b, l, s, e, ev) = attention_dims("sdpfa_fwd", &[1, 2, 9, 16], &[1, 2, 11, 16], &[1, 2, 11, 8]).unwrap();
        assert_eq!((b, l, s, e, ev), (vec![1, 2], 9, 11, 16, 8));
        // Batch dims broadcast; extra batch dims are allowed (nvFuser flattens them).
        let (b, ..) = attention_dims("sdpfa_fwd", &[3, 1, 2, 4, 8], &[1, 5, 2, 6, 8], &[3, 5, 2, 6, 8]).unwrap();
        assert_eq!(b, vec![3, 5, 2]);
        assert!(attention_dims("x", &[2, 9, 16], &[2, 11, 16], &[2, 11, 16]).is_err());
        assert!(attention_dims("x", &[1, 2, 9, 16], &[1, 2, 11, 8], &[1, 2, 11, 16]).is_err());
        assert!(attention_dims("x", &[1, 2, 9, 16], &[1, 2, 11, 16], &[1, 2, 10, 16]).is_err());
        assert!(attention_dims("x", &[1, 2, 9, 12], &[1, 2, 11, 12], &[1, 2, 11, 12]).is_err());
    }

    #[test]
    fn grouped_mm_shapes() {
        assert_eq!(grouped_mm_shape(&[24, 16], &[3, 16, 8], 3).unwrap(), vec![24, 8]);
        assert_eq!(grouped_mm_shape(&[5, 12], &[12, 7], 4).unwrap(), vec![4, 5, 7]);
        assert_eq!(grouped_mm_shape(&[2, 5, 12], &[12, 7], 2).unwrap(), vec![5, 7]);
        assert!(grouped_mm_shape(&[24, 16], &[3, 16, 8], 2).is_err());
        assert!(grouped_mm_shape(&[24, 16], &[3, 15, 8], 3).is_err());
        assert!(grouped_mm_shape(&[2, 24, 16], &[2, 16, 8], 2).is_err());
    }
}
