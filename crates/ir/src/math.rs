//! Semantics of elementwise ops that are more than an expression, on the
//! f64 / i64 lanes the op table (`elementwise.rs`) computes in.

/// Integer power as nvFuser's `pow<T>` (runtime/helpers.cu): negative
/// exponents give 0 except for bases 1 and -1; overflow wraps.
#[inline]
pub fn ipow(a: i64, b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 => {
                if b % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    a.wrapping_pow(b.min(u32::MAX as i64) as u32)
}

/// NaN-propagating maximum, as PyTorch's and nvFuser's.
#[inline(always)]
pub fn fmax_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// NaN-propagating minimum, as PyTorch's and nvFuser's.
#[inline(always)]
pub fn fmin_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// Wraps an integer lane to `bits` (32 or 64) as the C type would hold it.
#[inline(always)]
fn wrap(x: i64, bits: u32) -> i64 {
    if bits == 32 {
        x as i32 as i64
    } else {
        x
    }
}

/// C's `a % b` (the dividend's sign); `b == 0` gives 0 instead of trapping.
#[inline(always)]
pub fn imod(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_rem(b)
    }
}

/// `imod` on lanes of `bits`: on bools (1 bit) `x % false` is true, as
/// nvFuser's kernels give (recorded goldens binary_{fmod,mod,remainder}_bool).
#[inline(always)]
pub fn imod_n(a: i64, b: i64, bits: u32) -> i64 {
    if bits == 1 && b == 0 {
        1
    } else {
        imod(a, b)
    }
}

/// Integer `a / b`; by 0 gives 0, except on bools, where nvFuser's kernels
/// give true (recorded golden binary_div_bool); MIN / -1 wraps.
#[inline(always)]
pub fn idiv(a: i64, b: i64, bits: u32) -> i64 {
    if b == 0 {
        (bits == 1) as i64
    } else {
        a.wrapping_div(b)
    }
}

/// nvFuser's integer `remainder`: Python's `%` (the divisor's sign).
#[inline(always)]
pub fn iremainder(a: i64, b: i64) -> i64 {
    let m = imod(a, b);
    if m != 0 && ((b < 0) != (m < 0)) {
        m + b
    } else {
        m
    }
}

/// nvFuser's float `remainder`: `fmod`, moved to the divisor's sign.
#[inline(always)]
pub fn fremainder(a: f64, b: f64) -> f64 {
    let m = a % b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        m + b
    } else {
        m
    }
}

/// `nextafter` in the compute dtype: the next Float after a Float is not
/// the next Double.
#[inline]
pub fn nextafter(a: f64, b: f64, d: crate::DType) -> f64 {
    if d == crate::DType::Double {
        libm::nextafter(a, b)
    } else {
        libm::nextafterf(a as f32, b as f32) as f64
    }
}

/// nvFuser's `gcd` (Euclid on absolute values) in a `bits`-wide integer:
/// the absolute value of the minimum wraps, as in C.
#[inline]
pub fn gcd(a: i64, b: i64, bits: u32) -> i64 {
    let (mut a, mut b) = (wrap(a.wrapping_abs(), bits), wrap(b.wrapping_abs(), bits));
    while b != 0 {
        let t = b;
        b = a.wrapping_rem(b);
        a = t;
    }
    a
}

/// `a << b` in a `bits`-wide integer; a negative amount or one of `bits` or
/// more gives 0 (as PyTorch's bitwise_left_shift).
#[inline]
pub fn shl(a: i64, b: i64, bits: u32) -> i64 {
    if b < 0 || b >= bits as i64 {
        0
    } else {
        wrap(a.wrapping_shl(b as u32), bits)
    }
}

/// Arithmetic `a >> b`; a negative amount or one of `bits` or more fills
/// with the sign (as PyTorch's bitwise_right_shift).
#[inline]
pub fn shr(a: i64, b: i64, bits: u32) -> i64 {
    if b < 0 || b >= bits as i64 {
        if a < 0 {
            -1
        } else {
            0
        }
    } else {
        a >> b
    }
}

