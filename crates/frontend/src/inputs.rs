//! The `inputs = [...]` list: how the script makes each input with torch.

use crate::error::{diag, expected, invalid, ErrorKind, PResult, Source};
use crate::expr::{Expr, ExprKind};
use crate::ops::{bind, Call};
use fusebench_ir::{DType, InputRecipe};

const WHAT: &str =
    "torch.testing.make_tensor(...), torch.randn(...), torch.randn(...).as_strided(...), torch.randint(...)(.as_strided(...)) or a Python scalar";

pub(crate) fn parse_inputs(src: &Source, e: &Expr) -> PResult<Vec<InputRecipe>> {
    let ExprKind::List(items) = &e.kind else {
        return Err(expected(
            e.span,
            "a list `[...]` of inputs",
            format!("`{}`", src.slice(e.span)),
        ));
    };
    items.iter().map(|x| item(src, x)).collect()
}

fn item(src: &Source, e: &Expr) -> PResult<InputRecipe> {
    if let Some(l) = e.literal() {
        return Ok(InputRecipe::Scalar { value: l? });
    }
    let ExprKind::Call(callee, args) = &e.kind else {
        return Err(expected(e.span, WHAT, format!("`{}`", src.slice(e.span))));
    };
    let call = Call { span: e.span, args };
    if let ExprKind::Attr(base, method) = &callee.kind {
        if method == "as_strided" {
            let base = plain_draw(src, base)?;
            if matches!(
                base,
                InputRecipe::Randn { as_strided: Some(_), .. } | InputRecipe::Randint { as_strided: Some(_), .. }
            ) {
                return Err(invalid(e.span, "as_strided applies to a plain torch.randn(...) or torch.randint(...)"));
            }
            let a = bind(
                "as_strided",
                &call,
                &["size", "stride", "storage_offset"],
                &[],
            )?;
            let shape = sizes(src, a.req("size")?)?;
            let stride = ints(src, a.req("stride")?)?;
            if let Some(o) = a.opt("storage_offset") {
                if int(src, o)? != 0 {
                    return Err(invalid(o.span, "a nonzero storage_offset is not supported"));
                }
            }
            let view = Some((shape, stride));
            return Ok(match base {
                InputRecipe::Randn { size, dtype, .. } => InputRecipe::Randn {
                    size,
                    dtype,
                    as_strided: view,
                },
                InputRecipe::Randint {
                    low,
                    high,
                    size,
                    dtype,
                    ..
                } => InputRecipe::Randint {
                    low,
                    high,
                    size,
                    dtype,
                    as_strided: view,
                },
                _ => unreachable!("plain_draw makes randn or randint"),
            });
        }
    }
    match callee.dotted().as_deref() {
        Some("torch.testing.make_tensor") => make_tensor(src, &call),
        Some("torch.randn") => randn(src, &call),
        Some("torch.randint") => randint(src, &call),
        _ => Err(expected(
            callee.span,
            WHAT,
            format!("`{}`", src.slice(callee.span)),
        )),
    }
}

/// The draw `.as_strided` views: `torch.randn(...)` or `torch.randint(...)`.
fn plain_draw(src: &Source, e: &Expr) -> PResult<InputRecipe> {
    match &e.kind {
        ExprKind::Call(callee, args) if callee.dotted().as_deref() == Some("torch.randn") => {
            randn(src, &Call { span: e.span, args })
        }
        ExprKind::Call(callee, args) if callee.dotted().as_deref() == Some("torch.randint") => {
            randint(src, &Call { span: e.span, args })
        }
        _ => Err(expected(
            e.span,
            "torch.randn(...) or torch.randint(...) before .as_strided",
            format!("`{}`", src.slice(e.span)),
        )),
    }
}

/// `*size` or one tuple/list: positional arguments of make_tensor and randn.
fn varargs_size(src: &Source, call: &Call) -> PResult<Vec<usize>> {
    let pos: Vec<&Expr> = call
        .args
        .iter()
        .filter(|a| a.keyword.is_none())
        .map(|a| &a.value)
        .collect();
    match pos.as_slice() {
        [one] if matches!(one.kind, ExprKind::List(_) | ExprKind::Tuple(_)) => sizes(src, one),
        many => many.iter().map(|e| size(src, e)).collect(),
    }
}

/// Keyword arguments, checked against those `callee` supports.
fn keywords<'e>(
    call: &Call<'e>,
    callee: &str,
    allowed: &[&str],
) -> PResult<Vec<(&'e str, &'e Expr)>> {
    let mut out = vec![];
    for a in call.args {
        if let Some((k, span)) = &a.keyword {
            if !allowed.contains(&k.as_str()) {
                return Err(diag(
                    *span,
                    ErrorKind::UnknownKeyword {
                        callee: callee.to_string(),
                        keyword: k.clone(),
                        supported: allowed.iter().map(|s| s.to_string()).collect(),
                    },
                ));
            }
            out.push((k.as_str(), &a.value));
        }
    }
    Ok(out)
}

