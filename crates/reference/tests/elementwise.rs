//! The op table's elementwise ops: nvFuser's dtype promotion, hand-checked
//! values on the CPU reference (edge cases included), constant folding, and
//! print -> parse round trips. Expected values come from nvFuser's
//! definitions (csrc/ops/arith.cpp, runtime/helpers.cu) and C / PyTorch
//! semantics, worked out by hand.

use fusebench_frontend::{parse_script, print_script};
use fusebench_ir::{DType, Fusion};
use fusebench_reference::{run, Arg, Tensor};

/// A direct-syntax script with tensor inputs `(dtype, shape)` and `body`
/// lines after them (inputs are t0, t1, ...; outputs are every `o*`).
fn script(inputs: &[(&str, &[usize])], body: &[&str]) -> String {
    let mut s = String::from(
        "from nvfuser_direct import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n",
    );
    for (i, (d, shape)) in inputs.iter().enumerate() {
        let contig = vec!["True"; shape.len()].join(", ");
        s += &format!(
            "    t{i} = fd.define_tensor(shape={shape:?}, contiguity=[{contig}], dtype=DataType.{d}, is_cpu=False)\n"
        );
    }
    for (i, b) in body.iter().enumerate() {
        s += &format!("    o{i} = fd.ops.{b}\n");
    }
    for i in 0..body.len() {
        s += &format!("    fd.add_output(o{i})\n");
    }
    s + "with FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n"
}

