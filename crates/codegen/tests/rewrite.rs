//! The rewrites made before planning (`fusebench_codegen::rewrite`): complex
//! sums become sums of the parts, integer welford / var_mean become the first
//! element, fulls of 0 (or NaN) and the count; and complex products plan with
//! a complex-double accumulator on every schedule.

use fusebench_codegen::{plan, rewrite, Device, Schedule};
use fusebench_ir::dtype_ops::ComplexOp;
use fusebench_ir::{DType, Fusion, Literal, Op, ReduceOp, ValueId};
use std::borrow::Cow;

mod common;
use common::script;

fn tensor(name: &str, shape: &str, dtype: &str) -> String {
    let contiguity: Vec<&str> = shape
        .split(',')
        .map(|e| if e.trim() == "1" { "None" } else { "True" })
        .collect();
    let contiguity = contiguity.join(", ");
    format!("    {name} = fd.define_tensor(shape=[{shape}], contiguity=[{contiguity}], dtype=DataType.{dtype}, is_cpu=False)\n")
}

fn rewritten(f: &Fusion) -> Fusion {
    match rewrite::apply(f).unwrap() {
        Cow::Owned(g) => {
            g.validate().unwrap();
            g
        }
        Cow::Borrowed(_) => panic!("nothing was rewritten"),
    }
}

fn producer(f: &Fusion, v: ValueId) -> &Op {
    &f.producer(v).expect("defined by an op").op
}

#[test]
fn a_complex_sum_becomes_a_complex_of_the_sums_of_its_parts() {
    let f = script(&format!(
        "{}    tv1 = fd.ops.sum(tv0, dims=[1])\n    tv2 = fd.ops.sum(tv0, dims=[0, 1], keepdim=True, dtype=DataType.ComplexDouble)\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n",
        tensor("tv0", "5, 7", "ComplexFloat")
    ));
    let g = rewritten(&f);
    assert_eq!(g.inputs.len(), 1);
    assert_eq!(g.value(g.inputs[0]).name, "tv0");
    for (o, (d, part, shape)) in [
        (DType::ComplexFloat, DType::Float, vec![5]),
        (DType::ComplexDouble, DType::Double, vec![1, 1]),
    ]
    .into_iter()
    .enumerate()
    {
        let out = g.value(g.outputs[o]);
        assert_eq!((out.dtype, out.shape.clone()), (d, Some(shape.clone())));
        assert_eq!(out.name, f.value(f.outputs[o]).name);
        let Op::Complex { kind: ComplexOp::Complex, xs } = producer(&g, g.outputs[o]) else {
            panic!("not complex(re, im)")
        };
        for (&s, kind) in xs.iter().zip([ComplexOp::Real, ComplexOp::Imag]) {
            let Op::Reduce { kind: ReduceOp::Sum, x, dtype, .. } = producer(&g, s) else {
                panic!("not a sum")
            };
            assert_eq!(*dtype, Some(part));
            assert_eq!(g.value(s).dtype, part);
            assert_eq!(g.value(s).shape, Some(shape.clone()));
            let Op::Complex { kind: k, xs } = producer(&g, *x) else { panic!("not a part") };
            assert_eq!((*k, xs.as_slice()), (kind, &[g.inputs[0]][..]));
        }
    }
}

#[test]
fn a_complex_reduction_to_a_real_dtype_reduces_the_converted_elements() {
    // nvFuser casts the input to the dtype first: a sum to Int truncates each
    // real part, a product to Float multiplies the real parts.
    for (op, d, want) in [("sum", "Float", DType::Float), ("sum", "Int", DType::Int), ("prod", "Float", DType::Float)] {
        let f = script(&format!(
            "{}    tv1 = fd.ops.{op}(tv0, dims=[0], dtype=DataType.{d})\n    fd.add_output(tv1)\n",
            tensor("tv0", "4, 3", "ComplexDouble")
        ));
        let g = rewritten(&f);
        let Op::Reduce { x, dtype: Some(got), .. } = producer(&g, g.outputs[0]) else {
            panic!("{op}: not a reduction")
        };
        assert_eq!(*got, want);
        let Op::Cast { x: c, dtype } = producer(&g, *x) else { panic!("{op} to {d}: not a cast") };
        assert_eq!((*dtype, *c), (want, g.inputs[0]));
    }
}

