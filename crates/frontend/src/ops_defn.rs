//! FusionDefinition methods and the small "meta" ops: every form of
//! `fd.define_tensor` nvFuser's printers emit, `fd.define_vector`,
//! `fd.add_output` with an alias or a stride order, and `set`,
//! `segment_set`, `stride_order`, `size`, `shape`, `tensor_sizes`, `at`.
//!
//! Shapes are concrete here, so a vector is a list of scalars known when the
//! fusion is built: `shape(t)` reads into one `size` value per dim and `at`
//! picks one of them; where nvFuser takes a vector (reshape, expand, full,
//! broadcast_in_dim shapes) its elements' values are used.

use crate::error::{expected, invalid, PResult, Span};
use crate::expr::{Expr, ExprKind};
use crate::ops::{bind, Call};
use crate::parse::Body;
use fusebench_ir::{DType, Literal, Op, ValueId};

/// Ops that return vectors or read them: handled before [`Body::op`].
pub(crate) const VECTOR_OPS: &[&str] = &["shape", "tensor_sizes", "at"];

/// nvFuser's `computeTensorDescriptor` (python_common/python_utils.cpp):
/// contiguity in allocation order and the stride order of a tensor of
/// `sizes` and `strides`. Dims of stride 0 keep their logical position
/// among the others, which are ordered by decreasing stride (stably).
pub(crate) fn tensor_descriptor(sizes: &[i64], strides: &[i64]) -> (Vec<Option<bool>>, Vec<i64>) {
    let n = sizes.len();
    let mut dims: Vec<usize> = (0..n).filter(|&i| strides[i] != 0).collect();
    dims.sort_by_key(|&i| std::cmp::Reverse(strides[i]));
    for i in (0..n).filter(|&i| strides[i] == 0) {
        dims.insert(i.min(dims.len()), i);
    }
    let bcast = |d: usize| strides[d] == 0 || sizes[d] == 1;
    let mut contiguity = vec![None; n];
    let mut order = vec![0i64; n];
    for (pos, &d) in dims.iter().enumerate() {
        order[d] = (n - 1 - pos) as i64;
        if bcast(d) {
            continue;
        }
        let expected = dims[pos + 1..]
            .iter()
            .find(|&&e| !bcast(e))
            .map_or(1, |&e| strides[e] * sizes[e]);
        contiguity[pos] = Some(strides[d] == expected);
    }
    (contiguity, order)
}

impl Body<'_, '_> {
    /// `fd.define_tensor(shape, contiguity, dtype, is_cpu, stride_order)` or
    /// `fd.define_tensor(sizes, strides, dtype, static_sizes, is_cpu)`.
    pub fn define_tensor(&mut self, call: &Call, name: &str) -> PResult<ValueId> {
        let callee = "fd.define_tensor";
        let keyword = |k: &str| {
            call.args
                .iter()
                .any(|a| a.keyword.as_ref().is_some_and(|(w, _)| w == k))
        };
        // The second positional argument tells the overloads apart: integers
        // are strides, True/False/None contiguity.
        let second_is_ints = call.args.get(1).is_some_and(|a| {
            a.keyword.is_none()
                && matches!(&a.value.kind, ExprKind::List(items) | ExprKind::Tuple(items)
                    if !items.is_empty() && items.iter().all(|x| x.i64().is_some()))
        });
        if keyword("sizes") || keyword("strides") || second_is_ints {
            return self.define_tensor_strided(call, name);
        }
        let a = bind(
            callee,
            call,
            &["shape", "contiguity", "dtype", "is_cpu", "stride_order"],
            &[],
        )?;
        let shape_e = a.req("shape")?;
        let written = self.ints(shape_e, "shape")?;
        let stride_order = a
            .opt("stride_order")
            .map(|e| self.ints(e, "stride_order"))
            .transpose()?
            .unwrap_or_default();
        let contiguity = match a.opt("contiguity") {
            // The overload with a single bool (default False): every dim of
            // extent 1 is a broadcast, the rest take the bool, placed in
            // allocation order (python_utils.cpp getContiguityVec).
            None => self.uniform_contiguity(&written, &stride_order, false, shape_e.span)?,
            Some(Expr {
                kind: ExprKind::Bool(b),
                span,
                ..
            }) => self.uniform_contiguity(&written, &stride_order, *b, *span)?,
            Some(e) => match &e.kind {
                ExprKind::List(items) | ExprKind::Tuple(items) => items
                    .iter()
                    .map(|x| match x.kind {
                        ExprKind::Bool(b) => Ok(Some(b)),
                        ExprKind::None => Ok(None),
                        _ => Err(expected(
                            x.span,
                            "True, False or None",
                            format!("`{}`", self.src.slice(x.span)),
                        )),
                    })
                    .collect::<PResult<Vec<_>>>()?,
                _ => {
                    return Err(expected(
                        e.span,
                        "a list of True/False/None",
                        format!("`{}`", self.src.slice(e.span)),
                    ))
                }
            },
        };
        let dtype = match a.get("dtype") {
            Some(e) => self.dtype(e, false)?.unwrap_or(DType::Float),
            None => DType::Float,
        };
        let is_cpu = a
            .get("is_cpu")
            .map(|e| self.boolean(e, "is_cpu"))
            .transpose()?
            .unwrap_or(false);
        let shape = self.bind_symbolic(&written, shape_e.span)?;
        self.b
            .define_tensor(Some(name), &shape, contiguity, dtype, &stride_order, is_cpu)
            .map_err(|e| self.ir(call.span, e))
    }

