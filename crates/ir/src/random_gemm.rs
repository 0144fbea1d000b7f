//! Draws of the matrix products `matmul`, `linear`, `grouped_mm` and `scaled_mm` for
//! [`super::STRUCTURED`]: one factor is a tensor of the pool (cast to a
//! product's dtype when it has another), so what comes before and after a
//! product is whatever the fusion drew; the other factor, a weight and a bias
//! are new inputs, laid out as any input (dense, transposed or sliced), or the
//! pool tensor itself transposed (`x @ x^T`). Every shape torch.matmul takes is
//! drawn: vectors on either side, batch dims on either side or both,
//! broadcast against 1. A grouped product's groups cut m, n or k, its pool
//! factor either operand; its offsets are a dense Int32 input whose values
//! the input generator draws (a split of the extent they cut). A scaled
//! product's pool factor is cast to an FP8 type, its scales one element each
//! or one a row and one a column.

use super::Ctx;
use crate::gemm::matmul_shape;
use crate::{DType, GemmOp, IrError, Op, ValueId};

type Drawn = Option<Result<Vec<ValueId>, IrError>>;

/// A product's factor drawn from the pool: the value, its shape and dtype.
type Factor = (ValueId, Vec<usize>, DType);

/// Multiply-adds a drawn product may take at most (with its bound, the CPU
/// reference runs four such products).
const MAX_MACS: usize = 1 << 21;

/// A product's dtypes, Float most often.
const DTYPES: [DType; 5] = [DType::Float, DType::Half, DType::BFloat16, DType::Float, DType::Double];

/// A tensor of the pool of rank >= 1, in a product's dtype (cast to one
/// when it has another; complex tensors are not drawn).
fn factor(c: &mut Ctx) -> Option<Result<Factor, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    let d = c.dtype_of(x);
    if s.is_empty() || d.is_complex() {
        return None;
    }
    if DTYPES.contains(&d) {
        return Some(Ok((x, s, d)));
    }
    let d = c.rng.pick(&DTYPES);
    Some(c.fd.cast(x, d).map(|v| (v, s, d)))
}

/// A free extent of a product (m, n, a batch).
fn free(c: &mut Ctx) -> usize {
    c.rng.pick(&[1, 2, 3, 7, 16, 33, 64, 100, 128, 257])
}

/// Batch dims for the new factor of a product whose pool factor has batch
/// dims `batch`: none, the same, 1s where they broadcast, or new ones when
/// the pool factor has none.
fn batch_like(c: &mut Ctx, batch: &[usize]) -> Vec<usize> {
    match c.rng.below(4) {
        0 => vec![],
        1 => batch.to_vec(),
        2 => batch.iter().map(|&e| if c.rng.chance(0.5) { 1 } else { e }).collect(),
        _ if batch.is_empty() => vec![c.rng.pick(&[1, 2, 3])],
        _ => batch[c.rng.below(batch.len())..].to_vec(),
    }
}

/// The new factor's shape, given the pool factor's shape `xs` and which side it is on.
fn other_shape(c: &mut Ctx, xs: &[usize], x_left: bool) -> Vec<usize> {
    let r = xs.len();
    let batch = if r > 2 { &xs[..r - 2] } else { &[][..] };
    let k = if x_left || r == 1 { xs[r - 1] } else { xs[r - 2] };
    if c.rng.chance(0.2) {
        return vec![k];
    }
    let mut s = batch_like(c, batch);
    let free = free(c);
    if x_left {
        s.extend([k, free]);
    } else {
        s.extend([free, k]);
    }
    s
}

pub(super) fn matmul(c: &mut Ctx) -> Drawn {
    let (x, xs, d) = step!(factor(c)?);
    let r = xs.len();
    if r >= 2 && c.rng.chance(0.15) {
        // x @ x^T: both factors one tensor, the right one a permuted view.
        let mut dims: Vec<i64> = (0..r as i64).collect();
        dims.swap(r - 2, r - 1);
        let (mut ts, m, k) = (xs.clone(), xs[r - 2], xs[r - 1]);
        ts.swap(r - 2, r - 1);
        if xs[..r - 2].iter().product::<usize>() * m * m * k > MAX_MACS {
            return None;
        }
        let t = step!(c.fd.permute(x, &dims));
        return Some(c.fd.op(Op::Matmul { a: x, b: t }, &[]));
    }
    let x_left = c.rng.chance(0.6);
    let os = other_shape(c, &xs, x_left);
    let (sa, sb) = if x_left { (&xs, &os) } else { (&os, &xs) };
    let s = matmul_shape(sa, sb).ok()?;
    if s.batch.iter().product::<usize>() * s.m * s.n * s.k > MAX_MACS {
        return None;
    }
    let o = step!(c.input(&os, d));
    let (a, b) = if x_left { (x, o) } else { (o, x) };
    Some(c.fd.op(Op::Matmul { a, b }, &[]))
}

