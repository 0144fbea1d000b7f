//! Rounding of f64 to the storage formats, round-to-nearest-even, shared by
//! constant folding and the reference executor so both round identically.
//!
//! A plain f64 -> f32 -> bf16 conversion can round twice and land on the wrong
//! side of a tie (1 + 2^-8 + 2^-40 becomes 1.0). Going through f32 with
//! round-to-odd keeps the information a second rounding needs: f32 has at least
//! two more significand bits than bf16 or f16, which makes the result exact.

use half::{bf16, f16};

/// f64 -> f32 rounding toward zero with the last bit set when inexact.
pub fn to_f32_round_odd(x: f64) -> f32 {
    let f = x as f32;
    if !x.is_finite() || f as f64 == x {
        return f;
    }
    let mut t = f;
    if (f as f64).abs() > x.abs() || f.is_infinite() {
        // Step one ulp toward zero.
        t = f32::from_bits(if f.is_infinite() {
            f32::MAX.to_bits()
        } else {
            f.to_bits() - 1
        })
        .copysign(x as f32);
    }
    f32::from_bits(t.to_bits() | 1)
}

pub fn to_bf16(x: f64) -> f64 {
    bf16::from_f32(to_f32_round_odd(x)).to_f64()
}

pub fn to_f16(x: f64) -> f64 {
    f16::from_f32(to_f32_round_odd(x)).to_f64()
}

pub fn to_f32(x: f64) -> f64 {
    x as f32 as f64
}

/// An 8-bit float format with a sign, `exp_bits` exponent bits and
/// `man_bits` stored mantissa bits (e4m3fn and e5m2).
struct F8 {
    man_bits: i32,
    bias: i32,
    /// Largest finite magnitude.
    max: f64,
}

const E4M3: F8 = F8 { man_bits: 3, bias: 7, max: 448.0 };
const E5M2: F8 = F8 { man_bits: 2, bias: 15, max: 57344.0 };

/// Rounds to the nearest value of an 8-bit format, ties to even. As nvFuser's
/// kernels do (runtime/casts.cu): a double goes to float first (round to
/// nearest), then `cvt.rn.satfinite`: magnitudes beyond the largest finite
/// value, infinities included, saturate to it; NaN stays NaN. (PyTorch's own
/// host conversion differs: e4m3fn overflow gives NaN, e5m2 overflow inf.)
fn round_f8(x: f64, f: &F8) -> f64 {
    let x = x as f32 as f64;
    if x.is_nan() {
        return f64::NAN;
    }
    let a = x.abs();
    if a >= f.max {
        return f.max.copysign(x);
    }
    if a == 0.0 {
        return x;
    }
    let emin = 1 - f.bias;
    let e = (libm::floor(libm::log2(a)) as i32).max(emin);
    // Exact: a has at most 24 significant bits and q is a power of two.
    let q = 2f64.powi(e - f.man_bits);
    let r = ((a / q).round_ties_even() * q).min(f.max);
    r.copysign(x)
}

/// Bits of a value already representable in an 8-bit format (NaN: all ones).
fn encode_f8(r: f64, f: &F8) -> u8 {
    let sign = if r.is_sign_negative() { 0x80u8 } else { 0 };
    if r.is_nan() {
        return 0x7F;
    }
    let a = r.abs();
    if a == 0.0 {
        return sign;
    }
    let emin = 1 - f.bias;
    let e = libm::floor(libm::log2(a)) as i32;
    let (field, mant) = if e < emin {
        (0, a / 2f64.powi(emin - f.man_bits))
    } else {
        (e + f.bias, a / 2f64.powi(e - f.man_bits) - 2f64.powi(f.man_bits))
    };
    sign | ((field as u8) << f.man_bits) | mant as u8
}

fn decode_f8(b: u8, f: &F8, has_inf: bool) -> f64 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let field = ((b & 0x7F) >> f.man_bits) as i32;
    let mant = (b & ((1 << f.man_bits) - 1)) as f64;
    let top = (1 << (7 - f.man_bits)) - 1;
    if field == top {
        if has_inf && mant == 0.0 {
            return sign * f64::INFINITY;
        }
        if has_inf || mant as i32 == (1 << f.man_bits) - 1 {
            return f64::NAN;
        }
    }
    let m = if field == 0 { mant } else { mant + 2f64.powi(f.man_bits) };
    let e = field.max(1) - f.bias - f.man_bits;
    sign * m * 2f64.powi(e)
}

