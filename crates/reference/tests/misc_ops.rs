//! Forms nvFuser accepts that need care on the CPU reference, against values
//! worked out by hand from nvFuser's semantics: integer welford/var_mean
//! (runtime/welford.cu's welfordCombine in integer arithmetic), squeezing an
//! expanded broadcast dim, iota of scalar inputs, e5m2 infinities kept by a
//! copy but saturated by a conversion, unsigned shifts, % and gcd.

use fusebench_frontend::parse_script;
use fusebench_ir::{DType, Fusion, Literal};
use fusebench_reference::{run, Arg, Tensor};

fn script(body: &str, inputs: &str) -> Fusion {
    let text = format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n{body}with FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n{inputs}"
    );
    parse_script("t.py", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn ints(dtype: DType, shape: &[usize], v: &[i64]) -> Arg {
    Arg::Tensor(Tensor::from_i64s(dtype, shape, v).unwrap())
}

#[test]
fn integer_welford_keeps_the_first_element_and_no_m2() {
    let f = script(
        "    tv0 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Int, is_cpu=False)\n    tv1, tv2, tv3 = fd.ops.welford(tv0, dims=[1])\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\n",
        "",
    );
    assert_eq!(f.value(f.outputs[0]).dtype, DType::Int);
    assert_eq!(f.value(f.outputs[1]).dtype, DType::Int);
    // welfordCombine: avg += (x - avg) * (N_b / N_ab) in integers: 1 for the
    // first element merged into the empty accumulator, 0 after it.
    let out = run(&f, &[ints(DType::Int, &[2, 3], &[18, -17, 0, -12, 5, 20])]).unwrap();
    assert_eq!(out[0].to_i64_vec(), vec![18, -12]);
    assert_eq!(out[1].to_i64_vec(), vec![0, 0]);
    assert_eq!(out[2].to_i64_vec(), vec![3, 3]);
}

#[test]
fn integer_var_mean_is_a_double_var_and_an_integer_mean() {
    let f = script(
        "    tv0 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Int32, is_cpu=False)\n    tv1, tv2 = fd.ops.var_mean(tv0, dims=[0], correction=1, keepdim=True)\n    tv3, tv4 = fd.ops.var_mean(tv0, dims=[0], correction=2, keepdim=False)\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\n",
        "",
    );
    assert_eq!(f.value(f.outputs[0]).dtype, DType::Double);
    assert_eq!(f.value(f.outputs[1]).dtype, DType::Int32);
    let out = run(&f, &[ints(DType::Int32, &[2, 3], &[4, -5, 6, 1, 2, 3])]).unwrap();
    // var = M2 (0) * 1 / (2 - 1); the mean is row 0.
    assert_eq!(out[0].shape(), &[1, 3]);
    assert_eq!(out[0].to_f64_vec(), vec![0.0, 0.0, 0.0]);
    assert_eq!(out[1].to_i64_vec(), vec![4, -5, 6]);
    // correction 2 of 2 elements: 0 * (1 / 0) is NaN.
    assert!(out[2].to_f64_vec().iter().all(|v| v.is_nan()));
}

#[test]
fn squeezing_an_expanded_dim_reads_its_first_element() {
    let f = script(
        "    tv0 = fd.define_tensor(shape=[2, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.expand(tv0, shape=[2, 3])\n    tv2 = fd.ops.squeeze(tv1, dims=[1], squeeze_expanded=True)\n    tv3 = fd.define_tensor(shape=[4, 2], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)\n    tv4 = fd.ops.squeeze(tv3, dims=[0], squeeze_expanded=True)\n    fd.add_output(tv2)\n    fd.add_output(tv4)\n",
        "",
    );
    let a = Tensor::from_f64s(DType::Float, &[2, 1], &[1.5, -2.0]).unwrap();
    // A stride-0 [4, 2] view of two values.
    let b = Tensor::from_f64s(DType::Float, &[1, 2], &[7.0, 8.0]).unwrap().broadcast_to(&[4, 2]);
    let out = run(&f, &[Arg::Tensor(a), Arg::Tensor(b)]).unwrap();
    assert_eq!(out[0].shape(), &[2]);
    assert_eq!(out[0].to_f64_vec(), vec![1.5, -2.0]);
    assert_eq!(out[1].to_f64_vec(), vec![7.0, 8.0]);
}

#[test]
fn iota_of_scalar_inputs_and_a_length_that_differs_at_run_time() {
    let f = script(
        "    c0 = fd.define_scalar(None, dtype=DataType.Int)\n    c1 = fd.define_scalar(None, dtype=DataType.Int)\n    c2 = fd.define_scalar(None, dtype=DataType.Int)\n    tv0 = fd.ops.iota(length=c0, start=c1, step=c2)\n    fd.add_output(tv0)\n",
        "inputs = [\n    4,\n    -2,\n    5,\n]\nfd.execute(inputs)\n",
    );
    let s = |v: i64| Arg::Scalar(Literal::Int(v));
    let out = run(&f, &[s(4), s(-2), s(5)]).unwrap();
    assert_eq!(out[0].to_i64_vec(), vec![-2, 3, 8, 13]);
    // Start and step are read at run time.
    assert_eq!(run(&f, &[s(4), s(1), s(-1)]).unwrap()[0].to_i64_vec(), vec![1, 0, -1, -2]);
    // The length fixed the extent when the fusion was built.
    let e = run(&f, &[s(5), s(0), s(1)]).unwrap_err().to_string();
    assert!(e.contains("was 4 when the fusion was built"), "{e}");
}

#[test]
fn e5m2_copies_keep_infinity_and_conversions_saturate() {
    let f = script(
        "    tv0 = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Float8_e5m2, is_cpu=False)\n    tv1 = fd.ops.cast(tv0, dtype=DataType.Float8_e5m2)\n    tv2 = fd.ops.real(tv0)\n    tv3 = fd.ops.cast(tv0, dtype=DataType.Float)\n    tv4 = fd.ops.cast(tv3, dtype=DataType.Float8_e5m2)\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv4)\n",
        "",
    );
    // e5m2 bits: +inf 0x7C, -inf 0xFC, 1.0 0x3C, max finite 57344 0x7B.
    let x = Tensor::from_le_bytes(DType::Float8E5m2, &[4], &[0x7C, 0xFC, 0x3C, 0x7B]).unwrap();
    let out = run(&f, &[Arg::Tensor(x)]).unwrap();
    let inf = f64::INFINITY;
    assert_eq!(out[0].to_f64_vec(), vec![inf, -inf, 1.0, 57344.0]);
    assert_eq!(out[1].to_f64_vec(), vec![inf, -inf, 1.0, 57344.0]);
    // cvt.rn.satfinite: infinities become the largest finite value.
    assert_eq!(out[2].to_f64_vec(), vec![57344.0, -57344.0, 1.0, 57344.0]);
}

#[test]
fn uint64_shift_mod_gcd_are_unsigned() {
    let f = script(
        "    tv0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.UInt64, is_cpu=False)\n    tv1 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.UInt64, is_cpu=False)\n    tv2 = fd.ops.bitwise_right_shift(tv0, tv1)\n    tv3 = fd.ops.mod(tv0, tv1)\n    tv4 = fd.ops.gcd(tv0, tv1)\n    tv5 = fd.ops.isnan(tv0)\n    tv6 = fd.ops.isreal(tv0)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\n    fd.add_output(tv4)\n    fd.add_output(tv5)\n    fd.add_output(tv6)\n",
        "",
    );
    // 2^64 - 1 (all bits set) and 2^63 as unsigned values.
    let a = ints(DType::UInt64, &[3], &[-1, i64::MIN, 12]);
    let b = ints(DType::UInt64, &[3], &[60, 10, 18]);
    let out = run(&f, &[a, b]).unwrap();
    assert_eq!(out[0].to_i64_vec(), vec![15, 1 << 53, 0]);
    // 2^64 - 1 = 18446744073709551615 ≡ 15 (mod 60); 2^63 ≡ 8 (mod 10).
    assert_eq!(out[1].to_i64_vec(), vec![15, 8, 12]);
    // gcd(2^64 - 1, 60) = 15 (3 * 5 divide it, 2 does not); gcd(2^63, 10) = 2.
    assert_eq!(out[2].to_i64_vec(), vec![15, 2, 6]);
    assert_eq!(out[3].to_i64_vec(), vec![0, 0, 0]);
    assert_eq!(out[4].to_i64_vec(), vec![1, 1, 1]);
}

