//! The op table: the single home of every elementwise op.
//!
//! One row per op gives its `fd.ops` name, its dtype rule ([`Rule`], read from
//! nvFuser's csrc/ops/arith.cpp and csrc/type_promotion.cpp), its CPU
//! semantics (on f64 lanes for float compute dtypes, on i64 lanes for integer
//! and bool ones) and its CUDA spelling for float, double and integer compute
//! types (`$0 $1 $2` are the operands, `$t` the C type; `""` means the op has
//! no such form, which type inference already refuses).
//!
//! The tables are macros (`unary_table!`, `binary_table!`, `ternary_table!`)
//! that hand their rows to a callback macro, so that other crates generate
//! code from the same rows (the reference executor's per-op loops in
//! `reference/src/expr/kernels.rs`). Adding an op is one row here, plus a function in
//! [`crate::math`] when its semantics are more than an expression.

use crate::dtype::DType;
use crate::infer::common_dtype;
use crate::{IrError, Op, Value, ValueId};
use serde::{Deserialize, Serialize};

/// How an op's compute and output dtypes follow from its operands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Rule {
    /// Output and compute dtype are the operand's (nvFuser's plain `unaryOp`: abs, ceil, relu...).
    Keep,
    /// As `Keep`, but the operand must be floating point (silu has no integer form in nvFuser).
    KeepFloat,
    /// `default_op_config`: common dtype, Half/BFloat16 computed as Float.
    Default,
    /// `float_op_config`: as `Default`, integers and bools promoted to Float.
    Float,
    /// `float_only_op_config`: as `Float`, and the common dtype must be Float or Double (nextafter).
    FloatOnly,
    /// Bool result computed on the operand's own dtype (isnan, isinf...).
    Predicate,
    /// Bool result computed on the `Default` dtype (signbit, comparisons).
    Compare,
    /// Operands cast to Bool, Bool result (logical_and/or/not).
    Logical,
    /// Integer or bool operands, `Default` dtype (bitwise and/or/xor/not).
    Bitwise,
    /// Integer operands only, `Default` dtype (shifts, gcd).
    IntOnly,
    /// `Default` over every operand, floating point required (lerp).
    DefaultFloat,
    /// First operand keeps its dtype; the others must be scalars, cast to it
    /// unless of the same category (clamp, threshold: nvFuser's `optionalCast`).
    Bounded,
}

/// Bit width of integer lanes of `dtype` (1 for Bool).
#[inline(always)]
pub fn int_bits(dtype: DType) -> u32 {
    match dtype {
        DType::Bool => 1,
        DType::Int32 => 32,
        _ => 64,
    }
}

/// Fills a CUDA template: `$0..$2` operands, `$t` the compute C type.
pub fn fill_cuda(template: &str, args: &[&str], ctype: &str) -> String {
    let mut s = template.replace("$t", ctype);
    for (i, a) in args.iter().enumerate() {
        s = s.replace(&format!("${i}"), a);
    }
    s
}

