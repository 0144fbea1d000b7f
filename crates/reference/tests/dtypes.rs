//! The dtypes of issue 13 (UInt64, float8, complex): casts between every
//! pair, complex arithmetic, unsigned semantics, safetensors bytes, refusals.
//! Expected values are worked out by hand from the formats' definitions.

use fusebench_frontend::parse_script;
use fusebench_ir::dtype::ALL_DTYPES;
use fusebench_ir::{DType, FusionBuilder};
use fusebench_reference::{run, Arg, Tensor};

fn script(body: &str) -> String {
    format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\n\
         def nvfuser_fusion(fd : FusionDefinition) -> None :\n{body}\
         with FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n"
    )
}

fn dtypes() -> Vec<DType> {
    ALL_DTYPES.into_iter().filter(|&d| d != DType::Index).collect()
}

/// 1, 2 and 4 are held exactly by every dtype (e8m0 included): a cast of
/// them between any two dtypes gives them back (Bool gives 1s).
#[test]
fn casts_between_every_pair() {
    for from in dtypes() {
        for to in dtypes() {
            let mut fd = FusionBuilder::new();
            let x = fd.tensor(&[3], from).unwrap();
            let y = fd.cast(x, to).unwrap();
            fd.add_output(y).unwrap();
            let input = Tensor::from_f64s(from, &[3], &[1.0, 2.0, 4.0]).unwrap();
            let out = run(&fd.finish(), &[Arg::Tensor(input)]).unwrap();
            let want: Vec<f64> = match (from, to) {
                (DType::Bool, _) | (_, DType::Bool) => vec![1.0; 3],
                _ => vec![1.0, 2.0, 4.0],
            };
            assert_eq!(out[0].dtype(), to);
            assert_eq!(out[0].to_f64_vec(), want, "{from} -> {to}");
            if to.is_complex() {
                // Imaginary parts are 0: bytes 4..8 (or 8..16) of the first element.
                let b = out[0].to_le_bytes();
                let half = to.size_bytes() / 2;
                assert!(b[half..2 * half].iter().all(|&x| x == 0), "{from} -> {to}");
            }
        }
    }
}

fn run_script(body: &str, inputs: Vec<Arg>) -> Vec<Tensor> {
    let f = parse_script("t.py", &script(body)).unwrap();
    run(&f, &inputs).unwrap()
}

#[test]
fn float8_casts_round_and_saturate() {
    let x = Tensor::from_f64s(DType::Float, &[6], &[500.0, 1.0625, 1.1875, -0.1, 3.0, f64::INFINITY]).unwrap();
    let out = run_script(
        "    t0 = fd.define_tensor(shape=[6], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n\
         \x20   t1 = fd.ops.cast(t0, dtype=DataType.Float8_e4m3fn)\n\
         \x20   t2 = fd.ops.cast(t0, dtype=DataType.Float8_e5m2)\n\
         \x20   t3 = fd.ops.cast(t0, dtype=DataType.Float8_e8m0fnu)\n\
         \x20   fd.add_output(t1)\n    fd.add_output(t2)\n    fd.add_output(t3)\n",
        vec![Arg::Tensor(x)],
    );
    // e4m3fn: 500 saturates to 448; ties to even around 1 (step 1/8);
    // -0.1 -> -0.1015625 (13 * 2^-7); inf saturates.
    assert_eq!(out[0].to_f64_vec(), vec![448.0, 1.0, 1.25, -0.1015625, 3.0, 448.0]);
    // e5m2: 500 -> 512 (step 32 in [256, 512)); 1.0625 -> 1.0; 1.1875 -> 1.25; -0.1 -> -0.09375.
    assert_eq!(out[1].to_f64_vec(), vec![512.0, 1.0, 1.25, -0.09375, 3.0, 57344.0]);
    // e8m0: 500 = 1.95 * 2^8 -> 2^9; 1.1875 -> 1; |-0.1| = 1.6 * 2^-4 -> 2^-3; 3 = 1.5*2 -> 4; inf -> NaN.
    let e = out[2].to_f64_vec();
    assert_eq!(&e[..5], &[512.0, 1.0, 1.0, 0.125, 4.0]);
    assert!(e[5].is_nan());
}

