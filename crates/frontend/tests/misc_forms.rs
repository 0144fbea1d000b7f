//! Script forms nvFuser accepts: squeeze of an expanded broadcast dim
//! (`squeeze_expanded`), iota of scalar inputs, a `torch.randint(...)
//! .as_strided(...)` input, welford/var_mean of integers; parsed, inferred
//! and printed back.

use fusebench_frontend::{parse_script, print_script};
use fusebench_ir::{DType, Fusion, InputRecipe, Literal};

fn direct(body: &str, inputs: &str) -> String {
    format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n{body}with FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n{inputs}"
    )
}

fn round_trip(text: &str) -> Fusion {
    let f = parse_script("t.py", text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let p1 = print_script(&f);
    let g = parse_script("p.py", &p1).unwrap_or_else(|e| panic!("{e}\n{p1}"));
    assert_eq!(print_script(&g), p1);
    assert_eq!(f.values, g.values);
    assert_eq!(f.nodes, g.nodes);
    f
}

#[test]
fn squeeze_of_expanded_broadcast_dims() {
    let body = "    tv0 = fd.define_tensor(shape=[5, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.expand(tv0, shape=[5, 3])\n    tv2 = fd.ops.squeeze(tv1, dims=[1], squeeze_expanded=True)\n    tv3 = fd.define_tensor(shape=[4, 7], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)\n    tv4 = fd.ops.abs(tv3)\n    tv5 = fd.ops.squeeze(tv4, dims=[-2], squeeze_expanded=True)\n    fd.add_output(tv2)\n    fd.add_output(tv5)\n";
    let f = round_trip(&direct(body, ""));
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![5]));
    assert_eq!(f.value(f.outputs[1]).shape, Some(vec![7]));
    assert!(print_script(&f).contains("squeeze(tv4, dims=[-2], squeeze_expanded=True)"));

    // nvFuser asks for the flag to squeeze an expanded dim.
    let no_flag = body.replace(", squeeze_expanded=True)\n    tv3", ")\n    tv3");
    let e = parse_script("t.py", &direct(&no_flag, "")).unwrap_err().to_string();
    assert!(e.contains("squeeze_expanded=True"), "{e}");
    // A dim that is not a broadcast cannot be squeezed at all.
    let concrete = "    tv0 = fd.define_tensor(shape=[5, 3], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.squeeze(tv0, dims=[1], squeeze_expanded=True)\n    fd.add_output(tv1)\n";
    let e = parse_script("t.py", &direct(concrete, "")).unwrap_err().to_string();
    assert!(e.contains("not a broadcast dim"), "{e}");
    // Nor a binary op's dim where only one operand broadcasts.
    let mixed = "    tv0 = fd.define_tensor(shape=[4, 7], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.define_tensor(shape=[4, 7], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    tv2 = fd.ops.add(tv0, tv1)\n    tv3 = fd.ops.squeeze(tv2, dims=[0], squeeze_expanded=True)\n    fd.add_output(tv3)\n";
    assert!(parse_script("t.py", &direct(mixed, "")).is_err());
}

#[test]
fn iota_length_from_a_scalar_input_is_bound_from_the_inputs_list() {
    let body = "    c0 = fd.define_scalar(None, dtype=DataType.Int)\n    c1 = fd.define_scalar(None, dtype=DataType.Int)\n    tv0 = fd.ops.iota(length=c0, start=c1, step=c1)\n    fd.add_output(tv0)\n";
    let inputs = "inputs = [\n    11,\n    -2,\n]\nfd.execute(inputs)\n";
    let f = round_trip(&direct(body, inputs));
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![11]));
    assert_eq!(f.value(f.inputs[0]).constant, Some(Literal::Int(11)));
    // start and step stay run-time values.
    assert_eq!(f.value(f.inputs[1]).constant, None);
    assert!(f.check_bound_scalar(f.inputs[0], Literal::Int(12)).is_err());
    assert!(f.check_bound_scalar(f.inputs[0], Literal::Int(11)).is_ok());
    // Without an inputs list there is no length to build with.
    let e = parse_script("t.py", &direct(body, "")).unwrap_err().to_string();
    assert!(e.contains("must be a constant"), "{e}");
}

#[test]
fn randint_as_strided_input() {
    let body = "    tv0 = fd.define_tensor(shape=[5, 7], contiguity=[True, True], dtype=DataType.Bool, is_cpu=False, stride_order=[0, 1])\n    fd.add_output(tv0)\n";
    let inputs = "inputs = [\n    torch.randint(0, 2, (35,), dtype=torch.bool, device='cuda:0').as_strided((5, 7), (1, 5)),\n]\nfd.execute(inputs)\n";
    let f = round_trip(&direct(body, inputs));
    let r = &f.recipe.as_ref().unwrap()[0];
    assert_eq!(
        *r,
        InputRecipe::Randint {
            low: 0,
            high: 2,
            size: vec![35],
            dtype: DType::Bool,
            as_strided: Some((vec![5, 7], vec![1, 5])),
        }
    );
    assert_eq!(r.shape(), Some(vec![5, 7]));
    assert_eq!(r.strides(), Some(vec![1, 5]));
    assert!(fusebench_ir::recipe::check_recipes(&f, f.recipe.as_ref().unwrap()).is_empty());
    assert!(print_script(&f).contains(".as_strided((5, 7), (1, 5))"));
}

#[test]
fn integer_welford_and_var_mean_types() {
    let body = "    tv0 = fd.define_tensor(shape=[5, 7], contiguity=[True, True], dtype=DataType.Int, is_cpu=False)\n    tv1, tv2, tv3 = fd.ops.welford(tv0, dims=[0])\n    tv4, tv5 = fd.ops.var_mean(tv0, dims=[1], correction=0, keepdim=False)\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\n    fd.add_output(tv4)\n    fd.add_output(tv5)\n";
    let f = round_trip(&direct(body, ""));
    let d: Vec<DType> = f.outputs.iter().map(|&o| f.value(o).dtype).collect();
    assert_eq!(d, vec![DType::Int, DType::Int, DType::Index, DType::Double, DType::Int]);
    let bool_in = body.replace("DataType.Int,", "DataType.Bool,");
    assert!(parse_script("t.py", &direct(&bool_in, "")).is_err());
}
