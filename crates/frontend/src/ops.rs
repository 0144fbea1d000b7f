//! The calls of a fusion definition, `fd.define_tensor`, `fd.define_scalar`,
//! `fd.add_output` and `fd.ops.*`, matched against nvFuser's signatures.
//!
//! Operands are resolved in the order [`Op::operands`] lists them, whatever
//! order the keywords came in: the literals they create then get the same
//! value ids when the printed script is read again.

use crate::error::{diag, expected, invalid, ErrorKind, PResult, Span};
use crate::expr::{Arg, Expr, ExprKind};
use crate::parse::Body;
use fusebench_ir::dtype_ops::ComplexOp;
use fusebench_ir::{BinaryOp, DType, Op, ReduceOp, RngDist, ScanOp, TernaryOp, UnaryOp, ValueId};

/// The arguments of one call, and the call's whole span.
pub(crate) struct Call<'e> {
    pub span: Span,
    pub args: &'e [Arg],
}

/// Arguments matched to parameter names, as Python binds them.
pub(crate) struct Bound<'e> {
    callee: String,
    span: Span,
    params: &'static [&'static str],
    slots: Vec<Option<&'e Expr>>,
}

/// Binds positional arguments to `params` in order and keywords by name;
/// `aliases` maps other spellings (`axes`) onto parameters (`dims`).
pub(crate) fn bind<'e>(
    callee: &str,
    call: &Call<'e>,
    params: &'static [&'static str],
    aliases: &[(&'static str, &'static str)],
) -> PResult<Bound<'e>> {
    let mut slots: Vec<Option<&'e Expr>> = vec![None; params.len()];
    let mut npos = 0;
    for a in call.args {
        let (idx, span) = match &a.keyword {
            None => {
                if npos >= params.len() {
                    let n = params.len();
                    return Err(invalid(
                        a.value.span,
                        format!(
                            "{callee} takes at most {n} positional argument{}",
                            if n == 1 { "" } else { "s" }
                        ),
                    ));
                }
                npos += 1;
                (npos - 1, a.value.span)
            }
            Some((k, ks)) => {
                let target = aliases
                    .iter()
                    .find(|(al, _)| al == k)
                    .map_or(k.as_str(), |(_, t)| t);
                match params.iter().position(|p| *p == target) {
                    Some(i) => (i, *ks),
                    None => {
                        let mut supported: Vec<String> =
                            params.iter().map(|p| p.to_string()).collect();
                        supported.extend(aliases.iter().map(|(al, t)| format!("{al} (= {t})")));
                        return Err(diag(
                            *ks,
                            ErrorKind::UnknownKeyword {
                                callee: callee.to_string(),
                                keyword: k.clone(),
                                supported,
                            },
                        ));
                    }
                }
            }
        };
        if slots[idx].is_some() {
            return Err(invalid(
                span,
                format!("{callee} got two values for `{}`", params[idx]),
            ));
        }
        slots[idx] = Some(&a.value);
    }
    Ok(Bound {
        callee: callee.to_string(),
        span: call.span,
        params,
        slots,
    })
}

impl<'e> Bound<'e> {
    pub fn get(&self, p: &str) -> Option<&'e Expr> {
        let i = self.params.iter().position(|q| *q == p)?;
        self.slots[i]
    }

    /// Like [`Bound::get`], but Python's `None` counts as absent.
    pub fn opt(&self, p: &str) -> Option<&'e Expr> {
        self.get(p).filter(|e| !matches!(e.kind, ExprKind::None))
    }

    pub fn req(&self, p: &str) -> PResult<&'e Expr> {
        self.get(p).ok_or_else(|| {
            invalid(
                self.span,
                format!("{} is missing the argument `{p}`", self.callee),
            )
        })
    }
}

fn positional(call: &Call) -> usize {
    call.args.iter().filter(|a| a.keyword.is_none()).count()
}

