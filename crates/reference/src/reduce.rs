//! Reductions (sum, max, min, welford, var_mean) over a stored tensor or a
//! pointwise expression, accumulated in f64 (integers in i64) and rounded to
//! the output dtype once.
//!
//! The input is walked in one of two orders. When the innermost dim is
//! reduced ("inner" form) the kept dims go outermost and each output
//! accumulates a contiguous run of the walk. Otherwise ("outer" form) the
//! reduced dims go outermost and each step of the walk adds a row into a
//! vector of accumulators. Work is split into tasks whose bounds depend only
//! on the shapes, and partial results are merged in a fixed order, so results
//! do not depend on the number of threads.

use crate::expr::{wrap_int, Operand, Program, Scratch, TileRef};
use crate::tensor::{with_dtype, Elem, Tensor};
use fusebench_ir::scalar::round_to;
use fusebench_ir::{DType, ReduceOp};
use rayon::prelude::*;

/// Elements of input per task.
const GRAIN: usize = 1 << 16;
/// Reduced extents at least this long are split across tasks.
const SPLIT: usize = 1 << 20;

struct Plan {
    prog: Program,
    inner: bool,
    /// Number of outputs (product of kept extents).
    m: usize,
    /// Number of elements reduced into each output.
    lr: usize,
}

fn plan(x: &Operand, shape: &[usize], dims: &[usize], dtype: Option<DType>) -> Plan {
    let rank = shape.len();
    let kept: Vec<usize> = (0..rank).filter(|d| !dims.contains(d)).collect();
    let inner = rank > 0 && dims.contains(&(rank - 1));
    let mut prog = Program::compile(x, shape, dtype);
    let (first, second) = if inner {
        (&kept[..], dims)
    } else {
        (dims, &kept[..])
    };
    let perm: Vec<usize> = first.iter().chain(second).copied().collect();
    prog.permute(&perm);
    prog.coalesce(&[0..first.len(), first.len()..rank]);
    let m = kept.iter().map(|&d| shape[d]).product();
    let lr = dims.iter().map(|&d| shape[d]).product();
    Plan { prog, inner, m, lr }
}

trait Acc: Sync {
    type V: Copy + Send + Sync + PartialEq + std::fmt::Debug;
    fn init(&self) -> Self::V;
    fn fold(&self, acc: Self::V, x: Self::V, out: usize) -> Self::V;
    #[inline]
    fn fold_slice(&self, acc: Self::V, xs: &[Self::V], out: usize) -> Self::V {
        xs.iter().fold(acc, |a, &x| self.fold(a, x, out))
    }
    fn merge(&self, a: Self::V, b: Self::V) -> Self::V;
    fn lanes<'a>(&self, t: TileRef<'a>) -> &'a [Self::V];
}

fn f_lanes(t: TileRef<'_>) -> &[f64] {
    match t {
        TileRef::F(v) => v,
        TileRef::I(_) => unreachable!("reduction over float lanes got integer lanes"),
    }
}

fn i_lanes(t: TileRef<'_>) -> &[i64] {
    match t {
        TileRef::I(v) => v,
        TileRef::F(_) => unreachable!("reduction over integer lanes got float lanes"),
    }
}

struct SumF;
impl Acc for SumF {
    type V = f64;
    fn init(&self) -> f64 {
        0.0
    }
    #[inline(always)]
    fn fold(&self, a: f64, x: f64, _: usize) -> f64 {
        a + x
    }
    #[inline]
    fn fold_slice(&self, acc: f64, xs: &[f64], _: usize) -> f64 {
        let mut s = [0.0f64; 4];
        let mut chunks = xs.chunks_exact(4);
        for c in &mut chunks {
            s[0] += c[0];
            s[1] += c[1];
            s[2] += c[2];
            s[3] += c[3];
        }
        let mut tail = 0.0;
        for &x in chunks.remainder() {
            tail += x;
        }
        acc + ((s[0] + s[1]) + (s[2] + s[3]) + tail)
    }
    fn merge(&self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn lanes<'a>(&self, t: TileRef<'a>) -> &'a [f64] {
        f_lanes(t)
    }
}

