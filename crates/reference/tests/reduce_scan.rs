//! prod, reductions over every dim, scans, var and batch_norm against values
//! worked out by hand from PyTorch's and nvFuser's definitions.

use fusebench_frontend::parse_script;
use fusebench_ir::DType;
use fusebench_reference::{run, Arg, Tensor};

/// Parses a body of `fd.ops` lines over the declared tensors and runs it.
fn eval(decls: &str, body: &str, outs: &[&str], inputs: Vec<Arg>) -> Vec<Tensor> {
    let mut s = String::from(
        "from nvfuser_direct import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n",
    );
    for l in decls.lines().chain(body.lines()) {
        s.push_str(&format!("    {}\n", l.trim()));
    }
    for o in outs {
        s.push_str(&format!("    fd.add_output({o})\n"));
    }
    s.push_str("with FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n");
    let f = parse_script("t.py", &s).unwrap_or_else(|e| panic!("{e}\n{s}"));
    run(&f, &inputs).unwrap()
}

fn tf(d: DType, shape: &[usize], v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(d, shape, v).unwrap())
}
fn ti(d: DType, shape: &[usize], v: &[i64]) -> Arg {
    Arg::Tensor(Tensor::from_i64s(d, shape, v).unwrap())
}

#[track_caller]
fn check(t: &Tensor, d: DType, shape: &[usize], want: &[f64]) {
    assert_eq!(t.dtype(), d);
    assert_eq!(t.shape(), shape);
    let got = t.to_f64_vec();
    let same = got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
    assert!(same, "got {got:?}, want {want:?}");
}

const F23: &str = "tv0 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)";
const I23: &str = "tv0 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Int32, is_cpu=False)";

