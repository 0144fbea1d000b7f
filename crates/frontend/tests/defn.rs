//! FusionDefinition methods and meta ops: every define_tensor form, vectors,
//! add_output with an alias or a stride order, set/segment_set/stride_order/
//! size/shape/tensor_sizes/at; parsed, inferred and printed back.

use fusebench_frontend::{parse_script, parse_script_with_shapes, print_script};
use fusebench_ir::{DType, Fusion, Literal, Op, ValueDef};

fn direct(body: &str, inputs: &str) -> String {
    format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n{body}with FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n{inputs}"
    )
}

fn legacy(body: &str) -> String {
    format!(
        "import torch\nfrom nvfuser import FusionDefinition, DataType\n\ndef nvfuser_fusion_id0(fd : FusionDefinition) -> None :\n{body}\nwith FusionDefinition() as fd:\n    nvfuser_fusion_id0(fd)\n"
    )
}

/// Parses, prints, parses again: the second fusion must print the same
/// script (the first may spell vectors that print as their elements).
fn round_trip(text: &str) -> Fusion {
    let f = parse_script("t.py", text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let p1 = print_script(&f);
    let g = parse_script("p.py", &p1).unwrap_or_else(|e| panic!("{e}\n{p1}"));
    let p2 = print_script(&g);
    assert_eq!(p1, p2);
    assert_eq!(g, parse_script("p2.py", &p2).unwrap());
    f
}

fn decl(f: &Fusion, i: usize) -> fusebench_ir::TensorDecl {
    match &f.value(f.inputs[i]).def {
        ValueDef::TensorInput(d) => d.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn define_tensor_sizes_strides_derives_contiguity_and_order() {
    // Strides (1, 35, 5) of sizes (5, 3, 7): memory order dims 1, 2, 0, all dense.
    let f = round_trip(&legacy(
        "    T0 = fd.define_tensor(sizes=[5, 3, 7], strides=[1, 35, 5], dtype=DataType.Float, static_sizes=False, is_cpu=False)\n    fd.add_output(T0)\n",
    ));
    let d = decl(&f, 0);
    assert_eq!(f.value(f.inputs[0]).shape, Some(vec![5, 3, 7]));
    assert_eq!(d.contiguity, vec![Some(true); 3]);
    // stride_order[i] = rank of dim i from the innermost: dim 0 innermost.
    assert_eq!(d.stride_order, vec![0, 2, 1]);
    // Positional, a padded row (stride 8 for extent 7): not contiguous there.
    let f = round_trip(&legacy(
        "    T0 = fd.define_tensor([4, 7], [8, 1], DataType.Half)\n    fd.add_output(T0)\n",
    ));
    let d = decl(&f, 0);
    assert_eq!(d.contiguity, vec![Some(false), Some(true)]);
    assert!(d.stride_order.is_empty());
    assert_eq!(f.value(f.inputs[0]).dtype, DType::Half);
    // A stride-0 (expanded) dim and a size-1 dim are broadcasts (None).
    let f = round_trip(&legacy(
        "    T0 = fd.define_tensor(sizes=[3, 1, 6], strides=[0, 6, 1])\n    fd.add_output(T0)\n",
    ));
    assert_eq!(decl(&f, 0).contiguity, vec![None, None, Some(true)]);
}

#[test]
fn define_tensor_bool_contiguity_defaults_false_and_follows_stride_order() {
    // nvFuser's bool overload: default False; extent-1 dims are None, placed
    // in allocation order (python_utils.cpp getContiguityVec).
    let f = round_trip(&direct(
        "    tv0 = fd.define_tensor(shape=[4, 1, 6], dtype=DataType.Float)\n    tv1 = fd.define_tensor(shape=[4, 1, 6], contiguity=True, stride_order=[0, 2, 1])\n    fd.add_output(tv0)\n    fd.add_output(tv1)\n",
        "",
    ));
    assert_eq!(decl(&f, 0).contiguity, vec![Some(false), None, Some(false)]);
    // dim 1 (extent 1) has stride rank 2: allocation position 0.
    assert_eq!(decl(&f, 1).contiguity, vec![None, Some(true), Some(true)]);
}

#[test]
fn symbolic_extents_bind_from_the_inputs_list_or_given_shapes() {
    let body = "    tv0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)\n    tv2 = fd.ops.add(tv0, tv1)\n    fd.add_output(tv2)\n";
    let inputs = "\ninputs = [\n    torch.randn((6, 13), dtype=torch.float32, device='cuda:0'),\n    torch.randn((6, 1), dtype=torch.float32, device='cuda:0'),\n]\nfd.execute(inputs)\n";
    let f = round_trip(&direct(body, inputs));
    assert_eq!(f.value(f.inputs[0]).shape, Some(vec![6, 13]));
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![6, 13]));
    // Given shapes (a --data file) win over the inputs list.
    let f = parse_script_with_shapes("t.py", &direct(body, inputs), &[Some(vec![2, 3]), Some(vec![2, 1])]).unwrap();
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![2, 3]));
    // No inputs list: a clear error naming the input.
    let e = parse_script("t.py", &direct(body, "")).unwrap_err().to_string();
    assert!(e.contains("symbolic (-1)") && e.contains("--data"), "{e}");
    // A fixed extent the input contradicts.
    let e = parse_script_with_shapes("t.py", &direct(body, ""), &[Some(vec![2, 3]), Some(vec![2, 4])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not fit input 1"), "{e}");
}

#[test]
fn define_vector_constant_and_scalar_forms() {
    let f = round_trip(&legacy(
        "    T0 = fd.define_tensor(shape=[2, 15], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    S1 = fd.define_constant(5, dtype=DataType.Int)\n    V2 = fd.define_vector([6, S1], dtype=DataType.Int)\n    T3 = fd.ops.reshape(T0, new_shape=V2)\n    fd.add_output(T3)\n",
    ));
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![6, 5]));
    // define_vector(size): that many Int scalar inputs, which cannot be shapes.
    let f = round_trip(&legacy(
        "    V0 = fd.define_vector(2)\n    T1 = fd.define_tensor(shape=[3], contiguity=[True])\n    fd.add_output(T1)\n",
    ));
    assert_eq!(f.inputs.len(), 3);
    assert_eq!(f.value(f.inputs[0]).dtype, DType::Int);
    let e = parse_script(
        "t.py",
        &legacy("    V0 = fd.define_vector(1)\n    T1 = fd.ops.full(shape=V0, fill_value=1.0, dtype=DataType.Float)\n    fd.add_output(T1)\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("not an integer known when the fusion is built"), "{e}");
}

#[test]
fn size_shape_at_tensor_sizes_are_the_extents() {
    let f = round_trip(&legacy(
        "    T0 = fd.define_tensor(shape=[5, 3, 7], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)\n    V1 = fd.ops.shape(T0)\n    S2 = fd.ops.at(V1, index=-1)\n    S3 = fd.ops.size(T0, dim=1)\n    S4, S5, S6 = fd.ops.tensor_sizes(T0)\n    T7 = fd.ops.full(shape=[S2, S3, S4], fill_value=1.0, dtype=DataType.Float)\n    T8 = fd.ops.expand(T0, shape=V1)\n    fd.add_output(T7)\n    fd.add_output(T8)\n",
    ));
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![7, 3, 5]));
    assert_eq!(f.value(f.outputs[1]).shape, Some(vec![5, 3, 7]));
    // size is an Index scalar whose value is known.
    let sizes: Vec<_> = f
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Size { .. }))
        .map(|n| f.value(n.outputs[0]))
        .collect();
    assert_eq!(sizes.len(), 7);
    assert!(sizes.iter().all(|v| v.dtype == DType::Index && v.shape.is_none()));
    assert_eq!(sizes[1].constant, Some(Literal::Int(3)));
    // Scalar arithmetic on sizes feeds a reshape (direct syntax).
    let f = round_trip(&direct(
        "    tv0 = fd.define_tensor(shape=[6, 13], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    s1 = fd.ops.size(tv0, dim=0)\n    s2 = fd.ops.size(tv0, dim=-1)\n    s3 = fd.ops.mul(s1, s2)\n    tv4 = fd.ops.reshape(tv0, new_shape=[s3])\n    fd.add_output(tv4)\n",
        "",
    ));
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![78]));
    let e = parse_script(
        "t.py",
        &legacy("    T0 = fd.define_tensor(shape=[5], contiguity=[True])\n    V1 = fd.ops.shape(T0)\n    S2 = fd.ops.at(V1, index=3)\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("outside a vector of 1"), "{e}");
    let e = parse_script(
        "t.py",
        &legacy("    T0 = fd.define_tensor(shape=[5], contiguity=[True])\n    S1 = fd.ops.size(T0, dim=1)\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("size"), "{e}");
}

#[test]
fn set_segment_set_stride_order_ops() {
    let f = round_trip(&direct(
        "    tv0 = fd.define_tensor(shape=[4, 1, 6], contiguity=[True, None, True], dtype=DataType.BFloat16, is_cpu=False)\n    tv1 = fd.ops.set(tv0)\n    tv2 = fd.ops.segment_set(tv1)\n    tv3 = fd.ops.stride_order(tv2, stride_order=[0, 1, 2])\n    fd.add_output(tv3)\n",
        "",
    ));
    let names: Vec<&str> = f.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(names, ["set", "segment_set", "stride_order"]);
    // Copies keep dtype and shape (no promotion: bf16 stays bf16).
    let o = f.value(f.outputs[0]);
    assert_eq!((o.dtype, o.shape.clone()), (DType::BFloat16, Some(vec![4, 1, 6])));
    let p = print_script(&f);
    assert!(p.contains("fd.ops.segment_set(tv1)") && p.contains("stride_order=[0, 1, 2]"), "{p}");
    let e = parse_script(
        "t.py",
        &direct("    tv0 = fd.define_tensor(shape=[4, 6], contiguity=[True, True])\n    tv1 = fd.ops.stride_order(tv0, stride_order=[1, 1])\n", ""),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("not a permutation"), "{e}");
}

#[test]
fn add_output_alias_keyword_positional_and_visibility() {
    let body = |out: &str| {
        format!("    tv0 = fd.define_tensor(shape=[3, 9], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.add(tv0, 1.0)\n{out}")
    };
    // Positional (the direct printer's form): hidden from execute's results.
    let f = round_trip(&direct(&body("    fd.add_output(tv1, tv0)\n"), ""));
    assert_eq!(f.aliases.len(), 1);
    assert!(f.aliases[0].hidden);
    assert_eq!(f.alias_of(0), Some(f.inputs[0]));
    assert!(f.visible_outputs().is_empty());
    assert!(print_script(&f).contains("fd.add_output(tv1, tv0)"));
    // Keyword, then returned too (nvFuser's form for a visible alias).
    let f = round_trip(&direct(&body("    fd.add_output(tv1, alias_input=tv0)\n    fd.add_output(tv1)\n"), ""));
    assert_eq!(f.outputs.len(), 2);
    assert_eq!(f.visible_outputs(), vec![1]);
    // An output added first, then aliased: returned, one output.
    let f = round_trip(&direct(&body("    fd.add_output(tv1)\n    fd.add_output(tv1, alias_input=tv0)\n"), ""));
    assert_eq!((f.outputs.len(), f.visible_outputs()), (1, vec![0]));
    // Legacy prints the keyword.
    let f = round_trip(&legacy(
        "    T0 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Float, is_cpu=False)\n    T1 = fd.ops.neg(T0)\n    fd.add_output(T1, alias_input=T0)\n",
    ));
    assert!(print_script(&f).contains("fd.add_output(T1, alias_input=T0)"));
    // Shape or dtype that cannot share the buffer; an alias to a non-input.
    for (out, want) in [
        ("    tv2 = fd.ops.sum(tv0, dims=[1])\n    fd.add_output(tv2, tv0)\n", "shape and dtype must be the same"),
        ("    tv2 = fd.ops.cast(tv1, dtype=DataType.Half)\n    fd.add_output(tv2, tv0)\n", "shape and dtype must be the same"),
        ("    fd.add_output(tv1, tv1)\n", "must be a tensor input"),
    ] {
        let e = parse_script("t.py", &direct(&body(out), "")).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn add_output_stride_order_keyword_and_positional() {
    let f = round_trip(&direct(
        "    tv0 = fd.define_tensor(shape=[3, 5, 7], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.neg(tv0)\n    fd.add_output(tv1, stride_order=[0, 2, 1])\n    fd.add_output(tv0, [2, 0, 1])\n",
        "",
    ));
    assert_eq!(f.layout_of(0), Some(&[0usize, 2, 1][..]));
    assert_eq!(f.layout_of(1), Some(&[2usize, 0, 1][..]));
    assert!(print_script(&f).contains("fd.add_output(tv1, stride_order=[0, 2, 1])"));
    let e = parse_script(
        "t.py",
        &direct("    tv0 = fd.define_tensor(shape=[3, 5], contiguity=[True, True])\n    fd.add_output(tv0, stride_order=[0, 0])\n", ""),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("not a permutation"), "{e}");
}

#[test]
fn complex_constants_are_real_values_of_a_complex_dtype() {
    let f = round_trip(&direct(
        "    tv0 = fd.define_tensor(shape=[5, 7], contiguity=[True, True], dtype=DataType.ComplexFloat, is_cpu=False)\n\
         \x20   c0 = fd.define_scalar(-1.50000+0.00000j, dtype=DataType.ComplexFloat)\n\
         \x20   c1 = fd.define_scalar(0j, dtype=DataType.ComplexDouble)\n\
         \x20   tv1 = fd.ops.pad(tv0, pad_widths=[1, 2, 0, 1], value=c0)\n\
         \x20   tv2 = fd.ops.mul(tv0, c1)\n\
         \x20   fd.add_output(tv1)\n    fd.add_output(tv2)\n",
        "",
    ));
    let consts: Vec<(DType, Option<Literal>)> = f
        .values
        .iter()
        .filter(|v| v.shape.is_none() && v.dtype.is_complex())
        .map(|v| (v.dtype, v.constant))
        .collect();
    assert_eq!(
        consts,
        vec![(DType::ComplexFloat, Some(Literal::Float(-1.5))), (DType::ComplexDouble, Some(Literal::Float(0.0)))]
    );
    // A scalar does not raise a tensor's precision within its category.
    assert_eq!(f.value(f.outputs[1]).dtype, DType::ComplexFloat);
    // A nonzero imaginary part has no representation: refused where it is written.
    let e = parse_script(
        "t.py",
        &direct("    c0 = fd.define_scalar(1.0-2.0j, dtype=DataType.ComplexFloat)\n", ""),
    )
    .expect_err("refused");
    assert!(e.to_string().contains("nonzero imaginary part"), "{e}");
    assert_eq!(e.line, 4);
}
