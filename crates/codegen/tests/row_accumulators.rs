//! A row kernel's thread deals its elements among several accumulators per
//! reduction (`Device::row_accumulators`), folded before the block reduction:
//! independent chains of adds or maxima instead of one.

use fusebench_codegen::{plan, Device};

mod common;

/// The maximum and the sum of exponentials of 64 rows of 6144 floats
/// (a softmax's statistics).
const ROW_STATS: &str = "    x = fd.define_tensor(shape=[64, 6144], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    m = fd.ops.max(x, dims=[1], keepdim=True)
    mb = fd.ops.expand(m, shape=[64, 6144])
    d = fd.ops.sub(x, mb)
    e = fd.ops.exp(d)
    s = fd.ops.sum(e, dims=[1], keepdim=False)
    fd.add_output(s)
";

fn cuda(n: u32) -> String {
    let f = common::script(ROW_STATS);
    let dev = Device { row_accumulators: n, ..Device::default() };
    let p = plan(&f, &vec![None; f.inputs.len()], dev).unwrap();
    common::kernels(&p).to_string()
}

/// Lines that fold one accumulator into another (`aX += aY;`, `aX = fb_maxf(aX, aY);`).
fn folds(code: &str) -> usize {
    code.lines()
        .map(str::trim)
        .filter(|l| {
            let w: Vec<&str> = l.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()).collect();
            w.len() >= 2 && w.iter().all(|w| w.starts_with('a') || *w == "fb_maxf") && w.iter().filter(|w| w.starts_with('a')).count() >= 2
        })
        .count()
}

#[test]
fn four_accumulators_are_folded_pairwise() {
    // Two reductions (the maximum, then the sum), four chains each, three folds each.
    let four = cuda(4);
    assert_eq!(folds(&four), 6, "{four}");
    assert!(four.contains("fb_block_max_f") && four.contains("fb_block_sum_f"));
}

#[test]
fn one_accumulator_is_one_chain() {
    let one = cuda(1);
    assert_eq!(folds(&one), 0, "{one}");
}

#[test]
fn three_accumulators_fold_the_odd_one_too() {
    assert_eq!(folds(&cuda(3)), 4);
}