#[test]
fn float8_arithmetic_computes_in_float() {
    // As for Half, nvFuser computes float8 arithmetic in Float and the
    // result stays Float: 1.125 + 1.125 = 2.25; 240 + 240 = 480, which
    // e4m3fn could not hold.
    let a = Tensor::from_f64s(DType::Float8E4m3fn, &[2], &[1.125, 240.0]).unwrap();
    let out = run_script(
        "    t0 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float8_e4m3fn, is_cpu=False)\n\
         \x20   t1 = fd.ops.add(t0, t0)\n    fd.add_output(t1)\n",
        vec![Arg::Tensor(a)],
    );
    assert_eq!(out[0].dtype(), DType::Float);
    assert_eq!(out[0].to_f64_vec(), vec![2.25, 480.0]);
}

#[test]
fn uint64_is_unsigned() {
    let big = Tensor::from_i64s(DType::Int, &[3], &[-1, 7, 10]).unwrap();
    let b = Tensor::from_i64s(DType::UInt64, &[3], &[2, 7, 3]).unwrap();
    let out = run_script(
        "    t0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Int, is_cpu=False)\n\
         \x20   t1 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.UInt64, is_cpu=False)\n\
         \x20   t2 = fd.ops.cast(t0, dtype=DataType.UInt64)\n\
         \x20   t3 = fd.ops.lt(t1, t2)\n    t4 = fd.ops.div(t2, t1)\n    t5 = fd.ops.maximum(t2, t1)\n\
         \x20   t6 = fd.ops.cast(t2, dtype=DataType.Double)\n    t7 = fd.ops.abs(t2)\n\
         \x20   fd.add_output(t3)\n    fd.add_output(t4)\n    fd.add_output(t5)\n    fd.add_output(t6)\n    fd.add_output(t7)\n",
        vec![Arg::Tensor(big), Arg::Tensor(b)],
    );
    let max = u64::MAX;
    // -1 as UInt64 is 2^64 - 1: 2 < 2^64 - 1 (signed, 2 < -1 would be false).
    assert_eq!(out[0].to_i64_vec(), vec![1, 0, 1]);
    assert_eq!(out[1].to_i64_vec(), vec![(max / 2) as i64, 1, 3]);
    assert_eq!(out[2].to_i64_vec(), vec![max as i64, 7, 10]);
    assert_eq!(out[3].to_f64_vec(), vec![18446744073709551615.0, 7.0, 10.0]);
    assert_eq!(out[4].to_i64_vec(), vec![max as i64, 7, 10]);
}

#[test]
fn uint64_refusals() {
    let bad = |body: &str, what: &str| {
        let e = parse_script("t.py", &script(body)).expect_err("should be refused").to_string();
        assert!(e.contains(what), "{e}");
    };
    // nvFuser's promoteType has no common type for UInt64 and Int.
    bad(
        "    t0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.UInt64, is_cpu=False)\n\
         \x20   t1 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Int, is_cpu=False)\n\
         \x20   t2 = fd.ops.add(t0, t1)\n    fd.add_output(t2)\n",
        "UInt64",
    );
    bad(
        "    t0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.UInt64, is_cpu=False)\n\
         \x20   t1 = fd.ops.max(t0, dims=[0])\n    fd.add_output(t1)\n",
        "max on UInt64",
    );
}

fn complex_of(re: &[f64], im: &[f64]) -> Vec<Arg> {
    vec![
        Arg::Tensor(Tensor::from_f64s(DType::Float, &[re.len()], re).unwrap()),
        Arg::Tensor(Tensor::from_f64s(DType::Float, &[im.len()], im).unwrap()),
    ]
}

/// (re, im) of each element of a complex tensor, read from its bytes.
fn parts(t: &Tensor) -> Vec<(f64, f64)> {
    let b = t.to_le_bytes();
    match t.dtype() {
        DType::ComplexFloat => b
            .chunks_exact(8)
            .map(|c| {
                let p = |k: usize| f32::from_le_bytes(c[k..k + 4].try_into().unwrap()) as f64;
                (p(0), p(4))
            })
            .collect(),
        DType::ComplexDouble => b
            .chunks_exact(16)
            .map(|c| {
                let p = |k: usize| f64::from_le_bytes(c[k..k + 8].try_into().unwrap());
                (p(0), p(8))
            })
            .collect(),
        d => panic!("{d} is not complex"),
    }
}

