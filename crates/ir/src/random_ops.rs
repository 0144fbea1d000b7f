//! Draws of the scans, the indexing and ordering ops and the random-number
//! ops, for [`super::STRUCTURED`]. Index operands are always in range: an
//! index tensor is either an input drawn by `randint` in `[0, extent)` (laid
//! out like any other input: dense, transposed or sliced), the `argsort` of
//! a tensor along the indexed dim, or an `iota` that fits; a scalar index is a
//! literal or a scalar input in range. An out-of-range index is undefined in
//! nvFuser (no check on the GPU), so it is never drawn.

use super::{numel, one, Ctx, MAX_ELEMENTS};
use crate::op_index::IndexOp;
use crate::recipe::InputRecipe;
use crate::{DType, IrError, Literal, Op, RngDist, ScanOp, ValueId};

type Drawn = Option<Result<Vec<ValueId>, IrError>>;

fn op(c: &mut Ctx, o: Op) -> Drawn {
    Some(c.fd.op(o, &[]))
}

/// A tensor operand of rank >= 1 that is not complex (the CPU reads indexing
/// and scan operands as real or integer values).
fn ranked(c: &mut Ctx) -> Option<(ValueId, Vec<usize>)> {
    let x = c.operand();
    let s = c.shape_of(x);
    if s.is_empty() || c.dtype_of(x).is_complex() {
        return None;
    }
    Some((x, s))
}

/// A dim of a tensor of rank `r`, sometimes written negative.
fn dim(c: &mut Ctx, r: usize) -> (usize, i64) {
    let d = c.rng.below(r);
    let w = if c.rng.chance(0.3) {
        d as i64 - r as i64
    } else {
        d as i64
    };
    (d, w)
}

fn int_lit(c: &mut Ctx, v: i64) -> ValueId {
    c.fd.literal(Literal::Int(v))
}

/// An Int scalar holding `v`: a literal, or now and then a scalar input.
fn int_scalar(c: &mut Ctx, v: i64) -> Result<ValueId, IrError> {
    if c.rng.chance(0.7) {
        return Ok(int_lit(c, v));
    }
    let s = c.fd.define_scalar(None, None, DType::Int);
    c.recipes.push(InputRecipe::Scalar {
        value: Literal::Int(v),
    });
    Ok(s)
}

pub(super) fn scan(c: &mut Ctx) -> Drawn {
    let (x, s) = ranked(c)?;
    let kind = c.rng.pick(ScanOp::ALL);
    let (_, d) = dim(c, s.len());
    let init = if c.rng.chance(0.3) {
        let k = if c.dtype_of(x).is_float() {
            DType::Double
        } else {
            DType::Int
        };
        let l = c.scalar(k);
        Some(c.fd.literal(l))
    } else {
        None
    };
    op(
        c,
        Op::Scan {
            kind,
            x,
            dim: d,
            init,
        },
    )
}

/// An index tensor for `x` (of shape `s`) along `d` of shape `is`: randint
/// in range, or (when `is` is `s`) the argsort of `x` along `d`.
fn index_for(
    c: &mut Ctx,
    x: ValueId,
    s: &[usize],
    d: usize,
    is: &[usize],
) -> Result<ValueId, IrError> {
    if is == s && s[d] <= 4096 && c.rng.chance(0.3) {
        let o = IndexOp::Argsort {
            x,
            dim: d as i64,
            descending: c.rng.chance(0.5),
            stable: c.rng.chance(0.5),
        };
        return Ok(c.fd.op(Op::Index(o), &[])?[0]);
    }
    let dt = c.rng.pick(&[DType::Int, DType::Int32]);
    c.index_input(is, dt, 0, s[d].max(1) as i64)
}