pub fn to_f8e4m3(x: f64) -> f64 {
    round_f8(x, &E4M3)
}
pub fn to_f8e5m2(x: f64) -> f64 {
    round_f8(x, &E5M2)
}
pub fn f8e4m3_bits(r: f64) -> u8 {
    encode_f8(r, &E4M3)
}
pub fn f8e5m2_bits(r: f64) -> u8 {
    encode_f8(r, &E5M2)
}
/// e5m2 bits of a value stored without a conversion: a copy of an e5m2
/// element (nvFuser's cast to the same dtype is `set`, `real` of a real
/// tensor too) keeps its infinity; everything else rounds as a cast does,
/// saturating (cvt.rn.satfinite).
pub fn f8e5m2_store_bits(x: f64) -> u8 {
    if x.is_infinite() {
        return if x < 0.0 { 0xFC } else { 0x7C };
    }
    encode_f8(to_f8e5m2(x), &E5M2)
}
pub fn f8e4m3_value(b: u8) -> f64 {
    decode_f8(b, &E4M3, false)
}
pub fn f8e5m2_value(b: u8) -> f64 {
    decode_f8(b, &E5M2, true)
}

/// Float8_e8m0fnu bits of `x`, as PyTorch's `fp8e8m0fnu_from_fp32_value`
/// defines them (c10/util/Float8_e8m0fnu.h), after rounding to float: the
/// float's exponent field, the sign ignored, plus one when the two bits
/// below the implicit one are set or the first is with any bit under it (so
/// 1.5 * 2^k rounds up to 2^(k+1)); NaN and infinities give the NaN code 255.
/// nvFuser's own kernel uses `cvt.rp.satfinite.ue8m0x2` (sm_100 only).
pub fn f8e8m0_bits(x: f64) -> u8 {
    let bits = (x as f32).to_bits();
    let exp = (bits >> 23) & 0xFF;
    if exp == 0xFF {
        return 0xFF;
    }
    let g = bits & 0x40_0000 != 0;
    let rest = bits & 0x3F_FFFF != 0;
    let lsb = exp > 0;
    if g && (rest || lsb) {
        (exp + 1) as u8
    } else {
        exp as u8
    }
}

/// Value of Float8_e8m0fnu bits: 2^(b - 127), and NaN for 255.
pub fn f8e8m0_value(b: u8) -> f64 {
    if b == 0xFF {
        f64::NAN
    } else {
        2f64.powi(b as i32 - 127)
    }
}

