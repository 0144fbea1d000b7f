//! Shape and dtype rules of the matrix products (`matmul`, `linear`), as
//! nvFuser's `newForMatmul`/`newForLinear` define them (torch.matmul and
//! torch.nn.functional.linear semantics). The CPU reference uses the same
//! [`MatmulShape`] to walk its loops, so the rule lives here once.

use crate::infer::broadcast_shapes;
use crate::{DType, IrError};

/// A product `[*batch, m, k] x [*batch, k, n]` after 1-D operands gained their
/// missing dim: `out` drops what they gained.
#[derive(Clone, Debug, PartialEq)]
pub struct MatmulShape {
    pub batch: Vec<usize>,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub out: Vec<usize>,
}

fn operand_dtype(op: &str, a: DType, b: DType) -> Result<DType, IrError> {
    if a != b {
        return Err(IrError::op(
            op,
            format!("operands must have the same dtype, got {a} and {b}"),
        ));
    }
    if !a.is_float() {
        return Err(IrError::op(
            op,
            format!("operands must be floating point (Half, BFloat16, Float, Double), got {a}"),
        ));
    }
    Ok(a)
}

/// `torch.matmul`'s rule: 1-D x 1-D is a dot product (0-d), a 1-D left operand
/// is a row and a 1-D right operand a column, batch dims broadcast.
pub fn matmul_shape(a: &[usize], b: &[usize]) -> Result<MatmulShape, IrError> {
    let op = "matmul";
    if a.is_empty() || b.is_empty() {
        return Err(IrError::op(op, "operands must be at least 1-D, got a 0-D tensor"));
    }
    let (m, ka, a_batch) = match a.len() {
        1 => (None, a[0], &a[..0]),
        r => (Some(a[r - 2]), a[r - 1], &a[..r - 2]),
    };
    let (kb, n, b_batch) = match b.len() {
        1 => (b[0], None, &b[..0]),
        r => (b[r - 2], Some(b[r - 1]), &b[..r - 2]),
    };
    if ka != kb {
        return Err(IrError::op(
            op,
            format!("inner extents differ: {a:?} x {b:?} ({ka} vs {kb})"),
        ));
    }
    let batch = broadcast_shapes(op, &[a_batch, b_batch])?;
    let mut out = batch.clone();
    out.extend(m);
    out.extend(n);
    Ok(MatmulShape {
        batch,
        m: m.unwrap_or(1),
        k: ka,
        n: n.unwrap_or(1),
        out,
    })
}

/// The output dtype and shape of `matmul`.
pub fn matmul(a: (DType, &[usize]), b: (DType, &[usize])) -> Result<(DType, Vec<usize>), IrError> {
    let d = operand_dtype("matmul", a.0, b.0)?;
    Ok((d, matmul_shape(a.1, b.1)?.out))
}