/// Elementwise ops of one operand. Row: name, rule, f64 semantics `|x|`,
/// i64 semantics `|x, bits|`, CUDA float / double / integer.
#[macro_export]
macro_rules! unary_table {
    ($cb:ident) => {
        $cb! {
            Neg => ["neg", Default, |x| -x, |x, _b| x.wrapping_neg(), "(-$0)", "(-$0)", "(-$0)"],
            Abs => ["abs", Keep, |x| x.abs(), |x, b| if b == 1 { x } else { x.wrapping_abs() },
                "fabsf($0)", "fabs($0)", "($0 < 0 ? -$0 : $0)"],
            Reciprocal => ["reciprocal", Float, |x| 1.0 / x, |x, _b| x, "(1.0f / $0)", "(1.0 / $0)", ""],
            Rsqrt => ["rsqrt", Float, |x| 1.0 / x.sqrt(), |x, _b| x, "rsqrtf($0)", "rsqrt($0)", ""],
            Sqrt => ["sqrt", Float, |x| x.sqrt(), |x, _b| x, "sqrtf($0)", "sqrt($0)", ""],
            Exp => ["exp", Float, |x| x.exp(), |x, _b| x, "expf($0)", "exp($0)", ""],
            Log => ["log", Float, |x| x.ln(), |x, _b| x, "logf($0)", "log($0)", ""],
            Tanh => ["tanh", Float, |x| x.tanh(), |x, _b| x, "tanhf($0)", "tanh($0)", ""],
            Erf => ["erf", Float, |x| libm::erf(x), |x, _b| x, "erff($0)", "erf($0)", ""],
            Sigmoid => ["sigmoid", Float, |x| 1.0 / (1.0 + (-x).exp()), |x, _b| x,
                "fb_sigmoidf($0)", "fb_sigmoidd($0)", ""],
            Acos => ["acos", Float, |x| x.acos(), |x, _b| x, "acosf($0)", "acos($0)", ""],
            Acosh => ["acosh", Float, |x| $crate::math::acosh(x), |x, _b| x, "acoshf($0)", "acosh($0)", ""],
            Asin => ["asin", Float, |x| x.asin(), |x, _b| x, "asinf($0)", "asin($0)", ""],
            Asinh => ["asinh", Float, |x| libm::asinh(x), |x, _b| x, "asinhf($0)", "asinh($0)", ""],
            Atan => ["atan", Float, |x| x.atan(), |x, _b| x, "atanf($0)", "atan($0)", ""],
            Atanh => ["atanh", Float, |x| libm::atanh(x), |x, _b| x, "atanhf($0)", "atanh($0)", ""],
            Cos => ["cos", Float, |x| x.cos(), |x, _b| x, "cosf($0)", "cos($0)", ""],
            Cosh => ["cosh", Float, |x| x.cosh(), |x, _b| x, "coshf($0)", "cosh($0)", ""],
            Sin => ["sin", Float, |x| x.sin(), |x, _b| x, "sinf($0)", "sin($0)", ""],
            Sinh => ["sinh", Float, |x| x.sinh(), |x, _b| x, "sinhf($0)", "sinh($0)", ""],
            Tan => ["tan", Float, |x| x.tan(), |x, _b| x, "tanf($0)", "tan($0)", ""],
            Exp2 => ["exp2", Float, |x| x.exp2(), |x, _b| x, "exp2f($0)", "exp2($0)", ""],
            Expm1 => ["expm1", Float, |x| x.exp_m1(), |x, _b| x, "expm1f($0)", "expm1($0)", ""],
            Erfc => ["erfc", Float, |x| libm::erfc(x), |x, _b| x, "erfcf($0)", "erfc($0)", ""],
            Erfinv => ["erfinv", Float, |x| $crate::math::erfinv(x), |x, _b| x, "erfinvf($0)", "erfinv($0)", ""],
            Erfcinv => ["erfcinv", Float, |x| $crate::math::erfcinv(x), |x, _b| x, "erfcinvf($0)", "erfcinv($0)", ""],
            // lgamma of every float dtype runs the prelude's fb_lgamma in double:
            // CUDA's lgammaf and lgamma are tens of ulps off next to the roots 1 and 2.
            Lgamma => ["lgamma", Float, |x| libm::lgamma(x), |x, _b| x, "(float)fb_lgamma((double)($0))", "fb_lgamma($0)", ""],
            Log10 => ["log10", Float, |x| x.log10(), |x, _b| x, "log10f($0)", "log10($0)", ""],
            Log1p => ["log1p", Float, |x| x.ln_1p(), |x, _b| x, "log1pf($0)", "log1p($0)", ""],
            Log2 => ["log2", Float, |x| x.log2(), |x, _b| x, "log2f($0)", "log2($0)", ""],
            // Integers (and bools) pass through the rounding ops unchanged.
            Ceil => ["ceil", Keep, |x| x.ceil(), |x, _b| x, "ceilf($0)", "ceil($0)", "$0"],
            Floor => ["floor", Keep, |x| x.floor(), |x, _b| x, "floorf($0)", "floor($0)", "$0"],
            Trunc => ["trunc", Keep, |x| x.trunc(), |x, _b| x, "truncf($0)", "trunc($0)", "$0"],
            // nvFuser spells round as nearbyint: halves to even.
            Round => ["round", Keep, |x| x.round_ties_even(), |x, _b| x, "nearbyintf($0)", "nearbyint($0)", "$0"],
            Frac => ["frac", Keep, |x| x - x.trunc(), |_x, _b| 0, "($0 - truncf($0))", "($0 - trunc($0))", "(($t)0)"],
            Relu => ["relu", Keep, |x| if x <= 0.0 { 0.0 } else { x }, |x, _b| if x <= 0 { 0 } else { x },
                "($0 <= 0.0f ? 0.0f : $0)", "($0 <= 0.0 ? 0.0 : $0)", "($0 <= 0 ? ($t)0 : $0)"],
            Silu => ["silu", KeepFloat, |x| x * (1.0 / (1.0 + (-x).exp())), |x, _b| x,
                "($0 * fb_sigmoidf($0))", "($0 * fb_sigmoidd($0))", ""],
            // nvFuser's sign is where(x > 0, 1, where(x < 0, -1, 0)) cast back: NaN gives 0.
            Sign => ["sign", Keep, |x| $crate::math::sign(x), |x, _b| x.signum(),
                "($0 > 0 ? ($t)1 : ($0 < 0 ? ($t)-1 : ($t)0))", "($0 > 0 ? ($t)1 : ($0 < 0 ? ($t)-1 : ($t)0))",
                "($0 > 0 ? ($t)1 : ($0 < 0 ? ($t)-1 : ($t)0))"],
            Signbit => ["signbit", Compare, |x| x.is_sign_negative() as i64 as f64, |x, _b| (x < 0) as i64,
                "((__float_as_uint($0) >> 31) != 0u)", "(__double_as_longlong($0) < 0)", "($0 < 0)"],
            IsFinite => ["isfinite", Predicate, |x| x.is_finite() as i64 as f64, |_x, _b| 1,
                "((__float_as_uint($0) & 0x7f800000u) != 0x7f800000u)",
                "((__double_as_longlong($0) & 0x7ff0000000000000LL) != 0x7ff0000000000000LL)", "true"],
            IsInf => ["isinf", Predicate, |x| x.is_infinite() as i64 as f64, |_x, _b| 0,
                "((__float_as_uint($0) & 0x7fffffffu) == 0x7f800000u)",
                "((__double_as_longlong($0) & 0x7fffffffffffffffLL) == 0x7ff0000000000000LL)", "false"],
            IsNan => ["isnan", Predicate, |x| x.is_nan() as i64 as f64, |_x, _b| 0, "($0 != $0)", "($0 != $0)", "false"],
            IsNegInf => ["isneginf", Predicate, |x| (x == f64::NEG_INFINITY) as i64 as f64, |_x, _b| 0,
                "($0 == __uint_as_float(0xff800000u))", "($0 == __longlong_as_double(0xfff0000000000000LL))", "false"],
            IsPosInf => ["isposinf", Predicate, |x| (x == f64::INFINITY) as i64 as f64, |_x, _b| 0,
                "($0 == __uint_as_float(0x7f800000u))", "($0 == __longlong_as_double(0x7ff0000000000000LL))", "false"],
            // On real lanes every value is real (complex ones: crate::complex_math).
            IsReal => ["isreal", Predicate, |_x| 1.0, |_x, _b| 1, "true", "true", "true"],
            LogicalNot => ["logical_not", Logical, |x| (x == 0.0) as i64 as f64, |x, _b| (x == 0) as i64, "", "", "(!$0)"],
            // On bools nvFuser's bitwise_not is logical_not.
            BitwiseNot => ["bitwise_not", Bitwise, |x| x, |x, b| if b == 1 { x ^ 1 } else { !x }, "", "", "fb_bnot($0)"],
        }
    };
}