pub fn to_f8e8m0(x: f64) -> f64 {
    f8e8m0_value(f8e8m0_bits(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
        assert_eq!(to_bf16(1.0 + 2f64.powi(-8)), 1.0);
        // Halfway between 1+2^-7 and 1+2^-6: ties to even (1+2^-6).
        assert_eq!(to_bf16(1.0 + 3.0 * 2f64.powi(-8)), 1.0 + 2f64.powi(-6));
        // Just above the tie, in bits an f32 could not hold: rounds up.
        assert_eq!(
            to_bf16(1.0 + 2f64.powi(-8) + 2f64.powi(-40)),
            1.0 + 2f64.powi(-7)
        );
        assert_eq!(to_bf16(-0.1), -0.10009765625);
        assert_eq!(to_bf16(1e39), f64::INFINITY);
        assert!(to_bf16(f64::NAN).is_nan());
        assert_eq!(
            to_bf16(-(1.0 + 2f64.powi(-8) + 2f64.powi(-40))),
            -(1.0 + 2f64.powi(-7))
        );
        assert_eq!(to_bf16(1e-45), 0.0);
    }

    #[test]
    fn f16_limits() {
        assert_eq!(to_f16(65504.0), 65504.0);
        assert_eq!(to_f16(65519.0), 65504.0);
        assert_eq!(to_f16(65520.0), f64::INFINITY);
        assert_eq!(to_f16(2f64.powi(-24)), 2f64.powi(-24));
        assert_eq!(to_f16(0.1), 0.0999755859375);
    }

    #[test]
    fn e4m3fn_edges() {
        // Largest finite: 1.75 * 2^8 = 448; smallest subnormal 2^-9; smallest normal 2^-6.
        assert_eq!(to_f8e4m3(448.0), 448.0);
        assert_eq!(to_f8e4m3(2f64.powi(-9)), 2f64.powi(-9));
        assert_eq!(to_f8e4m3(2f64.powi(-6)), 2f64.powi(-6));
        // Half the smallest subnormal is a tie: to even (0); just above rounds up.
        assert_eq!(to_f8e4m3(2f64.powi(-10)), 0.0);
        assert_eq!(to_f8e4m3(2f64.powi(-10) * 1.5), 2f64.powi(-9));
        // 3 * 2^-10 lies halfway between 2^-9 (mantissa 1, odd) and 2^-8 (2, even).
        assert_eq!(to_f8e4m3(3.0 * 2f64.powi(-10)), 2f64.powi(-8));
        // Between 1 and 1.125 (step 2^-3): 1.0625 ties to 1, 1.1875 ties to 1.25.
        assert_eq!(to_f8e4m3(1.0625), 1.0);
        assert_eq!(to_f8e4m3(1.1875), 1.25);
        assert_eq!(to_f8e4m3(-1.1875), -1.25);
        // satfinite: overflow and infinity saturate; NaN stays NaN.
        assert_eq!(to_f8e4m3(470.0), 448.0);
        assert_eq!(to_f8e4m3(1e9), 448.0);
        assert_eq!(to_f8e4m3(f64::INFINITY), 448.0);
        assert_eq!(to_f8e4m3(f64::NEG_INFINITY), -448.0);
        assert!(to_f8e4m3(f64::NAN).is_nan());
        // Bits: 448 = 0 1111 110, 2^-9 = 0 0000 001, 1.0 = 0 0111 000, NaN = 0 1111 111.
        assert_eq!(f8e4m3_bits(448.0), 0x7E);
        assert_eq!(f8e4m3_bits(2f64.powi(-9)), 0x01);
        assert_eq!(f8e4m3_bits(1.0), 0x38);
        assert_eq!(f8e4m3_bits(-2.0), 0xC0);
        assert!(f8e4m3_value(0x7F).is_nan());
        assert!(f8e4m3_value(0xFF).is_nan());
        assert_eq!(f8e4m3_value(0x7E), 448.0);
        for b in 0..=255u8 {
            let v = f8e4m3_value(b);
            if !v.is_nan() {
                assert_eq!(f8e4m3_bits(v), b, "bits {b:#x}");
                assert_eq!(to_f8e4m3(v), v);
            }
        }
    }

    #[test]
    fn e5m2_edges() {
        // Largest finite: 1.75 * 2^15 = 57344; smallest subnormal 2^-16.
        assert_eq!(to_f8e5m2(57344.0), 57344.0);
        assert_eq!(to_f8e5m2(61440.0), 57344.0);
        assert_eq!(to_f8e5m2(f64::INFINITY), 57344.0);
        assert_eq!(to_f8e5m2(2f64.powi(-16)), 2f64.powi(-16));
        assert_eq!(to_f8e5m2(2f64.powi(-17)), 0.0);
        // Step 0.25 above 1: 1.125 ties to 1.0, 1.375 ties to 1.5.
        assert_eq!(to_f8e5m2(1.125), 1.0);
        assert_eq!(to_f8e5m2(1.375), 1.5);
        assert_eq!(to_f8e5m2(0.1), 0.09375);
        assert!(to_f8e5m2(f64::NAN).is_nan());
        assert_eq!(f8e5m2_bits(57344.0), 0x7B);
        assert_eq!(f8e5m2_value(0x7C), f64::INFINITY);
        assert_eq!(f8e5m2_value(0xFC), f64::NEG_INFINITY);
        assert!(f8e5m2_value(0x7D).is_nan());
        for b in 0..=255u8 {
            let v = f8e5m2_value(b);
            if v.is_finite() {
                assert_eq!(f8e5m2_bits(v), b, "bits {b:#x}");
            }
        }
    }

    #[test]
    fn e8m0_edges() {
        assert_eq!(to_f8e8m0(1.0), 1.0);
        assert_eq!(f8e8m0_bits(1.0), 127);
        // 1.5 * 2^k is the rounding point (implicit bit is the LSB, set): up.
        assert_eq!(to_f8e8m0(1.5), 2.0);
        assert_eq!(to_f8e8m0(1.4999), 1.0);
        assert_eq!(to_f8e8m0(3.0), 4.0);
        // Sign ignored; zero is the exponent-0 code, 2^-127.
        assert_eq!(to_f8e8m0(-4.0), 4.0);
        assert_eq!(to_f8e8m0(0.0), 2f64.powi(-127));
        assert_eq!(f8e8m0_bits(2f64.powi(127)), 254);
        assert!(to_f8e8m0(f64::INFINITY).is_nan());
        assert!(to_f8e8m0(f64::NAN).is_nan());
        // 1.75 * 2^127 rounds past the largest exponent into the NaN code.
        assert_eq!(f8e8m0_bits(1.75 * 2f64.powi(127)), 255);
    }
}
