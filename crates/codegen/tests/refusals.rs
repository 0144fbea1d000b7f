//! Fusions the GPU refuses at plan time, with a message naming what and
//! why, rather than run differently from nvFuser: an output laid out by a
//! stride order other than row-major, integer welford over an empty extent,
//! complex reductions to an integer dtype (and products to a real one). Those it
//! plans: a row-major stride order, a squeeze of an expanded broadcast dim.

use fusebench_codegen::{plan, Device};

fn script(body: &str) -> fusebench_ir::Fusion {
    let src = format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n{body}with FusionDefinition() as fd:\n    f(fd)\n"
    );
    fusebench_frontend::parse_script("t.py", &src).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_stride_ordered_output_is_refused_and_a_row_major_one_planned() {
    let body = "    tv0 = fd.define_tensor(shape=[3, 5], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.neg(tv0)\n    fd.add_output(tv1, stride_order=[0, 1])\n";
    let f = script(body);
    let e = plan(&f, &[None], Device::default()).unwrap_err().to_string();
    assert!(e.contains("tv1") && e.contains("stride_order") && e.contains("row-major"), "{e}");
    // [1, 0] is row-major: the layout the kernels write.
    let f = script(&body.replace("stride_order=[0, 1]", "stride_order=[1, 0]"));
    assert!(plan(&f, &[None], Device::default()).is_ok());
    // A dim of extent 1 may sit anywhere.
    let f = script(&body.replace("shape=[3, 5]", "shape=[1, 5]"));
    assert!(plan(&f, &[None], Device::default()).is_ok());
}

#[test]
fn integer_welford_over_an_empty_extent_is_refused() {
    // No first element to be the mean: nvFuser's integer welford is not
    // lowered for it (the CPU reference runs it).
    let f = script("    tv0 = fd.define_tensor(shape=[3, 0], contiguity=[True, True], dtype=DataType.Int, is_cpu=False)\n    tv1, tv2, tv3 = fd.ops.welford(tv0, dims=[1])\n    fd.add_output(tv1)\n");
    let e = plan(&f, &[None], Device::default()).unwrap_err().to_string();
    assert!(e.contains("welford") && e.contains("integer") && e.contains("empty"), "{e}");
}

#[test]
fn complex_reductions_to_real_dtypes_are_refused_where_nvfuser_casts_first() {
    // nvFuser casts each element before reducing; a product of real parts is
    // not the real part of the product, and a sum of truncated parts is not
    // the truncated sum.
    let x = "    tv0 = fd.define_tensor(shape=[3, 5], contiguity=[True, True], dtype=DataType.ComplexFloat, is_cpu=False)\n";
    for (op, d) in [("prod", "Float"), ("sum", "Int"), ("prod", "Int")] {
        let f = script(&format!("{x}    tv1 = fd.ops.{op}(tv0, dims=[1], dtype=DataType.{d})\n    fd.add_output(tv1)\n"));
        let e = plan(&f, &[None], Device::default()).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("complex") && e.contains("tv1"), "{e}");
    }
}

#[test]
fn squeeze_of_an_expanded_dim_is_planned() {
    let f = script("    tv0 = fd.define_tensor(shape=[4, 7], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.abs(tv0)\n    tv2 = fd.ops.squeeze(tv1, dims=[0], squeeze_expanded=True)\n    fd.add_output(tv2)\n");
    let p = plan(&f, &[Some((vec![0, 1], 0))], Device::default()).unwrap();
    assert_eq!(p.outputs[0].shape, vec![7]);
}