pub(super) fn linear(c: &mut Ctx) -> Drawn {
    let (x, xs, d) = step!(factor(c)?);
    let k = xs[xs.len() - 1];
    let n = free(c);
    let batch: Vec<usize> = if c.rng.chance(0.1) { vec![c.rng.pick(&[2, 3])] } else { vec![] };
    let rows: usize = xs[..xs.len() - 1].iter().product();
    if batch.iter().product::<usize>() * rows * n * k > MAX_MACS {
        return None;
    }
    let mut ws = batch.clone();
    ws.extend([n, k]);
    let weight = step!(c.input(&ws, d));
    let bias = match c.rng.below(10) {
        0..=3 => None,
        4..=7 => Some(vec![n]),
        _ => Some([batch.as_slice(), &[n]].concat()),
    };
    let bias = match bias.map(|s| c.input(&s, d)) {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => return Some(Err(e)),
    };
    Some(c.fd.op(Op::Linear { a: x, weight, bias }, &[]))
}

pub(super) fn grouped_mm(c: &mut Ctx) -> Drawn {
    let x = c.operand();
    let xs = c.shape_of(x);
    let d = c.dtype_of(x);
    if !(2..=3).contains(&xs.len()) || d.is_complex() {
        return None;
    }
    // The GPU runs Half and BFloat16 (a Float one is refused by name).
    let x = match d {
        DType::Half | DType::BFloat16 => x,
        _ => step!(c.fd.cast(x, c.rng.pick(&[DType::BFloat16, DType::Half]))),
    };
    let d = c.dtype_of(x);
    // mat1 and mat2's shapes, x as one of them, and the groups.
    let x_first = c.rng.chance(0.5);
    let (a, b, g) = match (xs.len(), x_first) {
        // [m, k] x [g, k, n] (groups cut m), or [m, k] x [k, n] (cut k).
        (2, true) => {
            let (g, n) = (c.rng.pick(&[1, 2, 3, 5, 8]), free(c));
            let b = if c.rng.chance(0.5) { vec![g, xs[1], n] } else { vec![xs[1], n] };
            (xs.clone(), b, g)
        }
        // [m, k] x [k, n] with x as mat2 (cut k), or [g, m, k] x [k, n] (cut n).
        (2, false) => {
            let (g, m) = (c.rng.pick(&[1, 2, 3, 5, 8]), free(c));
            let a = if c.rng.chance(0.5) { vec![g, m, xs[0]] } else { vec![m, xs[0]] };
            (a, xs.clone(), g)
        }
        // [g, m, k] x [k, n] (cut n).
        (_, true) => (xs.clone(), vec![xs[2], free(c)], xs[0]),
        // [m, k] x [g, k, n] (cut m).
        (_, false) => (vec![free(c), xs[1]], xs.clone(), xs[0]),
    };
    let (m, k) = (a[a.len() - 2], a[a.len() - 1]);
    let n = b[b.len() - 1];
    // The groups split one extent: m n k multiply-adds in all.
    if m * n * k > MAX_MACS {
        return None;
    }
    let (mat1, mat2) = if x_first {
        let o = step!(c.input(&b, d));
        (x, o)
    } else {
        let o = step!(c.input(&a, d));
        (o, x)
    };
    let offsets = step!(c.dense_input(&[g], DType::Int32));
    Some(c.fd.op(Op::Gemm(GemmOp::GroupedMm { mat1, mat2, offsets }), &[]))
}

pub(super) fn scaled_mm(c: &mut Ctx) -> Drawn {
    let x = c.operand();
    let xs = c.shape_of(x);
    if xs.len() != 2 || c.dtype_of(x).is_complex() {
        return None;
    }
    let fp8 = [DType::Float8E4m3fn, DType::Float8E5m2];
    let (d1, d2) = (c.rng.pick(&fp8), c.rng.pick(&fp8));
    let x_first = c.rng.chance(0.6);
    let (m, k, n) = if x_first { (xs[0], xs[1], free(c)) } else { (free(c), xs[0], xs[1]) };
    if m * n * k > MAX_MACS {
        return None;
    }
    let x8 = step!(c.fd.cast(x, if x_first { d1 } else { d2 }));
    let other = if x_first { c.input(&[k, n], d2) } else { c.input(&[m, k], d1) };
    let other = step!(other);
    let (mat1, mat2) = if x_first { (x8, other) } else { (other, x8) };
    let (s1, s2): (Vec<usize>, Vec<usize>) = if c.rng.chance(0.5) { (vec![], vec![]) } else { (vec![m, 1], vec![1, n]) };
    let scale1 = step!(c.input(&s1, DType::Float));
    let scale2 = step!(c.input(&s2, DType::Float));
    let dtype = c.rng.pick(&[DType::BFloat16, DType::Half, DType::Float]);
    Some(c.fd.op(Op::Gemm(GemmOp::ScaledMm { mat1, mat2, scale1, scale2, dtype }), &[]))
}