/// nvFuser's `logical_right_shift` (csrc/ops/arith.cpp builds it from other
/// ops): `x >> s`, with the `s` sign bits it shifted in cleared by xor with
/// `(2^s - 1) << (bits - s)` when x is negative; `s >= bits` uses mask -1.
#[inline]
pub fn lrshift(a: i64, s: i64, bits: u32) -> i64 {
    let nb = bits as i64;
    let mask = if s >= nb {
        -1
    } else {
        wrap(ipow(2, s).wrapping_sub(1), bits)
    };
    let shifted_mask = shl(mask, wrap(nb.wrapping_sub(s), bits), bits);
    let rs = shr(a, s, bits);
    if a < 0 {
        wrap(shifted_mask ^ rs, bits)
    } else {
        rs
    }
}

/// nvFuser's `sign`: 1, -1 or 0; NaN gives 0.
#[inline(always)]
pub fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// Inverse error function to f64 accuracy: Newton's method on `erf` for
/// |y| < 0.5, and `erfcinv(1 - |y|)` (1 - |y| exact there) beyond.
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || y.abs() > 1.0 {
        return f64::NAN;
    }
    if y.abs() >= 0.5 {
        return erfcinv(1.0 - y.abs()).copysign(y);
    }
    if y == 0.0 {
        return y;
    }
    // erf is close to linear here: x = y * sqrt(pi) / 2 starts within 10%.
    let mut x = y / TWO_OVER_SQRT_PI;
    for _ in 0..40 {
        let dx = (libm::erf(x) - y) / (TWO_OVER_SQRT_PI * (-x * x).exp());
        x -= dx;
        if dx.abs() <= 1e-17 * x.abs() {
            break;
        }
    }
    x
}

/// Inverse complementary error function to f64 accuracy: Newton's method on
/// `ln(erfc(x)) = ln(y)`, which stays well scaled down to the smallest y.
pub fn erfcinv(y: f64) -> f64 {
    if y.is_nan() || !(0.0..=2.0).contains(&y) {
        return f64::NAN;
    }
    if y == 0.0 {
        return f64::INFINITY;
    }
    if y == 2.0 {
        return f64::NEG_INFINITY;
    }
    if y > 1.0 {
        // erfc(-x) = 2 - erfc(x); 2 - y is exact for y in (1, 2).
        return -erfcinv(2.0 - y);
    }
    if y > 0.5 {
        // Near x = 0, erfinv's Newton on erf is better conditioned; 1 - y is exact.
        return erfinv(1.0 - y);
    }
    // erfc(x) ~ exp(-x^2) / (x sqrt(pi)): start from x = sqrt(-ln y).
    let target = y.ln();
    let mut x = (-target).sqrt().max(0.5);
    for _ in 0..100 {
        let e = libm::erfc(x);
        // d/dx ln(erfc(x)) = -(2/sqrt(pi)) exp(-x^2) / erfc(x)
        let slope = -TWO_OVER_SQRT_PI * (-x * x).exp() / e;
        let dx = (e.ln() - target) / slope;
        x -= dx;
        if dx.abs() <= 1e-16 * x.abs() {
            break;
        }
    }
    x
}