/// Elementwise ops of two operands. Row: name, rule, f64 semantics
/// `|a, b, compute dtype|`, i64 semantics `|a, b, bits|`, CUDA float / double / integer.
#[macro_export]
macro_rules! binary_table {
    ($cb:ident) => {
        $cb! {
            Add => ["add", Default, |a, b, _d| a + b, |a, b, _n| a.wrapping_add(b), "($0 + $1)", "($0 + $1)", "($0 + $1)"],
            Sub => ["sub", Default, |a, b, _d| a - b, |a, b, _n| a.wrapping_sub(b), "($0 - $1)", "($0 - $1)", "($0 - $1)"],
            Mul => ["mul", Default, |a, b, _d| a * b, |a, b, _n| a.wrapping_mul(b), "($0 * $1)", "($0 * $1)", "($0 * $1)"],
            // C semantics on integers; division by zero gives 0 rather than trapping
            // (on bools true, as nvFuser's kernels give: the GPU's all-ones quotient).
            // Floats divide through the IEEE intrinsics (the same instructions as `/`):
            // with `/`, NVRTC took x / x of a padded 0 for never NaN and folded
            // `x / x == x / x` to true (seed 1 fusion 6901).
            Div => ["div", Default, |a, b, _d| a / b, |a, b, n| $crate::math::idiv(a, b, n),
                "__fdiv_rn($0, $1)", "__ddiv_rn($0, $1)", "fb_idiv($0, $1)"],
            Pow => ["pow", Default, |a, b, _d| a.powf(b), |a, b, _n| $crate::math::ipow(a, b),
                "powf($0, $1)", "pow($0, $1)", "fb_ipow($0, $1)"],
            Maximum => ["maximum", Default, |a, b, _d| $crate::math::fmax_nan(a, b), |a, b, _n| a.max(b),
                "fb_maxf($0, $1)", "fb_maxd($0, $1)", "($0 > $1 ? $0 : $1)"],
            Minimum => ["minimum", Default, |a, b, _d| $crate::math::fmin_nan(a, b), |a, b, _n| a.min(b),
                "fb_minf($0, $1)", "fb_mind($0, $1)", "($0 < $1 ? $0 : $1)"],
            Eq => ["eq", Compare, |a, b, _d| (a == b) as i64 as f64, |a, b, _n| (a == b) as i64, "($0 == $1)", "($0 == $1)", "($0 == $1)"],
            Ne => ["ne", Compare, |a, b, _d| (a != b) as i64 as f64, |a, b, _n| (a != b) as i64, "($0 != $1)", "($0 != $1)", "($0 != $1)"],
            Lt => ["lt", Compare, |a, b, _d| (a < b) as i64 as f64, |a, b, _n| (a < b) as i64, "($0 < $1)", "($0 < $1)", "($0 < $1)"],
            Le => ["le", Compare, |a, b, _d| (a <= b) as i64 as f64, |a, b, _n| (a <= b) as i64, "($0 <= $1)", "($0 <= $1)", "($0 <= $1)"],
            Gt => ["gt", Compare, |a, b, _d| (a > b) as i64 as f64, |a, b, _n| (a > b) as i64, "($0 > $1)", "($0 > $1)", "($0 > $1)"],
            Ge => ["ge", Compare, |a, b, _d| (a >= b) as i64 as f64, |a, b, _n| (a >= b) as i64, "($0 >= $1)", "($0 >= $1)", "($0 >= $1)"],
            Truediv => ["truediv", Float, |a, b, _d| a / b, |a, _b, _n| a, "__fdiv_rn($0, $1)", "__ddiv_rn($0, $1)", ""],
            Atan2 => ["atan2", Float, |a, b, _d| a.atan2(b), |a, _b, _n| a, "atan2f($0, $1)", "atan2($0, $1)", ""],
            // C's fmod and %: the result takes the dividend's sign; integer x % 0 gives 0.
            Fmod => ["fmod", Default, |a, b, _d| a % b, |a, b, n| $crate::math::imod_n(a, b, n),
                "fmodf($0, $1)", "fmod($0, $1)", "fb_imod($0, $1)"],
            // nvFuser's mod is C's % (on floats, as fmod).
            Mod => ["mod", Default, |a, b, _d| a % b, |a, b, n| $crate::math::imod_n(a, b, n),
                "fmodf($0, $1)", "fmod($0, $1)", "fb_imod($0, $1)"],
            // Python's %: the result takes the divisor's sign.
            Remainder => ["remainder", Default, |a, b, _d| $crate::math::fremainder(a, b), |a, b, n| if n == 1 { $crate::math::imod_n(a, b, n) } else { $crate::math::iremainder(a, b) },
                "fb_remf($0, $1)", "fb_remd($0, $1)", "fb_iremainder($0, $1)"],
            Nextafter => ["nextafter", FloatOnly, |a, b, d| $crate::math::nextafter(a, b, d), |a, _b, _n| a,
                "nextafterf($0, $1)", "nextafter($0, $1)", ""],
            Gcd => ["gcd", IntOnly, |a, _b, _d| a, |a, b, n| $crate::math::gcd(a, b, n), "", "", "fb_gcd($0, $1)"],
            BitwiseAnd => ["bitwise_and", Bitwise, |a, _b, _d| a, |a, b, _n| a & b, "", "", "($0 & $1)"],
            BitwiseOr => ["bitwise_or", Bitwise, |a, _b, _d| a, |a, b, _n| a | b, "", "", "($0 | $1)"],
            BitwiseXor => ["bitwise_xor", Bitwise, |a, _b, _d| a, |a, b, _n| a ^ b, "", "", "($0 ^ $1)"],
            // Shifts by a negative amount or by the width or more: 0, or the sign for >>.
            BitwiseLeftShift => ["bitwise_left_shift", IntOnly, |a, _b, _d| a, |a, b, n| $crate::math::shl(a, b, n),
                "", "", "fb_shl($0, $1)"],
            BitwiseRightShift => ["bitwise_right_shift", IntOnly, |a, _b, _d| a, |a, b, n| $crate::math::shr(a, b, n),
                "", "", "fb_shr($0, $1)"],
            LogicalRightShift => ["logical_right_shift", IntOnly, |a, _b, _d| a, |a, b, n| $crate::math::lrshift(a, b, n),
                "", "", "fb_lrshift($0, $1)"],
            LogicalAnd => ["logical_and", Logical, |a, _b, _d| a, |a, b, _n| (a != 0 && b != 0) as i64, "", "", "($0 && $1)"],
            LogicalOr => ["logical_or", Logical, |a, _b, _d| a, |a, b, _n| (a != 0 || b != 0) as i64, "", "", "($0 || $1)"],
        }
    };
}

