//! What the dtypes added for issue 13 allow: the ops that may read or make
//! complex and UInt64 values, promotion pairs nvFuser refuses, unsigned
//! integer arithmetic, and the `complex`/`real`/`imag` ops.

use crate::dtype::try_promote_types;
use crate::infer::{broadcast_shapes, Graph, OutType};
use crate::op::{BinaryOp, Op};
use crate::{DType, IrError, Value, ValueId};
use serde::{Deserialize, Serialize};

/// The ops that build or take apart complex values.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComplexOp {
    /// `complex(real, imag)`: two real tensors of the same dtype.
    Complex,
    Real,
    Imag,
}

impl ComplexOp {
    pub const ALL: [ComplexOp; 3] = [ComplexOp::Complex, ComplexOp::Real, ComplexOp::Imag];
    pub fn name(self) -> &'static str {
        match self {
            ComplexOp::Complex => "complex",
            ComplexOp::Real => "real",
            ComplexOp::Imag => "imag",
        }
    }
    pub fn from_name(s: &str) -> Option<ComplexOp> {
        ComplexOp::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Ops besides the op table's that handle complex values on the CPU and the
/// GPU (the table's ops: those with a complex entry in [`crate::complex_math`]).
const COMPLEX_OPS: &[&str] = &[
    "complex", "real", "imag", "where", "cast", "set", "segment_set", "broadcast",
    "broadcast_in_dim", "expand", "reshape", "permute", "squeeze", "slice", "pad", "cat", "sum",
    "prod",
];

/// Whether fusebench computes `op` on complex values.
fn complex_ok(op: &Op) -> bool {
    use crate::complex_math as cm;
    match op {
        Op::Unary { kind, .. } => cm::unary::<cm::F64>(*kind).is_some(),
        Op::Binary { kind, .. } => cm::binary::<cm::F64>(*kind).is_some(),
        Op::Ternary { kind, .. } => cm::ternary::<cm::F64>(*kind).is_some(),
        _ => COMPLEX_OPS.contains(&op.name()),
    }
}

/// Every op name fusebench computes on complex values, for error messages.
fn complex_op_names() -> Vec<&'static str> {
    use crate::complex_math as cm;
    let mut v: Vec<&str> = crate::UnaryOp::ALL.iter().filter(|k| cm::unary::<cm::F64>(**k).is_some()).map(|k| k.name()).collect();
    v.extend(BinaryOp::ALL.iter().filter(|k| cm::binary::<cm::F64>(**k).is_some()).map(|k| k.name()));
    v.extend(crate::TernaryOp::ALL.iter().filter(|k| cm::ternary::<cm::F64>(**k).is_some()).map(|k| k.name()));
    v.extend(COMPLEX_OPS);
    v
}

/// Ops that give the same bits for UInt64 as for Int, or that have an
/// unsigned variant in the reference and run as `unsigned long long` on the GPU.
const UINT64_OPS: &[&str] = &[
    "add", "sub", "mul", "div", "neg", "abs", "pow", "maximum", "minimum", "eq", "ne", "lt", "le",
    "gt", "ge", "where", "cast", "sum", "broadcast", "broadcast_in_dim", "expand", "reshape",
    "permute", "squeeze", "slice", "set", "segment_set", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitwise_left_shift", "lshift", "bitwise_right_shift", "rshift",
    "mod", "gcd", "isnan", "isreal",
    // Unary float ops: they cast UInt64 to Float first (an unsigned conversion).
    "reciprocal", "rsqrt", "sqrt", "exp", "log", "tanh", "erf", "sigmoid",
    // Its philox seed/offset (UInt64) are only read for dropout, refused on the CPU.
    "sdpfa_bwd",
];

