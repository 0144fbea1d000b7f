//! What an input's values are: their range and a hash of their contents
//! (`fusebench_ir::recipe::InputFacts`), for `save` to record and for input
//! generation to respect; how many distinct ids an index holds, for counting
//! the rows a gather reads (`fusebench_ir::traffic`).

use crate::tensor::Tensor;
use crate::Arg;
use fusebench_ir::analysis::index_inputs;
use fusebench_ir::recipe::InputFacts;
use fusebench_ir::Fusion;
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

/// The number of distinct values among the logical elements of an integer
/// tensor; `None` for any other dtype.
pub fn distinct(t: &Tensor) -> Option<u64> {
    if !t.dtype().is_integral() {
        return None;
    }
    let mut v = t.to_i64_vec();
    v.par_sort_unstable();
    v.dedup();
    Some(v.len() as u64)
}

/// Per input of `f`, the distinct values of those that feed a gather's index
/// (`None` for the others): what `fusebench_ir::traffic` takes to count the
/// rows a gather reads rather than its ids.
pub fn distinct_ids(f: &Fusion, inputs: &[Arg]) -> Vec<Option<u64>> {
    let index = index_inputs(f);
    inputs
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            Arg::Tensor(t) if index.iter().any(|u| u.input == i) => distinct(t),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fusebench_ir::{DType, FusionBuilder};

    #[test]
    fn distinct_counts_each_value_once() {
        let t = Tensor::from_i64s(DType::Int, &[6], &[7, -1, 7, 3, -1, 7]).unwrap();
        assert_eq!(distinct(&t), Some(3));
        let t = Tensor::from_i64s(DType::Int32, &[2, 2], &[5, 5, 5, 5]).unwrap();
        assert_eq!(distinct(&t), Some(1));
        // A broadcast view repeats its elements: still the same values.
        let row = Tensor::from_i64s(DType::Int, &[1, 3], &[1, 2, 3]).unwrap();
        assert_eq!(distinct(&row.broadcast_to(&[100, 3])), Some(3));
        let empty = Tensor::from_i64s(DType::Int, &[0], &[]).unwrap();
        assert_eq!(distinct(&empty), Some(0));
    }

    #[test]
    fn distinct_is_for_integers_only() {
        let t = Tensor::from_f64s(DType::Float, &[3], &[1.0, 1.0, 2.0]).unwrap();
        assert_eq!(distinct(&t), None);
    }

    #[test]
    fn distinct_ids_counts_only_gather_indices() {
        let mut fd = FusionBuilder::new();
        let ids = fd.tensor(&[4], DType::Int).unwrap();
        let other = fd.tensor(&[4], DType::Int).unwrap();
        let table = fd.tensor(&[10, 2], DType::Float).unwrap();
        let got = fd.index_select(table, ids, 0).unwrap();
        let sum = fd.add(other, other).unwrap();
        fd.add_output(got).unwrap();
        fd.add_output(sum).unwrap();
        let f = fd.finish();
        let args = [
            Arg::Tensor(Tensor::from_i64s(DType::Int, &[4], &[3, 3, 9, 0]).unwrap()),
            Arg::Tensor(Tensor::from_i64s(DType::Int, &[4], &[1, 2, 3, 4]).unwrap()),
            Arg::Tensor(Tensor::from_f64s(DType::Float, &[10, 2], &[0.0; 20]).unwrap()),
        ];
        assert_eq!(distinct_ids(&f, &args), vec![Some(3), None, None]);
    }
}
