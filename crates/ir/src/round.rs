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
}