/// acosh, NaN below 1 as CUDA's and C's. `libm::acosh` (musl's) leaves the
/// domain to its formula, which for x <= -2 can cancel to a positive
/// argument of its log: acosh(-2760242) came out 3.677 instead of NaN.
pub fn acosh(x: f64) -> f64 {
    if x < 1.0 {
        f64::NAN
    } else {
        libm::acosh(x)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn acosh_is_nan_below_one_and_exact_above() {
        for x in [-2760242.0, -2.0, -1.0, 0.0, 0.999, f64::NEG_INFINITY, f64::NAN] {
            assert!(super::acosh(x).is_nan(), "acosh({x})");
        }
        assert_eq!(super::acosh(1.0), 0.0);
        assert!((super::acosh(20.0) - 3.6882538673612966).abs() < 1e-15);
        assert_eq!(super::acosh(f64::INFINITY), f64::INFINITY);
        // atanh and asinh from the same library keep their domains.
        assert!(libm::atanh(2.0).is_nan() && libm::atanh(-2.0).is_nan());
        assert!(libm::asinh(-2760242.0) < -15.0);
    }

    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 4.0 * f64::EPSILON * b.abs().max(1e-300)
    }

    #[test]
    fn erfinv_known_values() {
        // erfinv(0.5), erfinv(0.9), erfinv(0.99) from tables (Abramowitz & Stegun / mpmath).
        assert!(close(erfinv(0.5), 0.476_936_276_204_469_9), "{}", erfinv(0.5));
        assert!(close(erfinv(0.9), 1.163_087_153_676_674_3), "{}", erfinv(0.9));
        assert!(close(erfinv(0.99), 1.821_386_367_718_449_6), "{}", erfinv(0.99));
        assert!(close(erfinv(-0.5), -0.476_936_276_204_469_9));
        assert_eq!(erfinv(0.0), 0.0);
        assert_eq!(erfinv(1.0), f64::INFINITY);
        assert_eq!(erfinv(-1.0), f64::NEG_INFINITY);
        assert!(erfinv(1.5).is_nan() && erfinv(f64::NAN).is_nan());
        // Tiny arguments: erfinv(y) ~ y * sqrt(pi) / 2.
        assert!(close(erfinv(1e-20), 1e-20 * std::f64::consts::PI.sqrt() / 2.0));
    }

    #[test]
    fn erfcinv_inverts_erfc() {
        assert!(close(erfcinv(0.5), 0.476_936_276_204_469_9));
        assert!(close(erfcinv(1.5), -0.476_936_276_204_469_9));
        assert_eq!(erfcinv(1.0), 0.0);
        assert_eq!(erfcinv(0.0), f64::INFINITY);
        assert_eq!(erfcinv(2.0), f64::NEG_INFINITY);
        assert!(erfcinv(-0.1).is_nan() && erfcinv(2.5).is_nan());
        for y in [1e-300, 1e-100, 1e-20, 1e-5, 0.01, 0.3, 0.7, 0.999] {
            let x = erfcinv(y);
            let back = libm::erfc(x);
            // erfc's relative slope is about 2x: one ulp of x moves it by 2x^2 ulps.
            assert!((back - y).abs() <= 4e-16 * y * (1.0 + 2.0 * x * x), "erfc(erfcinv({y})) = {back}");
        }
        for y in [-0.999_999, -0.3, 0.1, 0.7, 0.999_999_999] {
            let x = erfinv(y);
            assert!((libm::erf(x) - y).abs() <= 2e-16, "erf(erfinv({y}))");
        }
    }

    #[test]
    fn integer_semantics() {
        // fmod/mod: dividend's sign; remainder: divisor's sign.
        assert_eq!((imod(-7, 3), imod(7, -3), imod(5, 0)), (-1, 1, 0));
        assert_eq!((iremainder(-7, 3), iremainder(7, -3), iremainder(6, -3)), (2, -2, 0));
        assert_eq!(imod(i64::MIN, -1), 0);
        assert_eq!((fremainder(-7.5, 2.0), fremainder(7.5, -2.0)), (0.5, -0.5));
        assert_eq!(gcd(-12, 18, 64), 6);
        assert_eq!((gcd(0, 0, 64), gcd(0, -5, 64)), (0, 5));
        // |INT32_MIN| wraps in int32.
        assert_eq!(gcd(i32::MIN as i64, 0, 32), i32::MIN as i64);
        assert_eq!((shl(1, 31, 32), shl(1, 32, 32), shl(3, -1, 64)), (i32::MIN as i64, 0, 0));
        assert_eq!((shl(1, 63, 64), shl(1, 64, 64)), (i64::MIN, 0));
        assert_eq!((shr(-8, 1, 64), shr(-8, 64, 64), shr(8, 70, 64), shr(-1, -1, 32)), (-4, -1, 0, -1));
        // logical shift: zeros come in from the left.
        assert_eq!(lrshift(-8, 1, 32), 0x7FFF_FFFC);
        assert_eq!(lrshift(-8, 1, 64), 0x7FFF_FFFF_FFFF_FFFC);
        assert_eq!((lrshift(-1, 0, 32), lrshift(-1, 31, 32), lrshift(-1, 32, 32)), (-1, 1, 0));
        assert_eq!((lrshift(16, 2, 64), lrshift(-1, 63, 64)), (4, 1));
        assert_eq!((ipow(2, 10), ipow(-1, -3), ipow(1, -3), ipow(3, -1)), (1024, -1, 1, 0));
    }

    #[test]
    fn float_semantics() {
        assert_eq!(nextafter(1.0, 2.0, crate::DType::Float), 1.0 + f32::EPSILON as f64);
        assert_eq!(nextafter(1.0, 2.0, crate::DType::Double), 1.0 + f64::EPSILON);
        assert_eq!(nextafter(0.0, -1.0, crate::DType::Double), -5e-324);
        assert_eq!((sign(-3.5), sign(0.0), sign(2.0)), (-1.0, 0.0, 1.0));
        assert_eq!(sign(f64::NAN), 0.0);
    }
}