#[test]
fn complex_arithmetic() {
    let out = run_script(
        "    t0 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n\
         \x20   t1 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n\
         \x20   z = fd.ops.complex(t0, t1)\n    w = fd.ops.complex(t1, t0)\n\
         \x20   p = fd.ops.mul(z, w)\n    q = fd.ops.div(z, w)\n    s = fd.ops.sub(z, w)\n\
         \x20   a = fd.ops.abs(z)\n    r = fd.ops.real(p)\n    i = fd.ops.imag(p)\n\
         \x20   e = fd.ops.eq(z, w)\n    n = fd.ops.neg(z)\n    d = fd.ops.add(z, 1.5)\n\
         \x20   fd.add_output(p)\n    fd.add_output(q)\n    fd.add_output(s)\n    fd.add_output(a)\n\
         \x20   fd.add_output(r)\n    fd.add_output(i)\n    fd.add_output(e)\n    fd.add_output(n)\n    fd.add_output(d)\n",
        complex_of(&[3.0, 1.0], &[4.0, 1.0]),
    );
    // z = [3+4i, 1+i], w = [4+3i, 1+i].
    // (3+4i)(4+3i) = 12 + 9i + 16i - 12 = 25i; (1+i)^2 = 2i.
    assert_eq!(out[0].dtype(), DType::ComplexFloat);
    assert_eq!(parts(&out[0]), vec![(0.0, 25.0), (0.0, 2.0)]);
    // (3+4i)/(4+3i) = (3+4i)(4-3i)/25 = (24 + 7i)/25.
    assert_eq!(parts(&out[1]), vec![(0.96f32 as f64, 0.28f32 as f64), (1.0, 0.0)]);
    assert_eq!(parts(&out[2]), vec![(-1.0, 1.0), (0.0, 0.0)]);
    assert_eq!(out[3].dtype(), DType::Float);
    assert_eq!(out[3].to_f64_vec(), vec![5.0, std::f32::consts::SQRT_2 as f64]);
    assert_eq!(out[4].to_f64_vec(), vec![0.0, 0.0]);
    assert_eq!(out[5].to_f64_vec(), vec![25.0, 2.0]);
    assert_eq!(out[6].to_i64_vec(), vec![0, 1]);
    assert_eq!(parts(&out[7]), vec![(-3.0, -4.0), (-1.0, -1.0)]);
    // A Double scalar with ComplexFloat gives ComplexFloat (tensor wins its category).
    assert_eq!(out[8].dtype(), DType::ComplexFloat);
    assert_eq!(parts(&out[8]), vec![(4.5, 4.0), (2.5, 1.0)]);
}

#[test]
fn complex_reductions_to_a_real_dtype_convert_each_element_first() {
    // nvFuser casts the input to the reduction's dtype before reducing: z =
    // [1.7+5i, 1.7-3i, 2+1i]. sum to Int: 1 + 1 + 2 = 4 (truncating the sum,
    // 5.4, would give 5); prod to Float: 1.7 * 1.7 * 2 = 5.78 (the real part
    // of the complex product is 32.38).
    let out = run_script(
        "    t0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n\
         \x20   t1 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n\
         \x20   z = fd.ops.complex(t0, t1)\n\
         \x20   s = fd.ops.sum(z, dims=[0], dtype=DataType.Int)\n\
         \x20   p = fd.ops.prod(z, dims=[0], dtype=DataType.Float)\n\
         \x20   fd.add_output(s)\n    fd.add_output(p)\n",
        complex_of(&[1.7, 1.7, 2.0], &[5.0, -3.0, 1.0]),
    );
    assert_eq!(out[0].dtype(), DType::Int);
    assert_eq!(out[0].to_i64_vec(), vec![4]);
    assert_eq!(out[1].dtype(), DType::Float);
    let want = (1.7f32 as f64 * 1.7f32 as f64 * 2.0) as f32 as f64;
    assert_eq!(out[1].to_f64_vec(), vec![want]);
}

