//! Rounding an f64 lane to a dtype exactly as storing it would, fast: the
//! lanes of every float dtype are f64, each op rounds its result.

use super::*;

/// Rounding of an f64 lane to a float dtype.
pub(crate) trait Rnd {
    fn r(x: f64) -> f64;
}
pub(crate) struct RDouble;
pub(crate) struct RFloat;
pub(crate) struct RBf16;
pub(crate) struct RHalf;
impl Rnd for RDouble {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        x
    }
}
impl Rnd for RFloat {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        x as f32 as f64
    }
}
impl Rnd for RBf16 {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round_bf16(x)
    }
}
impl Rnd for RHalf {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round_f16(x)
    }
}

/// Rounds to `bits` significant bits (round to nearest even) directly on
/// the f64 encoding; exact while the result is a normal number of the target
/// format, which the callers check.
#[inline(always)]
pub(super) fn round_significand(u: u64, bits: u32) -> u64 {
    let drop = 53 - bits;
    let lsb = (u >> drop) & 1;
    (u + (1u64 << (drop - 1)) - 1 + lsb) & !((1u64 << drop) - 1)
}

/// `fusebench_ir::round::to_bf16`, with a fast path for the normal range
/// (2^-126 <= |x| < 2^128) that gives the same value.
#[inline(always)]
pub(crate) fn round_bf16(x: f64) -> f64 {
    let u = x.to_bits();
    let e = (u >> 52) & 0x7FF;
    if (1023 - 126..1023 + 128).contains(&e) {
        let r = round_significand(u, 8);
        if (r >> 52) & 0x7FF < 1023 + 128 {
            return f64::from_bits(r);
        }
    }
    round::to_bf16(x)
}

/// `fusebench_ir::round::to_f16`, with a fast path for the normal range
/// (2^-14 <= |x| < 2^16) that gives the same value.
#[inline(always)]
pub(crate) fn round_f16(x: f64) -> f64 {
    let u = x.to_bits();
    let e = (u >> 52) & 0x7FF;
    if (1023 - 14..1023 + 16).contains(&e) {
        let r = round_significand(u, 11);
        if (r >> 52) & 0x7FF < 1023 + 16 {
            return f64::from_bits(r);
        }
    }
    round::to_f16(x)
}

/// Rounding to the float8 formats (`fusebench_ir::round`).
pub(crate) struct RF8E4m3;
pub(crate) struct RF8E5m2;
pub(crate) struct RF8E8m0;
impl Rnd for RF8E4m3 {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round::to_f8e4m3(x)
    }
}
impl Rnd for RF8E5m2 {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round::to_f8e5m2(x)
    }
}
impl Rnd for RF8E8m0 {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round::to_f8e8m0(x)
    }
}

macro_rules! with_round {
    ($dtype:expr, $R:ident => $body:expr) => {
        match $dtype {
            DType::Float8E4m3fn => {
                type $R = RF8E4m3;
                $body
            }
            DType::Float8E5m2 => {
                type $R = RF8E5m2;
                $body
            }
            DType::Float8E8m0fnu => {
                type $R = RF8E8m0;
                $body
            }
            // Complex values never enter lanes; a lane would hold the real part.
            DType::ComplexFloat => {
                type $R = RFloat;
                $body
            }
            DType::ComplexDouble => {
                type $R = RDouble;
                $body
            }
            DType::Double => {
                type $R = RDouble;
                $body
            }
            DType::Float => {
                type $R = RFloat;
                $body
            }
            DType::BFloat16 => {
                type $R = RBf16;
                $body
            }
            DType::Half => {
                type $R = RHalf;
                $body
            }
            other => unreachable!("{other} is not a float dtype"),
        }
    };
}

/// Wraps an i64 result into an integer or bool dtype.
#[inline(always)]
pub(crate) fn wrap_int(x: i64, dtype: DType) -> i64 {
    match dtype {
        DType::Bool => (x != 0) as i64,
        DType::Int32 => x as i32 as i64,
        _ => x,
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// Random f64 bit patterns concentrated near the formats' ranges, ties included.
    fn samples() -> Vec<f64> {
        let mut v = vec![];
        let mut z = 0x1234_5678_9ABC_DEF0u64;
        for i in 0..400_000u64 {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            let exp = 1023 + ((z >> 53) % 300) as i64 - 170;
            let mut mant = z & ((1 << 52) - 1);
            if i % 4 == 0 {
                // An exact tie or near-tie for bf16 / f16.
                mant &= !((1 << 44) - 1);
                mant |= 1 << 44;
            } else if i % 4 == 1 {
                mant &= !((1 << 41) - 1);
                mant |= 1 << 41;
            }
            let bits = ((z >> 63) << 63) | ((exp.clamp(0, 2046) as u64) << 52) | mant;
            v.push(f64::from_bits(bits));
        }
        v.extend([
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            65504.0,
            65519.99,
            65520.0,
            3.3895e38,
            3.4e38,
            1e-40,
            6e-8,
        ]);
        v
    }

    #[test]
    fn fast_rounding_matches_ir_rounding() {
        for x in samples() {
            let (a, b) = (round_bf16(x), round::to_bf16(x));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "bf16 {x:e}: {a:e} vs {b:e}"
            );
            let (a, b) = (round_f16(x), round::to_f16(x));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "f16 {x:e}: {a:e} vs {b:e}"
            );
        }
    }
}
