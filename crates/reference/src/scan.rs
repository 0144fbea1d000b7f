//! Inclusive scans (cumsum, cumprod, cummin, cummax) along one dim.
//!
//! Each line along the scanned dim is walked in order. Floats accumulate in
//! f64 and every prefix is rounded once to the output dtype (PyTorch's CUDA
//! scans also carry a wider accumulator than bf16/f16). Integers accumulate in
//! i64 with wrapping and are wrapped to the output dtype at the end, which is
//! the same result as wrapping at every step (wrapping is a ring map for sums
//! and products). Bools go through 0/1 integers, so cumsum is a running OR and
//! cumprod a running AND.

use crate::tensor::Tensor;
use crate::ExecError;
use fusebench_ir::{DType, Literal, ScanOp};

/// NaN-propagating max/min, as nvFuser's and PyTorch's max and min are.
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// Calls `line(base, stride, n)` for every line of `shape` along `dim`, with
/// offsets into a dense row-major layout.
fn lines(shape: &[usize], dim: usize, mut line: impl FnMut(usize, usize, usize)) {
    let n = shape[dim];
    let inner: usize = shape[dim + 1..].iter().product();
    let outer: usize = shape[..dim].iter().product();
    for o in 0..outer {
        for i in 0..inner {
            line(o * n * inner + i, inner, n);
        }
    }
}

/// Scans `x` along the normalized `dim`; `init` (already a value of the
/// output's kind) is combined into the first element when given.
pub(crate) fn scan(
    x: &Tensor,
    dim: usize,
    kind: ScanOp,
    init: Option<Literal>,
    out: DType,
) -> Result<Tensor, ExecError> {
    let shape = x.shape().to_vec();
    // A line of one element: nvFuser's scan of a broadcast dim is a copy.
    let init = if shape[dim] == 1 { None } else { init };
    if out.is_float() {
        let mut v = x.to_contiguous().to_f64_vec();
        let start = match (init, kind) {
            (Some(l), _) => l.as_f64(),
            (None, ScanOp::Cumsum) => 0.0,
            (None, ScanOp::Cumprod) => 1.0,
            (None, ScanOp::Cummin) => f64::INFINITY,
            (None, ScanOp::Cummax) => f64::NEG_INFINITY,
        };
        let op = |a: f64, b: f64| match kind {
            ScanOp::Cumsum => a + b,
            ScanOp::Cumprod => a * b,
            ScanOp::Cummin => fmin(a, b),
            ScanOp::Cummax => fmax(a, b),
        };
        lines(&shape, dim, |base, stride, n| {
            let mut acc = start;
            for k in 0..n {
                acc = op(acc, v[base + k * stride]);
                v[base + k * stride] = acc;
            }
        });
        Tensor::from_f64s(out, &shape, &v)
    } else {
        let mut v = x.to_contiguous().to_i64_vec();
        let start = match (init, kind) {
            (Some(l), _) => l.as_i64().unwrap_or(0),
            (None, ScanOp::Cumsum) => 0,
            (None, ScanOp::Cumprod) => 1,
            (None, ScanOp::Cummin) => i64::MAX,
            (None, ScanOp::Cummax) => i64::MIN,
        };
        let op = |a: i64, b: i64| match kind {
            ScanOp::Cumsum => a.wrapping_add(b),
            ScanOp::Cumprod => a.wrapping_mul(b),
            ScanOp::Cummin => a.min(b),
            ScanOp::Cummax => a.max(b),
        };
        lines(&shape, dim, |base, stride, n| {
            let mut acc = start;
            for k in 0..n {
                acc = op(acc, v[base + k * stride]);
                v[base + k * stride] = acc;
            }
        });
        Tensor::from_i64s(out, &shape, &v)
    }
}