#[test]
fn prod_over_dims_all_dims_and_keepdim() {
    let x = || tf(DType::Float, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let o = eval(
        F23,
        "tv1 = fd.ops.prod(tv0, dims=[1])\ntv2 = fd.ops.prod(tv0)\ntv3 = fd.ops.prod(tv0, 0, True)",
        &["tv1", "tv2", "tv3"],
        vec![x()],
    );
    check(&o[0], DType::Float, &[2], &[6., 120.]);
    check(&o[1], DType::Float, &[], &[720.]);
    check(&o[2], DType::Float, &[1, 3], &[4., 10., 18.]);
}

#[test]
fn prod_and_sum_of_ints_and_bools_are_int64() {
    let x = ti(DType::Int32, &[2, 3], &[-1, 2, 3, 4, -5, 6]);
    let o = eval(
        I23,
        "tv1 = fd.ops.prod(tv0, dims=[1])\ntv2 = fd.ops.prod(tv0)\ntv3 = fd.ops.sum(tv0)\ntv4 = fd.ops.max(tv0, dims=[0, 1], keepdim=True)\ntv5 = fd.ops.min(tv0)",
        &["tv1", "tv2", "tv3", "tv4", "tv5"],
        vec![x],
    );
    check(&o[0], DType::Int, &[2], &[-6., -120.]);
    check(&o[1], DType::Int, &[], &[720.]);
    check(&o[2], DType::Int, &[], &[9.]);
    // max/min keep the input's dtype.
    check(&o[3], DType::Int32, &[1, 1], &[6.]);
    check(&o[4], DType::Int32, &[], &[-5.]);
    let b = ti(DType::Bool, &[2, 2], &[1, 1, 1, 0]);
    let o = eval(
        "tv0 = fd.define_tensor(shape=[2, 2], contiguity=[True, True], dtype=DataType.Bool, is_cpu=False)",
        "tv1 = fd.ops.prod(tv0, dims=[1])\ntv2 = fd.ops.sum(tv0)\ntv3 = fd.ops.prod(tv0, dims=[0], dtype=DataType.Float)",
        &["tv1", "tv2", "tv3"],
        vec![b],
    );
    check(&o[0], DType::Int, &[2], &[1., 0.]);
    check(&o[1], DType::Int, &[], &[3.]);
    check(&o[2], DType::Float, &[2], &[1., 0.]);
}

#[test]
fn int32_prod_wraps_like_int64_arithmetic() {
    // 2^20 * 2^20 = 2^40 fits in the Int output (prod of ints is Int).
    let x = ti(DType::Int32, &[2], &[1 << 20, 1 << 20]);
    let o = eval(
        "tv0 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Int32, is_cpu=False)",
        "tv1 = fd.ops.prod(tv0)",
        &["tv1"],
        vec![x],
    );
    check(&o[0], DType::Int, &[], &[(1u64 << 40) as f64]);
}

#[test]
fn scans_along_inner_and_outer_dims() {
    let x = || tf(DType::Float, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let o = eval(
        F23,
        "tv1 = fd.ops.cumsum(tv0, dim=1)\ntv2 = fd.ops.cumsum(tv0, 0)\ntv3 = fd.ops.cumprod(tv0, dim=-1)\ntv4 = fd.ops.cumsum(tv0, dim=1, init=10.0)",
        &["tv1", "tv2", "tv3", "tv4"],
        vec![x()],
    );
    check(&o[0], DType::Float, &[2, 3], &[1., 3., 6., 4., 9., 15.]);
    check(&o[1], DType::Float, &[2, 3], &[1., 2., 3., 5., 7., 9.]);
    check(&o[2], DType::Float, &[2, 3], &[1., 2., 6., 4., 20., 120.]);
    check(&o[3], DType::Float, &[2, 3], &[11., 13., 16., 14., 19., 25.]);
}

#[test]
fn scans_keep_int_dtypes_and_ties() {
    let x = ti(DType::Int32, &[2, 3], &[3, 1, 3, 2, 2, 5]);
    let o = eval(
        I23,
        "tv1 = fd.ops.cummax(tv0, dim=1)\ntv2 = fd.ops.cummin(tv0, dim=1)\ntv3 = fd.ops.cumsum(tv0, dim=0)\ntv4 = fd.ops.cumprod(tv0, dim=1)",
        &["tv1", "tv2", "tv3", "tv4"],
        vec![x],
    );
    // nvFuser's scan keeps the input dtype (PyTorch's cumsum would give int64).
    check(&o[0], DType::Int32, &[2, 3], &[3., 3., 3., 2., 2., 5.]);
    check(&o[1], DType::Int32, &[2, 3], &[3., 1., 1., 2., 2., 2.]);
    check(&o[2], DType::Int32, &[2, 3], &[3., 1., 3., 5., 3., 8.]);
    check(&o[3], DType::Int32, &[2, 3], &[3., 3., 9., 2., 4., 20.]);
}

#[test]
fn int32_cumsum_wraps() {
    let x = ti(DType::Int32, &[2], &[i32::MAX as i64, 1]);
    let o = eval(
        "tv0 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Int32, is_cpu=False)",
        "tv1 = fd.ops.cumsum(tv0, dim=0)",
        &["tv1"],
        vec![x],
    );
    check(&o[0], DType::Int32, &[2], &[i32::MAX as f64, i32::MIN as f64]);
}

#[test]
fn bf16_cumsum_rounds_each_exact_prefix_once() {
    // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: it rounds
    // to even (1); the next prefix 1 + 2^-7 is exact. Summing in bf16 step by
    // step would give 1, 1, 1.
    let x = tf(DType::BFloat16, &[3], &[1., 1. / 256., 1. / 256.]);
    let o = eval(
        "tv0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)",
        "tv1 = fd.ops.cumsum(tv0, dim=0)",
        &["tv1"],
        vec![x],
    );
    check(&o[0], DType::BFloat16, &[3], &[1., 1., 1. + 1. / 128.]);
}

#[test]
fn cummax_propagates_nan_and_size_one_dims_are_copies() {
    let x = tf(DType::Float, &[4], &[1., f64::NAN, 3., 0.]);
    let o = eval(
        "tv0 = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Float, is_cpu=False)",
        "tv1 = fd.ops.cummax(tv0, dim=0)\ntv2 = fd.ops.cummin(tv0, dim=0)",
        &["tv1", "tv2"],
        vec![x],
    );
    check(&o[0], DType::Float, &[4], &[1., f64::NAN, f64::NAN, f64::NAN]);
    check(&o[1], DType::Float, &[4], &[1., f64::NAN, f64::NAN, f64::NAN]);
    // Along a dim of extent 1 a scan is a copy, init or not.
    let x = tf(DType::Float, &[1, 2], &[2., 3.]);
    let o = eval(
        "tv0 = fd.define_tensor(shape=[1, 2], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)",
        "tv1 = fd.ops.cumsum(tv0, dim=0, init=5.0)",
        &["tv1"],
        vec![x],
    );
    check(&o[0], DType::Float, &[1, 2], &[2., 3.]);
}

#[test]
fn var_follows_nvfusers_composition() {
    let x = tf(DType::Float, &[2, 4], &[1., 2., 3., 4., 2., 2., 2., 2.]);
    let o = eval(
        "tv0 = fd.define_tensor(shape=[2, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)",
        "tv1 = fd.ops.var(tv0, dims=[1])\ntv2 = fd.ops.var(tv0, dims=[1], correction=0, keepdim=True)\ntv3 = fd.ops.var(tv0, [0, 1], 8)",
        &["tv1", "tv2", "tv3"],
        vec![x],
    );
    // Row 0: mean 2.5, squared deviations sum to 5: 5/3 with Bessel's correction, 5/4 without.
    check(&o[0], DType::Float, &[2], &[(5.0f64 * (1.0 / 3.0) as f32 as f64) as f32 as f64, 0.]);
    check(&o[1], DType::Float, &[2, 1], &[1.25, 0.]);
    // n - correction = 0: 1/0 is inf, as PyTorch's var gives (sum > 0 here).
    check(&o[2], DType::Float, &[], &[f64::INFINITY]);
}

#[test]
fn batch_norm_inference_and_training() {
    // x [2, 2, 1, 1]: channel 0 holds 1 and 3, channel 1 holds 2 and 6.
    let decls = "tv0 = fd.define_tensor(shape=[2, 2, 1, 1], contiguity=[True, True, None, None], dtype=DataType.Float, is_cpu=False)
tv1 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)
tv2 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)";
    let x = || tf(DType::Float, &[2, 2, 1, 1], &[1., 2., 3., 6.]);
    // Training: batch mean [2, 4], biased var [1, 4], eps 0: invstd [1, 0.5].
    let o = eval(
        decls,
        "tv3, tv4, tv5 = fd.ops.batch_norm(tv0, None, None, None, None, 0.1, 0.0, True)",
        &["tv3", "tv4", "tv5"],
        vec![x(), tf(DType::Float, &[2], &[0., 0.]), tf(DType::Float, &[2], &[1., 1.])],
    );
    check(&o[0], DType::Float, &[2, 2, 1, 1], &[-1., -1., 1., 1.]);
    check(&o[1], DType::Float, &[2], &[2., 4.]);
    check(&o[2], DType::Float, &[2], &[1., 0.5]);
    // Inference with running stats mean [1, 2], var [4, 16]: invstd [0.5, 0.25].
    let o = eval(
        decls,
        "tv3, tv4, tv5 = fd.ops.batch_norm(tv0, None, None, tv1, tv2, 0.1, 0.0, False)",
        &["tv3", "tv5"],
        vec![x(), tf(DType::Float, &[2], &[1., 2.]), tf(DType::Float, &[2], &[4., 16.])],
    );
    check(&o[0], DType::Float, &[2, 2, 1, 1], &[0., 0., 1., 1.]);
    check(&o[1], DType::Float, &[2], &[0.5, 0.25]);
}

