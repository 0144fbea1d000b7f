//! Shape and dtype inference with nvFuser's rules: every op's output type is
//! derived from its operands here, and nowhere else.

mod broadcast;
mod index;

use crate::dtype::promote_types;
use crate::op::{Op, ReduceOp};
use crate::elementwise::typing;
use crate::scalar::{fold_binary, fold_ternary, fold_unary};
use crate::{DType, IrError, Literal, Node, Value, ValueDef, ValueId};

/// The type of one op output.
#[derive(Clone, Debug, PartialEq)]
pub struct OutType {
    pub dtype: DType,
    pub shape: Option<Vec<usize>>,
    pub constant: Option<Literal>,
}

impl OutType {
    pub(crate) fn tensor(dtype: DType, shape: Vec<usize>) -> Self {
        OutType {
            dtype,
            shape: Some(shape),
            constant: None,
        }
    }
}

/// What inference may look at: the values and nodes defined so far.
pub struct Graph<'a> {
    pub values: &'a [Value],
    pub nodes: &'a [Node],
}

impl Graph<'_> {
    pub(crate) fn get(&self, op: &str, v: ValueId) -> Result<&Value, IrError> {
        self.values
            .get(v.index())
            .ok_or_else(|| IrError::op(op, format!("refers to value {} which is not defined", v.0)))
    }
}

/// nvFuser's `computeTypes`: PyTorch's result-type rules where tensors of rank
/// > 0 outrank 0-dim tensors, which outrank scalars within a category, and a
/// > Half/BFloat16 scalar counts as Float.
pub fn common_dtype(operands: &[&Value], promote_int_to_float: bool, half_to_float: bool) -> DType {
    let first = operands[0].dtype;
    let mut common = if operands.iter().all(|v| v.dtype == first) {
        first
    } else {
        let (mut dim, mut zero, mut wrapped): (Option<DType>, Option<DType>, Option<DType>) =
            (None, None, None);
        let join = |acc: Option<DType>, d: DType| Some(acc.map_or(d, |a| promote_types(a, d)));
        for v in operands {
            match &v.shape {
                Some(s) if !s.is_empty() => dim = join(dim, v.dtype),
                Some(_) => zero = join(zero, v.dtype),
                None => {
                    let d = if v.dtype.is_reduced_float() {
                        DType::Float
                    } else {
                        v.dtype
                    };
                    wrapped = join(wrapped, d)
                }
            }
        }
        combine(dim, combine(zero, wrapped)).expect("at least one operand")
    };
    if promote_int_to_float && (common.is_integral() || common.is_bool()) {
        common = DType::Float;
    }
    if half_to_float && common.is_reduced_float() {
        common = DType::Float;
    }
    common
}

/// PyTorch's `combine_categories`: the higher-priority kind wins unless the
/// lower one is of a higher category (bool < integer < float).
fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) => {
            if h.is_complex() || l.is_complex() {
                // The complex one wins; a floating higher keeps its precision.
                Some(if h.is_float() { l.complex_part().and_then(|_| h.complex_of()).unwrap_or(l) } else if h.is_complex() { h } else { l })
            } else if h.is_float() {
                Some(h)
            } else if h.is_bool() || l.category() > h.category() {
                Some(promote_types(h, l))
            } else {
                Some(h)
            }
        }
    }
}