/// `linear`: input `[*i, k]`, weight `[*w, n, k]` (at least 2-D), bias
/// `[n]` or `[*w, n]`; output `[*w, *i, n]`.
pub fn linear(
    a: (DType, &[usize]),
    w: (DType, &[usize]),
    bias: Option<(DType, &[usize])>,
) -> Result<(DType, Vec<usize>), IrError> {
    let op = "linear";
    let d = operand_dtype(op, a.0, w.0)?;
    let (ash, wsh) = (a.1, w.1);
    if ash.is_empty() {
        return Err(IrError::op(op, "input must be at least 1-D"));
    }
    if wsh.len() < 2 {
        return Err(IrError::op(
            op,
            format!("weight must be at least 2-D ([out_features, in_features]), got {wsh:?}"),
        ));
    }
    let k = ash[ash.len() - 1];
    let (n, kw) = (wsh[wsh.len() - 2], wsh[wsh.len() - 1]);
    if k != kw {
        return Err(IrError::op(
            op,
            format!("in_features differ: input {ash:?}, weight {wsh:?} ({k} vs {kw})"),
        ));
    }
    let w_batch = &wsh[..wsh.len() - 2];
    if let Some((bd, bs)) = bias {
        if bd != d {
            return Err(IrError::op(
                op,
                format!("bias must have the operands' dtype {d}, got {bd}"),
            ));
        }
        let mut want = w_batch.to_vec();
        want.push(n);
        if bs != [n] && bs != want.as_slice() {
            return Err(IrError::op(
                op,
                format!("bias must be [{n}] or {want:?}, got {bs:?}"),
            ));
        }
    }
    let mut out = w_batch.to_vec();
    out.extend_from_slice(&ash[..ash.len() - 1]);
    out.push(n);
    Ok((d, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_shapes_follow_torch() {
        assert_eq!(matmul_shape(&[8], &[8]).unwrap().out, Vec::<usize>::new());
        assert_eq!(matmul_shape(&[8], &[8, 7]).unwrap().out, vec![7]);
        assert_eq!(matmul_shape(&[5, 8], &[8]).unwrap().out, vec![5]);
        assert_eq!(matmul_shape(&[5, 8], &[8, 7]).unwrap().out, vec![5, 7]);
        let s = matmul_shape(&[2, 1, 5, 8], &[3, 8, 7]).unwrap();
        assert_eq!((s.batch.clone(), s.out), (vec![2, 3], vec![2, 3, 5, 7]));
        assert!(matmul_shape(&[5, 8], &[7, 7]).is_err());
        assert!(matmul_shape(&[], &[7]).is_err());
        assert!(matmul_shape(&[2, 5, 8], &[3, 8, 7]).is_err());
    }

    #[test]
    fn linear_shapes_and_dtypes() {
        let f = DType::Float;
        assert_eq!(linear((f, &[2, 5, 8]), (f, &[7, 8]), None).unwrap().1, vec![2, 5, 7]);
        assert_eq!(linear((f, &[8]), (f, &[7, 8]), Some((f, &[7]))).unwrap().1, vec![7]);
        assert_eq!(linear((f, &[5, 8]), (f, &[3, 7, 8]), Some((f, &[3, 7]))).unwrap().1, vec![3, 5, 7]);
        assert!(linear((f, &[5, 8]), (f, &[8]), None).is_err());
        assert!(linear((f, &[5, 8]), (f, &[7, 8]), Some((f, &[8]))).is_err());
        assert!(linear((f, &[5, 8]), (DType::Half, &[7, 8]), None).is_err());
        assert!(matmul((DType::Int, &[2, 2]), (DType::Int, &[2, 2])).is_err());
    }
}

/// The arithmetic of a fusion's matrix products and attention, in floating-
/// point operations (a multiply-add is two), as the field counts it: 2mnk per
/// product (grouped products: the full extents, each group taking its share),
/// 2 L S (E + Ev) per batch row of attention's forward and 2 L S (3E + 2Ev) of
/// its backward (the five products FlashAttention-2 counts, 2.5 forwards at E
/// = Ev), half of each with a causal mask. 0 where the fusion has none: its
/// other ops are counted by bytes, not operations.
pub fn flops(f: &crate::Fusion) -> u64 {
    use crate::{GemmOp, Op};
    let shape = |v: crate::ValueId| f.value(v).shape.clone().unwrap_or_default();
    let numel = |s: &[usize]| s.iter().product::<usize>() as f64;
    let causal = |c: Option<crate::ValueId>| c.and_then(|v| f.value(v).constant).is_some_and(|l| l.as_bool());
    let mut total = 0f64;
    for n in &f.nodes {
        total += match n.op {
            Op::Matmul { a, b } => match matmul_shape(&shape(a), &shape(b)) {
                Ok(ms) => 2.0 * numel(&ms.batch) * (ms.m * ms.n * ms.k) as f64,
                Err(_) => 0.0,
            },
            Op::Linear { a, .. } => {
                let (sa, so) = (shape(a), shape(n.outputs[0]));
                2.0 * numel(&so) * sa.last().copied().unwrap_or(0) as f64
            }
            Op::Gemm(GemmOp::GroupedMm { mat1, mat2, .. }) => {
                let (s1, s2) = (shape(mat1), shape(mat2));
                let (m, k) = (s1[s1.len() - 2], s1[s1.len() - 1]);
                2.0 * (m * k * s2[s2.len() - 1]) as f64
            }
            Op::Gemm(GemmOp::ScaledMm { mat1, mat2, .. }) => {
                let (s1, s2) = (shape(mat1), shape(mat2));
                2.0 * (s1[0] * s1[1] * s2[1]) as f64
            }
            Op::Gemm(GemmOp::SdpfaFwd { query, key, value, is_causal, .. })
            | Op::Gemm(GemmOp::SdpfaBwd { query, key, value, is_causal, .. }) => {
                let (q, k, v) = (shape(query), shape(key), shape(value));
                let Ok((batch, l, s, e, ev)) = crate::op_gemm::attention_dims("attention", &q, &k, &v) else {
                    continue;
                };
                let per = if matches!(n.op, Op::Gemm(GemmOp::SdpfaFwd { .. })) { e + ev } else { 3 * e + 2 * ev };
                let all = 2.0 * numel(&batch) * (l * s * per) as f64;
                if causal(is_causal) {
                    all / 2.0
                } else {
                    all
                }
            }
            _ => 0.0,
        };
    }
    total as u64
}

#[cfg(test)]
mod flops_tests {
    use crate::{DType, FusionBuilder, GemmOp, Literal, Op};

    #[test]
    fn products_and_attention_are_counted_as_the_field_counts_them() {
        let mut b = FusionBuilder::new();
        let q = b.tensor(&[2, 4, 128, 64], DType::BFloat16).unwrap();
        let x = b.tensor(&[3, 32, 16], DType::BFloat16).unwrap();
        let w = b.tensor(&[8, 16], DType::BFloat16).unwrap();
        let causal = b.literal(Literal::Bool(true));
        let fwd = |causal| Op::Gemm(GemmOp::SdpfaFwd { query: q, key: q, value: q, dropout_p: None, is_causal: causal, scale: None });
        let o = b.op(fwd(Some(causal)), &["o", "lse", "s", "off"]).unwrap();
        let y = b.op(Op::Linear { a: x, weight: w, bias: None }, &["y"]).unwrap();
        b.add_output(o[0]).unwrap();
        b.add_output(y[0]).unwrap();
        let f = b.finish();
        // Attention: 2 * 8 batch rows * 128 * 128 * (64 + 64), halved by the causal mask;
        // the linear: 2 * (3 * 32 rows) * 8 * 16.
        assert_eq!(super::flops(&f), 8 * 128 * 128 * 128 + 2 * 96 * 8 * 16);
        let mut b = FusionBuilder::new();
        let q = b.tensor(&[1, 1, 16, 8], DType::Half).unwrap();
        let e = b.tensor(&[4], DType::Half).unwrap();
        let o = b.op(Op::Gemm(GemmOp::SdpfaFwd { query: q, key: q, value: q, dropout_p: None, is_causal: None, scale: None }), &["o", "l", "s", "x"]).unwrap();
        let _ = o;
        let ex = b.op(Op::Unary { kind: crate::UnaryOp::Exp, x: e }, &["ex"]).unwrap();
        b.add_output(ex[0]).unwrap();
        assert_eq!(super::flops(&b.finish()), 2 * 16 * 16 * 16, "elementwise work is not counted");
    }
}
