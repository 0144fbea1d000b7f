//! The variants of the script syntax that the reader accepts; each script
//! also goes through print and read again.

use fusebench_frontend::{check_any_text, parse_script, print_script};
use fusebench_ir::op::{Op, ReduceOp};
use fusebench_ir::{DType, Fusion, FusionBuilder, InputRecipe, Literal, Syntax, ValueDef};

fn read(text: &str) -> Fusion {
    check_any_text(text).unwrap_or_else(|e| panic!("{e}"))
}

fn legacy(body: &str) -> String {
    format!(
        "from nvfuser import FusionDefinition, DataType\n\ndef nvfuser_fusion_id0(fd : FusionDefinition) -> None :\n{body}\nwith FusionDefinition() as fd:\n    nvfuser_fusion_id0(fd)\n"
    )
}

fn direct(body: &str) -> String {
    format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n{body}\nwith FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n"
    )
}

fn op_of<'f>(f: &'f Fusion, name: &str) -> &'f Op {
    let v = f
        .values
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no value {name}"));
    let ValueDef::Node { node, .. } = v.def else {
        panic!("{name} is not an op output")
    };
    &f.nodes[node].op
}

#[test]
fn every_op_script() {
    let f = read(include_str!("every_op.py"));
    assert_eq!(
        f.script.header,
        [
            "A script that uses every op and every kind of input, for the tests.",
            " an indented header line"
        ]
    );
    assert_eq!(f.inputs.len(), 10);
    assert_eq!(f.outputs.len(), 23);
    let mut seen: Vec<&str> = f.nodes.iter().map(|n| n.op.name()).collect();
    seen.sort_unstable();
    seen.dedup();
    let mut all: Vec<&str> = Op::supported_names()
        .into_iter()
        // The random ops have their own script and round trip in tests/rng.rs.
        .filter(|n| !matches!(*n, "amax" | "amin" | "uniform" | "normal" | "rand_like" | "randn_like"))
        // Read into `size` values (composites, read into the ops nvFuser
        // builds them from, are not in the list).
        .filter(|n| !matches!(*n, "shape" | "tensor_sizes" | "at"))
        .collect();
    all.sort_unstable();
    assert_eq!(seen, all);
    let r = f.recipe.as_ref().unwrap();
    assert_eq!(
        r[0],
        InputRecipe::MakeTensor {
            shape: vec![4, 8],
            dtype: DType::Float,
            low: Some(-1.0),
            high: Some(1.5)
        }
    );
    assert_eq!(
        r[2],
        InputRecipe::Randint {
            low: 0,
            high: 4,
            size: vec![3],
            dtype: DType::Int,
            as_strided: None
        }
    );
    assert_eq!(r[3].shape(), Some(vec![1, 8]));
    assert_eq!(
        r[4],
        InputRecipe::Scalar {
            value: Literal::Float(0.5)
        }
    );
    // `t` is rebound after its first use as an output; both outputs stay distinct.
    let (a, b) = (f.outputs[20], f.outputs[21]);
    assert_ne!(a, b);
    assert_eq!(f.value(a).name, "t");
    assert_eq!(f.value(b).name, "t");
    // Slice without strides gets unit strides; literals are values of their own.
    assert!(
        matches!(op_of(&f, "tv43"), Op::Slice { strides, manual_normalization: false, .. } if strides == &[1, 1])
    );
    assert!(
        matches!(op_of(&f, "tv31"), Op::Reduce { kind: ReduceOp::Min, dims, .. } if dims == &[-1])
    );
    let Op::Where { b, .. } = op_of(&f, "tv27") else {
        panic!()
    };
    assert!(matches!(f.value(*b).constant, Some(Literal::Float(x)) if x.is_nan()));
    assert_eq!(f.value(*b).def, ValueDef::Literal);
}