impl Body<'_, '_> {
    pub fn define_scalar(&mut self, call: &Call, name: &str) -> PResult<ValueId> {
        let a = bind("fd.define_scalar", call, &["value", "dtype"], &[])?;
        let value = match a.opt("value") {
            None => None,
            Some(e) => match e.literal() {
                Some(l) => Some(l?),
                None => {
                    return Err(expected(
                        e.span,
                        "a literal value such as 1.5, 3, True or float(\"inf\")",
                        format!("`{}`", self.src.slice(e.span)),
                    ))
                }
            },
        };
        let dtype = match a.get("dtype") {
            Some(e) => self.dtype(e, false)?,
            None => None,
        };
        let dtype = match (dtype, value) {
            (Some(d), _) => d,
            (None, Some(v)) => v.natural_dtype(),
            (None, None) => {
                return Err(invalid(
                    call.span,
                    "fd.define_scalar needs a value or a dtype",
                ))
            }
        };
        Ok(self.b.define_scalar(Some(name), value, dtype))
    }

    fn rank(&self, x: ValueId) -> usize {
        self.b.fusion().value(x).rank()
    }

    /// Legacy scripts pass the input's shape along; it must be the input's.
    fn check_original_shape(&self, x: ValueId, e: Option<&Expr>) -> PResult<()> {
        let Some(e) = e else { return Ok(()) };
        let want = self.ints(e, "original_shape")?;
        let v = self.b.fusion().value(x);
        if let Some(s) = &v.shape {
            let same = want.len() == s.len()
                && want
                    .iter()
                    .zip(s)
                    .all(|(&w, &e)| w < 0 || w as u64 == e as u64);
            if !same {
                return Err(invalid(
                    e.span,
                    format!(
                        "original_shape {want:?} is not the shape {s:?} of {}",
                        v.name
                    ),
                ));
            }
        }
        Ok(())
    }