/// Refuses an op reading or making complex or UInt64 values that fusebench
/// does not compute for them, and promotions nvFuser refuses.
pub fn check(g: &Graph, op: &Op) -> Result<(), IrError> {
    let name = op.name();
    let mut dtypes: Vec<DType> = op
        .operands()
        .iter()
        .filter_map(|v| g.values.get(v.index()).map(|x| x.dtype))
        .collect();
    match op {
        Op::Full { dtype, .. } | Op::Cast { dtype, .. } => dtypes.push(*dtype),
        Op::Reduce { dtype: Some(d), .. } => dtypes.push(*d),
        _ => {}
    }
    // A complex scalar is a constant with a zero imaginary part (a real
    // literal cast to complex, or `x+0j`): its Literal holds the real part.
    let scalar_complex = op.operands().iter().any(|v| {
        g.values.get(v.index()).is_some_and(|x| x.shape.is_none() && x.dtype.is_complex() && x.constant.is_none())
    }) || matches!(op, Op::Cast { x, dtype } if dtype.is_complex()
        && g.values.get(x.index()).is_some_and(|v| v.shape.is_none() && v.constant.is_none()));
    if scalar_complex {
        return Err(IrError::op(
            name,
            "complex scalar inputs are not supported (only constants with a zero imaginary part)".to_string(),
        ));
    }
    for d in dtypes {
        let (allowed, what, ok) = if d.is_complex() {
            (complex_op_names(), "complex dtypes", complex_ok(op))
        } else if d == DType::UInt64 {
            (UINT64_OPS.to_vec(), "UInt64", UINT64_OPS.contains(&name))
        } else {
            continue;
        };
        if !ok {
            return Err(IrError::op(
                name,
                format!(
                    "{name} on {d} is not supported: fusebench computes only these ops on {what}: {}",
                    allowed.join(", ")
                ),
            ));
        }
    }
    if let Op::Reduce { kind, x, .. } = op {
        let d = g.values[x.index()].dtype;
        if d == DType::UInt64 && *kind != crate::op::ReduceOp::Sum {
            return Err(IrError::op(name, format!("{name} on {d} is not supported (only sum)")));
        }
        // nvFuser: "Could not generate a max op for tensor with type: std::complex".
        if d.is_complex() && !matches!(kind, crate::op::ReduceOp::Sum | crate::op::ReduceOp::Prod) {
            return Err(IrError::op(name, format!("{name} on {d} is not supported (only sum and prod)")));
        }
    }
    let pair = match op {
        Op::Binary { a, b, .. } | Op::Where { a, b, .. } => Some((*a, *b)),
        _ => None,
    };
    if let Some((a, b)) = pair {
        let (av, bv) = (&g.values[a.index()], &g.values[b.index()]);
        check_promotion(name, av, bv)?;
    }
    Ok(())
}

/// nvFuser's `computeTypes` joins dtypes with `promoteType` within tensors
/// of rank > 0, within 0-dim tensors and within scalars; a pair it cannot
/// join (UInt64 with a signed integer or Bool) is an error there.
fn check_promotion(name: &str, a: &Value, b: &Value) -> Result<(), IrError> {
    let group = |v: &Value| match &v.shape {
        Some(s) if !s.is_empty() => 0,
        Some(_) => 1,
        None => 2,
    };
    if a.dtype == b.dtype || group(a) != group(b) {
        return Ok(());
    }
    let wrapped = |d: DType| if group(a) == 2 && d.is_reduced_float() { DType::Float } else { d };
    try_promote_types(wrapped(a.dtype), wrapped(b.dtype))
        .map(|_| ())
        .map_err(|m| IrError::op(name, m))
}

/// Shapes and dtypes of `complex`, `real`, `imag` (nvFuser's ops/arith.cpp).
pub fn infer(g: &Graph, kind: ComplexOp, xs: &[ValueId]) -> Result<Vec<OutType>, IrError> {
    let name = kind.name();
    let want = if kind == ComplexOp::Complex { 2 } else { 1 };
    if xs.len() != want {
        return Err(IrError::op(name, format!("takes {want} operands, got {}", xs.len())));
    }
    let vals: Vec<&Value> = xs.iter().map(|v| &g.values[v.index()]).collect();
    let Some(shape) = vals[0].shape.clone() else {
        return Err(IrError::op(
            name,
            "complex scalars are not supported: pass tensors".to_string(),
        ));
    };
    let dtype = match kind {
        ComplexOp::Complex => {
            let (r, i) = (vals[0], vals[1]);
            if r.dtype != i.dtype {
                return Err(IrError::op(
                    name,
                    format!(
                        "real and imag data type should be same in complex(), got {} and {}",
                        r.dtype, i.dtype
                    ),
                ));
            }
            let Some(s) = &i.shape else {
                return Err(IrError::op(name, "imag must be a tensor, as real is".to_string()));
            };
            if *s != shape {
                broadcast_shapes(name, &[&shape, s])?;
                return Err(IrError::op(
                    name,
                    format!("real {shape:?} and imag {s:?} must have the same shape"),
                ));
            }
            r.dtype.complex_of().filter(|_| !r.dtype.is_complex()).ok_or_else(|| {
                IrError::op(name, format!("only Float and Double parts make a complex value, got {}", r.dtype))
            })?
        }
        // real of a real tensor is the tensor itself (nvFuser's `set`).
        ComplexOp::Real => vals[0].dtype.complex_part().unwrap_or(vals[0].dtype),
        ComplexOp::Imag => vals[0].dtype.complex_part().ok_or_else(|| {
            IrError::op(name, format!("imag not supported for non-complex tensors ({})", vals[0].dtype))
        })?,
    };
    Ok(vec![OutType {
        dtype,
        shape: Some(shape),
        constant: None,
    }])
}

