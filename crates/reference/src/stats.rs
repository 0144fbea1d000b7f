//! Summary statistics of an output tensor.

use crate::expr::{Operand, Program, Scratch, TileRef, TILE};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Summary of a tensor's values, computed in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutputStats {
    /// Mean of the finite elements (0 when there are none); of a complex
    /// tensor, the mean's real part.
    pub mean: f64,
    /// Of a complex tensor, the mean's imaginary part.
    pub mean_imag: Option<f64>,
    /// Largest absolute value (modulus, for complex) among the finite
    /// elements (0 when there are none).
    pub abs_max: f64,
    pub nan_count: usize,
    pub inf_count: usize,
}

#[derive(Clone, Copy, Default)]
struct Part {
    sum: f64,
    finite: usize,
    abs_max: f64,
    nan: usize,
    inf: usize,
}

impl Part {
    #[inline]
    fn add(&mut self, x: f64) {
        if x.is_finite() {
            self.sum += x;
            self.finite += 1;
            self.abs_max = self.abs_max.max(x.abs());
        } else if x.is_nan() {
            self.nan += 1;
        } else {
            self.inf += 1;
        }
    }
    /// Adds a tile: plain vectorizable loops when every value is finite.
    fn add_tile(&mut self, v: &[f64]) {
        if v.iter().all(|x| x.is_finite()) {
            let mut s = [0.0f64; 4];
            let mut m = [0.0f64; 4];
            let mut chunks = v.chunks_exact(4);
            for c in &mut chunks {
                for k in 0..4 {
                    s[k] += c[k];
                    m[k] = m[k].max(c[k].abs());
                }
            }
            for &x in chunks.remainder() {
                s[0] += x;
                m[0] = m[0].max(x.abs());
            }
            self.sum += (s[0] + s[1]) + (s[2] + s[3]);
            self.abs_max = self.abs_max.max(m[0].max(m[1]).max(m[2].max(m[3])));
            self.finite += v.len();
        } else {
            v.iter().for_each(|&x| self.add(x));
        }
    }

    fn merge(mut self, o: Part) -> Part {
        self.sum += o.sum;
        self.finite += o.finite;
        self.abs_max = self.abs_max.max(o.abs_max);
        self.nan += o.nan;
        self.inf += o.inf;
        self
    }
}

/// Mean, largest magnitude and NaN/inf counts of `t`, in parallel; the
/// result does not depend on the number of threads.
pub fn stats(t: &Tensor) -> OutputStats {
    if t.dtype().is_complex() {
        return complex_stats(t);
    }
    let n = t.numel();
    let prog = Program::compile(&Operand::Tensor(t.clone()), t.shape(), None);
    // Fixed-size chunks: the partial sums, and so the mean, do not depend on the thread count.
    let chunk = 64 * TILE;
    let parts: Vec<Part> = (0..n.div_ceil(chunk))
        .into_par_iter()
        .map_init(Scratch::default, |s, c| {
            let mut p = Part::default();
            prog.for_each_tile(
                c * chunk,
                ((c + 1) * chunk).min(n),
                s,
                |_, tile| match tile {
                    TileRef::F(v) => p.add_tile(v),
                    TileRef::I(v) => v.iter().for_each(|&x| p.add(x as f64)),
                },
            );
            p
        })
        .collect();
    let p = parts.into_iter().fold(Part::default(), Part::merge);
    OutputStats {
        mean: if p.finite > 0 {
            p.sum / p.finite as f64
        } else {
            0.0
        },
        mean_imag: None,
        abs_max: p.abs_max,
        nan_count: p.nan,
        inf_count: p.inf,
    }
}

/// The same summary over complex elements: an element is NaN when either
/// part is, infinite when either part is (and neither is NaN); the mean has
/// both parts and the largest magnitude is the modulus. The elements'
/// real parts alone (what the tile programs read) would misstate both.
fn complex_stats(t: &Tensor) -> OutputStats {
    use crate::{C128, C64};
    let parts: Vec<[f64; 2]> = match t.dtype() {
        fusebench_ir::DType::ComplexFloat => t
            .contiguous_vec::<C64>()
            .into_iter()
            .map(|z| [z.0[0] as f64, z.0[1] as f64])
            .collect(),
        _ => t.contiguous_vec::<C128>().into_iter().map(|z| z.0).collect(),
    };
    let (mut re, mut im, mut finite, mut abs_max, mut nan, mut inf) = (0.0, 0.0, 0usize, 0.0f64, 0, 0);
    for [a, b] in parts {
        if a.is_nan() || b.is_nan() {
            nan += 1;
        } else if a.is_infinite() || b.is_infinite() {
            inf += 1;
        } else {
            re += a;
            im += b;
            finite += 1;
            abs_max = abs_max.max(a.hypot(b));
        }
    }
    let d = finite.max(1) as f64;
    OutputStats {
        mean: re / d,
        mean_imag: Some(im / d),
        abs_max,
        nan_count: nan,
        inf_count: inf,
    }
}
