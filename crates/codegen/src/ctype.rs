//! How each dtype lives in generated CUDA C: storage type in memory, register
//! type in arithmetic, loads, stores, conversions and literals.

use fusebench_ir::{DType, Literal};

/// Element type in global memory.
pub fn storage(d: DType) -> &'static str {
    match d {
        DType::Bool => "unsigned char",
        DType::Int32 => "int",
        DType::Int | DType::Index => "long long",
        DType::Half => "fb_f16",
        DType::BFloat16 => "fb_bf16",
        DType::Float => "float",
        DType::Double => "double",
        DType::UInt64 => "unsigned long long",
        DType::Float8E4m3fn | DType::Float8E5m2 | DType::Float8E8m0fnu => "unsigned char",
        DType::ComplexFloat => "fb_cf",
        DType::ComplexDouble => "fb_cd",
    }
}

/// Type of a value in registers. Reduced floats compute in float, holding
/// only values their own format can represent.
pub fn reg(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::Int32 => "int",
        DType::Int | DType::Index => "long long",
        DType::Half | DType::BFloat16 | DType::Float => "float",
        DType::Float8E4m3fn | DType::Float8E5m2 | DType::Float8E8m0fnu => "float",
        DType::Double => "double",
        DType::UInt64 => "unsigned long long",
        DType::ComplexFloat => "fb_cf",
        DType::ComplexDouble => "fb_cd",
    }
}

/// Register value from a storage element expression.
pub fn from_storage(d: DType, e: &str) -> String {
    match d {
        DType::Bool => format!("({e} != 0)"),
        DType::Half => format!("fb_h2f({e})"),
        DType::BFloat16 => format!("fb_bf2f({e})"),
        DType::Float8E4m3fn => format!("fb_e4m3_to_f({e})"),
        DType::Float8E5m2 => format!("fb_e5m2_to_f({e})"),
        DType::Float8E8m0fnu => format!("fb_e8m0_to_f({e})"),
        _ => e.to_string(),
    }
}

/// Storage element from a register value.
pub fn to_storage(d: DType, e: &str) -> String {
    match d {
        DType::Bool => format!("(unsigned char)({e})"),
        DType::Half => format!("fb_f2h({e})"),
        DType::BFloat16 => format!("fb_f2bf({e})"),
        DType::Float8E4m3fn => format!("fb_f_to_e4m3({e})"),
        DType::Float8E5m2 => format!("fb_store_e5m2({e})"),
        DType::Float8E8m0fnu => format!("fb_f_to_e8m0({e})"),
        _ => e.to_string(),
    }
}

/// Converts a register value of dtype `from` to dtype `to` with C cast
/// semantics and a single rounding to `to`.
pub fn convert(from: DType, to: DType, e: &str) -> String {
    if from == to || (reg(from) == reg(to) && !to.is_reduced_float()) {
        return e.to_string();
    }
    if from.is_complex() || to.is_complex() {
        return convert_complex(from, to, e);
    }
    if from.is_reduced_float() && to.is_reduced_float() {
        // bf16 -> f16 or back: one rounding from an exact float.
        return round_reduced(to, e);
    }
    match to {
        DType::Bool => format!("({e} != 0)"),
        // float8: through float first, as nvFuser's __double2e4m3 does.
        d if d.is_float8() => round_reduced(to, &format!("(float)({e})")),
        DType::Half | DType::BFloat16 if from == DType::Double => {
            let f = format!("fb_d2f_odd({e})");
            round_reduced(to, &f)
        }
        DType::Half | DType::BFloat16 => round_reduced(to, &format!("(float)({e})")),
        // Float to integer: the prelude's defined rule (saturate, NaN to 0), not C's cast.
        DType::Int32 if from.is_float() => format!("fb_f2i32({e})"),
        DType::Int | DType::Index if from.is_float() => format!("fb_f2i64({e})"),
        DType::UInt64 if from.is_float() => format!("fb_f2u64({e})"),
        _ => format!("({})({e})", reg(to)),
    }
}

/// Conversions to, from and between complex types: a real value becomes the
/// real part; a complex value cast to a real type keeps its real part, to
/// bool is true when either part is nonzero.
fn convert_complex(from: DType, to: DType, e: &str) -> String {
    match (from.complex_part(), to.complex_part()) {
        (Some(_), Some(p)) => format!("{}(({})({e}).re, ({})({e}).im)", reg(to), reg(p), reg(p)),
        (Some(_), None) if to == DType::Bool => format!("(fb_cbool({e}) != 0)"),
        (Some(p), None) => convert(p, to, &format!("({e}).re")),
        (None, Some(p)) => {
            let re = convert(from, p, e);
            format!("{}({re}, ({})0)", reg(to), reg(p))
        }
        (None, None) => unreachable!("one side is complex"),
    }
}