#[test]
fn complex_refusals() {
    let bad = |body: &str, what: &[&str]| {
        let e = parse_script("t.py", &script(body)).expect_err("should be refused").to_string();
        for w in what {
            assert!(e.contains(w), "{e}");
        }
    };
    let def = "    t0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.ComplexFloat, is_cpu=False)\n";
    // nvFuser's kernels fail to compile these on complex (ambiguous overloads).
    bad(&format!("{def}    t1 = fd.ops.ceil(t0)\n    fd.add_output(t1)\n"), &["ceil", "ComplexFloat"]);
    bad(&format!("{def}    t1 = fd.ops.atan2(t0, t0)\n    fd.add_output(t1)\n"), &["atan2"]);
    // "Could not generate a max op for tensor with type: std::complex<float>".
    bad(&format!("{def}    t1 = fd.ops.max(t0, dims=[0])\n    fd.add_output(t1)\n"), &["max", "ComplexFloat"]);
    bad(&format!("{def}    t1 = fd.ops.bitwise_and(t0, t0)\n    fd.add_output(t1)\n"), &["bitwise_and"]);
    // Complex constants are real values of a complex dtype.
    bad(
        &format!("{def}    c = fd.define_scalar(1.0+2.0j, dtype=DataType.ComplexFloat)\n    t1 = fd.ops.mul(t0, c)\n    fd.add_output(t1)\n"),
        &["nonzero imaginary part"],
    );
    bad(
        &format!("{def}    c = fd.define_scalar(dtype=DataType.ComplexFloat)\n    t1 = fd.ops.mul(t0, c)\n    fd.add_output(t1)\n"),
        &["complex scalar"],
    );
    bad(
        "    t0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Half, is_cpu=False)\n\
         \x20   t1 = fd.ops.complex(t0, t0)\n    fd.add_output(t1)\n",
        &["complex", "Half"],
    );
    bad(
        "    t0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n\
         \x20   t1 = fd.ops.imag(t0)\n    fd.add_output(t1)\n",
        &["imag"],
    );
}

/// Values worked out by hand from nvFuser's runtime: complex math, and the
/// ops that see a complex value as bool (nonzero), computed on 0 and 1.
#[test]
fn complex_ops_by_hand() {
    let out = run_script(
        "    t0 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n\
         \x20   t1 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n\
         \x20   z = fd.ops.complex(t0, t1)\n\
         \x20   t2 = fd.ops.add(t0, 1.0)\n\
         \x20   w = fd.ops.cast(t2, dtype=DataType.ComplexFloat)\n\
         \x20   o0 = fd.ops.lt(z, w)\n\
         \x20   o1 = fd.ops.maximum(z, w)\n\
         \x20   o2 = fd.ops.minimum(z, w)\n\
         \x20   o3 = fd.ops.relu(z)\n\
         \x20   o4 = fd.ops.sqrt(z)\n\
         \x20   o5 = fd.ops.isreal(z)\n\
         \x20   o6 = fd.ops.sum(z, dims=[0])\n\
         \x20   o7 = fd.ops.prod(w, dims=[0])\n\
         \x20   c = fd.define_scalar(0.0+0.0j, dtype=DataType.ComplexFloat)\n\
         \x20   t3 = fd.ops.gt(t0, 1.0)\n\
         \x20   o8 = fd.ops.where(t3, z, c)\n\
         \x20   lo = fd.ops.cast(-1.5, dtype=DataType.ComplexFloat)\n\
         \x20   hi = fd.ops.cast(2.0, dtype=DataType.ComplexFloat)\n\
         \x20   o9 = fd.ops.clamp(z, lo, hi)\n\
         \x20   fd.add_output(o0)\n\
         \x20   fd.add_output(o1)\n\
         \x20   fd.add_output(o2)\n\
         \x20   fd.add_output(o3)\n\
         \x20   fd.add_output(o4)\n\
         \x20   fd.add_output(o5)\n\
         \x20   fd.add_output(o6)\n\
         \x20   fd.add_output(o7)\n\
         \x20   fd.add_output(o8)\n\
         \x20   fd.add_output(o9)\n",
        complex_of(&[3.0, 0.0], &[4.0, 0.0]),
    );
    // z = [3+4i, 0], w = [4, 1]: bool(z) = [1, 0], bool(w) = [1, 1].
    assert_eq!(out[0].to_i64_vec(), vec![0, 1]);
    assert_eq!(parts(&out[1]), vec![(1.0, 0.0), (1.0, 0.0)]);
    assert_eq!(parts(&out[2]), vec![(1.0, 0.0), (0.0, 0.0)]);
    assert_eq!(parts(&out[3]), vec![(1.0, 0.0), (0.0, 0.0)]);
    // sqrt(3 + 4i) = 2 + i (|z| = 5 at half the angle).
    assert_eq!(parts(&out[4]), vec![(2.0, 1.0), (0.0, 0.0)]);
    assert_eq!(out[5].to_i64_vec(), vec![0, 1]);
    assert_eq!(parts(&out[6]), vec![(3.0, 4.0)]);
    assert_eq!(parts(&out[7]), vec![(4.0, 0.0)]);
    assert_eq!(parts(&out[8]), vec![(3.0, 4.0), (0.0, 0.0)]);
    // clamp(bool(z), bool(-1.5), bool(2)) = clamp([1, 0], 1, 1) = 1.
    assert_eq!(parts(&out[9]), vec![(1.0, 0.0), (1.0, 0.0)]);
}

