//! Comparing a result with the reference, with a tolerance stated per dtype.
//! Integers, booleans and exact ops must match exactly; floats within a few
//! units of their own rounding, relative to the element or, for elements far
//! smaller than the output's largest, to that largest value (sums that cancel
//! keep the absolute error of their largest terms).

use crate::Tensor;
use fusebench_ir::DType;
use serde::Serialize;

/// |got - want| <= rtol * |want| + atol * max|want|.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

impl Tolerance {
    /// The tolerance fusebench states for outputs of `d`.
    pub fn for_dtype(d: DType) -> Tolerance {
        match d {
            // Complex: each part within its part type's tolerance.
            DType::ComplexFloat => Tolerance::for_dtype(DType::Float),
            DType::ComplexDouble => Tolerance::for_dtype(DType::Double),
            // float8: one unit in the last place (results are rounded once from
            // float, so two computations differ by at most one step).
            DType::Float8E4m3fn => Tolerance {
                rtol: 2f64.powi(-3),
                atol: 2f64.powi(-3) * 0.1,
            },
            DType::Float8E5m2 => Tolerance {
                rtol: 2f64.powi(-2),
                atol: 2f64.powi(-2) * 0.1,
            },
            // Powers of two: one step is a factor of two.
            DType::Float8E8m0fnu => Tolerance { rtol: 1.0, atol: 0.0 },
            DType::Bool | DType::Int | DType::Int32 | DType::Index | DType::UInt64 => Tolerance {
                rtol: 0.0,
                atol: 0.0,
            },
            // Two units in the last place of each format.
            DType::BFloat16 => Tolerance {
                rtol: 2.0 * 2f64.powi(-8),
                atol: 2.0 * 2f64.powi(-8) * 0.1,
            },
            DType::Half => Tolerance {
                rtol: 2.0 * 2f64.powi(-11),
                atol: 2.0 * 2f64.powi(-11) * 0.1,
            },
            DType::Float => Tolerance {
                rtol: 1e-5,
                atol: 1e-6,
            },
            DType::Double => Tolerance {
                rtol: 1e-12,
                atol: 1e-13,
            },
        }
    }

