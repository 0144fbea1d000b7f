//! Statistics of a set of timing samples. Kernel times are skewed (a floor
//! set by the hardware and a tail of slow samples), so the median is the
//! estimate and its confidence interval comes from order statistics, which
//! assume nothing about the distribution.

use serde::{Deserialize, Serialize};

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
    pub mean: f64,
    /// 95% confidence interval of the median.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Half the interval's width over the median: 0.01 means +-1%.
    pub rel_ci: f64,
    /// Samples beyond Tukey's fences (1.5 interquartile ranges past the quartiles).
    pub outliers_low: usize,
    pub outliers_high: usize,
}

/// Linear interpolation between order statistics (the definition numpy and
/// PyTorch use by default) of sorted `s` at quantile `q` in [0, 1].
pub fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    assert!(!s.is_empty(), "quantile of no samples");
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// The median of `v` (any order; the mean of the middle two for an even
/// count): the one median every figure of fusebench is taken with. NaN for
/// no values.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    quantile_sorted(&s, 0.5)
}

/// Ranks (0-based, into sorted samples) bounding the 95% interval of the
/// median: the order statistics `j` and `n + 1 - j` (1-based) for the largest
/// `j` with P(Binomial(n, 1/2) < j) <= 2.5%, computed exactly; coverage is
/// then at least 95%. With fewer than 6 samples no interval is narrower than
/// [min, max].
pub fn median_ci_ranks(n: usize) -> (usize, usize) {
    if n < 6 {
        return (0, n.saturating_sub(1));
    }
    if n > 5000 {
        // The normal approximation is exact enough here, and the sum below slow.
        let half = Z95 * (n as f64).sqrt() / 2.0;
        let j = ((n as f64 / 2.0 - half).floor() as usize).max(1);
        return (j - 1, n - j);
    }
    // P(B <= k) accumulated in log space: C(n, i) / 2^n.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_c = 0.0f64; // ln C(n, 0)
    let mut cdf = 0.0f64;
    let mut j = 0usize; // P(B <= j - 1) <= 0.025 holds for j = 0 trivially
    for i in 0..n {
        cdf += (ln_c + ln_half_n).exp();
        if cdf > 0.025 {
            break;
        }
        j = i + 1;
        ln_c += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    let j = j.max(1);
    (j - 1, n - j)
}

/// Summary of `samples` (any order). Panics on an empty slice or a NaN: a
/// sample that is not a number is a failed measurement and never gets here.
pub fn summarize(samples: &[f64]) -> Summary {
    assert!(!samples.is_empty(), "summary of no samples");
    let mut s = samples.to_vec();
    assert!(s.iter().all(|x| !x.is_nan()), "a NaN sample");
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    let median = quantile_sorted(&s, 0.5);
    let (lo, hi) = median_ci_ranks(n);
    let (q1, q3) = (quantile_sorted(&s, 0.25), quantile_sorted(&s, 0.75));
    let iqr = q3 - q1;
    let (fence_lo, fence_hi) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
    Summary {
        n,
        min: s[0],
        median,
        p90: quantile_sorted(&s, 0.9),
        max: s[n - 1],
        mean: s.iter().sum::<f64>() / n as f64,
        ci_low: s[lo],
        ci_high: s[hi],
        rel_ci: if median > 0.0 {
            (s[hi] - s[lo]) / 2.0 / median
        } else {
            f64::INFINITY
        },
        outliers_low: s.iter().filter(|&&x| x < fence_lo).count(),
        outliers_high: s.iter().filter(|&&x| x > fence_hi).count(),
    }
}

/// Whether two measurements differ beyond their noise: their intervals of the
/// median do not overlap.
pub fn differ(a: &Summary, b: &Summary) -> bool {
    a.ci_high < b.ci_low || b.ci_high < a.ci_low
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quantiles() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((s.min, s.median, s.max, s.mean), (1.0, 3.0, 5.0, 3.0));
        assert_eq!(s.p90, 4.6);
        let even = summarize(&[1.0, 2.0, 3.0, 10.0]);
        assert_eq!(even.median, 2.5);
        assert_eq!(
            median(&[10.0, 1.0, 3.0, 2.0]),
            2.5,
            "even counts: mean of the middle two"
        );
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn small_samples_get_the_whole_range_as_interval() {
        let s = summarize(&[1.0, 2.0, 3.0]);
        assert_eq!((s.ci_low, s.ci_high), (1.0, 3.0));
    }

    #[test]
    fn interval_ranks_cover_the_median_and_narrow_with_n() {
        for n in 6..500 {
            let (lo, hi) = median_ci_ranks(n);
            assert!(
                lo < n / 2 && hi >= (n - 1) / 2 && hi < n,
                "n={n}: ({lo}, {hi})"
            );
        }
        let w = |n: usize| {
            let (lo, hi) = median_ci_ranks(n);
            (hi - lo) as f64 / n as f64
        };
        assert!(w(400) < w(100) && w(100) < w(25));
        // Known values (binomial tables): n = 10 gives x(2)..x(9); n = 100 gives x(40)..x(61).
        assert_eq!(median_ci_ranks(10), (1, 8));
        assert_eq!(median_ci_ranks(100), (39, 60));
    }

    #[test]
    fn outliers_are_counted_not_dropped() {
        let mut v: Vec<f64> = (0..20).map(|i| 10.0 + i as f64 * 0.01).collect();
        v.push(50.0);
        let s = summarize(&v);
        assert_eq!((s.outliers_low, s.outliers_high), (0, 1));
        assert_eq!(s.max, 50.0);
        assert!(s.median < 10.2);
    }

    #[test]
    fn overlapping_intervals_do_not_differ() {
        let a = summarize(
            &(0..50)
                .map(|i| 10.0 + (i % 7) as f64 * 0.01)
                .collect::<Vec<_>>(),
        );
        let b = summarize(
            &(0..50)
                .map(|i| 10.02 + (i % 5) as f64 * 0.01)
                .collect::<Vec<_>>(),
        );
        let c = summarize(
            &(0..50)
                .map(|i| 11.0 + (i % 5) as f64 * 0.01)
                .collect::<Vec<_>>(),
        );
        assert!(!differ(&a, &b));
        assert!(differ(&a, &c));
    }
}