fn read(text: &str) -> Fusion {
    parse_script("t.py", text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn out_dtypes(f: &Fusion) -> Vec<DType> {
    f.outputs.iter().map(|&o| f.value(o).dtype).collect()
}

/// Output dtype of `op` applied to `args` over inputs of the given dtypes.
fn dtype_of(inputs: &[&str], call: &str) -> Result<DType, String> {
    let ins: Vec<(&str, &[usize])> = inputs.iter().map(|d| (*d, &[3usize][..])).collect();
    parse_script("t.py", &script(&ins, &[call]))
        .map(|f| out_dtypes(&f)[0])
        .map_err(|e| e.to_string())
}

#[test]
fn promotion_follows_nvfuser() {
    use DType::*;
    let cases: &[(&[&str], &str, DType)] = &[
        // float_op_config: integers and bools become Float; reduced floats compute as Float.
        (&["Int"], "sin(t0)", Float),
        (&["Bool"], "erfinv(t0)", Float),
        (&["BFloat16"], "cos(t0)", Float),
        (&["Double"], "lgamma(t0)", Double),
        (&["Int32", "Int32"], "truediv(t0, t1)", Float),
        (&["Int", "Double"], "atan2(t0, t1)", Double),
        // Plain unaryOp keeps the dtype, reduced floats included.
        (&["BFloat16"], "relu(t0)", BFloat16),
        (&["Half"], "round(t0)", Half),
        (&["Int32"], "ceil(t0)", Int32),
        (&["Int"], "frac(t0)", Int),
        (&["Int32"], "sign(t0)", Int32),
        (&["Half"], "silu(t0)", Half),
        // Predicates and signbit give Bool.
        (&["Int"], "isnan(t0)", Bool),
        (&["BFloat16"], "isfinite(t0)", Bool),
        (&["Half"], "signbit(t0)", Bool),
        (&["Float"], "logical_not(t0)", Bool),
        (&["Float", "Int"], "logical_and(t0, t1)", Bool),
        // default_op_config: common dtype, Half -> Float.
        (&["Int32", "Int"], "fmod(t0, t1)", Int),
        (&["Int32"], "remainder(t0, 2)", Int32),
        // A Double scalar outranks an integer tensor (a category above it).
        (&["Int32"], "remainder(t0, 2.5)", Double),
        (&["Half", "Half"], "mod(t0, t1)", Float),
        (&["Int32"], "bitwise_left_shift(t0, 3)", Int32),
        (&["Int32", "Int"], "gcd(t0, t1)", Int),
        (&["Bool", "Bool"], "bitwise_xor(t0, t1)", Bool),
        (&["Bool", "Int32"], "bitwise_and(t0, t1)", Int32),
        (&["Bool"], "bitwise_not(t0)", Bool),
        (&["Int32"], "neg(t0)", Int32),
        (&["BFloat16", "Float"], "lerp(t0, t1, 0.5)", Float),
        (&["Double"], "nextafter(t0, 1.0)", Double),
        (&["Int"], "nextafter(t0, t0)", Float),
        // clamp and threshold keep the input's dtype.
        (&["BFloat16"], "clamp(t0, 0.1, 0.2)", BFloat16),
        (&["Int32"], "threshold(t0, 2.5, 1)", Int32),
        // add_alpha: the common dtype of the tensors, alpha cast to it.
        (&["Int32", "Int32"], "add_alpha(t0, t1, 2.7)", Int32),
        (&["BFloat16", "BFloat16"], "addcmul(t0, t1, t1, 0.5)", Float),
    ];
    for (ins, call, want) in cases {
        assert_eq!(dtype_of(ins, call), Ok(*want), "{call} over {ins:?}");
    }
    // Refused as nvFuser refuses them, naming the op.
    for (ins, call, what) in [
        (&["Float"][..], "bitwise_not(t0)", "bitwise_not"),
        (&["Bool", "Bool"], "gcd(t0, t1)", "gcd"),
        (&["Float"], "bitwise_left_shift(t0, 1)", "bitwise_left_shift"),
        (&["BFloat16", "BFloat16"], "nextafter(t0, t1)", "nextafter"),
        (&["Int"], "silu(t0)", "silu"),
        (&["Int", "Int"], "lerp(t0, t1, 1)", "lerp"),
        (&["Float", "Float"], "clamp(t0, t1, 1.0)", "clamp"),
    ] {
        let e = dtype_of(ins, call).expect_err(call);
        assert!(e.contains(what), "{call}: {e}");
    }
}

/// Runs one-input scripts: every `ops` call on `x` of `dtype`, outputs as f64s.
fn eval(dtype: &str, x: &[f64], calls: &[&str]) -> Vec<Vec<f64>> {
    let f = read(&script(&[(dtype, &[x.len()])], calls));
    let d = DType::from_nvfuser_name(dtype).unwrap();
    let t = Tensor::from_f64s(d, &[x.len()], x).unwrap();
    run(&f, &[Arg::Tensor(t)]).unwrap().iter().map(|t| t.to_f64_vec()).collect()
}

#[track_caller]
fn same(got: &[f64], want: &[f64]) {
    let ok = got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
    assert!(ok, "got {got:?}, want {want:?}");
}

#[track_caller]
fn near(got: &[f64], want: &[f64], rel: f64) {
    for (a, b) in got.iter().zip(want) {
        assert!(
            (a - b).abs() <= rel * b.abs() || (a.is_nan() && b.is_nan()) || a == b,
            "got {got:?}, want {want:?}"
        );
    }
}

const INF: f64 = f64::INFINITY;
const NAN: f64 = f64::NAN;

#[test]
fn unary_float_values() {
    let x = [-2.5, -0.5, -0.0, 0.5, 1.5, 2.5, INF, -INF, NAN];
    let o = eval(
        "Double",
        &x,
        &["round(t0)", "ceil(t0)", "floor(t0)", "trunc(t0)", "frac(t0)", "sign(t0)", "relu(t0)"],
    );
    // round is half to even (nearbyint).
    same(&o[0], &[-2.0, -0.0, -0.0, 0.0, 2.0, 2.0, INF, -INF, NAN]);
    same(&o[1], &[-2.0, -0.0, -0.0, 1.0, 2.0, 3.0, INF, -INF, NAN]);
    same(&o[2], &[-3.0, -1.0, -0.0, 0.0, 1.0, 2.0, INF, -INF, NAN]);
    same(&o[3], &[-2.0, -0.0, -0.0, 0.0, 1.0, 2.0, INF, -INF, NAN]);
    // frac = x - trunc(x); of infinities NaN.
    same(&o[4], &[-0.5, -0.5, 0.0, 0.5, 0.5, 0.5, NAN, NAN, NAN]);
    // sign of NaN is 0 (nvFuser's where(x > 0, 1, where(x < 0, -1, 0))).
    same(&o[5], &[-1.0, -1.0, 0.0, 1.0, 1.0, 1.0, 1.0, -1.0, 0.0]);
    // relu: x <= 0 ? 0 : x, NaN passes.
    same(&o[6], &[0.0, 0.0, 0.0, 0.5, 1.5, 2.5, INF, 0.0, NAN]);

    let o = eval(
        "Float",
        &x,
        &["isfinite(t0)", "isinf(t0)", "isnan(t0)", "isneginf(t0)", "isposinf(t0)", "isreal(t0)", "signbit(t0)", "logical_not(t0)"],
    );
    same(&o[0], &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
    same(&o[1], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]);
    same(&o[2], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    same(&o[3], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    same(&o[4], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    same(&o[5], &[1.0; 9]);
    // signbit(-0.0) is set.
    same(&o[6][..8], &[1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    // logical_not casts to bool first: NaN is true.
    same(&o[7], &[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);

    let y = [0.5, -0.25, 0.9];
    let o = eval(
        "Double",
        &y,
        &["acos(t0)", "asin(t0)", "atanh(t0)", "exp2(t0)", "expm1(t0)", "log1p(t0)", "erfc(t0)", "erfinv(t0)", "silu(t0)"],
    );
    near(&o[0], &[std::f64::consts::FRAC_PI_3, 1.823_476_581_936_975, 0.451_026_811_796_262_3], 1e-15);
    near(&o[1], &[std::f64::consts::FRAC_PI_6, -0.252_680_255_142_078_65, 1.119_769_514_998_634_2], 1e-15);
    near(&o[2], &[0.549_306_144_334_054_8, -0.255_412_811_882_995_3, 1.472_219_489_583_220_2], 1e-15);
    near(&o[3], &[std::f64::consts::SQRT_2, 0.840_896_415_253_714_6, 1.866_065_983_073_614_8], 1e-15);
    near(&o[4], &[0.648_721_270_700_128_1, -0.221_199_216_928_595_1, 1.459_603_111_156_949_7], 1e-15);
    near(&o[5], &[0.405_465_108_108_164_4, -0.287_682_072_451_780_9, 0.641_853_886_172_394_8], 1e-15);
    near(&o[6], &[0.479_500_122_186_953_5, 1.276_326_390_168_237, 0.203_091_787_577_167_86], 1e-14);
    near(&o[7], &[0.476_936_276_204_469_9, -0.225_312_055_012_178_1, 1.163_087_153_676_674_3], 1e-14);
    // silu(x) = x * sigmoid(x)
    near(&o[8], &[0.311_229_665_600_927_3, -0.109_455_874_778_550_48, 0.639_854_552_362_503_5], 1e-15);

    // log10 / log2 / lgamma / acosh on exact points.
    let o = eval("Double", &[1.0, 100.0, 8.0], &["log10(t0)", "log2(t0)", "lgamma(t0)", "acosh(t0)"]);
    near(&o[0], &[0.0, 2.0, 0.903_089_986_991_943_6], 1e-15);
    near(&o[1], &[0.0, 6.643_856_189_774_724, 3.0], 1e-15);
    // lgamma(8) = ln(5040)
    near(&o[2], &[0.0, 359.134_205_369_575_4, 8.525_161_361_065_415], 1e-14);
    near(&o[3], &[0.0, 5.298_292_365_610_484, 2.768_659_383_313_573_8], 1e-15);
}

#[test]
fn reduced_floats_round_once() {
    // sin(1) in f64, rounded to bf16: 0.84147... -> 0.83984375.
    let o = eval("BFloat16", &[1.0], &["sin(t0)", "relu(t0)"]);
    // sin promotes bf16 to Float: the Float rounding of sin(1).
    same(&o[0], &[1f64.sin() as f32 as f64]);
    same(&o[1], &[1.0]);
    let f = read(&script(&[("BFloat16", &[1])], &["silu(t0)"]));
    let t = Tensor::from_f64s(DType::BFloat16, &[1], &[1.0]).unwrap();
    let out = run(&f, &[Arg::Tensor(t)]).unwrap();
    assert_eq!(out[0].dtype(), DType::BFloat16);
    // silu(1) = 0.7310585786; bf16 neighbours 0.73046875 and 0.734375.
    same(&out[0].to_f64_vec(), &[0.730_468_75]);
}

/// Two-input script over integer tensors; outputs as i64s.
fn eval_int(dtype: &str, a: &[i64], b: &[i64], calls: &[&str]) -> Vec<Vec<i64>> {
    let n = a.len();
    let f = read(&script(&[(dtype, &[n]), (dtype, &[n])], calls));
    let d = DType::from_nvfuser_name(dtype).unwrap();
    let ta = Tensor::from_i64s(d, &[n], a).unwrap();
    let tb = Tensor::from_i64s(d, &[n], b).unwrap();
    run(&f, &[Arg::Tensor(ta), Arg::Tensor(tb)]).unwrap().iter().map(|t| t.to_i64_vec()).collect()
}

#[test]
fn integer_values() {
    let a = [-7, 7, -7, 7, 5, i32::MIN as i64, -8];
    let b = [3, -3, -3, 3, 0, -1, 1];
    let o = eval_int(
        "Int32",
        &a,
        &b,
        &["fmod(t0, t1)", "remainder(t0, t1)", "mod(t0, t1)", "gcd(t0, t1)", "bitwise_and(t0, t1)", "bitwise_not(t0)"],
    );
    // fmod and mod: the dividend's sign; x % 0 and MIN % -1 give 0.
    assert_eq!(o[0], [-1, 1, -1, 1, 0, 0, 0]);
    assert_eq!(o[2], [-1, 1, -1, 1, 0, 0, 0]);
    // remainder: the divisor's sign.
    assert_eq!(o[1], [2, -2, -1, 1, 0, 0, 0]);
    // gcd of absolute values; gcd(5, 0) = 5; |INT32_MIN| wraps.
    assert_eq!(o[3], [1, 1, 1, 1, 5, 1, 1]);
    // INT32_MIN & -1 is INT32_MIN.
    assert_eq!(o[4], [-7 & 3, 7 & -3, -7 & -3, 7 & 3, 0, i32::MIN as i64, 0]);
    assert_eq!(o[5], [6, -8, 6, -8, -6, i32::MAX as i64, 7]);

    // Shifts: amounts below 0 or of the width or more give 0 (<<) or the sign (>>).
    let x = [1, -1, -8, 5, -8, 3, -16];
    let s = [31, 32, 1, -1, 40, 0, 2];
    let o = eval_int(
        "Int32",
        &x,
        &s,
        &["bitwise_left_shift(t0, t1)", "bitwise_right_shift(t0, t1)", "logical_right_shift(t0, t1)"],
    );
    assert_eq!(o[0], [i32::MIN as i64, 0, -16, 0, 0, 3, -64]);
    assert_eq!(o[1], [0, -1, -4, 0, -1, 3, -4]);
    // Logical: zeros shifted in; -16 >>> 2 = 0x3FFFFFFC.
    assert_eq!(o[2], [0, 0, 0x7FFF_FFFC, 0, -1, 3, 0x3FFF_FFFC]);

    let o = eval_int("Int", &[-8, 1 << 62], &[1, 2], &["logical_right_shift(t0, t1)", "bitwise_left_shift(t0, t1)"]);
    assert_eq!(o[0], [0x7FFF_FFFF_FFFF_FFFC, 1 << 60]);
    assert_eq!(o[1], [-16, 0]);

    // Integer ops that keep integers, and the int-to-float ones.
    let o = eval_int("Int", &[-3, 0, 4], &[2, 2, 2], &["sign(t0)", "relu(t0)", "frac(t0)", "round(t0)", "abs(t0)", "isfinite(t0)", "signbit(t0)"]);
    assert_eq!(o[0], [-1, 0, 1]);
    assert_eq!(o[1], [0, 0, 4]);
    assert_eq!(o[2], [0, 0, 0]);
    assert_eq!(o[3], [-3, 0, 4]);
    assert_eq!(o[4], [3, 0, 4]);
    assert_eq!(o[5], [1, 1, 1]);
    assert_eq!(o[6], [1, 0, 0]);
}

#[test]
fn binary_float_values() {
    let f = read(&script(
        &[("Double", &[6]), ("Double", &[6])],
        &["fmod(t0, t1)", "remainder(t0, t1)", "atan2(t0, t1)", "nextafter(t0, t1)", "truediv(t0, t1)"],
    ));
    let a = [-7.5, 7.5, 1.0, 0.0, 5.0, -0.0];
    let b = [2.0, -2.0, 2.0, -1.0, 0.0, 1.0];
    let args = [
        Arg::Tensor(Tensor::from_f64s(DType::Double, &[6], &a).unwrap()),
        Arg::Tensor(Tensor::from_f64s(DType::Double, &[6], &b).unwrap()),
    ];
    let o: Vec<Vec<f64>> = run(&f, &args).unwrap().iter().map(|t| t.to_f64_vec()).collect();
    same(&o[0], &[-1.5, 1.5, 1.0, 0.0, NAN, -0.0]);
    same(&o[1], &[0.5, -0.5, 1.0, 0.0, NAN, -0.0]);
    near(&o[2], &[-1.310_193_935_047_555_3, 1.831_398_718_542_237_8, 0.463_647_609_000_806_1, std::f64::consts::PI, std::f64::consts::FRAC_PI_2, -0.0], 1e-15);
    same(&o[3], &[(-7.5f64).next_up(), 7.5f64.next_down(), 1f64.next_up(), -5e-324, 5f64.next_down(), 5e-324]);
    same(&o[4], &[-3.75, -3.75, 0.5, -0.0, INF, -0.0]);

    // nextafter in Float steps by Float ulps.
    let o = eval("Float", &[1.0], &["nextafter(t0, 2.0)"]);
    same(&o[0], &[1.0 + f32::EPSILON as f64]);
}

#[test]
fn ternary_values() {
    let x = [-2.0, -0.5, 0.0, 0.5, 2.0, NAN];
    let o = eval(
        "Float",
        &x,
        &["clamp(t0, -1.0, 1.0)", "threshold(t0, 0.0, 9.0)", "lerp(t0, 10.0, 0.25)", "lerp(t0, 10.0, 0.75)"],
    );
    same(&o[0], &[-1.0, -0.5, 0.0, 0.5, 1.0, NAN]);
    // threshold: x <= t ? value : x.
    same(&o[1], &[9.0, 9.0, 9.0, 0.5, 2.0, NAN]);
    same(&o[2], &[1.0, 2.125, 2.5, 2.875, 4.0, NAN]);
    same(&o[3], &[7.0, 7.375, 7.5, 7.625, 8.0, NAN]);
    // A Double bound of a bf16 clamp is not rounded to bf16 first: 0.1 rounds once.
    let o = eval("BFloat16", &[0.0], &["clamp(t0, 0.1, 1.0)"]);
    same(&o[0], &[0.100_097_656_25]);
    // Integer clamp: int32 tensor, bounds as Int.
    let o = eval_int("Int32", &[-9, 0, 9], &[0, 0, 0], &["clamp(t0, -3, 4)", "threshold(t0, 0, 100)"]);
    assert_eq!(o[0], [-3, 0, 4]);
    assert_eq!(o[1], [100, 100, 9]);
}

#[test]
fn composites_as_nvfuser_builds_them() {
    let f = read(&script(
        &[("Int32", &[3]), ("Int32", &[3])],
        &["add_alpha(t0, t1, 2.7)", "sub_alpha(t0, t1, 2)", "addcmul(t0, t1, t1, 3)"],
    ));
    let a = Tensor::from_i64s(DType::Int32, &[3], &[1, 2, 3]).unwrap();
    let b = Tensor::from_i64s(DType::Int32, &[3], &[10, 20, 30]).unwrap();
    let o: Vec<Vec<i64>> = run(&f, &[Arg::Tensor(a), Arg::Tensor(b)]).unwrap().iter().map(|t| t.to_i64_vec()).collect();
    // alpha 2.7 is cast to the Int32 common dtype: 2.
    assert_eq!(o[0], [21, 42, 63]);
    assert_eq!(o[1], [-19, -38, -57]);
    assert_eq!(o[2], [301, 1202, 2703]);
}

#[test]
fn scalar_expressions_fold() {
    let text = "from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    t0 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    c0 = fd.ops.remainder(-7, 3)
    c1 = fd.ops.round(2.5)
    c2 = fd.ops.bitwise_left_shift(1, 70)
    c3 = fd.ops.clamp(5.5, 0.0, 2.0)
    c4 = fd.ops.isnan(float(\"nan\"))
    c5 = fd.ops.gcd(12, -18)
    o0 = fd.ops.add(t0, c0)
    fd.add_output(o0)
with FusionDefinition() as fd:
    nvfuser_fusion(fd)
";
    let f = read(text);
    let c = |name: &str| {
        let v = f.values.iter().find(|v| v.name == name).unwrap();
        v.constant.unwrap().as_f64()
    };
    assert_eq!([c("c0"), c("c1"), c("c2"), c("c3"), c("c4"), c("c5")], [2.0, 2.0, 0.0, 2.0, 1.0, 6.0]);
}

#[test]
fn every_elementwise_op_round_trips() {
    let f = read(&script(
        &[("Float", &[2, 3]), ("Int", &[3]), ("Bool", &[2, 1])],
        &[
            "acos(t0)", "erfcinv(t0)", "signbit(t0)", "isposinf(t0)", "bitwise_not(t1)", "logical_not(t2)",
            "atan2(t0, 2.0)", "nextafter(t0, t0)", "gcd(t1, 4)", "logical_right_shift(t1, t1)", "bitwise_xor(t2, t2)",
            "lerp(t0, t0, t0)", "clamp(t0, 0, 1.5)", "threshold(t1, 2, -1)", "add_alpha(t0, t1, 3)",
            "addcmul(t0, t1, t0, 0.5)", "sub_alpha(t1, t1, 2.5)", "remainder(t0, -1.0)",
        ],
    ));
    let printed = print_script(&f);
    let g = parse_script("printed.py", &printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert!(g == f, "round trip differs\n{printed}");
    assert_eq!(print_script(&g), printed);
}
