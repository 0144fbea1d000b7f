//! nvFuser's random numbers on the CPU: Philox4x32-10 and the way nvFuser's
//! runtime (runtime/random_numbers.cu) turns its 32-bit outputs into values,
//! step by step in the same precision, so that uniform values match nvFuser
//! bit for bit.
//!
//! Element `i` of the output (its linear index in logical row-major order,
//! nvFuser's `getLinearLogicalIndex`) takes Philox subsequence `i / m` and
//! component `i % m` of the call, `m` = 4 (2 for Double), at counter offset
//! `offset` and key `seed` (csrc/device_lower/pass/rng.cpp).
//!
//! Normal values use logf/sinf/cosf (log/sin/cos for Double) on the GPU,
//! which are not correctly rounded there; here each is computed in f64 and
//! rounded to the working precision, so a normal value can differ from
//! nvFuser's in its last bits (the fixture test measures by how much).

use crate::tensor::Tensor;
use crate::ExecError;
use fusebench_ir::{round, DType, RngDist};
use half::{bf16, f16};

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

fn round_once(c: [u32; 4], k: [u32; 2]) -> [u32; 4] {
    let p0 = (M0 as u64) * (c[0] as u64);
    let p1 = (M1 as u64) * (c[2] as u64);
    let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
    let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
    [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
}

/// Philox4x32 with 10 rounds on counter `ctr` and key `key` (Random123).
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for _ in 0..9 {
        c = round_once(c, k);
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    round_once(c, k)
}

/// nvFuser's `philox(seed, subsequence, offset)`: key = seed, counter =
/// (offset lo, offset hi, subsequence lo, subsequence hi).
pub fn philox(seed: u64, subsequence: u64, offset: u64) -> [u32; 4] {
    philox4x32_10(
        [
            offset as u32,
            (offset >> 32) as u32,
            subsequence as u32,
            (subsequence >> 32) as u32,
        ],
        [seed as u32, (seed >> 32) as u32],
    )
}

/// A float in (0, 1]: x * 2^-32 + 2^-33 in f32 (the product is exact, so
/// contracting it into an FMA changes nothing).
fn raw_uniform_f32(x: u32) -> f32 {
    let scale = (1.0f64 / 4294967296.0) as f32;
    (x as f32).mul_add(scale, 0.5 * scale)
}

fn uniform_f32(x: u32) -> f32 {
    let r = raw_uniform_f32(x);
    if r == 1.0 {
        0.0
    } else {
        r
    }
}

/// A double in (0, 1] from 53 bits, x ^ (y << 21), then 1 -> 0.
fn uniform_f64(x: u32, y: u32) -> f64 {
    let scale = 1.0 / (1u64 << 53) as f64;
    let z = (x as u64) ^ ((y as u64) << 21);
    let r = (z as f64).mul_add(scale, 0.5 * scale);
    if r == 1.0 {
        0.0
    } else {
        r
    }
}

/// f32 to the reduced dtype, round to nearest even (`__float2half`,
/// `__float2bfloat`), returned exactly as f64.
fn reduce(d: DType, x: f32) -> f64 {
    match d {
        DType::Half => f16::from_f32(x).to_f64(),
        DType::BFloat16 => bf16::from_f32(x).to_f64(),
        _ => x as f64,
    }
}

fn logf(x: f32) -> f32 {
    (x as f64).ln() as f32
}

/// `normalf`: Box-Muller on the pair (x, y); even components take the sine,
/// odd ones the cosine.
fn normal_f32(x: u32, y: u32, component: u64) -> f32 {
    let u = uniform_f32(x);
    let v = uniform_f32(y) * 6.283_185_5_f32;
    let r = (-2.0f32 * logf(u)).sqrt();
    let t = if component.is_multiple_of(2) {
        (v as f64).sin() as f32
    } else {
        (v as f64).cos() as f32
    };
    r * t
}

/// `normal` in Double: u from outputs 0-1, v from outputs 2-3.
fn normal_f64(r: [u32; 4], component: u64) -> f64 {
    let u = uniform_f64(r[0], r[1]);
    // nvFuser writes 6.283185307179586: the same double.
    let v = uniform_f64(r[2], r[3]) * std::f64::consts::TAU;
    let t = if component.is_multiple_of(2) { v.sin() } else { v.cos() };
    (-2.0 * u.ln()).sqrt() * t
}

/// One element of a random op at linear index `i`. `a`, `b` are minval/maxval
/// or mean/std; the formulas are nvFuser's range and general forms, which
/// give the same values as its plain forms for (0, 1).
fn element(dist: RngDist, d: DType, a: f64, b: f64, seed: u64, offset: u64, i: u64) -> f64 {
    let m = fusebench_ir::rng::per_call(d);
    let r = philox(seed, i / m, offset);
    let c = i % m;
    match (dist, d) {
        (RngDist::Uniform, DType::Double) => {
            let u = uniform_f64(r[2 * c as usize], r[2 * c as usize + 1]);
            (b - a).mul_add(u, a)
        }
        (RngDist::Uniform, DType::Float) => {
            let (from, to) = (a as f32, b as f32);
            (to - from).mul_add(uniform_f32(r[c as usize]), from) as f64
        }
        (RngDist::Uniform, _) => {
            // Reduced floats: no 1 -> 0 on the f32 value; a result that
            // rounds to `to` becomes `from` instead.
            let (from, to) = (a as f32, b as f32);
            let v = reduce(d, (to - from).mul_add(raw_uniform_f32(r[c as usize]), from));
            if v == reduce(d, to) {
                reduce(d, from)
            } else {
                v
            }
        }
        (RngDist::Normal, DType::Double) => normal_f64(r, c).mul_add(b, a),
        (RngDist::Normal, _) => {
            let k = (c / 2 * 2) as usize;
            let n = normal_f32(r[k], r[k + 1], c);
            reduce(d, n.mul_add(b as f32, a as f32))
        }
    }
}

/// The whole output of a random op, in logical row-major order.
pub fn generate(
    dist: RngDist,
    dtype: DType,
    shape: &[usize],
    a: f64,
    b: f64,
    seed: u64,
    offset: u64,
) -> Result<Tensor, ExecError> {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n as u64)
        .map(|i| element(dist, dtype, a, b, seed, offset, i))
        .collect();
    // Every value is already one the dtype holds: no further rounding.
    debug_assert!(values
        .iter()
        .all(|&v| v.is_nan() || round::to_f32(v) == v || dtype == DType::Double));
    Tensor::from_f64s(dtype, shape, &values)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer tests of Random123 (kat_vectors, philox4x32_10).
    #[test]
    fn philox_known_answers() {
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn counter_layout() {
        // offset fills the low counter words, the subsequence the high ones.
        assert_eq!(
            philox(0x1_0000_0002, 0x3_0000_0004, 0x5_0000_0006),
            philox4x32_10([6, 5, 4, 3], [2, 1])
        );
    }

    #[test]
    fn uniform_floats_are_in_unit_interval() {
        // 0 maps to 2^-33; u32::MAX rounds to 2^32 in f32, i.e. 1.0 -> 0.
        assert_eq!(uniform_f32(0), 2f32.powi(-33));
        assert_eq!(uniform_f32(u32::MAX), 0.0);
        assert_eq!(uniform_f32(1 << 31), 0.5 + 2f32.powi(-33));
        // Double: z = x ^ (y << 21); z = 2^53 - 1 (x the low 21 bits, y all
        // ones) gives 1 - 2^-54, which rounds to 1 -> 0.
        assert_eq!(uniform_f64(0x1F_FFFF, u32::MAX), 0.0);
        assert_eq!(uniform_f64(0, 0), 2f64.powi(-54));
        assert_eq!(uniform_f64(1, 0), 1.5 * 2f64.powi(-53));
    }

    #[test]
    fn reduced_uniform_maps_top_to_bottom() {
        // A raw value just under 1 rounds to 1.0 in bf16: nvFuser gives 0 (= from).
        let x = u32::MAX - (1 << 20);
        assert_eq!(reduce(DType::BFloat16, raw_uniform_f32(x)), 1.0);
        let r = philox(0, 0, 0);
        let v = element(RngDist::Uniform, DType::BFloat16, 0.0, 1.0, 0, 0, 0);
        assert_eq!(v, reduce(DType::BFloat16, raw_uniform_f32(r[0])));
    }

    #[test]
    fn element_picks_subsequence_and_component() {
        let r = philox(7, 2, 3);
        // f32: element 9 = subsequence 2, component 1.
        let v = element(RngDist::Uniform, DType::Float, 0.0, 1.0, 7, 3, 9);
        assert_eq!(v, uniform_f32(r[1]) as f64);
        // f64: element 5 = subsequence 2, component 1 (outputs 2 and 3).
        let v = element(RngDist::Uniform, DType::Double, 0.0, 1.0, 7, 3, 5);
        assert_eq!(v, uniform_f64(r[2], r[3]));
        // normal f32, component 3: pair (2, 3), cosine.
        let v = element(RngDist::Normal, DType::Float, 0.0, 1.0, 7, 3, 11);
        let (u, w) = (uniform_f32(r[2]) as f64, uniform_f32(r[3]) as f64 * 6.283_185_5);
        let want = (-2.0 * u.ln()).sqrt() * w.cos();
        assert!((v - want).abs() <= 1e-6 * want.abs().max(1.0), "{v} vs {want}");
    }

    #[test]
    fn range_scales_into_min_max() {
        for i in 0..64 {
            let v = element(RngDist::Uniform, DType::Float, -3.0, 5.0, 1, 0, i);
            assert!((-3.0..5.0).contains(&v), "{v}");
            let v = element(RngDist::Uniform, DType::Half, -3.0, 5.0, 1, 0, i);
            assert!((-3.0..5.0).contains(&v), "{v}");
        }
    }
}