#[inline(always)]
fn nan_max(a: f64, x: f64) -> f64 {
    if a.is_nan() || x.is_nan() {
        f64::NAN
    } else if x > a {
        x
    } else {
        a
    }
}

#[inline(always)]
fn nan_min(a: f64, x: f64) -> f64 {
    if a.is_nan() || x.is_nan() {
        f64::NAN
    } else if x < a {
        x
    } else {
        a
    }
}

struct MaxF;
impl Acc for MaxF {
    type V = f64;
    fn init(&self) -> f64 {
        f64::NEG_INFINITY
    }
    #[inline(always)]
    fn fold(&self, a: f64, x: f64, _: usize) -> f64 {
        nan_max(a, x)
    }
    fn merge(&self, a: f64, b: f64) -> f64 {
        nan_max(a, b)
    }
    fn lanes<'a>(&self, t: TileRef<'a>) -> &'a [f64] {
        f_lanes(t)
    }
}

struct MinF;
impl Acc for MinF {
    type V = f64;
    fn init(&self) -> f64 {
        f64::INFINITY
    }
    #[inline(always)]
    fn fold(&self, a: f64, x: f64, _: usize) -> f64 {
        nan_min(a, x)
    }
    fn merge(&self, a: f64, b: f64) -> f64 {
        nan_min(a, b)
    }
    fn lanes<'a>(&self, t: TileRef<'a>) -> &'a [f64] {
        f_lanes(t)
    }
}

/// Products in f64: exact for short runs of f32/bf16 values, and far past
/// f32's range before it overflows or flushes.
struct ProdF;
impl Acc for ProdF {
    type V = f64;
    fn init(&self) -> f64 {
        1.0
    }
    #[inline(always)]
    fn fold(&self, a: f64, x: f64, _: usize) -> f64 {
        a * x
    }
    fn merge(&self, a: f64, b: f64) -> f64 {
        a * b
    }
    fn lanes<'a>(&self, t: TileRef<'a>) -> &'a [f64] {
        f_lanes(t)
    }
}

/// Sum of squared deviations from a per-output mean.
struct SqDev<'a> {
    mean: &'a [f64],
}
impl Acc for SqDev<'_> {
    type V = f64;
    fn init(&self) -> f64 {
        0.0
    }
    #[inline(always)]
    fn fold(&self, a: f64, x: f64, out: usize) -> f64 {
        let d = x - self.mean[out];
        a + d * d
    }
    #[inline]
    fn fold_slice(&self, acc: f64, xs: &[f64], out: usize) -> f64 {
        let m = self.mean[out];
        let mut s = [0.0f64; 4];
        let mut chunks = xs.chunks_exact(4);
        for c in &mut chunks {
            for k in 0..4 {
                let d = c[k] - m;
                s[k] += d * d;
            }
        }
        let mut tail = 0.0;
        for &x in chunks.remainder() {
            tail += (x - m) * (x - m);
        }
        acc + ((s[0] + s[1]) + (s[2] + s[3]) + tail)
    }
    fn merge(&self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn lanes<'b>(&self, t: TileRef<'b>) -> &'b [f64] {
        f_lanes(t)
    }
}

struct IntAcc(ReduceOp);
impl Acc for IntAcc {
    type V = i64;
    fn init(&self) -> i64 {
        match self.0 {
            ReduceOp::Sum => 0,
            ReduceOp::Max => i64::MIN,
            ReduceOp::Min => i64::MAX,
            ReduceOp::Prod => 1,
        }
    }
    #[inline(always)]
    fn fold(&self, a: i64, x: i64, _: usize) -> i64 {
        match self.0 {
            ReduceOp::Sum => a.wrapping_add(x),
            ReduceOp::Max => a.max(x),
            ReduceOp::Min => a.min(x),
            ReduceOp::Prod => a.wrapping_mul(x),
        }
    }
    fn merge(&self, a: i64, b: i64) -> i64 {
        self.fold(a, b, 0)
    }
    fn lanes<'a>(&self, t: TileRef<'a>) -> &'a [i64] {
        i_lanes(t)
    }
}