/// `gather` (index extents at most x's outside `dim`) and `take_along_axis`
/// (index extents x's or 1 outside `dim`, broadcasting both ways).
pub(super) fn gather(c: &mut Ctx) -> Drawn {
    let (x, s) = ranked(c)?;
    let (d, w) = dim(c, s.len());
    let take = c.rng.chance(0.5);
    let mut is = vec![];
    for (i, &e) in s.iter().enumerate() {
        is.push(if i == d {
            c.rng.pick(&[1, 2, 3, e, e + 2])
        } else if take {
            if e == 1 {
                c.rng.pick(&[1, 3])
            } else if c.rng.chance(0.3) {
                1
            } else {
                e
            }
        } else {
            1 + c.rng.below(e)
        });
    }
    if c.rng.chance(0.4) {
        is = s.clone();
    }
    if numel(&is) > MAX_ELEMENTS || numel(&is) * numel(&s) > 1 << 26 {
        return None;
    }
    let index = step!(index_for(c, x, &s, d, &is));
    let o = if take {
        IndexOp::TakeAlongAxis { x, index, dim: w }
    } else {
        IndexOp::Gather { x, index, dim: w }
    };
    op(c, Op::Index(o))
}

pub(super) fn select(c: &mut Ctx) -> Drawn {
    let (x, s) = ranked(c)?;
    let (d, w) = dim(c, s.len());
    let i = c.rng.below(s[d]) as i64;
    let index = step!(int_scalar(c, i));
    op(c, Op::Index(IndexOp::Select { x, index, dim: w }))
}

/// `index_select` with an `iota` as its index: `length` consecutive rows
/// from `start` (or a randint index, see `random::index_select`).
pub(super) fn index_select_iota(c: &mut Ctx) -> Drawn {
    let (x, s) = ranked(c)?;
    let (d, w) = dim(c, s.len());
    let len = 1 + c.rng.below(s[d]);
    let start = c.rng.below(s[d] - len + 1) as i64;
    let io = IndexOp::Iota {
        length: int_lit(c, len as i64),
        start: Some(int_lit(c, start)),
        step: Some(int_lit(c, 1)),
        dtype: c.rng.pick(&[DType::Int, DType::Int32]),
    };
    let index = step!(c.fd.op(Op::Index(io), &[]))[0];
    one(c.fd.index_select(x, index, w))
}

pub(super) fn scatter(c: &mut Ctx) -> Drawn {
    let (x, s) = ranked(c)?;
    let (d, w) = dim(c, s.len());
    let is: Vec<usize> = if c.rng.chance(0.3) {
        s.clone()
    } else {
        s.iter().map(|&e| 1 + c.rng.below(e)).collect()
    };
    let xd = c.dtype_of(x);
    let dt = c.rng.pick(&[DType::Int, DType::Int32]);
    let index = step!(c.index_input(&is, dt, 0, s[d] as i64));
    let src = match c.rng.below(10) {
        // A scalar written into every indexed position.
        0..=2 => {
            let k = if xd.is_float() {
                DType::Double
            } else if xd.is_bool() {
                DType::Bool
            } else {
                DType::Int
            };
            let l = c.scalar(k);
            c.fd.literal(l)
        }
        // A tensor of the index's shape, or one of x's (x itself among them).
        // (An Index tensor, such as welford's count, cannot be a script's input.)
        3..=5 if xd != DType::Index => step!(c.input(&is, xd)),
        _ => {
            let same: Vec<ValueId> = c
                .pool
                .iter()
                .copied()
                .filter(|&v| c.shape_of(v) == s && !c.dtype_of(v).is_complex())
                .collect();
            let y = c.rng.pick(&same);
            if c.dtype_of(y) == xd {
                y
            } else {
                step!(c.fd.cast(y, xd))
            }
        }
    };
    op(
        c,
        Op::Index(IndexOp::Scatter {
            x,
            index,
            src,
            dim: w,
        }),
    )
}