    fn operands(&mut self, e: &Expr, what: &str) -> PResult<Vec<ValueId>> {
        match &e.kind {
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                items.iter().map(|x| self.operand(x)).collect()
            }
            _ => Err(expected(
                e.span,
                format!("a list for {what}"),
                format!("`{}`", self.src.slice(e.span)),
            )),
        }
    }

    /// Reads `fd.ops.NAME(...)` into an op; `name_span` covers `fd.ops.NAME`.
    pub fn op(&mut self, name: &str, name_span: Span, call: &Call) -> PResult<Op> {
        let callee = format!("fd.ops.{name}");
        let callee = callee.as_str();
        if let Some(kind) = UnaryOp::from_name(name) {
            let a = bind(callee, call, &["arg"], &[])?;
            let x = self.operand(a.req("arg")?)?;
            return Ok(Op::Unary { kind, x });
        }
        if let Some(kind) = BinaryOp::from_name(name) {
            let a = bind(callee, call, &["lhs", "rhs"], &[])?;
            let (l, r) = (a.req("lhs")?, a.req("rhs")?);
            let (l, r) = (self.operand(l)?, self.operand(r)?);
            return Ok(Op::Binary { kind, a: l, b: r });
        }
        if let Some(kind) = TernaryOp::from_name(name) {
            return self.ternary(kind, callee, call);
        }
        if let Some(kind) = ScanOp::from_name(name) {
            let a = bind(callee, call, &["arg", "dim", "init"], &[])?;
            let (x, d) = (a.req("arg")?, a.req("dim")?);
            let x = self.operand(x)?;
            let dim = self.int(d, "dim")?;
            let init = a.opt("init").map(|e| self.operand(e)).transpose()?;
            return Ok(Op::Scan { kind, x, dim, init });
        }
        let reduce = match name {
            "sum" => Some(ReduceOp::Sum),
            "max" | "amax" => Some(ReduceOp::Max),
            "min" | "amin" => Some(ReduceOp::Min),
            "prod" => Some(ReduceOp::Prod),
            _ => None,
        };
        if let Some(kind) = reduce {
            let a = bind(
                callee,
                call,
                &["arg", "dims", "keepdim", "dtype"],
                // The direct bindings' one-dim form spells it `dim`.
                &[("axes", "dims"), ("dim", "dims")],
            )?;
            let x = self.operand(a.req("arg")?)?;
            let dims = match a.opt("dims") {
                Some(e) => self.ints(e, "dims")?,
                // Without dims nvFuser reduces every dim.
                None => (0..self.rank(x) as i64).collect(),
            };
            let keepdim = a
                .get("keepdim")
                .map(|e| self.boolean(e, "keepdim"))
                .transpose()?
                .unwrap_or(false);
            let dtype = match a.get("dtype") {
                Some(e) => self.dtype(e, true)?,
                None => None,
            };
            return Ok(Op::Reduce {
                kind,
                x,
                dims,
                keepdim,
                dtype,
            });
        }
        Ok(match name {
            "where" => {
                let a = bind(callee, call, &["cond", "lhs", "rhs"], &[])?;
                let (c, l, r) = (a.req("cond")?, a.req("lhs")?, a.req("rhs")?);
                let cond = self.operand(c)?;
                let (l, r) = (self.operand(l)?, self.operand(r)?);
                Op::Where { cond, a: l, b: r }
            }
            "cast" => {
                let a = bind(callee, call, &["arg", "dtype"], &[])?;
                let (x, d) = (a.req("arg")?, a.req("dtype")?);
                let x = self.operand(x)?;
                let dtype = self.dtype(d, false)?.unwrap_or(DType::Float);
                Op::Cast { x, dtype }
            }
            "welford" => {
                let a = bind(callee, call, &["arg", "dims"], &[("axes", "dims")])?;
                let (x, d) = (a.req("arg")?, a.req("dims")?);
                let x = self.operand(x)?;
                Op::Welford {
                    x,
                    dims: self.ints(d, "dims")?,
                }
            }
            "var_mean" => {
                let a = bind(
                    callee,
                    call,
                    &["arg", "dims", "correction", "keepdim"],
                    &[("axes", "dims")],
                )?;
                let (x, d) = (a.req("arg")?, a.req("dims")?);
                let x = self.operand(x)?;
                let dims = self.ints(d, "dims")?;
                // nvFuser's default is Bessel's correction.
                let correction = a
                    .get("correction")
                    .map(|e| self.int(e, "correction"))
                    .transpose()?
                    .unwrap_or(1);
                let keepdim = a
                    .get("keepdim")
                    .map(|e| self.boolean(e, "keepdim"))
                    .transpose()?
                    .unwrap_or(false);
                Op::VarMean {
                    x,
                    dims,
                    correction,
                    keepdim,
                }
            }
            "broadcast" => {
                let a = bind(callee, call, &["arg", "is_broadcast_dim"], &[])?;
                let (x, d) = (a.req("arg")?, a.req("is_broadcast_dim")?);
                let x = self.operand(x)?;
                Op::Broadcast {
                    x,
                    is_broadcast_dim: self.bools(d, "is_broadcast_dim")?,
                }
            }
            "broadcast_in_dim" => {
                let a = bind(
                    callee,
                    call,
                    &["arg", "shape", "broadcast_dims"],
                    &[("output_shape", "shape")],
                )?;
                let (x, s, d) = (a.req("arg")?, a.req("shape")?, a.req("broadcast_dims")?);
                let x = self.operand(x)?;
                Op::BroadcastInDim {
                    x,
                    shape: self.ints(s, "shape")?,
                    broadcast_dims: self.ints(d, "broadcast_dims")?,
                }
            }
            "expand" => {
                let a = bind(callee, call, &["arg", "shape"], &[])?;
                let (x, s) = (a.req("arg")?, a.req("shape")?);
                let x = self.operand(x)?;
                Op::Expand {
                    x,
                    shape: self.ints(s, "shape")?,
                }
            }
            "reshape" => {
                // Old legacy scripts write reshape(x, original_shape, new_shape).
                let params: &'static [&'static str] = if positional(call) >= 3 {
                    &["arg", "original_shape", "new_shape"]
                } else {
                    &["arg", "new_shape", "original_shape"]
                };
                let a = bind(callee, call, params, &[])?;
                let (x, s) = (a.req("arg")?, a.req("new_shape")?);
                let x = self.operand(x)?;
                self.check_original_shape(x, a.get("original_shape"))?;
                Op::Reshape {
                    x,
                    new_shape: self.ints(s, "new_shape")?,
                }
            }
            "permute" => {
                let a = bind(callee, call, &["arg", "dims"], &[])?;
                let (x, d) = (a.req("arg")?, a.req("dims")?);
                let x = self.operand(x)?;
                Op::Permute {
                    x,
                    dims: self.ints(d, "dims")?,
                }
            }
            "squeeze" => {
                // Old legacy scripts write squeeze(x, original_shape, dims).
                let third_is_list = call.args.get(2).is_some_and(|a| {
                    a.keyword.is_none()
                        && matches!(a.value.kind, ExprKind::List(_) | ExprKind::Tuple(_))
                });
                let params: &'static [&'static str] = if third_is_list {
                    &["arg", "original_shape", "dims", "squeeze_expanded"]
                } else {
                    &["arg", "dims", "squeeze_expanded", "original_shape"]
                };
                let a = bind(callee, call, params, &[])?;
                let (x, d) = (a.req("arg")?, a.req("dims")?);
                let x = self.operand(x)?;
                self.check_original_shape(x, a.get("original_shape"))?;
                // Squeezing an expanded dim is the same op here (the IR checks that it
                // is a broadcast dim); nvFuser asks for the flag to allow it.
                let flag = a
                    .get("squeeze_expanded")
                    .map(|e| self.boolean(e, "squeeze_expanded"))
                    .transpose()?
                    .unwrap_or(false);
                let dims = self.ints(d, "dims")?;
                let shape = self.b.fusion().value(x).shape.clone().unwrap_or_default();
                let n = shape.len() as i64;
                let big = dims.iter().find(|&&k| {
                    let k = if k < 0 { k + n } else { k };
                    (0..n).contains(&k) && shape[k as usize] != 1
                });
                if let (Some(k), false) = (big, flag) {
                    return Err(invalid(
                        call.span,
                        format!(
                            "squeeze: dim {k} has extent {}: refusing to squeeze an expanded dim; to force removal of this axis, use squeeze_expanded=True",
                            shape[(if *k < 0 { k + n } else { *k }) as usize]
                        ),
                    ));
                }
                Op::Squeeze { x, dims }
            }
            "slice" => {
                let a = bind(
                    callee,
                    call,
                    &[
                        "arg",
                        "start_indices",
                        "end_indices",
                        "strides",
                        "manual_normalization",
                    ],
                    &[],
                )?;
                let (x, s, e) = (
                    a.req("arg")?,
                    a.req("start_indices")?,
                    a.req("end_indices")?,
                );
                let x = self.operand(x)?;
                let start = self.ints(s, "start_indices")?;
                let end = self.ints(e, "end_indices")?;
                let strides = match a.opt("strides") {
                    Some(e) => self.ints(e, "strides")?,
                    None => vec![1; start.len()],
                };
                let manual_normalization = a
                    .get("manual_normalization")
                    .map(|e| self.boolean(e, "manual_normalization"))
                    .transpose()?
                    .unwrap_or(false);
                Op::Slice {
                    x,
                    start,
                    end,
                    strides,
                    manual_normalization,
                }
            }
            "pad" => {
                let a = bind(callee, call, &["arg", "pad_widths", "value"], &[])?;
                let (x, w) = (a.req("arg")?, a.req("pad_widths")?);
                let x = self.operand(x)?;
                let widths = self.operands(w, "pad_widths")?;
                let value = a.opt("value").map(|v| self.operand(v)).transpose()?;
                Op::Pad { x, widths, value }
            }
            "cat" => {
                let a = bind(callee, call, &["tensors", "dim", "manual_padding"], &[])?;
                let xs = self.operands(a.req("tensors")?, "tensors")?;
                let dim = a
                    .get("dim")
                    .map(|e| self.int(e, "dim"))
                    .transpose()?
                    .unwrap_or(0);
                let manual_padding = a
                    .get("manual_padding")
                    .map(|e| self.boolean(e, "manual_padding"))
                    .transpose()?
                    .unwrap_or(false);
                Op::Cat {
                    xs,
                    dim,
                    manual_padding,
                }
            }
            "full" => {
                let a = bind(callee, call, &["shape", "fill_value", "dtype"], &[])?;
                let (s, v, d) = (a.req("shape")?, a.req("fill_value")?, a.req("dtype")?);
                let shape = self.ints(s, "shape")?;
                let fill = self.operand(v)?;
                let dtype = self.dtype(d, false)?.unwrap_or(DType::Float);
                Op::Full { shape, fill, dtype }
            }
            "uniform" | "normal" => return self.rng(callee, name, call),
            "rand_like" | "randn_like" => {
                let a = bind(callee, call, &["arg"], &[])?;
                let x = self.operand(a.req("arg")?)?;
                let dist = if name == "rand_like" { RngDist::Uniform } else { RngDist::Normal };
                Op::RngLike { dist, x }
            }
            "complex" => {
                let a = bind(callee, call, &["lhs", "rhs"], &[])?;
                let (l, r) = (a.req("lhs")?, a.req("rhs")?);
                let xs = vec![self.operand(l)?, self.operand(r)?];
                Op::Complex { kind: ComplexOp::Complex, xs }
            }
            "real" | "imag" => {
                let a = bind(callee, call, &["arg"], &[])?;
                let xs = vec![self.operand(a.req("arg")?)?];
                let kind = ComplexOp::from_name(name).expect("real or imag");
                Op::Complex { kind, xs }
            }
            "index_select" => {
                let a = bind(callee, call, &["arg", "index", "dim"], &[])?;
                let (x, i, d) = (a.req("arg")?, a.req("index")?, a.req("dim")?);
                let x = self.operand(x)?;
                let index = self.operand(i)?;
                Op::IndexSelect {
                    x,
                    index,
                    dim: self.int(d, "dim")?,
                }
            }
            n if fusebench_ir::IndexOp::NAMES.contains(&n) => {
                Op::Index(self.index_op(n, callee, call)?)
            }
            "set" | "segment_set" | "stride_order" | "size" => self.defn_op(name, callee, call)?,
            n if crate::ops_gemm::NAMES.contains(&n) => self.gemm_op(n, callee, call)?,
            "matmul" => {
                let a = bind(callee, call, &["arg1", "arg2"], &[])?;
                let (x, y) = (a.req("arg1")?, a.req("arg2")?);
                let (a, b) = (self.operand(x)?, self.operand(y)?);
                Op::Matmul { a, b }
            }
            "linear" => {
                let a = bind(callee, call, &["arg1", "arg2", "bias"], &[])?;
                let (x, w) = (a.req("arg1")?, a.req("arg2")?);
                let (x, weight) = (self.operand(x)?, self.operand(w)?);
                let bias = a.opt("bias").map(|b| self.operand(b)).transpose()?;
                Op::Linear { a: x, weight, bias }
            }
            _ => {
                let mut supported = Op::supported_names();
                supported.extend(crate::ops_composite::COMPOSITES);
                supported.sort_unstable();
                return Err(diag(
                    name_span,
                    ErrorKind::UnknownOp {
                        name: name.to_string(),
                        supported,
                    },
                ));
            }
        })
    }

    /// `fd.ops.uniform(minval, maxval, shape, *, rng_seed=None, rng_offset=None,
    /// dtype=DataType.Float)` and `normal(mean, std, shape, ...)`, as both
    /// bindings declare them.
    fn rng(&mut self, callee: &str, name: &str, call: &Call) -> PResult<Op> {
        let (dist, p) = if name == "uniform" {
            (RngDist::Uniform, ["minval", "maxval"])
        } else {
            (RngDist::Normal, ["mean", "std"])
        };
        let params: &'static [&'static str] = if name == "uniform" {
            &["minval", "maxval", "shape", "rng_seed", "rng_offset", "dtype"]
        } else {
            &["mean", "std", "shape", "rng_seed", "rng_offset", "dtype"]
        };
        if positional(call) > 3 {
            return Err(invalid(
                call.span,
                format!("{callee} takes 3 positional arguments; rng_seed, rng_offset and dtype are keywords"),
            ));
        }
        let a = bind(callee, call, params, &[])?;
        let (av, bv, s) = (a.req(p[0])?, a.req(p[1])?, a.req("shape")?);
        let shape = self.ints(s, "shape")?;
        let (a_id, b_id) = (self.operand(av)?, self.operand(bv)?);
        let seed = a.opt("rng_seed").map(|e| self.operand(e)).transpose()?;
        let offset = a.opt("rng_offset").map(|e| self.operand(e)).transpose()?;
        if seed.is_some() != offset.is_some() {
            return Err(invalid(
                call.span,
                format!("{callee}: rng_seed and rng_offset must be provided together"),
            ));
        }
        let dtype = match a.get("dtype") {
            Some(d) => self.dtype(d, false)?.unwrap_or(DType::Float),
            None => DType::Float,
        };
        Ok(Op::Rng {
            dist,
            a: a_id,
            b: b_id,
            shape,
            seed,
            offset,
            dtype,
        })
    }
}