#[test]
fn float4_is_refused_at_parse_time() {
    let text = script(
        "    t0 = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Float4_e2m1fn_x2, is_cpu=False)\n\
         \x20   fd.add_output(t0)\n",
    );
    let e = parse_script("t.py", &text).expect_err("Float4 is refused");
    assert_eq!(e.line, 4);
    assert!(e.to_string().contains("DataType.Float4_e2m1fn_x2 is not supported"), "{e}");
}

#[test]
fn safetensors_round_trip() {
    use safetensors::{serialize, tensor::TensorView, Dtype, SafeTensors};
    for d in dtypes() {
        let Some(tag) = d.safetensors_name() else {
            assert!(d.is_complex(), "{d} has a tag");
            continue;
        };
        let t = Tensor::from_f64s(d, &[2, 2], &[1.0, 2.0, 4.0, 0.5]).unwrap();
        let bytes = t.to_le_bytes();
        let st_dtype = [
            Dtype::BOOL, Dtype::I32, Dtype::I64, Dtype::U64, Dtype::F16, Dtype::BF16, Dtype::F32,
            Dtype::F64, Dtype::F8_E4M3, Dtype::F8_E5M2, Dtype::F8_E8M0,
        ]
        .into_iter()
        .find(|x| format!("{x:?}") == tag)
        .unwrap_or_else(|| panic!("no safetensors dtype {tag}"));
        let view = TensorView::new(st_dtype, vec![2, 2], &bytes).unwrap();
        let file = serialize([("x", view)], None).unwrap();
        let st = SafeTensors::deserialize(&file).unwrap();
        let back = st.tensor("x").unwrap();
        let got = Tensor::from_le_bytes(d, back.shape(), back.data()).unwrap();
        assert_eq!(got.to_f64_vec(), t.to_f64_vec(), "{d}");
        assert_eq!(DType::from_safetensors_name(tag), Some(if d == DType::Index { DType::Int } else { d }));
    }
    // Float8 bytes are the formats' encodings: 1.0 is 0x38 in e4m3fn, 0x3C in e5m2, 127 in e8m0.
    let one = |d| Tensor::from_f64s(d, &[1], &[1.0]).unwrap().to_le_bytes();
    assert_eq!(one(DType::Float8E4m3fn), vec![0x38]);
    assert_eq!(one(DType::Float8E5m2), vec![0x3C]);
    assert_eq!(one(DType::Float8E8m0fnu), vec![127]);
}

#[test]
fn printed_scripts_read_back() {
    let text = script(
        "    t0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Double, is_cpu=False)\n\
         \x20   t1 = fd.ops.complex(t0, t0)\n    t2 = fd.ops.real(t1)\n    t3 = fd.ops.imag(t1)\n\
         \x20   t4 = fd.ops.cast(t2, dtype=DataType.Float8_e5m2)\n    t5 = fd.ops.cast(t3, dtype=DataType.UInt64)\n\
         \x20   fd.add_output(t1)\n    fd.add_output(t4)\n    fd.add_output(t5)\n",
    );
    let f = parse_script("t.py", &text).unwrap();
    let printed = fusebench_frontend::print_script(&f);
    let g = parse_script("p.py", &printed).unwrap();
    assert_eq!(fusebench_frontend::print_script(&g), printed);
    assert!(printed.contains("fd.ops.complex(") && printed.contains("DataType.Float8_e5m2"), "{printed}");
    assert_eq!(g.value(g.outputs[0]).dtype, DType::ComplexDouble);
}