/// Elementwise ops of three operands (besides `where`, which stays `Op::Where`).
/// Row: name, rule, f64 semantics `|a, b, c|`, i64 semantics `|a, b, c|`,
/// CUDA float / double / integer. Rule `Bounded` ops compute in double (float
/// operands) or long long (integer ones), as nvFuser's helpers do.
#[macro_export]
macro_rules! ternary_table {
    ($cb:ident) => {
        $cb! {
            // nvFuser's lerp (runtime/helpers.cu), monotonic and exact at both ends.
            Lerp => ["lerp", DefaultFloat, |s, e, w| if w < 0.5 { s + w * (e - s) } else { e - (e - s) * (1.0 - w) },
                |a, _b, _c| a, "fb_lerpf($0, $1, $2)", "fb_lerpd($0, $1, $2)", ""],
            Clamp => ["clamp", Bounded, |x, lo, hi| $crate::math::fmin_nan($crate::math::fmax_nan(x, lo), hi),
                |x, lo, hi| x.max(lo).min(hi), "", "fb_clamp($0, $1, $2)", "fb_clampi($0, $1, $2)"],
            Threshold => ["threshold", Bounded, |x, t, v| if x <= t { v } else { x },
                |x, t, v| if x <= t { v } else { x }, "", "fb_threshold($0, $1, $2)", "fb_thresholdi($0, $1, $2)"],
        }
    };
}

