//! CUDA text of the complex ops whose lowering differs from the real one:
//! `complex`, `real`, `imag`, `abs` of a complex value (a real result) and
//! complex division (the integer-style zero check does not apply). The rest
//! (add, sub, mul, neg, eq, ne, where, cast) use the operators and
//! conversions of `fb_cf`/`fb_cd` in prelude.cu through the ordinary path.

use crate::ctype;
use fusebench_ir::dtype_ops::ComplexOp;
use fusebench_ir::infer::common_dtype;
use fusebench_ir::{BinaryOp, DType, Fusion, Op, UnaryOp};

/// Whether `op` is lowered here.
pub fn involved(f: &Fusion, op: &Op) -> bool {
    match op {
        Op::Complex { .. } => true,
        Op::Unary { kind: UnaryOp::Abs, x } => f.value(*x).dtype.is_complex(),
        Op::Binary { kind: BinaryOp::Div, a, b } => {
            common_dtype(&[f.value(*a), f.value(*b)], false, true).is_complex()
        }
        _ => false,
    }
}

/// The expression of `op` (output dtype `d`) from its operands' register
/// expressions and dtypes.
pub fn lower(f: &Fusion, op: &Op, d: DType, vals: &[(String, DType)]) -> String {
    match op {
        Op::Complex { kind, .. } => match kind {
            ComplexOp::Complex => {
                let p = d.complex_part().expect("complex output");
                let re = ctype::convert(vals[0].1, p, &vals[0].0);
                let im = ctype::convert(vals[1].1, p, &vals[1].0);
                format!("{}({re}, {im})", ctype::reg(d))
            }
            ComplexOp::Real if vals[0].1.is_complex() => format!("({}).re", vals[0].0),
            ComplexOp::Real => ctype::convert(vals[0].1, d, &vals[0].0),
            ComplexOp::Imag => format!("({}).im", vals[0].0),
        },
        Op::Unary { .. } => format!("fb_cabs({})", vals[0].0),
        Op::Binary { a, b, .. } => {
            let c = common_dtype(&[f.value(*a), f.value(*b)], false, true);
            let av = ctype::convert(vals[0].1, c, &vals[0].0);
            let bv = ctype::convert(vals[1].1, c, &vals[1].0);
            format!("({av} / {bv})")
        }
        _ => unreachable!("not a complex op lowered here"),
    }
}