pub(super) fn index_put_accumulate(c: &mut Ctx) -> Drawn {
    let (x, s) = ranked(c)?;
    // The dtypes the GPU accumulates (others are refused there).
    let kinds = [
        DType::Float,
        DType::Double,
        DType::Half,
        DType::BFloat16,
        DType::Int32,
        DType::Int,
    ];
    let acc = if kinds.contains(&c.dtype_of(x)) {
        x
    } else {
        step!(c.fd.cast(x, c.rng.pick(&kinds)))
    };
    let ad = c.dtype_of(acc);
    let m = c.rng.pick(&[1, 2, 3, 5, 17]);
    let row = numel(&s[1..]);
    if m * row > MAX_ELEMENTS {
        return None;
    }
    let dt = c.rng.pick(&[DType::Int, DType::Int32]);
    let index = step!(c.index_input(&[m], dt, 0, s[0] as i64));
    let mut vs = vec![m];
    vs.extend(
        s[1..]
            .iter()
            .map(|&e| if c.rng.chance(0.2) { 1 } else { e }),
    );
    if c.rng.chance(0.2) {
        vs[0] = 1;
    }
    let value = step!(c.input(&vs, ad));
    op(
        c,
        Op::Index(IndexOp::IndexPutAccumulate { acc, index, value }),
    )
}

pub(super) fn topk(c: &mut Ctx) -> Drawn {
    let x = c.operand();
    let s = c.shape_of(x);
    let xd = c.dtype_of(x);
    if xd.is_complex() || xd.is_bool() {
        return None;
    }
    let (w, k) = if s.is_empty() {
        (c.rng.pick(&[0, -1]), 1)
    } else {
        let (d, w) = dim(c, s.len());
        let k = if c.rng.chance(0.2) {
            s[d]
        } else {
            1 + c.rng.below(s[d].min(8))
        };
        (w, k as i64)
    };
    let k = int_lit(c, k);
    let o = IndexOp::Topk {
        x,
        k,
        dim: w,
        largest: c.rng.chance(0.5),
        sorted: c.rng.chance(0.5),
    };
    op(c, Op::Index(o))
}

pub(super) fn argsort(c: &mut Ctx) -> Drawn {
    let x = c.operand();
    let s = c.shape_of(x);
    if c.dtype_of(x).is_complex() {
        return None;
    }
    let w = if s.is_empty() { 0 } else { dim(c, s.len()).1 };
    let o = IndexOp::Argsort {
        x,
        dim: w,
        descending: c.rng.chance(0.5),
        stable: c.rng.chance(0.5),
    };
    op(c, Op::Index(o))
}

pub(super) fn embedding(c: &mut Ctx) -> Drawn {
    let x = c.operand();
    let xs = c.shape_of(x);
    let xd = c.dtype_of(x);
    let weight = if xs.len() == 2 && xd.is_float() && !xd.is_complex() {
        x
    } else {
        let shape = [c.rng.pick(&[1, 3, 7, 17, 65]), c.rng.pick(&[1, 2, 5, 8, 33])];
        let d = c.rng.pick(&[DType::Float, DType::Half, DType::BFloat16, DType::Double]);
        step!(c.input(&shape, d))
    };
    let rows = c.shape_of(weight)[0];
    let is: Vec<usize> = if c.rng.chance(0.5) {
        vec![c.rng.pick(&[1, 3, 4, 17])]
    } else {
        vec![c.rng.pick(&[1, 2, 3]), c.rng.pick(&[1, 5, 8])]
    };
    let dt = c.rng.pick(&[DType::Int, DType::Int32]);
    let input = step!(c.index_input(&is, dt, 0, rows as i64));
    // padding_idx changes only the gradient; max_norm is not drawn (see bounds).
    let padding_idx = if c.rng.chance(0.3) {
        let p = c.rng.below(rows) as i64;
        Some(int_lit(c, p))
    } else {
        None
    };
    let o = IndexOp::EmbeddingFwd {
        input,
        weight,
        padding_idx,
        max_norm: None,
        norm_type: None,
        scale_grad_by_freq: None,
        sparse: None,
    };
    op(c, Op::Index(o))
}