/// Numpy-style broadcast of extents, aligned on the right; extent-1 dims stretch.
pub fn broadcast_shapes(op: &str, shapes: &[&[usize]]) -> Result<Vec<usize>, IrError> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &e) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = e;
            } else if e != 1 && e != *o {
                return Err(IrError::op(
                    op,
                    format!(
                        "operand shapes {:?} cannot be broadcast together (dim {} is {} vs {})",
                        shapes,
                        off + i,
                        *o,
                        e
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Shape of an elementwise result: the broadcast of its tensor operands, or
/// `None` (a scalar) when every operand is a scalar.
pub fn elementwise_shape(op: &str, operands: &[&Value]) -> Result<Option<Vec<usize>>, IrError> {
    let shapes: Vec<&[usize]> = operands.iter().filter_map(|v| v.shape.as_deref()).collect();
    if shapes.is_empty() {
        return Ok(None);
    }
    broadcast_shapes(op, &shapes).map(Some)
}

/// Number of elements, if it is below 2^63: every extent then fits in i64.
fn checked_numel(s: &[usize]) -> Option<usize> {
    s.iter()
        .try_fold(1usize, |a, &e| a.checked_mul(e))
        .filter(|&n| n <= i64::MAX as usize)
}

/// Normalizes a possibly negative dim against `rank`.
pub fn norm_dim(op: &str, d: i64, rank: usize) -> Result<usize, IrError> {
    let r = rank as i64;
    let n = if d < 0 { d + r } else { d };
    if n < 0 || n >= r {
        return Err(IrError::op(
            op,
            format!("dim {d} is out of range for a tensor of rank {rank}"),
        ));
    }
    Ok(n as usize)
}

/// Normalizes, sorts and checks a list of dims for duplicates.
pub fn norm_dims(op: &str, dims: &[i64], rank: usize) -> Result<Vec<usize>, IrError> {
    let mut out = dims
        .iter()
        .map(|&d| norm_dim(op, d, rank))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(IrError::op(
            op,
            format!("dims {dims:?} name the same dim twice"),
        ));
    }
    Ok(out)
}

pub(crate) fn tensor<'a>(
    g: &'a Graph,
    op: &str,
    what: &str,
    v: ValueId,
) -> Result<(&'a Value, &'a [usize]), IrError> {
    let val = g.get(op, v)?;
    match &val.shape {
        Some(s) => Ok((val, s.as_slice())),
        None => Err(IrError::op(
            op,
            format!("{what} must be a tensor, got scalar {}", val.name),
        )),
    }
}

pub(crate) fn extents(op: &str, what: &str, shape: &[i64]) -> Result<Vec<usize>, IrError> {
    shape
        .iter()
        .map(|&e| {
            usize::try_from(e).map_err(|_| {
                IrError::op(
                    op,
                    format!(
                        "{what} {shape:?} has a negative extent; fusebench needs concrete extents"
                    ),
                )
            })
        })
        .collect()
}

/// Integer value of a constant scalar operand.
pub fn const_int(g: &Graph, op: &str, what: &str, v: ValueId) -> Result<i64, IrError> {
    let val = g.get(op, v)?;
    match (&val.shape, val.constant) {
        (None, Some(c)) => c
            .as_i64()
            .ok_or_else(|| IrError::op(op, format!("{what} must be an integer, got {c}"))),
        (None, None) => Err(IrError::op(
            op,
            format!(
                "{what} {} must be a constant known when the fusion is built",
                val.name
            ),
        )),
        (Some(_), _) => Err(IrError::op(
            op,
            format!("{what} must be a scalar, got tensor {}", val.name),
        )),
    }
}

/// Infers the outputs of `op` given what is defined so far.
pub fn infer(g: &Graph, op: &Op) -> Result<Vec<OutType>, IrError> {
    let name = op.name();
    for v in op.operands() {
        g.get(name, v)?;
    }
    crate::dtype_ops::check(g, op)?;
    let out = match op {
        Op::Unary { kind, x } => {
            let xv = g.get(name, *x)?;
            let mut t = typing(name, kind.rule(), &[xv])?;
            // |z| of a complex value is real.
            if let (crate::UnaryOp::Abs, Some(r)) = (kind, crate::dtype_ops::abs_dtype(xv.dtype)) {
                t.out = r;
            }
            let constant = xv.constant.map(|c| fold_unary(*kind, c.cast(t.casts[0]), t.compute, t.out));
            vec![OutType {
                dtype: t.out,
                shape: xv.shape.clone(),
                constant,
            }]
        }
        Op::Binary { kind, a, b } => {
            let (av, bv) = (g.get(name, *a)?, g.get(name, *b)?);
            let t = typing(name, kind.rule(), &[av, bv])?;
            let shape = elementwise_shape(name, &[av, bv])?;
            let constant = match (av.constant, bv.constant) {
                (Some(x), Some(y)) if shape.is_none() => Some(fold_binary(
                    *kind,
                    x.cast(t.casts[0]),
                    y.cast(t.casts[1]),
                    t.compute,
                    t.out,
                )),
                _ => None,
            };
            vec![OutType {
                dtype: t.out,
                shape,
                constant,
            }]
        }
        Op::Ternary { kind, a, b, c } => {
            let vs = [g.get(name, *a)?, g.get(name, *b)?, g.get(name, *c)?];
            let t = typing(name, kind.rule(), &vs)?;
            let shape = elementwise_shape(name, &vs)?;
            let constant = match (vs[0].constant, vs[1].constant, vs[2].constant) {
                (Some(x), Some(y), Some(z)) if shape.is_none() => Some(fold_ternary(
                    *kind,
                    [x, y, z],
                    [t.casts[0], t.casts[1], t.casts[2]],
                    t.compute,
                    t.out,
                )),
                _ => None,
            };
            vec![OutType {
                dtype: t.out,
                shape,
                constant,
            }]
        }
        Op::Where { cond, a, b } => {
            let (cv, av, bv) = (g.get(name, *cond)?, g.get(name, *a)?, g.get(name, *b)?);
            if cv.dtype != DType::Bool {
                return Err(IrError::op(
                    name,
                    format!("condition {} must be Bool, got {}", cv.name, cv.dtype),
                ));
            }
            let dtype = common_dtype(&[av, bv], false, false);
            let shapes: Vec<&[usize]> = [cv, av, bv]
                .iter()
                .filter_map(|v| v.shape.as_deref())
                .collect();
            let shape = if shapes.is_empty() {
                None
            } else {
                Some(broadcast_shapes(name, &shapes)?)
            };
            let constant = match (cv.constant, av.constant, bv.constant) {
                (Some(c), Some(x), Some(y)) if shape.is_none() => {
                    Some(if c.as_bool() { x } else { y }.cast(dtype))
                }
                _ => None,
            };
            vec![OutType {
                dtype,
                shape,
                constant,
            }]
        }
        Op::Cast { x, dtype } => {
            let xv = g.get(name, *x)?;
            vec![OutType {
                dtype: *dtype,
                shape: xv.shape.clone(),
                constant: xv.constant.map(|c| crate::dtype_ops::cast_literal(c, xv.dtype, *dtype)),
            }]
        }
        Op::Reduce {
            kind,
            x,
            dims,
            keepdim,
            dtype,
        } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let out_dtype = match (kind, dtype) {
                // nvFuser's sum and prod: ints and bools accumulate as Int.
                (ReduceOp::Sum | ReduceOp::Prod, Some(d)) => *d,
                (ReduceOp::Sum | ReduceOp::Prod, None)
                    if xv.dtype.is_integral() || xv.dtype.is_bool() =>
                {
                    DType::Int
                }
                (_, None) => xv.dtype,
                (_, Some(d)) => {
                    return Err(IrError::op(
                        name,
                        format!("dtype={d} is not supported for {name}; only sum and prod take a dtype"),
                    ))
                }
            };
            if dims.is_empty() {
                return Err(IrError::op(name, "no dims to reduce were given"));
            }
            let rd = norm_dims(name, dims, s.len())?;
            vec![OutType::tensor(out_dtype, reduced_shape(s, &rd, *keepdim))]
        }
        Op::Welford { x, dims } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let rd = norm_dims(name, dims, s.len())?;
            let d = stat_dtype(name, xv)?;
            let shape = reduced_shape(s, &rd, false);
            vec![
                OutType::tensor(d, shape.clone()),
                OutType::tensor(d, shape.clone()),
                OutType::tensor(DType::Index, shape),
            ]
        }
        Op::VarMean {
            x,
            dims,
            correction,
            keepdim,
        } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let rd = norm_dims(name, dims, s.len())?;
            if *correction < 0 {
                return Err(IrError::op(
                    name,
                    format!("correction must be >= 0, got {correction}"),
                ));
            }
            let d = stat_dtype(name, xv)?;
            let shape = reduced_shape(s, &rd, *keepdim);
            // On integers nvFuser multiplies the integer M2 by a Double reciprocal.
            let var = if d.is_float() { d } else { DType::Double };
            vec![OutType::tensor(var, shape.clone()), OutType::tensor(d, shape)]
        }
        Op::Broadcast {
            x,
            is_broadcast_dim,
        } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let kept = is_broadcast_dim.iter().filter(|b| !**b).count();
            if kept != s.len() {
                return Err(IrError::op(
                    name,
                    format!("is_broadcast_dim {is_broadcast_dim:?} keeps {kept} dims but the input has rank {}", s.len()),
                ));
            }
            let mut it = s.iter();
            let shape = is_broadcast_dim
                .iter()
                .map(|&b| if b { 1 } else { *it.next().unwrap() })
                .collect();
            vec![OutType::tensor(xv.dtype, shape)]
        }
        Op::BroadcastInDim {
            x,
            shape,
            broadcast_dims,
        } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let out = extents(name, "shape", shape)?;
            if broadcast_dims.len() != s.len() {
                return Err(IrError::op(
                    name,
                    format!(
                        "broadcast_dims {broadcast_dims:?} has {} entries for an input of rank {}",
                        broadcast_dims.len(),
                        s.len()
                    ),
                ));
            }
            let mut prev: Option<usize> = None;
            for (i, &bd) in broadcast_dims.iter().enumerate() {
                let d = norm_dim(name, bd, out.len())?;
                if prev.is_some_and(|p| d <= p) {
                    return Err(IrError::op(
                        name,
                        format!("broadcast_dims {broadcast_dims:?} must be increasing"),
                    ));
                }
                prev = Some(d);
                if s[i] != out[d] && s[i] != 1 {
                    return Err(IrError::op(
                        name,
                        format!("input dim {i} has extent {} which cannot become extent {} of output dim {d}", s[i], out[d]),
                    ));
                }
            }
            vec![OutType::tensor(xv.dtype, out)]
        }
        Op::Expand { x, shape } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            if shape.len() != s.len() {
                return Err(IrError::op(
                    name,
                    format!(
                        "shape {shape:?} has rank {} but the input has rank {}",
                        shape.len(),
                        s.len()
                    ),
                ));
            }
            let mut out = Vec::with_capacity(s.len());
            for (i, (&e, &want)) in s.iter().zip(shape).enumerate() {
                let w = if want == -1 {
                    e
                } else {
                    extents(name, "shape", &[want])?[0]
                };
                if e != w && e != 1 {
                    return Err(IrError::op(
                        name,
                        format!(
                            "dim {i} has extent {e}; only extent-1 dims can be expanded (to {w})"
                        ),
                    ));
                }
                out.push(w);
            }
            vec![OutType::tensor(xv.dtype, out)]
        }
        Op::Reshape { x, new_shape } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let numel = checked_numel(s).ok_or_else(|| {
                IrError::op(
                    name,
                    format!("input of shape {s:?} has 2^63 elements or more"),
                )
            })?;
            let holes = new_shape.iter().filter(|&&e| e == -1).count();
            if holes > 1 {
                return Err(IrError::op(
                    name,
                    format!("new_shape {new_shape:?} has more than one -1"),
                ));
            }
            let known = new_shape
                .iter()
                .filter(|&&e| e != -1)
                .try_fold(1usize, |a, &e| a.checked_mul(e.max(0) as usize));
            let out: Vec<usize> = new_shape
                .iter()
                .map(|&e| match (e, known) {
                    (-1, Some(k)) if k != 0 => numel / k,
                    (-1, _) => 0,
                    _ => e.max(0) as usize,
                })
                .collect();
            if new_shape.iter().any(|&e| e < -1)
                || known.is_none()
                || checked_numel(&out) != Some(numel)
            {
                return Err(IrError::op(
                    name,
                    format!("cannot reshape {s:?} ({numel} elements) to {new_shape:?}"),
                ));
            }
            vec![OutType::tensor(xv.dtype, out)]
        }
        Op::Permute { x, dims } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let nd = norm_dims(name, dims, s.len())?;
            if nd.len() != s.len() {
                return Err(IrError::op(
                    name,
                    format!("dims {dims:?} is not a permutation of {} dims", s.len()),
                ));
            }
            let out = dims
                .iter()
                .map(|&d| s[norm_dim(name, d, s.len()).unwrap()])
                .collect();
            vec![OutType::tensor(xv.dtype, out)]
        }
        Op::Squeeze { x, dims } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let nd = norm_dims(name, dims, s.len())?;
            for &d in &nd {
                // nvFuser squeezes broadcast dims only; an expanded one (extent > 1,
                // all elements equal) reads its element 0, as every squeeze does here.
                if s[d] != 1 && !broadcast::is_broadcast_dim(g, *x, d) {
                    return Err(IrError::op(
                        name,
                        format!(
                            "dim {d} has extent {} and is not a broadcast dim; only extent-1 or expanded broadcast dims can be squeezed",
                            s[d]
                        ),
                    ));
                }
            }
            let out = s
                .iter()
                .enumerate()
                .filter(|(i, _)| !nd.contains(i))
                .map(|(_, &e)| e)
                .collect();
            vec![OutType::tensor(xv.dtype, out)]
        }
        Op::Slice {
            x,
            start,
            end,
            strides,
            manual_normalization,
        } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let (b, _, _) = slice_bounds(name, s, start, end, strides, *manual_normalization)?;
            vec![OutType::tensor(xv.dtype, b)]
        }
        Op::Pad { x, widths, value } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let w = pad_widths(g, name, widths, s.len())?;
            if let Some(v) = value {
                let vv = g.get(name, *v)?;
                if vv.is_tensor() {
                    return Err(IrError::op(name, "value must be a scalar"));
                }
            }
            let mut out = Vec::with_capacity(s.len());
            for (d, &e) in s.iter().enumerate() {
                let ext = e as i128 + w[d].0 as i128 + w[d].1 as i128;
                if ext > i64::MAX as i128 {
                    return Err(IrError::op(
                        name,
                        format!("pad widths {:?} make dim {d} of extent {e} too large", w[d]),
                    ));
                }
                if ext < 0 {
                    return Err(IrError::op(
                        name,
                        format!("pad widths {:?} make dim {d} of extent {e} negative", w[d]),
                    ));
                }
                out.push(ext as usize);
            }
            vec![OutType::tensor(xv.dtype, out)]
        }
        Op::Cat {
            xs,
            dim,
            manual_padding,
        } => {
            if xs.is_empty() {
                return Err(IrError::op(name, "needs at least one tensor"));
            }
            let ts = xs
                .iter()
                .map(|&v| tensor(g, name, "every input", v))
                .collect::<Result<Vec<_>, _>>()?;
            let rank = ts[0].1.len();
            let d = norm_dim(name, *dim, rank)?;
            let mut dtype = ts[0].0.dtype;
            let mut out = ts[0].1.to_vec();
            if *manual_padding {
                cat_owner_ranges(g, name, xs, d)?;
            } else {
                out[d] = 0;
            }
            for (v, s) in &ts {
                dtype = promote_types(dtype, v.dtype);
                let same = s.len() == rank
                    && s.iter()
                        .enumerate()
                        .all(|(i, &e)| (i == d && !manual_padding) || e == out[i]);
                if !same {
                    return Err(IrError::op(
                        name,
                        format!(
                            "input {} of shape {s:?} does not match {:?} outside dim {d}",
                            v.name, ts[0].1
                        ),
                    ));
                }
                if !manual_padding {
                    out[d] = out[d]
                        .checked_add(s[d])
                        .filter(|&n| n <= i64::MAX as usize)
                        .ok_or_else(|| {
                            IrError::op(name, format!("the joined extent of dim {d} is too large"))
                        })?;
                }
            }
            vec![OutType::tensor(dtype, out)]
        }
        Op::Full { shape, fill, dtype } => {
            let fv = g.get(name, *fill)?;
            if fv.is_tensor() {
                return Err(IrError::op(name, "fill_value must be a scalar"));
            }
            vec![OutType::tensor(*dtype, extents(name, "shape", shape)?)]
        }
        Op::Complex { kind, xs } => crate::dtype_ops::infer(g, *kind, xs)?,
        Op::IndexSelect { x, index, dim } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            let (iv, is) = tensor(g, name, "index", *index)?;
            if !(iv.dtype.is_integral()) {
                return Err(IrError::op(
                    name,
                    format!(
                        "index {} must be an integer tensor, got {}",
                        iv.name, iv.dtype
                    ),
                ));
            }
            let d = norm_dim(name, *dim, s.len())?;
            let n = index_extent(name, is, s.len(), d)?;
            let mut out = s.to_vec();
            out[d] = n;
            vec![OutType::tensor(xv.dtype, out)]
        }
        Op::Index(o) => index::infer_index(g, o)?,
        Op::Gemm(o) => crate::op_gemm::infer(g, o)?,
        Op::Rng { .. } | Op::RngLike { .. } => crate::rng::infer(g, name, op)?,
        Op::Scan { x, dim, init, .. } => {
            // nvFuser's `scan` keeps the input's dtype (no upcast of bf16 or ints).
            let (xv, s) = tensor(g, name, "input", *x)?;
            norm_dim(name, *dim, s.len())?;
            if let Some(i) = init {
                if g.get(name, *i)?.is_tensor() {
                    return Err(IrError::op(name, "init must be a scalar"));
                }
            }
            vec![OutType::tensor(xv.dtype, s.to_vec())]
        }
        Op::Set { x, .. } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            vec![OutType::tensor(xv.dtype, s.to_vec())]
        }
        Op::StrideOrder { x, stride_order } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            stride_permutation(name, stride_order, s.len())?;
            vec![OutType::tensor(xv.dtype, s.to_vec())]
        }
        Op::Size { x, dim } => {
            let (_, s) = tensor(g, name, "input", *x)?;
            let d = norm_dim(name, *dim, s.len())?;
            // nvFuser's extents are Index scalars.
            vec![OutType {
                dtype: DType::Index,
                shape: None,
                constant: Some(Literal::Int(s[d] as i64)),
            }]
        }
        Op::Matmul { a, b } => {
            let (av, s_a) = tensor(g, name, "arg1", *a)?;
            let (bv, s_b) = tensor(g, name, "arg2", *b)?;
            let (d, out) = crate::gemm::matmul((av.dtype, s_a), (bv.dtype, s_b))?;
            vec![OutType::tensor(d, out)]
        }
        Op::Linear { a, weight, bias } => {
            let (av, s_a) = tensor(g, name, "arg1", *a)?;
            let (wv, s_w) = tensor(g, name, "arg2", *weight)?;
            let bias = match bias {
                Some(b) => Some(tensor(g, name, "bias", *b)?),
                None => None,
            };
            let (d, out) = crate::gemm::linear(
                (av.dtype, s_a),
                (wv.dtype, s_w),
                bias.map(|(v, s)| (v.dtype, s)),
            )?;
            vec![OutType::tensor(d, out)]
        }
    };
    Ok(out)
}