fn fill(g: &Fusion, v: ValueId) -> (DType, Literal) {
    let Op::Full { fill, dtype, .. } = producer(g, v) else { panic!("not a full") };
    (*dtype, g.value(*fill).constant.unwrap())
}

#[test]
fn integer_welford_becomes_the_first_element_a_zero_m2_and_the_count() {
    let f = script(&format!(
        "{}    tv1, tv2, tv3 = fd.ops.welford(tv0, dims=[1])\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\n",
        tensor("tv0", "5, 7", "Int32")
    ));
    let g = rewritten(&f);
    let [mean, m2, n] = [g.outputs[0], g.outputs[1], g.outputs[2]];
    let Op::Squeeze { x, dims } = producer(&g, mean) else { panic!("not a squeeze") };
    assert_eq!(dims, &[1]);
    let Op::Slice { start, end, .. } = producer(&g, *x) else { panic!("not a slice") };
    assert_eq!((start.as_slice(), end.as_slice()), (&[0, 0][..], &[5, 1][..]));
    assert_eq!(g.value(mean).dtype, DType::Int32);
    assert_eq!(fill(&g, m2).0, DType::Int32);
    assert_eq!(fill(&g, m2).1.as_i64(), Some(0));
    assert_eq!(fill(&g, n).0, DType::Index);
    assert_eq!(fill(&g, n).1.as_i64(), Some(7));
    for (a, b) in f.outputs.iter().zip(&g.outputs) {
        let (a, b) = (f.value(*a), g.value(*b));
        assert_eq!((&a.name, a.dtype, &a.shape), (&b.name, b.dtype, &b.shape));
    }
}

#[test]
fn integer_var_mean_keeps_dims_and_divides_zero_by_the_degrees_of_freedom() {
    let f = script(&format!(
        "{}    tv1, tv2 = fd.ops.var_mean(tv0, dims=[0, 2], correction=1, keepdim=True)\n    tv3, tv4 = fd.ops.var_mean(tv0, dims=[1], correction=1)\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\n    fd.add_output(tv4)\n",
        tensor("tv0", "3, 1, 4", "Int")
    ));
    let g = rewritten(&f);
    // keepdim: the slice itself, [1, 1, 1]; var 0 / 11.
    let Op::Slice { end, .. } = producer(&g, g.outputs[1]) else { panic!("not a slice") };
    assert_eq!(end, &[1, 1, 1]);
    assert_eq!(g.value(g.outputs[1]).shape, Some(vec![1, 1, 1]));
    let (d, v) = fill(&g, g.outputs[0]);
    assert_eq!((d, v.as_f64()), (DType::Double, 0.0));
    // One element and correction 1: 0 * (1 / 0) is NaN, as nvFuser's
    // M2 * reciprocal(max(N - correction, 0)).
    assert!(matches!(producer(&g, g.outputs[3]), Op::Squeeze { .. }));
    assert_eq!(g.value(g.outputs[3]).shape, Some(vec![3, 4]));
    assert!(fill(&g, g.outputs[2]).1.as_f64().is_nan());
}

#[test]
fn a_fusion_without_them_is_left_as_it_is() {
    let f = script(&format!(
        "{}    tv1 = fd.ops.sum(tv0, dims=[1])\n    tv2, tv3 = fd.ops.var_mean(tv0, dims=[1])\n    fd.add_output(tv1)\n    fd.add_output(tv3)\n",
        tensor("tv0", "5, 7", "Float")
    ));
    assert!(matches!(rewrite::apply(&f).unwrap(), Cow::Borrowed(_)));
}