#[test]
fn legacy_forms() {
    let f = read(&legacy(
        "    T0 = fd.define_tensor(shape=[2, 1, 6], contiguity=[True, None, True], dtype=DataType.Float, is_cpu=False, stride_order=[2, 1, 0])
    S1 = fd.define_scalar(3)
    S2 = fd.define_scalar(None, dtype=DataType.Int)
    S3 = fd.define_scalar(1.00000e-05, dtype=DataType.Double)
    T4 = fd.ops.amax(T0, axes=[2], keepdim=False, dtype=DataType.Null)
    T5 = fd.ops.reshape(T0, original_shape=[2, 1, 6], new_shape=[2, 6])
    T6 = fd.ops.reshape(T0, [2, 1, 6], [12])
    T7 = fd.ops.squeeze(T0, [2, 1, 6], [1])
    T8 = fd.ops.squeeze(T0, dims=[1], squeeze_expanded=False)
    T9 = fd.ops.broadcast_in_dim(T4, output_shape=[2, 1, 6], broadcast_dims=[0, 1])
    T11, T12 = fd.ops.var_mean(T0, [2], 0, True)
    T13 = fd.ops.sum(T0)
    fd.add_output(T13)",
    ));
    assert_eq!(f.script.syntax, Syntax::Legacy);
    let s1 = f.values.iter().find(|v| v.name == "S1").unwrap();
    assert_eq!(
        (s1.dtype, s1.constant, &s1.def),
        (DType::Int, Some(Literal::Int(3)), &ValueDef::DefineScalar)
    );
    let s2 = f.values.iter().find(|v| v.name == "S2").unwrap();
    assert_eq!((s2.dtype, &s2.def), (DType::Int, &ValueDef::ScalarInput));
    assert_eq!(f.inputs.len(), 2);
    assert!(
        matches!(op_of(&f, "T4"), Op::Reduce { kind: ReduceOp::Max, dims, keepdim: false, dtype: None, .. } if dims == &[2])
    );
    assert!(matches!(op_of(&f, "T6"), Op::Reshape { new_shape, .. } if new_shape == &[12]));
    assert!(matches!(op_of(&f, "T7"), Op::Squeeze { dims, .. } if dims == &[1]));
    assert!(matches!(
        op_of(&f, "T11"),
        Op::VarMean {
            correction: 0,
            keepdim: true,
            ..
        }
    ));
    assert!(matches!(op_of(&f, "T13"), Op::Reduce { dims, .. } if dims == &[0, 1, 2]));
    assert!(f.recipe.is_none());
    // The legacy printer spells out keepdim and dtype.
    assert!(print_script(&f)
        .contains("T4 = fd.ops.max(T0, dims=[2], keepdim=False, dtype=DataType.Null)"));
    // original_shape must be the input's.
    let bad = legacy("    T0 = fd.define_tensor(shape=[2, 6], contiguity=[True, True], dtype=DataType.Float)\n    T1 = fd.ops.reshape(T0, original_shape=[3, 4], new_shape=[12])\n    fd.add_output(T1)");
    let e = parse_script("x.py", &bad).unwrap_err();
    assert!(
        e.to_string()
            .contains("original_shape [3, 4] is not the shape [2, 6] of T0"),
        "{e}"
    );
}

#[test]
fn direct_forms_and_literals() {
    let f = read(&direct(
        "    tv0 = fd.define_tensor([2, 3], [True, True], DataType.Half)
    tv1 = fd.define_tensor(dtype=DataType.Float, shape=[3])
    c0 = fd.ops.add(0, 32)
    c1 = fd.ops.reciprocal(2048.00)
    c2 = fd.ops.cast(1000, dtype=DataType.Double)
    c3 = fd.ops.ge(c0, 16)
    tv2 = fd.ops.mul(tv0, -3.5)
    tv3 = fd.ops.add(tv2, float('-inf'))
    tv4 = fd.ops.sub(-2, tv3)
    tv5 = fd.ops.pad(tv4, [c0, -32], value=c2)
    tv6 = fd.ops.add(tv1, True)
    fd.add_output(tv5)
    fd.add_output(tv6)",
    ));
    assert_eq!(f.script.syntax, Syntax::Direct);
    let tv1 = f.values.iter().find(|v| v.name == "tv1").unwrap();
    let ValueDef::TensorInput(d) = &tv1.def else {
        panic!()
    };
    // No contiguity given: nvFuser's default is not contiguous.
    assert_eq!(d.contiguity, [Some(false)]);
    let c = |n: &str| f.values.iter().find(|v| v.name == n).unwrap().constant;
    assert_eq!(c("c0"), Some(Literal::Int(32)));
    assert_eq!(c("c1"), Some(Literal::Float(1.0 / 2048.0)));
    assert_eq!(c("c2"), Some(Literal::Float(1000.0)));
    assert_eq!(c("c3"), Some(Literal::Bool(true)));
    let Op::Binary { b, .. } = op_of(&f, "tv2") else {
        panic!()
    };
    assert_eq!(f.value(*b).constant, Some(Literal::Float(-3.5)));
    let Op::Binary { b, .. } = op_of(&f, "tv3") else {
        panic!()
    };
    assert_eq!(
        f.value(*b).constant,
        Some(Literal::Float(f64::NEG_INFINITY))
    );
    let Op::Binary { a, .. } = op_of(&f, "tv4") else {
        panic!()
    };
    assert_eq!(f.value(*a).constant, Some(Literal::Int(-2)));
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![2, 3]));
}

#[test]
fn layout_variants() {
    // CRLF line ends, a backslash continuation, a call over several lines,
    // comments everywhere, a BOM, tabs for indentation.
    let text = "\u{feff}# title\r\nimport torch\r\nfrom nvfuser_direct import FusionDefinition, DataType  # why not\r\n\r\ndef f(fd : FusionDefinition) -> None :\r\n\ttv0 = fd.define_tensor(\r\n\t\tshape=[2, 3],  # rows, cols\r\n\t\tcontiguity=[True, True],\r\n\t\tdtype=DataType.Float,\r\n\t)\r\n\t# between\r\n\ttv1 = \\\r\n\t\tfd.ops.neg(tv0)\r\n\tfd.add_output(tv1)\r\nwith FusionDefinition() as fd:\r\n\tf(fd)\r\ninputs = [torch.randn(2, 3, dtype=torch.float32, device='cuda:0'), torch.randn((6,), device='cuda:0').as_strided((2, 3), (0, 1)),]\r\nfd.execute(inputs)\r\n";
    let f = read(text);
    assert_eq!(f.script.header, ["title"]);
    assert_eq!(f.script.function_name, "f");
    let r = f.recipe.as_ref().unwrap();
    assert_eq!(
        r[0],
        InputRecipe::Randn {
            size: vec![2, 3],
            dtype: DType::Float,
            as_strided: None
        }
    );
    assert_eq!(
        r[1],
        InputRecipe::Randn {
            size: vec![6],
            dtype: DType::Float,
            as_strided: Some((vec![2, 3], vec![0, 1]))
        }
    );
}