/// A stride order (rank of each dim from the innermost) checked to be a
/// permutation of `0..rank`; negative entries count from `rank`.
pub fn stride_permutation(op: &str, order: &[i64], rank: usize) -> Result<Vec<usize>, IrError> {
    if order.len() != rank {
        return Err(IrError::op(
            op,
            format!("stride_order {order:?} must have one entry per dim ({rank})"),
        ));
    }
    let mut out = Vec::with_capacity(rank);
    for &s in order {
        let n = if s < 0 { s + rank as i64 } else { s };
        if n < 0 || n >= rank as i64 || out.contains(&(n as usize)) {
            return Err(IrError::op(
                op,
                format!("stride_order {order:?} is not a permutation of 0..{rank}"),
            ));
        }
        out.push(n as usize);
    }
    Ok(out)
}

/// The dtype of welford's mean and M2 (var_mean's mean): the input's for
/// Int and Int32, which nvFuser's welford keeps (its integer welfordCombine),
/// Float for reduced floats.
fn stat_dtype(op: &str, x: &Value) -> Result<DType, IrError> {
    if matches!(x.dtype, DType::Int | DType::Int32) {
        return Ok(x.dtype);
    }
    if !x.dtype.is_float() {
        return Err(IrError::op(
            op,
            format!("input {} must be floating point, got {}", x.name, x.dtype),
        ));
    }
    Ok(if x.dtype.is_reduced_float() {
        DType::Float
    } else {
        x.dtype
    })
}