    fn uniform_contiguity(
        &self,
        shape: &[i64],
        stride_order: &[i64],
        c: bool,
        span: Span,
    ) -> PResult<Vec<Option<bool>>> {
        let rank = shape.len();
        let order = if stride_order.is_empty() {
            vec![]
        } else {
            fusebench_ir::infer::stride_permutation("fd.define_tensor", stride_order, rank)
                .map_err(|e| self.ir(span, e))?
        };
        let mut out = vec![Some(c); rank];
        for (d, &e) in shape.iter().enumerate() {
            if e == 1 {
                let pos = if order.is_empty() { d } else { rank - 1 - order[d] };
                out[pos] = None;
            }
        }
        Ok(out)
    }

    /// The legacy "integration" form: `define_tensor(sizes=, strides=, dtype=,
    /// static_sizes=, is_cpu=)`; contiguity and stride order are derived from
    /// the strides as nvFuser does, the sizes are the tensor's.
    fn define_tensor_strided(&mut self, call: &Call, name: &str) -> PResult<ValueId> {
        let a = bind(
            "fd.define_tensor",
            call,
            &["sizes", "strides", "dtype", "static_sizes", "is_cpu"],
            &[],
        )?;
        let (se, te) = (a.req("sizes")?, a.req("strides")?);
        let sizes = self.ints(se, "sizes")?;
        let strides = self.ints(te, "strides")?;
        if sizes.len() != strides.len() {
            return Err(invalid(
                te.span,
                format!(
                    "{} strides for {} sizes: the numbers must match",
                    strides.len(),
                    sizes.len()
                ),
            ));
        }
        if let Some(s) = strides.iter().find(|&&s| s < 0) {
            return Err(invalid(te.span, format!("negative stride {s}: nvFuser does not support them")));
        }
        if let Some(s) = sizes.iter().find(|&&s| s < 0) {
            return Err(invalid(se.span, format!("size {s}: sizes must be >= 0")));
        }
        let (contiguity, order) = tensor_descriptor(&sizes, &strides);
        // Row-major is the empty stride order, as define_tensor prints it.
        let row_major: Vec<i64> = (0..sizes.len() as i64).rev().collect();
        let order = if order == row_major { vec![] } else { order };
        let dtype = match a.get("dtype") {
            Some(e) => self.dtype(e, false)?.unwrap_or(DType::Float),
            None => DType::Float,
        };
        // Without static_sizes nvFuser makes every extent but 1 symbolic; the
        // sizes given are the ones it is run with.
        a.get("static_sizes")
            .map(|e| self.boolean(e, "static_sizes"))
            .transpose()?;
        let is_cpu = a
            .get("is_cpu")
            .map(|e| self.boolean(e, "is_cpu"))
            .transpose()?
            .unwrap_or(false);
        self.b
            .define_tensor(Some(name), &sizes, contiguity, dtype, &order, is_cpu)
            .map_err(|e| self.ir(call.span, e))
    }

