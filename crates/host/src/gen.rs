//! Input generation: from the script's `inputs = [...]` recipe when it has
//! one, else from the definition; seeded and independent of thread count.

use crate::tensor::{Buffer, Tensor, C128, C64, F8E4m3, F8E5m2, F8E8m0};
use crate::{Arg, ExecError};
use fusebench_ir::analysis::index_inputs;
use fusebench_ir::recipe::{row_major_strides, Distribution};
use fusebench_ir::{round, DType, Fusion, InputRecipe, Literal, ValueDef};
use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;
use std::sync::Arc;

/// Elements drawn from one RNG stream; each chunk is seeded from
/// (seed, input, chunk), so values do not depend on how work is split.
const CHUNK: usize = 1 << 16;

/// Inputs made for a fusion, and what was changed from the script's recipe.
#[derive(Clone, Debug)]
pub struct Generated {
    pub inputs: Vec<Arg>,
    /// Inputs used as gather indices that were drawn in range instead of as
    /// the script (or the default `make_tensor` range) would draw them.
    pub redrawn: Vec<Redrawn>,
    /// One human-readable line per redrawn input.
    pub notes: Vec<String>,
}

/// An index input drawn in `[0, bound)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Redrawn {
    /// Position among the fusion's inputs.
    pub input: usize,
    pub bound: usize,
    /// The integer range `[low, high)` the script's recipe draws from, if it has one.
    pub script_range: Option<(i64, i64)>,
    /// Whether that range (or, without a recipe, `make_tensor`'s default
    /// `[-9, 10)`) includes values outside `[0, bound)`.
    pub script_invalid: bool,
}

/// What values to draw.
#[derive(Clone, Copy, Debug)]
enum Dist {
    /// Floats in [low, high).
    Uniform(f64, f64),
    /// Integers in [low, high).
    Int(i64, i64),
    Normal,
    Bool,
}