pub fn reduced_shape(s: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
    s.iter()
        .enumerate()
        .filter_map(|(i, &e)| match (dims.contains(&i), keepdim) {
            (false, _) => Some(e),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Extent of an index tensor along the gathered dim: a 1-D index, or one of the
/// input's rank whose other dims are all extent 1.
pub fn index_extent(op: &str, is: &[usize], rank: usize, d: usize) -> Result<usize, IrError> {
    if is.len() == 1 {
        return Ok(is[0]);
    }
    if is.len() == rank && is.iter().enumerate().all(|(i, &e)| i == d || e == 1) {
        return Ok(is[d]);
    }
    Err(IrError::op(
        op,
        format!("index of shape {is:?} must be 1-D, or of rank {rank} with extent 1 everywhere but dim {d}"),
    ))
}

/// A slice's normalized start and step per dim, and its output shape.
pub type SliceBounds = (Vec<usize>, Vec<usize>, Vec<usize>);

/// Normalized (start, step) per dim and the output shape of a slice.
pub fn slice_bounds(
    op: &str,
    s: &[usize],
    start: &[i64],
    end: &[i64],
    strides: &[i64],
    manual_normalization: bool,
) -> Result<SliceBounds, IrError> {
    let rank = s.len();
    if start.len() != rank || end.len() != rank || !(strides.is_empty() || strides.len() == rank) {
        return Err(IrError::op(
            op,
            format!("start_indices, end_indices and strides must each have {rank} entries (got {}, {}, {})", start.len(), end.len(), strides.len()),
        ));
    }
    let (mut shape, mut starts, mut steps) = (vec![], vec![], vec![]);
    for d in 0..rank {
        let e = s[d] as i64;
        let step = if strides.is_empty() { 1 } else { strides[d] };
        if step <= 0 {
            return Err(IrError::op(
                op,
                format!("stride {step} of dim {d} must be positive"),
            ));
        }
        let (mut a, mut b) = (start[d], end[d]);
        if !manual_normalization {
            if a < 0 {
                a += e;
            }
            if b < 0 {
                b += e;
            }
            a = a.clamp(0, e);
            b = b.clamp(a, e);
        } else if a < 0 || b > e || a > b {
            return Err(IrError::op(
                op,
                format!("dim {d}: [{a}, {b}) is not within [0, {e}] (manual_normalization=True)"),
            ));
        }
        shape.push(((b - a) / step + ((b - a) % step != 0) as i64) as usize);
        starts.push(a as usize);
        steps.push(step as usize);
    }
    Ok((shape, starts, steps))
}

/// Pad widths as (before, after) per dim, in dim order.
pub fn pad_widths(
    g: &Graph,
    op: &str,
    widths: &[ValueId],
    rank: usize,
) -> Result<Vec<(i64, i64)>, IrError> {
    if !widths.len().is_multiple_of(2) || widths.len() > 2 * rank {
        return Err(IrError::op(
            op,
            format!(
                "pad_widths has {} entries; expected an even number up to {}",
                widths.len(),
                2 * rank
            ),
        ));
    }
    let vals = widths
        .iter()
        .map(|&w| const_int(g, op, "pad width", w))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = vec![(0, 0); rank];
    for (k, pair) in vals.chunks(2).enumerate() {
        out[rank - 1 - k] = (pair[0], pair[1]);
    }
    Ok(out)
}

/// For a cat with manual padding: the range along `dim` each input owns,
/// found from the pad that produced it.
pub fn cat_owner_ranges(
    g: &Graph,
    op: &str,
    xs: &[ValueId],
    dim: usize,
) -> Result<Vec<(usize, usize)>, IrError> {
    xs.iter()
        .map(|&x| {
            let v = &g.values[x.index()];
            let s = v.shape.as_deref().unwrap_or(&[]);
            let not_pad = || {
                IrError::op(
                    op,
                    format!("with manual_padding=True every input must come from fd.ops.pad along dim {dim}; {} does not", v.name),
                )
            };
            let ValueDef::Node { node, .. } = v.def else { return Err(not_pad()) };
            let Op::Pad { x: src, widths, .. } = &g.nodes[node].op else { return Err(not_pad()) };
            let w = pad_widths(g, "pad", widths, s.len())?;
            if w.iter().enumerate().any(|(d, p)| d != dim && *p != (0, 0)) {
                return Err(not_pad());
            }
            let inner = g.values[src.index()].shape.as_ref().map_or(0, |s| s[dim]);
            Ok((w[dim].0.max(0) as usize, w[dim].0.max(0) as usize + inner))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn val(dtype: DType, shape: Option<Vec<usize>>) -> Value {
        Value {
            name: "v".into(),
            dtype,
            shape,
            def: ValueDef::Literal,
            constant: None,
        }
    }

    #[test]
    fn promotion_follows_nvfuser() {
        use DType::*;
        let bf = val(BFloat16, Some(vec![4]));
        let f = val(Float, Some(vec![4]));
        let d_scalar = val(Double, None);
        let i_tensor = val(Int, Some(vec![4]));
        // bf16 + bf16 computes and returns Float.
        assert_eq!(common_dtype(&[&bf, &bf], false, true), Float);
        // A Double scalar does not widen a Float tensor.
        assert_eq!(common_dtype(&[&f, &d_scalar], false, true), Float);
        // ...but does widen an integer tensor (higher category).
        assert_eq!(common_dtype(&[&i_tensor, &d_scalar], false, true), Double);
        // where keeps bf16.
        assert_eq!(common_dtype(&[&bf, &bf], false, false), BFloat16);
        assert_eq!(common_dtype(&[&i_tensor], true, true), Float);
    }

    #[test]
    fn broadcasting_rules() {
        assert_eq!(
            broadcast_shapes("add", &[&[4, 1], &[4, 5]]).unwrap(),
            vec![4, 5]
        );
        assert_eq!(
            broadcast_shapes("add", &[&[5], &[3, 5]]).unwrap(),
            vec![3, 5]
        );
        assert!(broadcast_shapes("add", &[&[4, 2], &[4, 5]]).is_err());
    }

    #[test]
    fn slice_normalizes_like_python() {
        let (shape, start, _) = slice_bounds("slice", &[10], &[-3], &[100], &[1], false).unwrap();
        assert_eq!((shape, start), (vec![3], vec![7]));
        assert!(slice_bounds("slice", &[10], &[-3], &[100], &[1], true).is_err());
        let (shape, _, _) = slice_bounds("slice", &[10], &[1], &[8], &[3], true).unwrap();
        assert_eq!(shape, vec![3]);
    }
}
