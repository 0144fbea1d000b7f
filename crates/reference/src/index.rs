//! The indexing and ordering ops on the CPU. Values are read densely in
//! logical order as f64 (floats: exact for every float dtype) or i64
//! (integers and bools), moved or combined, and written back once, rounded to
//! the output dtype. Index values out of range are an error naming the op,
//! the index tensor and the position.
//!
//! topk/argsort follow PyTorch's rules (nvFuser evaluates them with ATen's
//! topk/argsort; the brief reports nvFuser 0.2.36 crashing on them on our GPU
//! machine, so ties and NaN follow PyTorch, not a recorded nvFuser run; the
//! golden cases recorded later on distinct values match): NaN orders above
//! every number (last ascending, first descending, chosen first by topk
//! largest=True), equal values keep their original order (a stable sort,
//! also a valid answer when stable=False), and topk returns its k elements
//! sorted even when sorted=False (PyTorch leaves that order unspecified).

use crate::tensor::Tensor;
use crate::ExecError;
use fusebench_ir::infer::norm_dim;
use fusebench_ir::{DType, IndexOp, Literal, Value, ValueId};
use std::cmp::Ordering;

/// Dense values in logical order.
enum Data {
    F(Vec<f64>),
    I(Vec<i64>),
}

impl Data {
    fn of(t: &Tensor) -> Data {
        if t.dtype().is_float() {
            Data::F(t.to_f64_vec())
        } else {
            Data::I(t.to_i64_vec())
        }
    }

    fn tensor(self, dtype: DType, shape: &[usize]) -> Result<Tensor, ExecError> {
        match self {
            Data::F(v) => Tensor::from_f64s(dtype, shape, &v),
            Data::I(v) => Tensor::from_i64s(dtype, shape, &v),
        }
    }

    /// `out[o] = self[src[o]]` for each output position.
    fn pick(&self, src: &[usize]) -> Data {
        match self {
            Data::F(v) => Data::F(src.iter().map(|&i| v[i]).collect()),
            Data::I(v) => Data::I(src.iter().map(|&i| v[i]).collect()),
        }
    }
}

/// Row-major strides of a dense tensor of `shape`.
fn dense(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * shape[d + 1];
    }
    st
}

/// Every multi-index of `shape` in row-major order.
fn positions(shape: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    let n: usize = shape.iter().product();
    let st = dense(shape);
    (0..n).map(move |p| {
        st.iter()
            .zip(shape)
            .map(|(&s, &e)| (p / s) % e.max(1))
            .collect()
    })
}

fn linear(idx: &[usize], st: &[usize]) -> usize {
    idx.iter().zip(st).map(|(i, s)| i * s).sum()
}

/// What an op reads from the fusion while it runs.
pub(crate) struct Ctx<'a> {
    pub tensor: &'a dyn Fn(ValueId) -> Tensor,
    pub scalar: &'a dyn Fn(ValueId) -> Literal,
    pub value: &'a dyn Fn(ValueId) -> &'a Value,
    /// The op's output values.
    pub outs: Vec<&'a Value>,
}

impl Ctx<'_> {
    fn err(&self, op: &IndexOp, message: String) -> ExecError {
        ExecError::Op {
            op: op.name().into(),
            value: self.outs[0].name.clone(),
            message,
        }
    }

    /// Checks index value `v` (read at `pos` of `index`) against `[0, bound)`.
    fn check(
        &self,
        op: &IndexOp,
        index: ValueId,
        pos: usize,
        v: i64,
        bound: usize,
    ) -> Result<usize, ExecError> {
        if v < 0 || v as u64 >= bound as u64 {
            return Err(self.err(
                op,
                format!(
                    "index {} holds {v} at position {pos}, outside [0, {bound})",
                    (self.value)(index).name
                ),
            ));
        }
        Ok(v as usize)
    }

    fn shape(&self, k: usize) -> Vec<usize> {
        self.outs[k].shape.clone().unwrap_or_default()
    }
}