    pub fn describe(d: DType) -> String {
        let t = Tolerance::for_dtype(d);
        if t.rtol == 0.0 {
            format!("{}: exact", d.torch_name())
        } else {
            format!(
                "{}: |diff| <= {:.1e}*|ref| + {:.1e}*max|ref|",
                d.torch_name(),
                t.rtol,
                t.atol
            )
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub ok: bool,
    pub elements: usize,
    pub mismatches: usize,
    pub max_abs_err: f64,
    /// Largest error relative to the element's own magnitude (over nonzero elements).
    pub max_rel_err: f64,
    pub ref_abs_max: f64,
    pub tolerance: Tolerance,
    /// The first mismatch: logical index, value, reference value.
    pub first_mismatch: Option<(Vec<usize>, f64, f64)>,
    /// Set when shapes or dtypes differ; nothing else is compared then.
    pub problem: Option<String>,
    /// Elements outside the dtype's tolerance that are within the error
    /// bound carried through the fusion's ops (`crate::bounds`), which
    /// `check` accepts: a 16-bit product rounded before a SiLU may land an
    /// ulp away and the SiLU moves it further.
    #[serde(skip_serializing_if = "is_zero")]
    pub by_bound: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Compares `got` with the reference `want` using `want`'s dtype tolerance.
pub fn compare(got: &Tensor, want: &Tensor) -> Comparison {
    compare_within(
        got,
        want,
        Tolerance::for_dtype(want.dtype()),
        Dtypes::SameKind,
    )
}

/// Two results of which each may be off by its dtype's tolerance from the
/// exact one (the GPU's and nvFuser's): twice the tolerance, dtypes equal.
pub fn compare_peers(got: &Tensor, want: &Tensor) -> Comparison {
    let one = Tolerance::for_dtype(want.dtype());
    let two = Tolerance {
        rtol: 2.0 * one.rtol,
        atol: 2.0 * one.atol,
    };
    compare_within(got, want, two, Dtypes::Equal)
}

/// What dtypes two compared tensors may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtypes {
    /// Equal, or both integers (Index against Int32/Int: the width is the executor's).
    SameKind,
    Equal,
}

/// Compares `got` with `want` within `tol`. Integers (a zero `rtol`) compare
/// as integers, so an i64 beyond 2^53 stays exact; NaN matches only NaN and
/// infinity only itself, so a poisoned element never passes.
pub fn compare_within(got: &Tensor, want: &Tensor, tol: Tolerance, dtypes: Dtypes) -> Comparison {
    compare_slack(got, want, tol, dtypes, None)
}

/// Like [`compare`], with `slack[i]` more absolute error allowed at element
/// `i` of a float output (the bound of a sum's accumulation, see
/// [`crate::sum_bound`]).
pub fn compare_with_slack(got: &Tensor, want: &Tensor, slack: Option<&Tensor>) -> Comparison {
    let extra = slack
        .filter(|s| s.shape() == want.shape())
        .map(|s| s.to_f64_vec());
    compare_slack(
        got,
        want,
        Tolerance::for_dtype(want.dtype()),
        Dtypes::SameKind,
        extra.as_deref(),
    )
}

fn compare_slack(
    got: &Tensor,
    want: &Tensor,
    tol: Tolerance,
    dtypes: Dtypes,
    extra: Option<&[f64]>,
) -> Comparison {
    let d = want.dtype();
    let mut c = Comparison {
        ok: false,
        elements: want.numel(),
        mismatches: 0,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        ref_abs_max: 0.0,
        tolerance: tol,
        first_mismatch: None,
        problem: None,
        by_bound: 0,
    };
    if got.shape() != want.shape() {
        c.problem = Some(format!(
            "shape {:?}, expected {:?}",
            got.shape(),
            want.shape()
        ));
        return c;
    }
    let dtype_ok = match dtypes {
        Dtypes::Equal => got.dtype() == d,
        Dtypes::SameKind => got.dtype() == d || (got.dtype().is_integral() && d.is_integral()),
    };
    if !dtype_ok {
        c.problem = Some(format!("dtype {}, expected {}", got.dtype(), d));
        return c;
    }
    if d.is_complex() {
        return crate::complex::compare_parts(got, want, tol, dtypes);
    }
    let bad_at = |c: &mut Comparison, i: usize, a: f64, b: f64| {
        c.mismatches += 1;
        if c.first_mismatch.is_none() {
            c.first_mismatch = Some((unravel(i, want.shape()), a, b));
        }
    };
    if tol.rtol == 0.0 {
        for (i, (&a, &b)) in got.to_i64_vec().iter().zip(&want.to_i64_vec()).enumerate() {
            if a != b {
                let e = (a as i128 - b as i128).unsigned_abs() as f64;
                c.max_abs_err = c.max_abs_err.max(e);
                bad_at(&mut c, i, a as f64, b as f64);
            }
        }
    } else {
        let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
        c.ref_abs_max = w
            .iter()
            .filter(|x| x.is_finite())
            .fold(0.0f64, |m, x| m.max(x.abs()));
        let slack = tol.atol * c.ref_abs_max;
        for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
            let bad = if a.is_nan() || b.is_nan() {
                !(a.is_nan() && b.is_nan())
            } else if a.is_infinite() || b.is_infinite() {
                a != b
            } else {
                let e = (a - b).abs();
                c.max_abs_err = c.max_abs_err.max(e);
                if b != 0.0 {
                    c.max_rel_err = c.max_rel_err.max(e / b.abs());
                }
                e > tol.rtol * b.abs() + slack + extra.map_or(0.0, |x| x[i])
            };
            if bad {
                bad_at(&mut c, i, a, b);
            }
        }
    }
    c.ok = c.mismatches == 0;
    c
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d].max(1);
        i /= shape[d].max(1);
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_catch_what_they_should() {
        let want = Tensor::from_f64s(DType::Float, &[3], &[1.0, -2.0, 100.0]).unwrap();
        let close = Tensor::from_f64s(DType::Float, &[3], &[1.000001, -2.0, 100.0]).unwrap();
        assert!(compare(&close, &want).ok);
        let off = Tensor::from_f64s(DType::Float, &[3], &[1.01, -2.0, 100.0]).unwrap();
        let c = compare(&off, &want);
        assert!(!c.ok);
        assert_eq!(c.first_mismatch.unwrap().0, vec![0]);
        let nan = Tensor::from_f64s(DType::Float, &[3], &[f64::NAN, -2.0, 100.0]).unwrap();
        assert!(
            !compare(&nan, &want).ok,
            "a NaN (an unwritten, poisoned element) never passes"
        );
        let ints = Tensor::from_i64s(DType::Int, &[2], &[1, 2]).unwrap();
        let ints2 = Tensor::from_i64s(DType::Int, &[2], &[1, 3]).unwrap();
        assert!(!compare(&ints2, &ints).ok);
        let wrong_shape = Tensor::from_f64s(DType::Float, &[1, 3], &[1.0, -2.0, 100.0]).unwrap();
        assert!(compare(&wrong_shape, &want).problem.is_some());
        // Integers beyond 2^53 compare exactly.
        let big = Tensor::from_i64s(DType::Int, &[1], &[(1 << 60) + 1]).unwrap();
        let big2 = Tensor::from_i64s(DType::Int, &[1], &[1 << 60]).unwrap();
        assert!(!compare(&big, &big2).ok);
    }

    #[test]
    fn peers_may_each_be_off_by_one_tolerance_and_must_share_a_dtype() {
        let want = Tensor::from_f64s(DType::Float, &[1], &[1.0]).unwrap();
        let near = Tensor::from_f64s(DType::Float, &[1], &[1.0 + 1.5e-5]).unwrap();
        assert!(!compare(&near, &want).ok);
        assert!(compare_peers(&near, &want).ok);
        let i32s = Tensor::from_i64s(DType::Int32, &[1], &[3]).unwrap();
        let i64s = Tensor::from_i64s(DType::Int, &[1], &[3]).unwrap();
        assert!(compare(&i32s, &i64s).ok);
        assert!(compare_peers(&i32s, &i64s).problem.is_some());
    }
}
