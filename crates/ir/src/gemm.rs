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
