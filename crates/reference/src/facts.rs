//! What an input's values are: their range and a hash of their contents
//! (`fusebench_ir::recipe::InputFacts`), for `save` to record and for input
//! generation to respect.

use crate::tensor::Tensor;
use fusebench_ir::recipe::InputFacts;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

/// Smallest and largest value over the logical elements (NaN ignored).
pub fn range(t: &Tensor) -> (f64, f64) {
    let fold = |(lo, hi): (f64, f64), x: f64| {
        if x.is_nan() {
            (lo, hi)
        } else {
            (lo.min(x), hi.max(x))
        }
    };
    let merge = |a: (f64, f64), b: (f64, f64)| (a.0.min(b.0), a.1.max(b.1));
    let init = (f64::INFINITY, f64::NEG_INFINITY);
    if t.is_contiguous() {
        let (b, off) = (t.buffer(), t.offset());
        (off..off + t.numel())
            .into_par_iter()
            .fold(|| init, |acc, i| fold(acc, b.get_f64(i)))
            .reduce(|| init, merge)
    } else {
        t.to_f64_vec().into_iter().fold(init, fold)
    }
}

pub fn facts(t: &Tensor) -> InputFacts {
    let (min, max) = range(t);
    let bytes = t.to_contiguous().to_le_bytes();
    let digest = Sha256::digest(&bytes);
    InputFacts {
        min,
        max,
        content_hash: digest.iter().take(12).map(|b| format!("{b:02x}")).collect(),
    }
}