pub(super) fn iota(c: &mut Ctx) -> Drawn {
    let n = c.rng.pick(&[1, 2, 5, 16, 33, 127]);
    let dtype = c.rng.pick(&[DType::Int, DType::Int32, DType::Float, DType::Double]);
    let length = int_lit(c, n);
    let (start, step) = if c.rng.chance(0.2) {
        (None, None)
    } else if dtype.is_float() {
        let a = c.rng.pick(&[0.0, 0.5, -1.5, 3.0]);
        let b = c.rng.pick(&[1.0, 0.25, -0.5, 3.0]);
        (
            Some(c.fd.literal(Literal::Float(a))),
            Some(c.fd.literal(Literal::Float(b))),
        )
    } else {
        let a = c.rng.pick(&[0, 1, -3, 7]);
        let b = c.rng.pick(&[1, 2, -1, 3]);
        (Some(int_lit(c, a)), Some(int_lit(c, b)))
    };
    let o = IndexOp::Iota {
        length,
        start,
        step,
        dtype,
    };
    op(c, Op::Index(o))
}

pub(super) fn triu(c: &mut Ctx) -> Drawn {
    let (x, s) = ranked(c)?;
    if s.len() < 2 {
        return None;
    }
    let diagonal = c.rng.pick(&[-2, -1, 0, 1, 2, 3]);
    op(c, Op::Index(IndexOp::Triu { x, diagonal }))
}

/// `uniform` / `normal` with rng_seed and rng_offset (literals or scalar
/// inputs), sometimes unseeded.
pub(super) fn rng(c: &mut Ctx) -> Drawn {
    let dist = c.rng.pick(RngDist::ALL);
    let dtype = c.rng.pick(&[DType::Float, DType::Double, DType::Half, DType::BFloat16]);
    let shape: Vec<i64> = if c.rng.chance(0.5) {
        let x = c.operand();
        c.shape_of(x)
    } else {
        c.shape(1 << 12)
    }
    .iter()
    .map(|&e| e as i64)
    .collect();
    let (a, b) = match dist {
        RngDist::Uniform => c.rng.pick(&[(0.0, 1.0), (-2.0, 3.0), (0.5, 0.75)]),
        RngDist::Normal => c.rng.pick(&[(0.0, 1.0), (1.5, 0.25), (-3.0, 2.0)]),
    };
    // A script defines a scalar input on a line of its own before the call
    // and writes the call's literals inline, in argument order: the values
    // are made in that order so that print -> parse gives the same fusion.
    let seeded = c.rng.chance(0.8);
    let sd = c.rng.pick(&[0, 1, 42, 1234567]);
    let of = c.rng.pick(&[0, 4, 17, 1 << 20]);
    let (sd_in, of_in) = (c.rng.chance(0.3), c.rng.chance(0.3));
    let scalar_in = |c: &mut Ctx, v: i64, yes: bool| {
        (seeded && yes).then(|| {
            let s = c.fd.define_scalar(None, None, DType::Int);
            c.recipes.push(InputRecipe::Scalar {
                value: Literal::Int(v),
            });
            s
        })
    };
    let sd_v = scalar_in(c, sd, sd_in);
    let of_v = scalar_in(c, of, of_in);
    let (a, b) = (
        c.fd.literal(Literal::Float(a)),
        c.fd.literal(Literal::Float(b)),
    );
    let (seed, offset) = if seeded {
        let s = sd_v.unwrap_or_else(|| int_lit(c, sd));
        let o = of_v.unwrap_or_else(|| int_lit(c, of));
        (Some(s), Some(o))
    } else {
        (None, None)
    };
    op(
        c,
        Op::Rng {
            dist,
            a,
            b,
            shape,
            seed,
            offset,
            dtype,
        },
    )
}

/// `rand_like` / `randn_like` of a floating-point operand (unseeded).
pub(super) fn rng_like(c: &mut Ctx) -> Drawn {
    let x = c.operand();
    let d = c.dtype_of(x);
    if !matches!(
        d,
        DType::Float | DType::Double | DType::Half | DType::BFloat16
    ) {
        return None;
    }
    let dist = c.rng.pick(RngDist::ALL);
    op(c, Op::RngLike { dist, x })
}