#[test]
fn complex_products_plan_on_every_schedule_with_a_complex_double_accumulator() {
    let f = script(&format!(
        "{}{}{}{}    tv4 = fd.ops.prod(tv0, dims=[1])\n    tv5 = fd.ops.prod(tv0, dims=[0])\n    tv6 = fd.ops.prod(tv1, dims=[1])\n    tv7 = fd.ops.prod(tv2, dims=[0])\n    tv8 = fd.ops.prod(tv3, dims=[0, 1])\n    fd.add_output(tv4)\n    fd.add_output(tv5)\n    fd.add_output(tv6)\n    fd.add_output(tv7)\n    fd.add_output(tv8)\n",
        tensor("tv0", "5, 7", "ComplexFloat"),
        tensor("tv1", "3, 4099", "ComplexFloat"),
        tensor("tv2", "4099, 3", "ComplexDouble"),
        tensor("tv3", "1021, 1027", "ComplexFloat"),
    ));
    let p = plan(&f, &vec![None; 4], Device::default()).unwrap();
    let schedules: Vec<Schedule> = p.kernels.iter().map(|k| k.schedule).collect();
    for s in [Schedule::InnerPersistent, Schedule::OuterPartial, Schedule::GridPartial, Schedule::OuterCombine] {
        assert!(schedules.contains(&s), "{s:?} not in {schedules:?}");
    }
    assert!(p.source.contains("= fb_block_prod_cd("), "no complex block product");
    assert!(p.source.contains("fb_cd a = fb_cd(1"), "no complex identity");
    let outs: Vec<DType> = p.outputs.iter().map(|o| o.dtype).collect();
    use DType::*;
    assert_eq!(outs, [ComplexFloat, ComplexFloat, ComplexFloat, ComplexDouble, ComplexFloat]);
}

#[test]
fn complex_sums_and_integer_statistics_plan_on_every_schedule() {
    let f = script(&format!(
        "{}{}{}{}    tv4 = fd.ops.sum(tv0, dims=[1])\n    tv5 = fd.ops.sum(tv1, dims=[1])\n    tv6 = fd.ops.sum(tv2, dims=[0])\n    tv7 = fd.ops.sum(tv3, dims=[0, 1])\n    fd.add_output(tv4)\n    fd.add_output(tv5)\n    fd.add_output(tv6)\n    fd.add_output(tv7)\n",
        tensor("tv0", "5, 7", "ComplexFloat"),
        tensor("tv1", "3, 4099", "ComplexDouble"),
        tensor("tv2", "4099, 3", "ComplexFloat"),
        tensor("tv3", "1021, 1027", "ComplexDouble"),
    ));
    let p = plan(&f, &vec![None; 4], Device::default()).unwrap();
    assert!(p.kernels.iter().any(|k| k.schedule == Schedule::GridPartial));
    // Real block sums of the parts (the source also holds the prelude, so calls are looked for).
    assert!(p.source.contains("= fb_block_sum_d("));
    assert!(!p.source.contains("= fb_block_prod") && !p.source.contains("fb_cd a = "));
    let g = script(&format!(
        "{}    tv1, tv2, tv3 = fd.ops.welford(tv0, dims=[1])\n    tv4, tv5 = fd.ops.var_mean(tv0, dims=[0], keepdim=True)\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\n    fd.add_output(tv4)\n    fd.add_output(tv5)\n",
        tensor("tv0", "5, 7", "Int")
    ));
    let p = plan(&g, &[None], Device::default()).unwrap();
    let shapes: Vec<Vec<usize>> = p.outputs.iter().map(|o| o.shape.clone()).collect();
    assert_eq!(shapes, [vec![5], vec![5], vec![5], vec![1, 7], vec![1, 7]]);
    let dtypes: Vec<DType> = p.outputs.iter().map(|o| o.dtype).collect();
    assert_eq!(dtypes, [DType::Int, DType::Int, DType::Index, DType::Double, DType::Int]);
}

#[test]
fn the_fixtures_of_these_ops_plan() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../cli/tests/fixtures/ops");
    for file in [
        "complex/sum_cf.py",
        "complex/sum_cd.py",
        "complex/sum_all_1m_cf.py",
        "complex/sum_all_1m_cd.py",
        "complex/prod_cf.py",
        "complex/prod_cd.py",
        "reduce/welford_int.py",
        "reduce/welford_int_used.py",
    ] {
        let path = std::path::Path::new(dir).join(file);
        let f = fusebench_frontend::parse_file(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        let layouts: Vec<_> = match &f.recipe {
            Some(r) => r.iter().map(|r| r.strides().map(|s| (s, 0))).collect(),
            None => f
                .inputs
                .iter()
                .map(|&i| match &f.value(i).def {
                    fusebench_ir::ValueDef::TensorInput(d) if !d.stride_order.is_empty() => {
                        Some((d.dense_strides(f.value(i).shape.as_ref().unwrap()), 0))
                    }
                    _ => None,
                })
                .collect(),
        };
        plan(&f, &layouts, Device::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}
