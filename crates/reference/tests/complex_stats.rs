//! `check`'s output summary of complex tensors: the mean has both parts, the
//! largest magnitude is the modulus, and an element with a NaN or infinite
//! part counts as NaN or infinite; read through the tensor's own strides.

use fusebench_ir::DType;
use fusebench_reference::{stats, Tensor};

fn c64(parts: &[[f32; 2]], shape: &[usize]) -> Tensor {
    let bytes: Vec<u8> = parts.iter().flatten().flat_map(|p| p.to_le_bytes()).collect();
    Tensor::from_le_bytes(DType::ComplexFloat, shape, &bytes).unwrap()
}

#[test]
fn complex_mean_has_both_parts_and_max_is_the_modulus() {
    let t = c64(&[[3.0, 4.0], [1.0, -2.0], [f32::NAN, 0.0], [0.0, f32::INFINITY]], &[4]);
    let s = stats(&t);
    assert_eq!((s.mean, s.mean_imag), (2.0, Some(1.0)));
    assert_eq!(s.abs_max, 5.0);
    assert_eq!((s.nan_count, s.inf_count), (1, 1));
}

#[test]
fn complex_stats_follow_the_strides() {
    // [[1+1j, 2+2j], [3+3j, 4+4j]] seen transposed: the same elements, the same summary.
    let t = c64(&[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 10.0]], &[2, 2]);
    let tt = Tensor::new(DType::ComplexFloat, vec![2, 2], vec![1, 2], 0, t.buffer_arc().clone()).unwrap();
    let (a, b) = (stats(&t), stats(&tt));
    assert_eq!(a, b);
    assert_eq!((a.mean, a.mean_imag), (2.5, Some(4.0)));
    assert_eq!(a.abs_max, (16.0f64 + 100.0).sqrt());
}

#[test]
fn real_tensors_have_no_imaginary_mean() {
    let bytes: Vec<u8> = [1.0f32, -3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let s = stats(&Tensor::from_le_bytes(DType::Float, &[2], &bytes).unwrap());
    assert_eq!((s.mean, s.mean_imag, s.abs_max), (-1.0, None, 3.0));
}