macro_rules! define_ops {
    ($(#[$m:meta])* $name:ident, $($v:ident => [$s:literal, $rule:ident, $($rest:tt)*]),* $(,)?) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
        pub enum $name { $($v),* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            /// The `fd.ops.NAME` spelling.
            pub fn name(self) -> &'static str { match self { $($name::$v => $s),* } }
            pub fn from_name(s: &str) -> Option<$name> {
                match s { $($s => Some($name::$v),)* _ => None }
            }
            pub fn rule(self) -> Rule { match self { $($name::$v => Rule::$rule),* } }
        }
    };
}

macro_rules! define_unary {
    ($($v:ident => [$s:literal, $rule:ident, |$x:ident| $f:expr, |$xi:ident, $bi:ident| $fi:expr,
        $cf:literal, $cd:literal, $ci:literal]),* $(,)?) => {
        define_ops!(
            /// Elementwise ops of one operand.
            UnaryOp, $($v => [$s, $rule,]),*
        );
        impl UnaryOp {
            /// CUDA templates for float, double and integer compute types.
            pub fn cuda(self) -> [&'static str; 3] {
                match self { $(UnaryOp::$v => [$cf, $cd, $ci]),* }
            }
        }
        /// The op on a float lane (predicates give 0 or 1).
        // Inlined across crates: the reference executor calls these per element.
        #[inline(always)]
        #[allow(clippy::redundant_closure_call)]
        pub fn unary_f64(kind: UnaryOp, x: f64) -> f64 {
            match kind { $(UnaryOp::$v => (|$x: f64| -> f64 { $f })(x)),* }
        }
        /// The op on an integer lane of `dtype` (bool lanes are 0 or 1).
        #[inline(always)]
        #[allow(clippy::redundant_closure_call, unused_variables)]
        pub fn unary_i64(kind: UnaryOp, x: i64, dtype: DType) -> i64 {
            let bits = int_bits(dtype);
            match kind { $(UnaryOp::$v => (|$xi: i64, $bi: u32| -> i64 { $fi })(x, bits)),* }
        }
    };
}

macro_rules! define_binary {
    ($($v:ident => [$s:literal, $rule:ident, |$a:ident, $b:ident, $d:ident| $f:expr,
        |$ai:ident, $bi:ident, $ni:ident| $fi:expr, $cf:literal, $cd:literal, $ci:literal]),* $(,)?) => {
        define_ops!(
            /// Elementwise ops of two operands.
            BinaryOp, $($v => [$s, $rule,]),*
        );
        impl BinaryOp {
            /// CUDA templates for float, double and integer compute types.
            pub fn cuda(self) -> [&'static str; 3] {
                match self { $(BinaryOp::$v => [$cf, $cd, $ci]),* }
            }
        }
        /// The op on float lanes of compute dtype `dtype` (comparisons give 0 or 1).
        #[inline(always)]
        #[allow(clippy::redundant_closure_call, unused_variables)]
        pub fn binary_f64(kind: BinaryOp, a: f64, b: f64, dtype: DType) -> f64 {
            match kind { $(BinaryOp::$v => (|$a: f64, $b: f64, $d: DType| -> f64 { $f })(a, b, dtype)),* }
        }
        /// The op on integer lanes of `dtype`.
        #[inline(always)]
        #[allow(clippy::redundant_closure_call, unused_variables)]
        pub fn binary_i64(kind: BinaryOp, a: i64, b: i64, dtype: DType) -> i64 {
            let bits = int_bits(dtype);
            match kind { $(BinaryOp::$v => (|$ai: i64, $bi: i64, $ni: u32| -> i64 { $fi })(a, b, bits)),* }
        }
    };
}

macro_rules! define_ternary {
    ($($v:ident => [$s:literal, $rule:ident, |$a:ident, $b:ident, $c:ident| $f:expr,
        |$ai:ident, $bi:ident, $ci_:ident| $fi:expr, $cf:literal, $cd:literal, $ci:literal]),* $(,)?) => {
        define_ops!(
            /// Elementwise ops of three operands.
            TernaryOp, $($v => [$s, $rule,]),*
        );
        impl TernaryOp {
            /// CUDA templates for float, double and integer compute types.
            pub fn cuda(self) -> [&'static str; 3] {
                match self { $(TernaryOp::$v => [$cf, $cd, $ci]),* }
            }
        }
        #[inline(always)]
        #[allow(clippy::redundant_closure_call, unused_variables, unreachable_code)]
        pub fn ternary_f64(kind: TernaryOp, a: f64, b: f64, c: f64) -> f64 {
            match kind { $(TernaryOp::$v => (|$a: f64, $b: f64, $c: f64| -> f64 { $f })(a, b, c)),* }
        }
        #[inline(always)]
        #[allow(clippy::redundant_closure_call, unused_variables, unreachable_code)]
        pub fn ternary_i64(kind: TernaryOp, a: i64, b: i64, c: i64) -> i64 {
            match kind { $(TernaryOp::$v => (|$ai: i64, $bi: i64, $ci_: i64| -> i64 { $fi })(a, b, c)),* }
        }
    };
}

unary_table!(define_unary);
binary_table!(define_binary);
ternary_table!(define_ternary);

/// The CUDA template of `cuda()` for a compute dtype.
pub fn cuda_for(t: [&'static str; 3], compute: DType) -> &'static str {
    if compute == DType::Double {
        t[1]
    } else if compute.is_float() {
        t[0]
    } else {
        t[2]
    }
}

/// The dtypes an elementwise op computes with.
#[derive(Clone, Debug, PartialEq)]
pub struct Typing {
    /// What each operand is converted to before the op reads it.
    pub casts: Vec<DType>,
    /// The dtype of the lanes the op computes on (its C type on the GPU).
    pub compute: DType,
    /// The output dtype.
    pub out: DType,
}

/// nvFuser's dtype rule `rule` of op `name` over `operands`.
pub fn typing(name: &str, rule: Rule, operands: &[&Value]) -> Result<Typing, IrError> {
    let all = |d: DType| vec![d; operands.len()];
    let int_like = |d: DType| d.is_integral() || d.is_bool();
    let refuse = |what: &str| {
        let got: Vec<String> = operands.iter().map(|v| format!("{} ({})", v.name, v.dtype)).collect();
        Err(IrError::op(name, format!("needs {what} operands, got {}", got.join(", "))))
    };
    // Index values compute as Int (64-bit), as everywhere else.
    let lanes = |d: DType| if d == DType::Index { DType::Int } else { d };
    let t = match rule {
        Rule::Keep | Rule::KeepFloat | Rule::Predicate => {
            let d = operands[0].dtype;
            if rule == Rule::KeepFloat && !d.is_float() {
                return refuse("floating-point");
            }
            let out = if rule == Rule::Predicate { DType::Bool } else { lanes(d) };
            Typing { casts: all(lanes(d)), compute: lanes(d), out }
        }
        Rule::Default | Rule::Compare | Rule::DefaultFloat => {
            // Unary ops compute Index as Int; binary ones keep Index, as before the table.
            let c = common_dtype(operands, false, true);
            let c = if operands.len() == 1 { lanes(c) } else { c };
            if rule == Rule::DefaultFloat && !c.is_float() && !c.is_complex() {
                return refuse("floating-point");
            }
            let out = if rule == Rule::Compare { DType::Bool } else { c };
            Typing { casts: all(c), compute: c, out }
        }
        Rule::Float => {
            let c = common_dtype(operands, true, true);
            Typing { casts: all(c), compute: c, out: c }
        }
        Rule::FloatOnly => {
            let c = common_dtype(operands, true, false);
            if !matches!(c, DType::Float | DType::Double) {
                return Err(IrError::op(
                    name,
                    format!("nvFuser computes {name} only in Float or Double; the operands promote to {c}"),
                ));
            }
            Typing { casts: all(c), compute: c, out: c }
        }
        Rule::Logical => Typing { casts: all(DType::Bool), compute: DType::Bool, out: DType::Bool },
        Rule::Bitwise | Rule::IntOnly => {
            let ok = operands.iter().all(|v| {
                if rule == Rule::IntOnly { v.dtype.is_integral() } else { int_like(v.dtype) }
            });
            if !ok {
                return refuse(if rule == Rule::IntOnly { "integer" } else { "integer or bool" });
            }
            let c = lanes(common_dtype(operands, false, true));
            Typing { casts: all(c), compute: c, out: c }
        }
        Rule::Bounded => {
            let x = lanes(operands[0].dtype);
            if let Some(t) = operands[1..].iter().find(|v| v.is_tensor()) {
                return Err(IrError::op(
                    name,
                    format!("{} must be a scalar (nvFuser's {name} takes scalar bounds), got a tensor", t.name),
                ));
            }
            // nvFuser's optionalCast: a scalar of x's category keeps its own dtype.
            let same = |d: DType| (d.is_float() && x.is_float()) || (d.is_integral() && x.is_integral());
            let mut casts = vec![x];
            casts.extend(operands[1..].iter().map(|v| if same(v.dtype) { lanes(v.dtype) } else { x }));
            let compute = if x.is_float() { DType::Double } else if x.is_complex() { x } else { DType::Int };
            Typing { casts, compute, out: x }
        }
    };
    Ok(t)
}

/// The typing of a table op (unary, binary or ternary) whose operands are
/// among `values`; `None` for other ops.
pub fn op_typing(op: &Op, values: &[Value]) -> Option<Result<Typing, IrError>> {
    let v = |id: &ValueId| &values[id.index()];
    Some(match op {
        Op::Unary { kind, x } => typing(kind.name(), kind.rule(), &[v(x)]),
        Op::Binary { kind, a, b } => typing(kind.name(), kind.rule(), &[v(a), v(b)]),
        Op::Ternary { kind, a, b, c } => typing(kind.name(), kind.rule(), &[v(a), v(b), v(c)]),
        _ => return None,
    })
}