/// Rounds a float holding any value to the nearest value of a reduced type.
pub fn round_reduced(d: DType, e: &str) -> String {
    match d {
        DType::BFloat16 => format!("fb_rbf({e})"),
        DType::Half => format!("fb_rh({e})"),
        DType::Float8E4m3fn => format!("fb_re4m3({e})"),
        DType::Float8E5m2 => format!("fb_re5m2({e})"),
        DType::Float8E8m0fnu => format!("fb_re8m0({e})"),
        _ => e.to_string(),
    }
}

/// The expression `round_reduced(d, x)` was made from: `x`, where `e` is
/// one. Storing `x` as `d` gives the same bits as storing `e` (rounding to
/// `d` twice is rounding once), with one conversion instead of three.
pub fn unround(d: DType, e: &str) -> Option<&str> {
    let f = match d {
        DType::BFloat16 => "fb_rbf(",
        DType::Half => "fb_rh(",
        _ => return None,
    };
    let inner = e.strip_prefix(f)?.strip_suffix(')')?;
    // The call's own parenthesis closes at the end: `inner` is balanced.
    let mut depth = 0i32;
    for c in inner.chars() {
        depth += match c {
            '(' => 1,
            ')' => -1,
            _ => 0,
        };
        if depth < 0 {
            return None;
        }
    }
    (depth == 0).then_some(inner)
}

/// A constant of dtype `d` as a C expression of its register type.
pub fn literal(d: DType, v: Literal) -> String {
    let v = v.cast(d);
    match d {
        DType::Bool => if v.as_bool() { "true" } else { "false" }.into(),
        DType::Int32 => format!("{}", v.as_i64().unwrap_or(0)),
        DType::Int | DType::Index => format!("{}LL", v.as_i64().unwrap_or(0)),
        DType::UInt64 => format!("{}ULL", v.as_i64().unwrap_or(0) as u64),
        // Complex constants do not exist (type inference refuses complex scalars).
        DType::ComplexFloat | DType::ComplexDouble => {
            let p = d.complex_part().expect("complex");
            format!("{}({}, {})", reg(d), literal(p, v), literal(p, Literal::Float(0.0)))
        }
        DType::Half | DType::BFloat16 | DType::Float | DType::Float8E4m3fn | DType::Float8E5m2 | DType::Float8E8m0fnu => {
            let x = v.as_f64() as f32;
            if x.is_nan() {
                "__uint_as_float(0x7fffffffu)".into()
            } else if x.is_infinite() {
                if x > 0.0 {
                    "__uint_as_float(0x7f800000u)"
                } else {
                    "__uint_as_float(0xff800000u)"
                }
                .into()
            } else {
                format!("{x:e}f")
            }
        }
        DType::Double => {
            let x = v.as_f64();
            if x.is_nan() {
                "__longlong_as_double(0x7ff8000000000000LL)".into()
            } else if x.is_infinite() {
                if x > 0.0 {
                    "__longlong_as_double(0x7ff0000000000000LL)"
                } else {
                    "__longlong_as_double(0xfff0000000000000LL)"
                }
                .into()
            } else {
                format!("{x:e}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_read_back_exactly() {
        assert_eq!(literal(DType::Float, Literal::Float(0.1)), "1e-1f");
        assert_eq!(literal(DType::Double, Literal::Float(1e-5)), "1e-5");
        assert_eq!(literal(DType::Int, Literal::Int(-3)), "-3LL");
        assert!(literal(DType::Float, Literal::Float(f64::INFINITY)).contains("0x7f800000"));
    }

    #[test]
    fn a_rounding_is_undone_only_where_it_wraps_the_whole_expression() {
        assert_eq!(unround(DType::BFloat16, "fb_rbf((float)(x))"), Some("(float)(x)"));
        assert_eq!(unround(DType::Half, "fb_rh(a + b)"), Some("a + b"));
        assert_eq!(unround(DType::BFloat16, "fb_rbf(a) + fb_rbf(b)"), None);
        assert_eq!(unround(DType::Half, "fb_rbf(a)"), None);
        assert_eq!(unround(DType::Float, "x"), None);
    }

    #[test]
    fn conversions() {
        assert_eq!(
            convert(DType::Float, DType::BFloat16, "x"),
            "fb_rbf((float)(x))"
        );
        assert_eq!(convert(DType::BFloat16, DType::Float, "x"), "x");
        assert_eq!(convert(DType::Float, DType::Int, "x"), "fb_f2i64(x)");
        assert_eq!(convert(DType::BFloat16, DType::Int32, "x"), "fb_f2i32(x)");
        assert_eq!(convert(DType::Double, DType::UInt64, "x"), "fb_f2u64(x)");
        assert_eq!(convert(DType::Int32, DType::Int, "x"), "(long long)(x)");
        assert_eq!(
            convert(DType::Double, DType::BFloat16, "x"),
            "fb_rbf(fb_d2f_odd(x))"
        );
    }
}