#[test]
fn batch_norm_training_updates_running_stats() {
    // x [2, 2]: channel 0 holds 1 and 3 (mean 2, var_sum 2), channel 1 holds
    // 2 and 6 (mean 4, var_sum 8). Unbiased variances (n - 1 = 1): 2 and 8.
    // momentum 0.1 on running mean [0, 10], running var [1, 1]:
    // mean [0.9*0 + 0.2, 0.9*10 + 0.4] = [0.2, 9.4],
    // var [0.9 + 0.2, 0.9 + 0.8] = [1.1, 1.7].
    let decls = "tv0 = fd.define_tensor(shape=[2, 2], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
tv1 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)
tv2 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)";
    let o = eval(
        decls,
        "tv3, tv4, tv5 = fd.ops.batch_norm(tv0, None, None, tv1, tv2, 0.1, 0.0, True)",
        &["tv3", "tv4", "tv5"],
        vec![
            tf(DType::Float, &[2, 2], &[1., 2., 3., 6.]),
            tf(DType::Float, &[2], &[0., 10.]),
            tf(DType::Float, &[2], &[1., 1.]),
        ],
    );
    // The two running stats come first: nvFuser adds them as outputs aliased
    // to tv1 and tv2 when batch_norm is built, before the script's outputs.
    let near = |t: &Tensor, want: &[f64]| {
        let got = t.to_f64_vec();
        assert!(got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-6), "{got:?} vs {want:?}");
    };
    near(&o[0], &[0.2, 9.4]);
    near(&o[1], &[1.1, 1.7]);
    check(&o[2], DType::Float, &[2, 2], &[-1., -1., 1., 1.]);
    check(&o[3], DType::Float, &[2], &[2., 4.]);
}

#[test]
fn long_prod_matches_a_plain_f64_product() {
    // Pseudo-random factors near 1, as a long f32 product sees them.
    let mut s = 12345u64;
    let v: Vec<f64> = (0..70001)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (0.9999 + 0.0002 * ((s >> 11) as f64 / (1u64 << 53) as f64)) as f32 as f64
        })
        .collect();
    let want = v.iter().product::<f64>() as f32 as f64;
    let o = eval(
        "tv0 = fd.define_tensor(shape=[70001], contiguity=[True], dtype=DataType.Float, is_cpu=False)",
        "tv1 = fd.ops.prod(tv0)",
        &["tv1"],
        vec![tf(DType::Float, &[70001], &v)],
    );
    check(&o[0], DType::Float, &[], &[want]);
}