pub(crate) fn exec(op: &IndexOp, cx: &Ctx) -> Result<Vec<Tensor>, ExecError> {
    let name = op.name();
    let ir = ExecError::Ir;
    let out_shape = cx.shape(0);
    let out_dtype = cx.outs[0].dtype;
    let t = match op {
        IndexOp::Iota { start, step, .. } => {
            let n = out_shape[0];
            let get = |v: &Option<ValueId>, d: i64| v.map_or(Literal::Int(d), |v| (cx.scalar)(v));
            let (a, s) = (get(start, 0), get(step, 1));
            if out_dtype.is_float() {
                let (a, s) = (a.as_f64(), s.as_f64());
                Data::F((0..n).map(|i| a + i as f64 * s).collect())
            } else {
                let (a, s) = (a.as_i64().unwrap_or(0), s.as_i64().unwrap_or(0));
                Data::I(
                    (0..n)
                        .map(|i| a.wrapping_add((i as i64).wrapping_mul(s)))
                        .collect(),
                )
            }
            .tensor(out_dtype, &out_shape)?
        }
        IndexOp::Triu { x, diagonal } => {
            let t = (cx.tensor)(*x);
            let r = out_shape.len();
            let keep: Vec<bool> = positions(&out_shape)
                .map(|p| p[r - 1] as i64 - p[r - 2] as i64 >= *diagonal)
                .collect();
            match Data::of(&t) {
                Data::F(v) => Data::F(
                    v.iter()
                        .zip(&keep)
                        .map(|(&x, &k)| if k { x } else { 0.0 })
                        .collect(),
                ),
                Data::I(v) => Data::I(
                    v.iter()
                        .zip(&keep)
                        .map(|(&x, &k)| if k { x } else { 0 })
                        .collect(),
                ),
            }
            .tensor(out_dtype, &out_shape)?
        }
        IndexOp::TakeAlongAxis { x, index, dim } | IndexOp::Gather { x, index, dim } => {
            let t = (cx.tensor)(*x);
            let it = (cx.tensor)(*index);
            let (xs, is) = (t.shape().to_vec(), it.shape().to_vec());
            let d = norm_dim(name, *dim, xs.len()).map_err(ir)?;
            let (xst, ist) = (dense(&xs), dense(&is));
            let iv = it.to_i64_vec();
            let mut src = Vec::with_capacity(out_shape.iter().product());
            for p in positions(&out_shape) {
                // take_along_axis broadcasts extent-1 dims of either operand.
                let ip: Vec<usize> = p
                    .iter()
                    .zip(&is)
                    .map(|(&q, &e)| if e == 1 { 0 } else { q })
                    .collect();
                let ipos = linear(&ip, &ist);
                let mut xp: Vec<usize> = p
                    .iter()
                    .zip(&xs)
                    .map(|(&q, &e)| if e == 1 { 0 } else { q })
                    .collect();
                xp[d] = cx.check(op, *index, ipos, iv[ipos], xs[d])?;
                src.push(linear(&xp, &xst));
            }
            Data::of(&t).pick(&src).tensor(out_dtype, &out_shape)?
        }
        IndexOp::Select { x, index, dim } => {
            let t = (cx.tensor)(*x);
            let xs = t.shape().to_vec();
            let d = norm_dim(name, *dim, xs.len()).map_err(ir)?;
            let i = (cx.scalar)(*index).as_i64().unwrap_or(-1);
            let i = cx.check(op, *index, 0, i, xs[d])?;
            let xst = dense(&xs);
            let src: Vec<usize> = positions(&out_shape)
                .map(|mut p| {
                    p.insert(d, i);
                    linear(&p, &xst)
                })
                .collect();
            Data::of(&t).pick(&src).tensor(out_dtype, &out_shape)?
        }
        IndexOp::Scatter { x, index, src, dim } => {
            let t = (cx.tensor)(*x);
            let it = (cx.tensor)(*index);
            let xs = t.shape().to_vec();
            let d = norm_dim(name, *dim, xs.len()).map_err(ir)?;
            let (xst, iv) = (dense(&xs), it.to_i64_vec());
            let sv = (cx.value)(*src);
            let s = sv.shape.as_ref().map(|_| (cx.tensor)(*src));
            let mut out = Data::of(&t);
            // Row-major order of the index: a later duplicate overwrites an earlier one.
            for (ipos, p) in positions(it.shape()).enumerate() {
                let mut tp = p.clone();
                tp[d] = cx.check(op, *index, ipos, iv[ipos], xs[d])?;
                let at = linear(&tp, &xst);
                let value = match &s {
                    Some(s) if out_dtype.is_float() => Literal::Float(s.get_f64(&p)),
                    Some(s) => Literal::Int(s.get_i64(&p)),
                    None => (cx.scalar)(*src).cast(out_dtype),
                };
                match &mut out {
                    Data::F(v) => v[at] = value.as_f64(),
                    Data::I(v) => v[at] = value.as_i64().unwrap_or(0),
                }
            }
            out.tensor(out_dtype, &out_shape)?
        }
        IndexOp::IndexPutAccumulate { acc, index, value } => {
            let t = (cx.tensor)(*acc);
            let it = (cx.tensor)(*index);
            let vt = (cx.tensor)(*value);
            let xs = t.shape().to_vec();
            let n = it.shape()[0];
            let want: Vec<usize> = std::iter::once(n).chain(xs[1..].iter().copied()).collect();
            let vt = vt.broadcast_to(&want);
            let row: usize = xs[1..].iter().product();
            let iv = it.to_i64_vec();
            // at::index_put accepts negative indices, counted from the end.
            let rows: Vec<usize> = iv
                .iter()
                .enumerate()
                .map(|(p, &i)| {
                    let w = if i < 0 { i + xs[0] as i64 } else { i };
                    cx.check(op, *index, p, w, xs[0]).map_err(|_| {
                        cx.err(
                            op,
                            format!(
                                "index {} holds {i} at position {p}, outside [-{n0}, {n0})",
                                (cx.value)(*index).name,
                                n0 = xs[0]
                            ),
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
            match (Data::of(&t), Data::of(&vt)) {
                (Data::F(mut o), Data::F(v)) => {
                    // Summed in f64 and rounded once.
                    for (k, &r) in rows.iter().enumerate() {
                        for j in 0..row {
                            o[r * row + j] += v[k * row + j];
                        }
                    }
                    Data::F(o)
                }
                (Data::I(mut o), Data::I(v)) => {
                    for (k, &r) in rows.iter().enumerate() {
                        for j in 0..row {
                            o[r * row + j] = o[r * row + j].wrapping_add(v[k * row + j]);
                        }
                    }
                    Data::I(o)
                }
                _ => return Err(cx.err(op, "acc and value differ in kind".into())),
            }
            .tensor(out_dtype, &out_shape)?
        }
        IndexOp::Topk {
            x, dim, largest, ..
        } => {
            let t = (cx.tensor)(*x);
            let (order, d) = sort_rows(&t, *dim, *largest).map_err(ir)?;
            let xs = t.shape().to_vec();
            let kk = if xs.is_empty() { 1 } else { out_shape[d] };
            let (vals, idxs) = take_sorted(&t, &order, &xs, d, kk);
            return Ok(vec![
                vals.tensor(out_dtype, &out_shape)?,
                Data::I(idxs).tensor(cx.outs[1].dtype, &cx.shape(1))?,
            ]);
        }
        IndexOp::Argsort {
            x, dim, descending, ..
        } => {
            let t = (cx.tensor)(*x);
            let xs = t.shape().to_vec();
            let (order, d) = sort_rows(&t, *dim, *descending).map_err(ir)?;
            let n = if xs.is_empty() { 1 } else { xs[d] };
            let (_, idxs) = take_sorted(&t, &order, &xs, d, n);
            Data::I(idxs).tensor(out_dtype, &out_shape)?
        }
        IndexOp::EmbeddingFwd {
            input,
            weight,
            max_norm,
            norm_type,
            ..
        } => {
            let w = (cx.tensor)(*weight);
            let it = (cx.tensor)(*input);
            let (rows, cols) = (w.shape()[0], w.shape()[1]);
            let iv = it.to_i64_vec();
            let wv = w.to_f64_vec();
            let max_norm = max_norm.map(|v| (cx.scalar)(v).as_f64());
            let p = norm_type.map_or(2.0, |v| (cx.scalar)(v).as_f64());
            let mut out = Vec::with_capacity(iv.len() * cols);
            for (pos, &i) in iv.iter().enumerate() {
                let r = cx.check(op, *input, pos, i, rows)?;
                let row = &wv[r * cols..(r + 1) * cols];
                // torch.embedding_renorm_: rows whose norm exceeds max_norm are
                // scaled by max_norm / (norm + 1e-7). (PyTorch also rewrites the
                // weight in place; the fusion's weight input is left as given.)
                let scale = match max_norm {
                    Some(m) => {
                        let n = p_norm(row, p);
                        if n > m {
                            m / (n + 1e-7)
                        } else {
                            1.0
                        }
                    }
                    None => 1.0,
                };
                out.extend(
                    row.iter()
                        .map(|&x| if scale == 1.0 { x } else { x * scale }),
                );
            }
            Data::F(out).tensor(out_dtype, &out_shape)?
        }
    };
    Ok(vec![t])
}

/// The p-norm of a row as torch.norm computes it (p = inf: largest magnitude,
/// p = 0: count of nonzeros).
pub(crate) fn p_norm(row: &[f64], p: f64) -> f64 {
    if p == f64::INFINITY {
        row.iter().fold(0.0, |m, x| m.max(x.abs()))
    } else if p == 0.0 {
        row.iter().filter(|x| **x != 0.0).count() as f64
    } else if p == 1.0 {
        row.iter().map(|x| x.abs()).sum()
    } else if p == 2.0 {
        row.iter().map(|x| x * x).sum::<f64>().sqrt()
    } else {
        row.iter()
            .map(|x| x.abs().powf(p))
            .sum::<f64>()
            .powf(1.0 / p)
    }
}

/// PyTorch's order of two values: NaN above everything, then numbers.
fn cmp_f(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// For every row along `dim` (rows in row-major order of the other dims),
/// the positions along `dim` in sorted order: descending when `desc`,
/// equal values by position.
fn sort_rows(
    t: &Tensor,
    dim: i64,
    desc: bool,
) -> Result<(Vec<Vec<usize>>, usize), fusebench_ir::IrError> {
    let xs = t.shape().to_vec();
    if xs.is_empty() {
        return Ok((vec![vec![0]], 0));
    }
    let d = norm_dim("sort", dim, xs.len())?;
    let n = xs[d];
    let inner: usize = xs[d + 1..].iter().product();
    let outer: usize = xs[..d].iter().product();
    let data = Data::of(t);
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let mut ord: Vec<usize> = (0..n).collect();
            ord.sort_by(|&a, &b| {
                let c = match &data {
                    Data::F(v) => cmp_f(v[at(a)], v[at(b)]),
                    Data::I(v) => v[at(a)].cmp(&v[at(b)]),
                };
                (if desc { c.reverse() } else { c }).then(a.cmp(&b))
            });
            out.push(ord);
        }
    }
    Ok((out, d))
}

/// The first `k` of each sorted row: values and positions, laid out with
/// extent `k` along `d`.
fn take_sorted(
    t: &Tensor,
    order: &[Vec<usize>],
    xs: &[usize],
    d: usize,
    k: usize,
) -> (Data, Vec<i64>) {
    if xs.is_empty() {
        return (Data::of(t), vec![0]);
    }
    let n = xs[d];
    let inner: usize = xs[d + 1..].iter().product();
    let outer: usize = xs[..d].iter().product();
    let mut src = vec![0usize; outer * k * inner];
    let mut idx = vec![0i64; outer * k * inner];
    for o in 0..outer {
        for i in 0..inner {
            let ord = &order[o * inner + i];
            for (j, &from) in ord[..k].iter().enumerate() {
                let at = (o * k + j) * inner + i;
                src[at] = (o * n + from) * inner + i;
                idx[at] = from as i64;
            }
        }
    }
    (Data::of(t).pick(&src), idx)
}
