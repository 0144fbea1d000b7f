//! CUDA text of ops on complex values: `complex`, `real`, `imag`, and every
//! table op whose operands or compute type are complex, from the op's complex
//! entry in `fusebench_ir::complex_math` (the prelude's `fb_c_NAME` for
//! complex math and predicates, the C operators for + - * / == !=, and the
//! table's integer template on `fb_cbool` operands for the ops nvFuser runs
//! on complex values converted to bool). `where`, `cast` and movement ops use
//! the conversions of `fb_cf`/`fb_cd` through the ordinary path.

use crate::ctype;
use fusebench_ir::complex_math::{self as cm, Complex};
use fusebench_ir::dtype_ops::ComplexOp;
use fusebench_ir::elementwise::{self, fill_cuda};
use fusebench_ir::{BinaryOp, DType, Fusion, Op, ReduceOp, UnaryOp};

/// Whether `op` is lowered here.
pub fn involved(f: &Fusion, op: &Op) -> bool {
    match op {
        Op::Complex { .. } => true,
        Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } => elementwise::op_typing(op, &f.values)
            .and_then(|t| t.ok())
            .is_some_and(|t| t.casts.iter().any(|d| d.is_complex())),
        _ => false,
    }
}

/// Why the GPU cannot run `op` on complex values yet, if it cannot. (Sums
/// to a complex or floating-point dtype are rewritten into sums of the parts
/// before this is asked: `crate::rewrite`; products to a complex dtype
/// accumulate in complex double: `reduction::acc_for`.)
pub fn unsupported(f: &Fusion, op: &Op) -> Option<String> {
    match op {
        Op::Reduce { x, kind: ReduceOp::Sum, dtype: Some(d), .. } if f.value(*x).dtype.is_complex() => Some(format!(
            "sum of complex values to {d} has no GPU kernel yet (nvFuser converts each element to {d} \
             before summing); the CPU reference runs it"
        )),
        Op::Reduce { x, kind: ReduceOp::Prod, dtype: Some(d), .. }
            if f.value(*x).dtype.is_complex() && !d.is_complex() =>
        {
            Some(format!(
                "prod of complex values to {d} has no GPU kernel yet (nvFuser converts each element \
                 to {d} before multiplying); the CPU reference runs it"
            ))
        }
        _ => None,
    }
}

/// The expression of `op` (output dtype `d`) from its operands' register
/// expressions and dtypes.
pub fn lower(f: &Fusion, op: &Op, d: DType, vals: &[(String, DType)]) -> Result<String, String> {
    if let Op::Complex { kind, .. } = op {
        return Ok(match kind {
            ComplexOp::Complex => {
                let p = d.complex_part().expect("complex output");
                let re = ctype::convert(vals[0].1, p, &vals[0].0);
                let im = ctype::convert(vals[1].1, p, &vals[1].0);
                format!("{}({re}, {im})", ctype::reg(d))
            }
            ComplexOp::Real if vals[0].1.is_complex() => format!("({}).re", vals[0].0),
            ComplexOp::Real => ctype::convert(vals[0].1, d, &vals[0].0),
            ComplexOp::Imag => format!("({}).im", vals[0].0),
        });
    }
    let t = elementwise::op_typing(op, &f.values)
        .expect("a table op")
        .map_err(|e| e.to_string())?;
    let args: Vec<String> = vals
        .iter()
        .zip(&t.casts)
        .map(|((e, from), to)| ctype::convert(*from, *to, e))
        .collect();
    let (sem, cuda) = match op {
        Op::Unary { kind, .. } => (cm::unary::<cm::F64>(*kind), kind.cuda()),
        Op::Binary { kind, .. } => (cm::binary::<cm::F64>(*kind), kind.cuda()),
        Op::Ternary { kind, .. } => (cm::ternary::<cm::F64>(*kind), kind.cuda()),
        _ => unreachable!("not a complex op lowered here"),
    };
    let name = op.name();
    let sem = sem.ok_or_else(|| format!("{name} on complex values is not supported"))?;
    let call = format!("fb_c_{name}({})", args.join(", "));
    // The dtype the expression has: complex math keeps the compute type.
    let (e, has) = match (sem, op) {
        (_, Op::Unary { kind: UnaryOp::Abs, .. }) => {
            (format!("fb_cabs({})", args[0]), t.compute.complex_part().expect("complex"))
        }
        (_, Op::Unary { kind: UnaryOp::Neg, .. }) => (format!("(-{})", args[0]), t.compute),
        (Complex::Binary(_) | Complex::Compare(_), Op::Binary { kind, .. }) => {
            let sym = match kind {
                BinaryOp::Add => "+",
                BinaryOp::Sub => "-",
                BinaryOp::Mul => "*",
                BinaryOp::Div | BinaryOp::Truediv => "/",
                BinaryOp::Eq => "==",
                BinaryOp::Ne => "!=",
                _ => return Ok(convert_out(call, t.compute, d)),
            };
            let has = if matches!(sem, Complex::Compare(_)) { DType::Bool } else { t.compute };
            (format!("({} {sym} {})", args[0], args[1]), has)
        }
        (Complex::Pred(_), _) => (call, DType::Bool),
        (Complex::Bools, _) => {
            let b: Vec<String> = args.iter().map(|a| format!("fb_cbool({a})")).collect();
            let refs: Vec<&str> = b.iter().map(|s| s.as_str()).collect();
            (fill_cuda(cuda[2], &refs, "long long"), DType::Int)
        }
        _ => (call, t.compute),
    };
    Ok(convert_out(e, has, d))
}

fn convert_out(e: String, has: DType, d: DType) -> String {
    if d == DType::Bool && has == DType::Int {
        format!("(({e}) != 0)")
    } else {
        ctype::convert(has, d, &e)
    }
}