/// The output dtype of `abs` on a complex value: its part type.
pub fn abs_dtype(x: DType) -> Option<DType> {
    x.complex_part()
}

/// A constant of dtype `from` converted to `to`: as `Literal::cast`, except
/// that a UInt64 constant (held as its bits) converts to floats unsigned.
pub fn cast_literal(l: crate::Literal, from: DType, to: DType) -> crate::Literal {
    match l {
        crate::Literal::Int(i) if from == DType::UInt64 && (to.is_float() || to.is_complex()) => {
            crate::Literal::Float(i as u64 as f64).cast(to)
        }
        _ => l.cast(to),
    }
}

/// Binary ops on UInt64 whose result depends on signedness, computed on the
/// bits of i64 lanes as unsigned (division by zero gives 0, as for Int).
#[inline]
pub fn binary_u64(kind: BinaryOp, a: i64, b: i64) -> i64 {
    let (x, y) = (a as u64, b as u64);
    match kind {
        BinaryOp::Div => x.checked_div(y).unwrap_or(0) as i64,
        BinaryOp::Pow => x.wrapping_pow(y.min(u32::MAX as u64) as u32) as i64,
        BinaryOp::Maximum => x.max(y) as i64,
        BinaryOp::Minimum => x.min(y) as i64,
        BinaryOp::Lt => (x < y) as i64,
        BinaryOp::Le => (x <= y) as i64,
        BinaryOp::Gt => (x > y) as i64,
        BinaryOp::Ge => (x >= y) as i64,
        // C's % on unsigned operands; by 0 gives 0, as for Int.
        BinaryOp::Mod => x.checked_rem(y).unwrap_or(0) as i64,
        // A logical shift: the width or more gives 0.
        BinaryOp::BitwiseRightShift => x.checked_shr(y.min(64) as u32).unwrap_or(0) as i64,
        BinaryOp::Gcd => {
            let (mut p, mut q) = (x, y);
            while q != 0 {
                (p, q) = (q, p % q);
            }
            p as i64
        }
        _ => crate::scalar::binary_i64(kind, a, b, crate::DType::UInt64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_ops() {
        let big = u64::MAX as i64; // 2^64 - 1, -1 as i64
        assert_eq!(binary_u64(BinaryOp::Lt, 1, big), 1);
        assert_eq!(binary_u64(BinaryOp::Maximum, 1, big), big);
        assert_eq!(binary_u64(BinaryOp::Div, big, 2), (u64::MAX / 2) as i64);
        assert_eq!(binary_u64(BinaryOp::Div, 5, 0), 0);
        assert_eq!(binary_u64(BinaryOp::Add, big, 1), 0);
        assert_eq!(binary_u64(BinaryOp::Pow, 2, 64), 0);
        assert_eq!(binary_u64(BinaryOp::Ge, i64::MIN, i64::MAX), 1);
        // 2^64 - 1 = 3 * 5 * 17 * 257 * 641 * 65537 * 6700417, as unsigned.
        assert_eq!(binary_u64(BinaryOp::BitwiseRightShift, big, 60), 15);
        assert_eq!(binary_u64(BinaryOp::BitwiseRightShift, big, 64), 0);
        assert_eq!(binary_u64(BinaryOp::Mod, big, 10), 5);
        assert_eq!(binary_u64(BinaryOp::Mod, 7, 0), 0);
        assert_eq!(binary_u64(BinaryOp::Gcd, big, 3 * 641), 3 * 641);
        assert_eq!(binary_u64(BinaryOp::Gcd, 0, 12), 12);
    }
}