    /// Replaces symbolic (-1) extents by those of the input this definition
    /// will be (the next input position), from the data file or the script's
    /// inputs list.
    fn bind_symbolic(&self, written: &[i64], span: Span) -> PResult<Vec<i64>> {
        if !written.contains(&-1) {
            return Ok(written.to_vec());
        }
        let pos = self.b.fusion().inputs.len();
        let Some(Some((actual, from))) = self.bound.get(pos) else {
            return Err(invalid(
                span,
                format!(
                    "shape {written:?} has symbolic (-1) extents and no input {pos} to take them from: \
                     fusebench needs concrete shapes (give the script an inputs list, or check it with --data)"
                ),
            ));
        };
        let fits = actual.len() == written.len()
            && written
                .iter()
                .zip(actual)
                .all(|(&w, &a)| w == -1 || w as u64 == a as u64);
        if !fits {
            return Err(invalid(
                span,
                format!("shape {written:?} does not fit input {pos}'s shape {actual:?} from {from}"),
            ));
        }
        Ok(actual.iter().map(|&e| e as i64).collect())
    }

    /// A scalar's integer value known when the fusion is built.
    pub fn known_int(&self, v: ValueId, span: Span, what: &str) -> PResult<i64> {
        let val = self.b.fusion().value(v);
        match (val.is_tensor(), val.constant) {
            (false, Some(Literal::Int(i))) => Ok(i),
            _ => Err(invalid(
                span,
                format!("{what}: element {} is not an integer known when the fusion is built", val.name),
            )),
        }
    }