fn make_tensor(src: &Source, call: &Call) -> PResult<InputRecipe> {
    let callee = "torch.testing.make_tensor";
    let shape = varargs_size(src, call)?;
    let (mut dtype, mut low, mut high) = (None, None, None);
    for (k, v) in keywords(call, callee, &["dtype", "device", "low", "high"])? {
        match k {
            "dtype" => dtype = Some(torch_dtype(src, v)?),
            "device" => device(src, v)?,
            "low" => low = bound(src, v)?,
            _ => high = bound(src, v)?,
        }
    }
    let dtype = dtype.ok_or_else(|| invalid(call.span, format!("{callee} needs dtype=")))?;
    Ok(InputRecipe::MakeTensor {
        shape,
        dtype,
        low,
        high,
    })
}

fn randn(src: &Source, call: &Call) -> PResult<InputRecipe> {
    let size = varargs_size(src, call)?;
    // torch's default dtype.
    let mut dtype = DType::Float;
    for (k, v) in keywords(call, "torch.randn", &["dtype", "device"])? {
        match k {
            "dtype" => dtype = torch_dtype(src, v)?,
            _ => device(src, v)?,
        }
    }
    Ok(InputRecipe::Randn {
        size,
        dtype,
        as_strided: None,
    })
}

fn randint(src: &Source, call: &Call) -> PResult<InputRecipe> {
    let callee = "torch.randint";
    let npos = call.args.iter().filter(|a| a.keyword.is_none()).count();
    // torch.randint(high, size) or torch.randint(low, high, size).
    let params: &'static [&'static str] = if npos == 2 {
        &["high", "size", "low", "dtype", "device"]
    } else {
        &["low", "high", "size", "dtype", "device"]
    };
    let a = bind(callee, call, params, &[])?;
    let low = a.get("low").map(|e| int(src, e)).transpose()?.unwrap_or(0);
    let high = int(src, a.req("high")?)?;
    let size = sizes(src, a.req("size")?)?;
    let dtype = a
        .get("dtype")
        .map(|e| torch_dtype(src, e))
        .transpose()?
        .unwrap_or(DType::Int);
    if let Some(d) = a.get("device") {
        device(src, d)?;
    }
    if low >= high {
        return Err(invalid(
            call.span,
            format!("{callee}: low {low} must be below high {high}"),
        ));
    }
    Ok(InputRecipe::Randint {
        low,
        high,
        size,
        dtype,
        as_strided: None,
    })
}

fn device(src: &Source, e: &Expr) -> PResult<()> {
    match e.kind {
        ExprKind::Str(_) => Ok(()),
        _ => Err(expected(
            e.span,
            "a device string such as 'cuda:0'",
            format!("`{}`", src.slice(e.span)),
        )),
    }
}

fn torch_dtype(src: &Source, e: &Expr) -> PResult<DType> {
    let path = e.path().unwrap_or_default();
    match path.as_slice() {
        [("torch", _), (x, _)] => DType::from_torch_name(x).ok_or_else(|| {
            let supported = [
                "bool", "int32", "int64", "float16", "bfloat16", "float32", "float64", "uint64",
                "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "complex64", "complex128",
            ];
            diag(
                e.span,
                ErrorKind::UnknownDType {
                    written: format!("torch.{x}"),
                    supported: supported.iter().map(|s| format!("torch.{s}")).collect(),
                },
            )
        }),
        _ => Err(expected(
            e.span,
            "a torch dtype such as `torch.float32`",
            format!("`{}`", src.slice(e.span)),
        )),
    }
}

/// `low=`/`high=` of make_tensor: a finite number, or None.
fn bound(src: &Source, e: &Expr) -> PResult<Option<f64>> {
    if matches!(e.kind, ExprKind::None) {
        return Ok(None);
    }
    match e.literal() {
        Some(l) => {
            let v = l?.as_f64();
            if !v.is_finite() {
                return Err(invalid(e.span, "low and high must be finite"));
            }
            Ok(Some(v))
        }
        None => Err(expected(
            e.span,
            "a number or None",
            format!("`{}`", src.slice(e.span)),
        )),
    }
}

fn int(src: &Source, e: &Expr) -> PResult<i64> {
    e.i64().unwrap_or_else(|| {
        Err(expected(
            e.span,
            "an integer",
            format!("`{}`", src.slice(e.span)),
        ))
    })
}

fn ints(src: &Source, e: &Expr) -> PResult<Vec<i64>> {
    match &e.kind {
        ExprKind::List(items) | ExprKind::Tuple(items) => {
            items.iter().map(|x| int(src, x)).collect()
        }
        _ => Err(expected(
            e.span,
            "a tuple of integers",
            format!("`{}`", src.slice(e.span)),
        )),
    }
}

fn size(src: &Source, e: &Expr) -> PResult<usize> {
    let v = int(src, e)?;
    usize::try_from(v).map_err(|_| invalid(e.span, format!("size {v} is negative")))
}

/// A tuple or list of sizes; one integer is a size of one dim.
fn sizes(src: &Source, e: &Expr) -> PResult<Vec<usize>> {
    match &e.kind {
        ExprKind::List(items) | ExprKind::Tuple(items) => {
            items.iter().map(|x| size(src, x)).collect()
        }
        _ => Ok(vec![size(src, e)?]),
    }
}