#[test]
fn python_scalar_inputs() {
    let text = direct("    s0 = fd.define_scalar(dtype=DataType.Double)\n    s1 = fd.define_scalar(dtype=DataType.Bool)\n    s2 = fd.define_scalar(dtype=DataType.Int)\n    s3 = fd.define_scalar(dtype=DataType.Double)\n    tv0 = fd.ops.full(shape=[2], fill_value=s0, dtype=DataType.Float)\n    fd.add_output(tv0)")
        + "inputs = [\n    float(\"nan\"),\n    True,\n    -7,\n    float('-inf'),\n]\nfd.execute(inputs)\n";
    let f = read(&text);
    let r = f.recipe.unwrap();
    assert!(matches!(r[0], InputRecipe::Scalar { value: Literal::Float(x) } if x.is_nan()));
    assert_eq!(
        r[1],
        InputRecipe::Scalar {
            value: Literal::Bool(true)
        }
    );
    assert_eq!(
        r[2],
        InputRecipe::Scalar {
            value: Literal::Int(-7)
        }
    );
    assert_eq!(
        r[3],
        InputRecipe::Scalar {
            value: Literal::Float(f64::NEG_INFINITY)
        }
    );
}

#[test]
fn extreme_literals_round_trip() {
    let f = read(&direct("    tv0 = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Int)\n    tv1 = fd.ops.add(tv0, -9223372036854775808)\n    tv2 = fd.ops.mul(tv1, 0x7fff_ffff_ffff_ffff)\n    tv3 = fd.ops.mul(tv2, -0.0)\n    tv4 = fd.ops.mul(tv3, 1e-320)\n    tv5 = fd.ops.mul(tv4, 1e999)\n    tv6 = fd.ops.mul(tv5, -float('nan'))\n    fd.add_output(tv6)"));
    let Op::Binary { b, .. } = op_of(&f, "tv1") else {
        panic!()
    };
    assert_eq!(f.value(*b).constant, Some(Literal::Int(i64::MIN)));
    let Op::Binary { b, .. } = op_of(&f, "tv3") else {
        panic!()
    };
    assert_eq!(f.value(*b).constant, Some(Literal::Float(-0.0)));
    let Op::Binary { b, .. } = op_of(&f, "tv5") else {
        panic!()
    };
    assert_eq!(f.value(*b).constant, Some(Literal::Float(f64::INFINITY)));
}

/// A fusion built in code may reuse names so that they no longer refer to
/// the right value; the printer renames those, and only those.
#[test]
fn printer_renames_shadowed_values() {
    use fusebench_ir::UnaryOp;
    let mut b = FusionBuilder::new();
    let t = b.tensor(&[2, 3], DType::Float).unwrap();
    let x1 = b
        .op(
            Op::Unary {
                kind: UnaryOp::Neg,
                x: t,
            },
            &["x"],
        )
        .unwrap()[0];
    let x2 = b
        .op(
            Op::Unary {
                kind: UnaryOp::Abs,
                x: t,
            },
            &["x"],
        )
        .unwrap()[0];
    let y = b.add(x1, x2).unwrap();
    let bad = b
        .op(
            Op::Unary {
                kind: UnaryOp::Exp,
                x: y,
            },
            &["not an identifier"],
        )
        .unwrap()[0];
    b.add_output(bad).unwrap();
    b.add_output(x1).unwrap();
    let f = b.finish();
    let printed = print_script(&f);
    let g = parse_script("p.py", &printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(g.nodes, f.nodes, "{printed}");
    assert_eq!(g.outputs, f.outputs);
    assert_eq!(g.value(x1).name, "tv1");
    assert_eq!(g.value(x2).name, "x");
    assert_eq!(g.value(bad).name, "tv4");
    assert_eq!(g.value(t).name, "tv0");
    assert_eq!(g.script.function_name, "nvfuser_fusion");
}

/// A value named `fd` (possible when the parameter has another name) moves the printer's `fd`.
#[test]
fn receiver_name_avoids_values() {
    let text = "from nvfuser_direct import FusionDefinition, DataType\ndef g(d : FusionDefinition) -> None :\n    fd = d.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Float)\n    d.add_output(fd)\nwith FusionDefinition() as d:\n    g(d)\n";
    let f = read(text);
    let printed = print_script(&f);
    assert!(
        printed.contains("def g(fd1 : FusionDefinition) -> None :\n    fd = fd1.define_tensor("),
        "{printed}"
    );
}