    /// `fd.define_vector([a, b, ...], dtype=DataType.Int)` (constants or
    /// scalars) or `fd.define_vector(size)` (that many Int scalar inputs).
    pub fn define_vector(&mut self, call: &Call, name: &str) -> PResult<Vec<ValueId>> {
        let a = bind("fd.define_vector", call, &["values", "dtype"], &[("size", "values")])?;
        let e = a.req("values")?;
        if let Some(d) = a.get("dtype") {
            let d = self.dtype(d, false)?;
            if d != Some(DType::Int) {
                return Err(invalid(call.span, "fd.define_vector: only DataType.Int vectors (shapes) are supported"));
            }
        }
        match &e.kind {
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                items.iter().map(|x| self.operand(x)).collect()
            }
            _ => {
                let n = self.int(e, "size")?;
                if !(0..=64).contains(&n) {
                    return Err(invalid(e.span, format!("a vector of {n} elements")));
                }
                Ok((0..n)
                    .map(|k| self.b.define_scalar(Some(&format!("{name}_{k}")), None, DType::Int))
                    .collect())
            }
        }
    }

    /// `fd.add_output(out)`, `fd.add_output(out, alias_input)` (keyword or
    /// positional) and `fd.add_output(out, stride_order=[...])`.
    pub fn add_output(&mut self, call: &Call) -> PResult<()> {
        // A list in second place is the stride-order overload's argument.
        let second_is_list = call.args.get(1).is_some_and(|a| {
            a.keyword.is_none() && matches!(a.value.kind, ExprKind::List(_) | ExprKind::Tuple(_))
        });
        let params: &'static [&'static str] = if second_is_list {
            &["output", "stride_order", "alias_input"]
        } else {
            &["output", "alias_input", "stride_order"]
        };
        let a = bind("fd.add_output", call, params, &[])?;
        let out = self.tensor_name(a.req("output")?)?;
        let alias = a.opt("alias_input").map(|e| self.tensor_name(e)).transpose()?;
        let order = a.opt("stride_order").map(|e| self.ints(e, "stride_order")).transpose()?;
        let r = match (alias, order) {
            (Some(_), Some(_)) => {
                return Err(invalid(call.span, "fd.add_output takes alias_input or stride_order, not both"))
            }
            (Some(i), None) => self.b.add_output_alias(out, i),
            (None, Some(o)) if !o.is_empty() => self.b.add_output_stride_order(out, &o),
            (None, _) => self.b.add_output(out),
        };
        r.map_err(|err| self.ir(call.span, err))
    }

    fn tensor_name(&self, e: &Expr) -> PResult<ValueId> {
        let ExprKind::Name(n) = &e.kind else {
            return Err(expected(
                e.span,
                "the name of a tensor",
                format!("`{}`", self.src.slice(e.span)),
            ));
        };
        self.lookup(n, e.span)
    }

    /// `set`, `segment_set`, `stride_order`, `size`.
    pub fn defn_op(&mut self, name: &str, callee: &str, call: &Call) -> PResult<Op> {
        Ok(match name {
            "set" | "segment_set" => {
                let a = bind(callee, call, &["arg"], &[])?;
                let x = self.operand(a.req("arg")?)?;
                Op::Set { x, segment: name == "segment_set" }
            }
            "stride_order" => {
                let a = bind(callee, call, &["arg", "stride_order"], &[])?;
                let x = self.operand(a.req("arg")?)?;
                let stride_order = self.ints(a.req("stride_order")?, "stride_order")?;
                Op::StrideOrder { x, stride_order }
            }
            _ => {
                let a = bind(callee, call, &["arg", "dim"], &[])?;
                let x = self.operand(a.req("arg")?)?;
                let dim = self.int(a.req("dim")?, "dim")?;
                Op::Size { x, dim }
            }
        })
    }

    /// `V = fd.ops.shape(t)`, `s0, s1 = fd.ops.tensor_sizes(t)` (or one name
    /// for the vector) and `s = fd.ops.at(V, index=i)`.
    pub fn vector_op(
        &mut self,
        name: &str,
        call: &Call,
        targets: &[(String, Span)],
        tuple: bool,
    ) -> PResult<()> {
        let callee = format!("fd.ops.{name}");
        let Some((first, first_span)) = targets.first().cloned() else {
            return Err(invalid(call.span, format!("the result of {callee} must be assigned to a name")));
        };
        if name == "at" {
            let a = bind(&callee, call, &["arg", "index"], &[])?;
            let v = a.req("arg")?;
            let elems = match &v.kind {
                ExprKind::Name(n) if self.vectors.contains_key(n) => self.vectors[n].clone(),
                _ => return Err(expected(v.span, "the name of a vector", format!("`{}`", self.src.slice(v.span)))),
            };
            let i = self.int(a.req("index")?, "index")?;
            let k = if i < 0 { i + elems.len() as i64 } else { i };
            let Some(&e) = usize::try_from(k).ok().and_then(|k| elems.get(k)) else {
                return Err(invalid(call.span, format!("index {i} is outside a vector of {} elements", elems.len())));
            };
            if tuple || targets.len() != 1 {
                return Err(invalid(first_span, format!("{callee} returns one value; assign it to one name")));
            }
            self.vectors.remove(&first);
            self.names.insert(first, e);
            return Ok(());
        }
        let a = bind(&callee, call, &["arg"], &[])?;
        let x = self.operand(a.req("arg")?)?;
        let rank = self.b.fusion().value(x).rank();
        if !self.b.fusion().value(x).is_tensor() {
            return Err(invalid(call.span, format!("{callee} takes a tensor")));
        }
        // Names written as a tuple (`s0, s1 = ...`, `s0, = ...`) take a size each;
        // one name takes the vector.
        let several = tuple;
        if several && targets.len() != rank {
            return Err(invalid(first_span, format!("{callee} returns {rank} sizes here; assign them to {rank} names or to one")));
        }
        let names: Vec<String> = if several {
            targets.iter().map(|(n, _)| n.clone()).collect()
        } else {
            (0..rank).map(|d| format!("{first}_{d}")).collect()
        };
        let mut elems = Vec::with_capacity(rank);
        for (d, n) in names.iter().enumerate() {
            let v = self
                .b
                .op(Op::Size { x, dim: d as i64 }, &[n.as_str()])
                .map_err(|e| self.ir(call.span, e))?[0];
            elems.push(v);
        }
        if several {
            for ((n, _), v) in targets.iter().zip(elems) {
                self.vectors.remove(n);
                self.names.insert(n.clone(), v);
            }
        } else {
            self.names.remove(&first);
            self.vectors.insert(first, elems);
        }
        Ok(())
    }
}
