//! Fusions never seen before: the fuzzer's random fusions
//! (`fusebench_ir::random`, the one generator `fusebench fuzz` draws from),
//! with their inputs' real layouts (transposed, sliced). Planning must return
//! a plan or an error, never panic, and every plan must name a kernel (or a
//! library's matrix product) for each written output.

use fusebench_codegen::{plan, Device, KernelArg, OutputSource};

#[test]
fn planning_never_panics() {
    for i in 0..400 {
        let f = fusebench_ir::random::fusion(0xC0DE, i).fusion;
        f.validate().unwrap();
        let layouts: Vec<Option<(Vec<i64>, i64)>> = f
            .recipe
            .as_ref()
            .unwrap()
            .iter()
            .map(|r| r.strides().map(|s| (s, 0)))
            .collect();
        // Also without the contiguous join (on by default), which moves
        // outputs into a reduction's kernel.
        let apart = Device {
            contiguous_join: false,
            ..Device::default()
        };
        for dev in [Device::default(), apart] {
            match plan(&f, &layouts, dev) {
                Ok(p) => {
                    for (o, out) in p.outputs.iter().enumerate() {
                        if matches!(out.source, OutputSource::Written) {
                            // By a kernel, or by a matrix product's library call.
                            let written = p.kernels.iter().any(|k| k.args.contains(&KernelArg::Output(o)))
                                || p.products.iter().any(|m| m.out == KernelArg::Output(o));
                            assert!(
                                written,
                                "fusion {i}: output {o} has no kernel: {:?}",
                                p.kernels.iter().map(|k| &k.summary).collect::<Vec<_>>()
                            );
                        }
                    }
                }
                // Unsupported shapes are errors with a reason, not crashes.
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
}

/// Found by the earlier proptest generator: a reshape of all-1 extents after
/// two negations, then a cast, with both an early and the last value as outputs.
#[test]
fn reshape_of_unit_extents_plans() {
    use fusebench_ir::{DType, FusionBuilder, UnaryOp};
    let mut fd = FusionBuilder::new();
    let a = fd.tensor(&[1, 1, 1], DType::Float).unwrap();
    let n1 = fd.unary(UnaryOp::Neg, a).unwrap();
    let n2 = fd.unary(UnaryOp::Neg, n1).unwrap();
    let r = fd.reshape(n2, &[-1, 1]).unwrap();
    let c = fd.cast(r, DType::BFloat16).unwrap();
    fd.add_output(c).unwrap();
    fd.add_output(n1).unwrap();
    let f = fd.finish();
    let p = plan(&f, &[None], Device::default()).unwrap();
    assert!(!p.kernels.is_empty());
}