fn run<A: Acc>(p: &Plan, a: &A) -> Vec<A::V> {
    if p.m == 0 {
        return vec![];
    }
    if p.lr == 0 {
        return vec![a.init(); p.m];
    }
    if p.inner {
        run_inner(p, a)
    } else {
        run_outer(p, a)
    }
}

/// Folds the walk's elements `[start, end)`, which all belong to output `o`.
fn fold_range<A: Acc>(
    p: &Plan,
    a: &A,
    o: usize,
    start: usize,
    end: usize,
    s: &mut Scratch,
) -> A::V {
    let mut acc = a.init();
    p.prog
        .for_each_tile(start, end, s, |_, t| acc = a.fold_slice(acc, a.lanes(t), o));
    acc
}

fn run_inner<A: Acc>(p: &Plan, a: &A) -> Vec<A::V> {
    let (m, lr) = (p.m, p.lr);
    if lr >= SPLIT {
        // Few long rows: split each row, then merge the pieces in order.
        let rc = (SPLIT / 4).max(lr.div_ceil(64));
        let nc = lr.div_ceil(rc);
        let parts: Vec<A::V> = (0..m * nc)
            .into_par_iter()
            .map_init(Scratch::default, |s, t| {
                let (o, c) = (t / nc, t % nc);
                let r0 = c * rc;
                let r1 = (r0 + rc).min(lr);
                fold_range(p, a, o, o * lr + r0, o * lr + r1, s)
            })
            .collect();
        return parts
            .chunks(nc)
            .map(|c| c.iter().fold(a.init(), |x, &y| a.merge(x, y)))
            .collect();
    }
    let mut out = vec![a.init(); m];
    let per_task = (GRAIN / lr).max(1);
    out.par_chunks_mut(per_task)
        .enumerate()
        .for_each_init(Scratch::default, |s, (ti, block)| {
            let o0 = ti * per_task;
            let (mut o, mut rem, mut acc) = (o0, lr, a.init());
            p.prog
                .for_each_tile(o0 * lr, (o0 + block.len()) * lr, s, |_, t| {
                    let xs = a.lanes(t);
                    let mut pos = 0;
                    while pos < xs.len() {
                        let n = rem.min(xs.len() - pos);
                        acc = a.fold_slice(acc, &xs[pos..pos + n], o);
                        pos += n;
                        rem -= n;
                        if rem == 0 {
                            block[o - o0] = acc;
                            o += 1;
                            rem = lr;
                            acc = a.init();
                        }
                    }
                });
        });
    out
}

fn run_outer<A: Acc>(p: &Plan, a: &A) -> Vec<A::V> {
    let (lr, m) = (p.lr, p.m);
    let kc = if m <= 8192 { m } else { 4096 };
    let nk = m.div_ceil(kc);
    let rc = ((4 * GRAIN) / kc).max(1).max(lr.div_ceil(64));
    let nr = lr.div_ceil(rc);
    let parts: Vec<Vec<A::V>> = (0..nr * nk)
        .into_par_iter()
        .map_init(Scratch::default, |s, t| {
            let (ri, ki) = (t / nk, t % nk);
            let k0 = ki * kc;
            let klen = kc.min(m - k0);
            let (r0, r1) = (ri * rc, ((ri + 1) * rc).min(lr));
            let mut local = vec![a.init(); klen];
            let mut add = |start: usize, end: usize, s: &mut Scratch| {
                let mut k = 0;
                p.prog.for_each_tile(start, end, s, |_, t| {
                    let xs = a.lanes(t);
                    let mut pos = 0;
                    while pos < xs.len() {
                        let n = (klen - k).min(xs.len() - pos);
                        for (j, (l, &x)) in local[k..k + n]
                            .iter_mut()
                            .zip(&xs[pos..pos + n])
                            .enumerate()
                        {
                            *l = a.fold(*l, x, k0 + k + j);
                        }
                        pos += n;
                        k += n;
                        if k == klen {
                            k = 0;
                        }
                    }
                });
            };
            if klen == m {
                add(r0 * m, r1 * m, s);
            } else {
                for r in r0..r1 {
                    add(r * m + k0, r * m + k0 + klen, s);
                }
            }
            local
        })
        .collect();
    let mut out = vec![a.init(); m];
    for (t, part) in parts.iter().enumerate() {
        let k0 = (t % nk) * kc;
        for (o, &v) in out[k0..k0 + part.len()].iter_mut().zip(part) {
            *o = a.merge(*o, v);
        }
    }
    out
}

