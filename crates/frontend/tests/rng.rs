//! The random ops as both bindings spell them (`uniform(minval, maxval,
//! shape, *, rng_seed, rng_offset, dtype)`, `normal(mean, std, ...)`,
//! `rand_like(x)`, `randn_like(x)`): parsed, typed, printed and read back.

use fusebench_frontend::{check_any_text, print_script};
use fusebench_ir::{DType, Fusion, Literal, Op, RngDist, ValueDef};

fn direct(body: &str) -> String {
    format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n{body}\nwith FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n"
    )
}

fn legacy(body: &str) -> String {
    format!(
        "from nvfuser import FusionDefinition, DataType\n\ndef nvfuser_fusion_id0(fd : FusionDefinition) -> None :\n{body}\nwith FusionDefinition() as fd:\n    nvfuser_fusion_id0(fd)\n"
    )
}

fn read(text: &str) -> Fusion {
    check_any_text(text).unwrap_or_else(|e| panic!("{e}"))
}

fn op_of<'f>(f: &'f Fusion, name: &str) -> &'f Op {
    let v = f.values.iter().find(|v| v.name == name).unwrap();
    let ValueDef::Node { node, .. } = v.def else {
        panic!("{name} is not an op output")
    };
    &f.nodes[node].op
}

fn round_trips(f: &Fusion) {
    let again = read(&print_script(f));
    assert_eq!(again.nodes, f.nodes, "{}", print_script(f));
    assert_eq!(again.values.len(), f.values.len());
    for (a, b) in again.values.iter().zip(&f.values) {
        assert_eq!((a.dtype, &a.shape, a.constant), (b.dtype, &b.shape, b.constant));
    }
}

#[test]
fn direct_forms() {
    let f = read(&direct(
        "    tv0 = fd.define_tensor(shape=[3, 5], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    s0 = fd.define_scalar(42, dtype=DataType.Int)
    s1 = fd.define_scalar(None, dtype=DataType.Int)
    tv1 = fd.ops.uniform(-1.00000, 2.00000, [5, 7], rng_seed=42, rng_offset=0)
    tv2 = fd.ops.normal(0.5, 2, shape=[2, 3, 4], rng_seed=s0, rng_offset=s1, dtype=DataType.Double)
    tv3 = fd.ops.uniform(0, 1, [6, 11])
    tv4 = fd.ops.rand_like(tv0)
    tv5 = fd.ops.randn_like(tv0)
    tv6 = fd.ops.normal(mean=0, std=1, shape=[9], dtype=DataType.Half)
    fd.add_output(tv1)
    fd.add_output(tv2)
    fd.add_output(tv3)
    fd.add_output(tv4)
    fd.add_output(tv5)
    fd.add_output(tv6)",
    ));
    let ty = |n: &str| {
        let v = f.values.iter().find(|v| v.name == n).unwrap();
        (v.dtype, v.shape.clone().unwrap())
    };
    assert_eq!(ty("tv1"), (DType::Float, vec![5, 7]));
    assert_eq!(ty("tv2"), (DType::Double, vec![2, 3, 4]));
    assert_eq!(ty("tv3"), (DType::Float, vec![6, 11]));
    assert_eq!(ty("tv4"), (DType::BFloat16, vec![3, 5]));
    assert_eq!(ty("tv5"), (DType::BFloat16, vec![3, 5]));
    assert_eq!(ty("tv6"), (DType::Half, vec![9]));
    let Op::Rng {
        dist, a, b, seed, offset, ..
    } = op_of(&f, "tv1")
    else {
        panic!()
    };
    assert_eq!(*dist, RngDist::Uniform);
    assert_eq!(f.value(*a).constant, Some(Literal::Float(-1.0)));
    assert_eq!(f.value(*b).constant, Some(Literal::Float(2.0)));
    assert_eq!(f.value(seed.unwrap()).constant, Some(Literal::Int(42)));
    assert_eq!(f.value(offset.unwrap()).constant, Some(Literal::Int(0)));
    let Op::Rng { seed, offset, .. } = op_of(&f, "tv2") else {
        panic!()
    };
    assert_eq!(f.value(seed.unwrap()).name, "s0");
    assert_eq!(f.value(offset.unwrap()).def, ValueDef::ScalarInput);
    assert!(matches!(op_of(&f, "tv3"), Op::Rng { seed: None, offset: None, .. }));
    assert!(matches!(op_of(&f, "tv5"), Op::RngLike { dist: RngDist::Normal, .. }));
    round_trips(&f);
}

#[test]
fn legacy_forms() {
    let f = read(&legacy(
        "    T0 = fd.define_tensor(shape=[4, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    S1 = fd.define_scalar(0.00000, dtype=DataType.Double)
    S2 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T3 = fd.ops.uniform(S1, S2, shape=[4, 4], dtype=DataType.Float)
    T4 = fd.ops.rand_like(T0)
    fd.add_output(T3)
    fd.add_output(T4)",
    ));
    assert!(matches!(op_of(&f, "T3"), Op::Rng { dist: RngDist::Uniform, dtype: DType::Float, .. }));
    round_trips(&f);
}

#[test]
fn nvfusers_own_scripts_read_and_print_back() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../reference/tests/fixtures/rng");
    for case in ["uniform_f32_range", "normal_f64_general", "dropout_bf16", "two_unseeded"] {
        let p = dir.join(format!("{case}.py"));
        let f = fusebench_frontend::parse_file(&p).unwrap_or_else(|e| panic!("{case}: {e}"));
        round_trips(&f);
    }
}

fn err(body: &str) -> String {
    check_any_text(&direct(body)).unwrap_err().to_string()
}

#[test]
fn bad_uses_are_refused() {
    let e = err("    tv0 = fd.ops.uniform(0, 1, [3], rng_seed=4)\n    fd.add_output(tv0)");
    assert!(e.contains("rng_seed and rng_offset must be provided together"), "{e}");
    let e = err("    tv0 = fd.ops.normal(0, 1, [3], dtype=DataType.Int)\n    fd.add_output(tv0)");
    assert!(e.contains("normal") && e.contains("floating point"), "{e}");
    let e = err("    tv0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Int, is_cpu=False)\n    tv1 = fd.ops.rand_like(tv0)\n    fd.add_output(tv1)");
    assert!(e.contains("rand_like") && e.contains("floating point"), "{e}");
    let e = err("    tv0 = fd.ops.uniform(0, 1, [3], 5)\n    fd.add_output(tv0)");
    assert!(e.contains("positional"), "{e}");
    let e = err("    tv0 = fd.ops.uniform(0, 1, [3], rng_seed=1.5, rng_offset=0)\n    fd.add_output(tv0)");
    assert!(e.contains("rng_seed must be an integer"), "{e}");
    let e = err("    tv0 = fd.ops.uniform(0, 1, [-1])\n    fd.add_output(tv0)");
    assert!(e.contains("negative extent"), "{e}");
}
