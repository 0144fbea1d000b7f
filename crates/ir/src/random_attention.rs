//! Draws of flash attention's forward (`sdpfa_fwd`) for [`super::STRUCTURED`].
//! The values V are a tensor of the pool, cast to Half or BFloat16 when it
//! has another type, its last dim padded with zeros to a multiple of 8 (the
//! head dims flash attention takes) and its leading dims seen as [N, H]
//! through a reshape; queries and keys are new inputs of the same type, in
//! any layout, their batch dims V's or 1 (broadcast). V is the operand the
//! pool's bounds can be carried through, since the output is linear in it
//! (P V); bounds on queries or keys would move P itself, which the fuzzer's
//! bounds do not follow (`reference::bounds`), so they are exact inputs.
//! Dropout is 0 or absent (the GPU engine refuses a mask drawn from
//! PyTorch's Philox stream), causal only where queries and keys are as
//! many, the scale nvFuser's default or a constant. The output and the
//! log-sum-exp join the pool; the Philox seed and offset do not.

use super::Ctx;
use crate::{DType, GemmOp, IrError, Literal, Op, ValueId};

type Drawn = Option<Result<Vec<ValueId>, IrError>>;

/// Multiply-adds a drawn attention may take at most: batch x L x S x (E + Ev).
const MAX_MACS: usize = 1 << 21;

pub(super) fn sdpfa_fwd(c: &mut Ctx) -> Drawn {
    let x = c.operand();
    let xs = c.shape_of(x);
    let d = c.dtype_of(x);
    let r = xs.len();
    if !(2..=4).contains(&r) || d.is_complex() {
        return None;
    }
    let (s, width) = (xs[r - 2], xs[r - 1]);
    let ev = width.div_ceil(8) * 8;
    let (n, h) = match xs[..r - 2] {
        [] => (1, 1),
        [h] => (1, h),
        [n, h] => (n, h),
        _ => unreachable!("rank 2 to 4"),
    };
    if s == 0 || ev == 0 || ev > 256 || n * h == 0 || n * h > 65535 {
        return None;
    }
    let causal = c.rng.chance(0.3);
    let l = if causal { s } else { c.rng.pick(&[1, 5, 16, 64, 100, 128, 257]) };
    let e = c.rng.pick(&[8, 16, 32, 64, 128]);
    if n * h * l * s * (e + ev) > MAX_MACS {
        return None;
    }
    let dt = match d {
        DType::Half | DType::BFloat16 => d,
        _ => c.rng.pick(&[DType::BFloat16, DType::Half]),
    };
    Some(draw(c, (x, d, dt), [n, h, l, s, e, ev], width, causal))
}

/// The attention of `x` (of type `d`, cast to `dt`) as V: [n, h, s, ev]
/// after padding its last dim from `width`; queries [.., l, e].
fn draw(
    c: &mut Ctx,
    (x, d, dt): (ValueId, DType, DType),
    [n, h, l, s, e, ev]: [usize; 6],
    width: usize,
    causal: bool,
) -> Result<Vec<ValueId>, IrError> {
    let mut v = if d == dt { x } else { c.fd.cast(x, dt)? };
    if ev != width {
        v = c.fd.pad(v, &[0, (ev - width) as i64], None)?;
    }
    if c.shape_of(v).len() != 4 {
        v = c.fd.reshape(v, &[n as i64, h as i64, s as i64, ev as i64])?;
    }
    // Batch dims of queries and keys: V's, or 1 where they broadcast.
    let batch = |c: &mut Ctx| -> Vec<usize> {
        [n, h].iter().map(|&b| if c.rng.chance(0.2) { 1 } else { b }).collect()
    };
    let (qb, kb) = (batch(c), batch(c));
    let q = c.input(&[qb[0], qb[1], l, e], dt)?;
    let k = c.input(&[kb[0], kb[1], s, e], dt)?;
    let dropout_p = c.rng.chance(0.3).then(|| c.fd.literal(Literal::Float(0.0)));
    let is_causal = (causal || c.rng.chance(0.3)).then(|| c.fd.literal(Literal::Bool(causal)));
    let scale = if c.rng.chance(0.5) {
        None
    } else {
        let sc = c.rng.pick(&[0.125, 1.0, 0.05]);
        Some(c.fd.literal(Literal::Float(sc)))
    };
    let op = Op::Gemm(GemmOp::SdpfaFwd { query: q, key: k, value: v, dropout_p, is_causal, scale });
    let outs = c.fd.op(op, &[])?;
    Ok(outs[..2].to_vec())
}