/// `values` (a 1-D Int32 input of `count` elements `step` apart) made a
/// random split of `extent`: sorted cut points, the last at `extent`, so
/// some groups may be empty as real routings leave them.
fn group_ends(values: &mut [i32], count: usize, step: usize, extent: usize, seed: u64, input: usize) {
    let mut rng = SmallRng::seed_from_u64(stream_seed(seed, input, usize::MAX));
    let mut cuts: Vec<i32> = (0..count).map(|_| below(rng.next_u64(), extent as u64 + 1) as i32).collect();
    cuts.sort_unstable();
    if let Some(last) = cuts.last_mut() {
        *last = extent as i32;
    }
    for (k, c) in cuts.into_iter().enumerate() {
        values[k * step] = c;
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn stream_seed(seed: u64, input: usize, chunk: usize) -> u64 {
    splitmix(
        splitmix(splitmix(seed) ^ (input as u64 + 1))
            ^ (chunk as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
    )
}

const U24: f32 = 1.0 / (1u32 << 24) as f32;
const U53: f64 = 1.0 / (1u64 << 53) as f64;

/// An integer uniform in [0, range) from 64 random bits (multiply-shift).
#[inline(always)]
fn below(bits: u64, range: u64) -> u64 {
    ((bits as u128 * range as u128) >> 64) as u64
}

trait Fill: crate::tensor::Elem {
    fn fill(rng: &mut SmallRng, out: &mut [Self], d: Dist);
}

macro_rules! fill_float {
    ($T:ty, $from_f32:expr, $from_f64:expr) => {
        impl Fill for $T {
            fn fill(rng: &mut SmallRng, out: &mut [Self], d: Dist) {
                let from_f32: fn(f32) -> $T = $from_f32;
                let from_f64: fn(f64) -> $T = $from_f64;
                match d {
                    Dist::Uniform(lo, hi) => {
                        let (l, w) = (lo as f32, (hi - lo) as f32);
                        for pair in out.chunks_mut(2) {
                            let r = rng.next_u64();
                            pair[0] = from_f32(l + w * ((r >> 40) as f32 * U24));
                            if pair.len() > 1 {
                                pair[1] = from_f32(l + w * (((r >> 8) & 0xFF_FFFF) as f32 * U24));
                            }
                        }
                    }
                    Dist::Normal => out
                        .iter_mut()
                        .for_each(|o| *o = from_f32(rng.sample::<f32, _>(StandardNormal))),
                    Dist::Int(lo, hi) => {
                        let range = (hi - lo).max(1) as u64;
                        out.iter_mut().for_each(|o| {
                            *o = from_f64((lo + below(rng.next_u64(), range) as i64) as f64)
                        });
                    }
                    Dist::Bool => out
                        .iter_mut()
                        .for_each(|o| *o = from_f64((rng.next_u32() & 1) as f64)),
                }
            }
        }
    };
}

fill_float!(f32, |x| x, |x| x as f32);
/// f32 to bf16, round to nearest even, for the finite values drawn here.
#[inline(always)]
fn bf16_from_finite(x: f32) -> bf16 {
    let b = x.to_bits();
    bf16::from_bits(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16)
}

fill_float!(bf16, bf16_from_finite, |x| bf16::from_f64(round::to_bf16(
    x
)));
fill_float!(f16, f16::from_f32, |x| f16::from_f64(round::to_f16(x)));

impl Fill for f64 {
    fn fill(rng: &mut SmallRng, out: &mut [Self], d: Dist) {
        match d {
            Dist::Uniform(lo, hi) => out
                .iter_mut()
                .for_each(|o| *o = lo + (hi - lo) * ((rng.next_u64() >> 11) as f64 * U53)),
            Dist::Normal => out
                .iter_mut()
                .for_each(|o| *o = rng.sample::<f64, _>(StandardNormal)),
            Dist::Int(lo, hi) => {
                let range = (hi - lo).max(1) as u64;
                out.iter_mut()
                    .for_each(|o| *o = (lo + below(rng.next_u64(), range) as i64) as f64);
            }
            Dist::Bool => out
                .iter_mut()
                .for_each(|o| *o = (rng.next_u32() & 1) as f64),
        }
    }
}

macro_rules! fill_int {
    ($T:ty) => {
        impl Fill for $T {
            fn fill(rng: &mut SmallRng, out: &mut [Self], d: Dist) {
                let (lo, hi) = match d {
                    Dist::Int(lo, hi) => (lo, hi),
                    Dist::Uniform(lo, hi) => (lo.ceil() as i64, hi.ceil() as i64),
                    Dist::Bool => (0, 2),
                    // Integers from a normal draw: rounded toward zero, as a cast does.
                    Dist::Normal => {
                        out.iter_mut()
                            .for_each(|o| *o = rng.sample::<f64, _>(StandardNormal) as $T);
                        return;
                    }
                };
                let range = (hi - lo).max(1) as u64;
                out.iter_mut()
                    .for_each(|o| *o = (lo + below(rng.next_u64(), range) as i64) as $T);
            }
        }
    };
}
fill_int!(i32);
fill_int!(i64);

impl Fill for bool {
    fn fill(rng: &mut SmallRng, out: &mut [Self], d: Dist) {
        match d {
            Dist::Normal => out
                .iter_mut()
                .for_each(|o| *o = rng.sample::<f64, _>(StandardNormal) != 0.0),
            _ => {
                for chunk in out.chunks_mut(64) {
                    let r = rng.next_u64();
                    for (k, o) in chunk.iter_mut().enumerate() {
                        *o = (r >> k) & 1 == 1;
                    }
                }
            }
        }
    }
}

fn draw<T: Fill>(n: usize, d: Dist, seed: u64, input: usize) -> Vec<T> {
    let mut v = T::zeros(n);
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(c, part)| {
        let mut rng = SmallRng::seed_from_u64(stream_seed(seed, input, c));
        T::fill(&mut rng, part, d);
    });
    v
}

fn draw_buffer(dtype: DType, n: usize, d: Dist, seed: u64, input: usize) -> Buffer {
    match dtype {
        DType::Bool => Buffer::Bool(draw(n, d, seed, input)),
        DType::Int32 => Buffer::I32(draw(n, d, seed, input)),
        DType::Int | DType::Index => Buffer::I64(draw(n, d, seed, input)),
        DType::Half => Buffer::F16(draw(n, d, seed, input)),
        DType::BFloat16 => Buffer::BF16(draw(n, d, seed, input)),
        DType::Float => Buffer::F32(draw(n, d, seed, input)),
        DType::Double => Buffer::F64(draw(n, d, seed, input)),
        // Drawn as i64 in a range of non-negative values (see `default_dist`).
        DType::UInt64 => Buffer::U64(draw::<i64>(n, d, seed, input).into_iter().map(|x| x as u64).collect()),
        // float8: a float draw rounded to the format (e8m0 keeps magnitudes: it has no sign).
        DType::Float8E4m3fn => Buffer::F8E4m3(
            draw::<f32>(n, d, seed, input).into_iter().map(|x| F8E4m3::from_f64_rounded(x as f64)).collect(),
        ),
        DType::Float8E5m2 => Buffer::F8E5m2(
            draw::<f32>(n, d, seed, input).into_iter().map(|x| F8E5m2::from_f64_rounded(x as f64)).collect(),
        ),
        DType::Float8E8m0fnu => Buffer::F8E8m0(
            draw::<f32>(n, d, seed, input).into_iter().map(|x| F8E8m0::from_f64_rounded(x as f64)).collect(),
        ),
        // Complex: real and imaginary parts drawn one after the other from one stream.
        DType::ComplexFloat => {
            let v = draw::<f32>(2 * n, d, seed, input);
            Buffer::C64(v.chunks_exact(2).map(|p| C64([p[0], p[1]])).collect())
        }
        DType::ComplexDouble => {
            let v = draw::<f64>(2 * n, d, seed, input);
            Buffer::C128(v.chunks_exact(2).map(|p| C128([p[0], p[1]])).collect())
        }
    }
}

/// `make_tensor`'s default range for a dtype.
fn default_dist(dtype: DType) -> Dist {
    if dtype.is_bool() {
        Dist::Bool
    } else if dtype == DType::UInt64 {
        Dist::Int(0, 19)
    } else if dtype.is_integral() {
        Dist::Int(-9, 10)
    } else {
        Dist::Uniform(-9.0, 9.0)
    }
}

fn dist_of(r: &InputRecipe) -> Dist {
    let dtype = r.dtype();
    match r.distribution() {
        Distribution::Normal => Dist::Normal,
        Distribution::Uniform { low, high } if dtype.is_bool() => {
            let _ = (low, high);
            Dist::Bool
        }
        Distribution::Uniform { low, high } if dtype == DType::UInt64 => {
            Dist::Int(low.ceil().max(0.0) as i64, high.ceil().max(1.0) as i64)
        }
        Distribution::Uniform { low, high } if dtype.is_integral() => {
            Dist::Int(low.ceil() as i64, high.ceil() as i64)
        }
        Distribution::Uniform { low, high } => Dist::Uniform(low, high),
        Distribution::Constant(_) => default_dist(dtype),
    }
}

/// Storage elements a view of `shape` with `strides` reaches (from offset 0).
fn reach(shape: &[usize], strides: &[i64]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    shape
        .iter()
        .zip(strides)
        .map(|(&e, &s)| (e as i64 - 1) * s.max(0))
        .sum::<i64>() as usize
        + 1
}

/// Makes inputs for `f`: from its recipe when it has one, else from its
/// definition (make_tensor ranges, dense strides). Inputs used as gather
/// indices are drawn in range (see [`Generated::redrawn`]).
pub fn generate_inputs(f: &Fusion, seed: u64) -> Result<Generated, ExecError> {
    let index_uses = index_inputs(f);
    let group_offsets = fusebench_ir::analysis::group_offset_inputs(f);
    let mut inputs = Vec::with_capacity(f.inputs.len());
    let mut redrawn = vec![];
    let mut notes = vec![];
    if let Some(rs) = &f.recipe {
        if rs.len() != f.inputs.len() {
            return Err(ExecError::Recipe(format!(
                "the script gives {} inputs but the fusion defines {}",
                rs.len(),
                f.inputs.len()
            )));
        }
    }
    // Checked against what is free before each input is drawn, counting the
    // inputs drawn before it.
    let available = crate::memory::available();
    let mut taken: u64 = 0;
    for (i, &vid) in f.inputs.iter().enumerate() {
        let v = f.value(vid);
        let recipe = f.recipe.as_ref().map(|rs| &rs[i]);
        let bad = |m: String| ExecError::Recipe(format!("input {i} ({}): {m}", v.name));
        match &v.def {
            ValueDef::ScalarInput => {
                let lit = match recipe {
                    Some(InputRecipe::Scalar { value }) => *value,
                    Some(_) => {
                        return Err(bad("a tensor where the fusion defines a scalar".into()))
                    }
                    // A scalar index (select's) without a value in the script: drawn in range.
                    None if index_uses.iter().any(|u| u.input == i) => {
                        let bound = index_uses
                            .iter()
                            .find(|u| u.input == i)
                            .map_or(1, |u| u.bound);
                        let b =
                            draw_buffer(DType::Int, 1, Dist::Int(0, bound.max(1) as i64), seed, i);
                        Literal::Int(b.get_i64(0))
                    }
                    None => {
                        let d = if v.dtype.is_float() {
                            DType::Double
                        } else {
                            v.dtype
                        };
                        let b = draw_buffer(d, 1, default_dist(v.dtype), seed, i);
                        if v.dtype.is_float() {
                            Literal::Float(b.get_f64(0))
                        } else if v.dtype.is_bool() {
                            Literal::Bool(b.get_i64(0) != 0)
                        } else {
                            Literal::Int(b.get_i64(0))
                        }
                    }
                };
                inputs.push(Arg::Scalar(lit.cast(v.dtype)));
            }
            ValueDef::TensorInput(decl) => {
                let shape = v.shape.clone().unwrap_or_default();
                let (strides, storage, mut dist, script_range) = match recipe {
                    None => {
                        let st = decl.dense_strides(&shape);
                        let n = reach(&shape, &st);
                        (st, n, default_dist(v.dtype), None)
                    }
                    Some(InputRecipe::Scalar { .. }) => {
                        return Err(bad("a scalar where the fusion defines a tensor".into()))
                    }
                    Some(r) => {
                        let rshape = r.shape().unwrap_or_default();
                        if rshape != shape {
                            return Err(bad(format!(
                                "shape {rshape:?} but the fusion defines {shape:?}"
                            )));
                        }
                        let same = r.dtype() == v.dtype
                            || (r.dtype().is_integral()
                                && v.dtype.is_integral()
                                && r.dtype().size_bytes() == v.dtype.size_bytes());
                        if !same {
                            return Err(bad(format!(
                                "dtype {} but the fusion defines {}",
                                r.dtype().torch_name(),
                                v.dtype.torch_name()
                            )));
                        }
                        let st = r.strides().unwrap_or_else(|| row_major_strides(&shape));
                        let d = dist_of(r);
                        let range = match d {
                            Dist::Int(lo, hi) => Some((lo, hi)),
                            _ => None,
                        };
                        (st, r.storage_len(), d, range)
                    }
                };
                if let Some(u) = index_uses.iter().find(|u| u.input == i) {
                    let bound = u.bound as i64;
                    // Without a recipe the definition's default is make_tensor's [-9, 10).
                    let (lo, hi) = script_range.unwrap_or((-9, 10));
                    let script_invalid = script_range.is_none() || lo < 0 || hi > bound || hi <= lo;
                    if recipe.is_none() || script_invalid {
                        let what = match recipe {
                            Some(InputRecipe::Randint { .. }) => format!("the script's randint draws [{lo}, {hi})"),
                            Some(InputRecipe::MakeTensor { .. }) => format!("the script's make_tensor draws [{lo}, {hi})"),
                            Some(_) => "the script draws them from a normal distribution".to_string(),
                            None => format!("the script gives no inputs and make_tensor's default range is [{lo}, {hi})"),
                        };
                        let consequence = if script_invalid {
                            ", which would give invalid indices"
                        } else {
                            ""
                        };
                        notes.push(format!(
                            "input {i} ({}): indices for {} must lie in [0, {bound}); {what}{consequence}; drew [0, {bound}) instead",
                            v.name, u.op
                        ));
                        redrawn.push(Redrawn {
                            input: i,
                            bound: u.bound,
                            script_range,
                            script_invalid,
                        });
                        dist = Dist::Int(0, bound.max(1));
                    }
                }
                let need = crate::memory::bytes(storage, v.dtype.size_bytes());
                crate::memory::fits(
                    &format!(
                        "input {i} ({}: {} {shape:?})",
                        v.name,
                        v.dtype.torch_name()
                    ),
                    need,
                    available.map(|a| a.saturating_sub(taken)),
                )?;
                taken = taken.saturating_add(need.unwrap_or(0));
                let mut buf = draw_buffer(v.dtype, storage, dist, seed, i);
                if let (Some(&(_, extent)), Buffer::I32(values)) = (group_offsets.iter().find(|&&(g, _)| g == i), &mut buf) {
                    let step = strides.first().copied().unwrap_or(1).max(1) as usize;
                    group_ends(values, shape.first().copied().unwrap_or(0), step, extent, seed, i);
                    notes.push(format!(
                        "input {i} ({}): grouped_mm's offsets must be nondecreasing group ends from 0 to {extent}; drew a random split of {extent} into {} groups instead",
                        v.name,
                        shape.first().copied().unwrap_or(0)
                    ));
                }
                let mut t = Tensor::new(v.dtype, shape.clone(), strides.clone(), 0, Arc::new(buf))
                    .map_err(|e| bad(e.to_string()))?;
                // Values like the live run's: within the range `save` recorded.
                let live = f
                    .input_facts
                    .as_ref()
                    .and_then(|fs| fs.get(i))
                    .and_then(|x| x.as_ref());
                let is_index = index_uses.iter().any(|u| u.input == i);
                if let (Some(live), false, false) = (live, is_index, v.dtype.is_bool()) {
                    let (lo, hi) = crate::facts::range(&t);
                    if lo < live.min || hi > live.max {
                        let consequence = if live.min >= 0.0 && lo < 0.0 {
                            ": negative values the live inputs never had (a sqrt or log of them would be NaN)"
                        } else {
                            ""
                        };
                        notes.push(format!(
                            "input {i} ({}): the live values lay in [{}, {}] and the recipe draws [{lo}, {hi}]{consequence}; drew within the live range instead",
                            v.name, live.min, live.max
                        ));
                        let d = if v.dtype.is_float() {
                            Dist::Uniform(live.min, live.max)
                        } else {
                            Dist::Int(live.min as i64, live.max as i64 + 1)
                        };
                        let buf = draw_buffer(v.dtype, storage, d, seed, i);
                        t = Tensor::new(v.dtype, shape, strides, 0, Arc::new(buf))
                            .map_err(|e| bad(e.to_string()))?;
                    }
                }
                inputs.push(Arg::Tensor(t));
            }
            _ => return Err(bad("is not an input".into())),
        }
    }
    Ok(Generated {
        inputs,
        redrawn,
        notes,
    })
}
