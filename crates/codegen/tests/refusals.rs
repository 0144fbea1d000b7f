//! Fusions the GPU refuses at plan time, with a message naming what and
//! why, rather than run differently from nvFuser: integer welford over an
//! empty extent. Those it plans: a squeeze of an expanded broadcast dim,
//! complex reductions to a real dtype. (Outputs with a stride order are
//! planned: tests/layout.rs.)

use fusebench_codegen::{plan, Device};

mod common;
use common::script;

#[test]
fn integer_welford_over_an_empty_extent_is_refused() {
    // No first element to be the mean: nvFuser's integer welford is not
    // lowered for it (the CPU reference runs it).
    let f = script("    tv0 = fd.define_tensor(shape=[3, 0], contiguity=[True, True], dtype=DataType.Int, is_cpu=False)\n    tv1, tv2, tv3 = fd.ops.welford(tv0, dims=[1])\n    fd.add_output(tv1)\n");
    let e = plan(&f, &[None], Device::default()).unwrap_err().to_string();
    assert!(e.contains("welford") && e.contains("integer") && e.contains("empty"), "{e}");
}

#[test]
fn complex_reductions_to_real_dtypes_are_planned_on_converted_elements() {
    // nvFuser casts each element before reducing (a product of real parts is
    // not the real part of the product): planned as a cast, then a real
    // reduction, with no complex value reduced.
    let x = "    tv0 = fd.define_tensor(shape=[3, 5], contiguity=[True, True], dtype=DataType.ComplexFloat, is_cpu=False)\n";
    for (op, d) in [("prod", "Float"), ("sum", "Int"), ("prod", "Int")] {
        let f = script(&format!("{x}    tv1 = fd.ops.{op}(tv0, dims=[1], dtype=DataType.{d})\n    fd.add_output(tv1)\n"));
        let p = plan(&f, &[None], Device::default()).unwrap_or_else(|e| panic!("{op} to {d}: {e}"));
        assert_eq!(p.outputs[0].shape, vec![3]);
    }
}

#[test]
fn squeeze_of_an_expanded_dim_is_planned() {
    let f = script("    tv0 = fd.define_tensor(shape=[4, 7], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.abs(tv0)\n    tv2 = fd.ops.squeeze(tv1, dims=[0], squeeze_expanded=True)\n    fd.add_output(tv2)\n");
    let p = plan(&f, &[Some((vec![0, 1], 0))], Device::default()).unwrap();
    assert_eq!(p.outputs[0].shape, vec![7]);
}