/// Dense tensor of `shape` from f64 results, each rounded to `dtype`.
pub(crate) fn tensor_from_f64(dtype: DType, shape: &[usize], v: &[f64]) -> Tensor {
    let buf = with_dtype!(dtype, T => {
        T::wrap(v.par_iter().map(|&x| if T::FLOAT { T::from_f64(round_to(x, dtype)) } else { T::from_i64(x as i64) }).collect())
    });
    Tensor::from_buffer(dtype, shape.to_vec(), buf).expect("sizes agree")
}

fn tensor_from_i64(dtype: DType, shape: &[usize], v: &[i64]) -> Tensor {
    let buf = with_dtype!(dtype, T => {
        T::wrap(v.par_iter().map(|&x| if T::FLOAT { T::from_f64(round_to(x as f64, dtype)) } else { T::from_i64(wrap_int(x, dtype)) }).collect())
    });
    Tensor::from_buffer(dtype, shape.to_vec(), buf).expect("sizes agree")
}

/// sum / max / min of `x` (of logical `shape`) over the normalized `dims`;
/// the input is first converted to `out_dtype`.
pub(crate) fn reduce(
    x: &Operand,
    shape: &[usize],
    dims: &[usize],
    kind: ReduceOp,
    out_dtype: DType,
    out_shape: &[usize],
) -> Tensor {
    let p = plan(x, shape, dims, Some(out_dtype));
    if out_dtype.is_float() {
        let v = match kind {
            ReduceOp::Sum => run(&p, &SumF),
            ReduceOp::Max => run(&p, &MaxF),
            ReduceOp::Min => run(&p, &MinF),
            ReduceOp::Prod => run(&p, &ProdF),
        };
        tensor_from_f64(out_dtype, out_shape, &v)
    } else {
        let v = run(&p, &IntAcc(kind));
        tensor_from_i64(out_dtype, out_shape, &v)
    }
}

/// Per output: mean and sum of squared deviations from it (in f64), and the
/// number of elements reduced. Two passes, both in f64.
pub(crate) fn moments(x: &Operand, shape: &[usize], dims: &[usize]) -> (Vec<f64>, Vec<f64>, usize) {
    let p = plan(x, shape, dims, Some(DType::Double));
    let n = p.lr;
    let sums = run(&p, &SumF);
    let mean: Vec<f64> = sums.iter().map(|&s| s / n as f64).collect();
    let m2 = run(&p, &SqDev { mean: &mean });
    (mean, m2, n)
}

/// nvFuser's welford on an integer tensor (runtime/welford.cu's
/// welfordCombine with T an integer): each merge adds `delta * (b_N / ab_N)`
/// to the mean in integer division, which is 1 only when merging into the
/// empty accumulator and 0 after, and M2 gains `delta^2 * a_N * 0`. So the
/// mean is the first element along the reduced dims and M2 is 0. Returns
/// that mean (a view of `x`, materialized; 0 over an empty extent) and the element count.
pub(crate) fn int_welford_mean(x: &Tensor, dims: &[usize]) -> (Tensor, usize) {
    let keep: Vec<usize> = (0..x.rank()).filter(|i| !dims.contains(i)).collect();
    let n = dims.iter().map(|&d| x.shape()[d]).product();
    let shape: Vec<usize> = keep.iter().map(|&i| x.shape()[i]).collect();
    // Over an empty extent nothing is merged: the accumulator's initial mean, 0
    // (a "first element" view would read past the empty input).
    if n == 0 {
        let zero = Tensor::full(x.dtype(), &shape, fusebench_ir::Literal::Int(0));
        return (zero.to_contiguous(), 0);
    }
    let first = x.with_layout(
        keep.iter().map(|&i| x.shape()[i]).collect(),
        keep.iter().map(|&i| x.strides()[i]).collect(),
        x.offset(),
    );
    (first.to_contiguous(), n)
}
