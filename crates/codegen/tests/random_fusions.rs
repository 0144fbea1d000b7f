//! Fusions never seen before: random chains of ops on random small shapes.
//! Planning must return a plan or an error, never panic, and every plan must
//! name a kernel for each written output.

use fusebench_codegen::{plan, Device, OutputSource};
use fusebench_ir::{BinaryOp, DType, FusionBuilder, Literal, ReduceOp, UnaryOp, ValueId};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Unary(u8),
    Binary(u8, usize),
    Cast(bool),
    Reduce(u8, bool, bool),
    Broadcast,
    Permute,
    Reshape,
    Slice,
    Pad,
    Cat(usize),
    Where(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..10).prop_map(Step::Unary),
        (0u8..7, 0usize..8).prop_map(|(k, o)| Step::Binary(k, o)),
        any::<bool>().prop_map(Step::Cast),
        (0u8..3, any::<bool>(), any::<bool>())
            .prop_map(|(k, inner, keep)| Step::Reduce(k, inner, keep)),
        Just(Step::Broadcast),
        Just(Step::Permute),
        Just(Step::Reshape),
        Just(Step::Slice),
        Just(Step::Pad),
        (0usize..8).prop_map(Step::Cat),
        (0usize..8).prop_map(Step::Where),
    ]
}

/// Applies `s` to the latest value; an op the shapes do not allow is skipped.
fn apply(fd: &mut FusionBuilder, vals: &mut Vec<ValueId>, s: &Step) {
    let x = *vals.last().unwrap();
    let shape: Vec<i64> = fd
        .fusion()
        .value(x)
        .shape
        .clone()
        .unwrap()
        .iter()
        .map(|&e| e as i64)
        .collect();
    let rank = shape.len();
    let pick = |o: usize, vals: &Vec<ValueId>| vals[o % vals.len()];
    let r = match s {
        Step::Unary(k) => fd.unary(UnaryOp::ALL[*k as usize % UnaryOp::ALL.len()], x),
        Step::Binary(k, o) => {
            let kinds = [
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Maximum,
                BinaryOp::Minimum,
                BinaryOp::Pow,
            ];
            fd.binary(kinds[*k as usize % kinds.len()], x, pick(*o, vals))
        }
        Step::Cast(bf) => fd.cast(x, if *bf { DType::BFloat16 } else { DType::Float }),
        Step::Reduce(k, inner, keep) if rank > 1 => {
            let d = if *inner { rank as i64 - 1 } else { 0 };
            let kind = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][*k as usize % 3];
            fd.reduce(kind, x, &[d], *keep)
        }
        Step::Broadcast if rank < 4 => {
            let r = fd.broadcast(
                x,
                &std::iter::once(true)
                    .chain(std::iter::repeat_n(false, rank))
                    .collect::<Vec<_>>(),
            );
            r.and_then(|b| {
                let mut to = vec![3i64];
                to.extend(&shape);
                fd.expand(b, &to)
            })
        }
        Step::Permute if rank > 1 => fd.permute(x, &(0..rank as i64).rev().collect::<Vec<_>>()),
        Step::Reshape if rank > 1 => fd.reshape(x, &[-1, shape[rank - 1]]),
        Step::Slice if shape[rank - 1] > 2 => {
            let end: Vec<i64> = shape
                .iter()
                .enumerate()
                .map(|(d, &e)| if d == rank - 1 { e - 1 } else { e })
                .collect();
            fd.slice(x, &vec![0; rank], &end)
        }
        Step::Pad => fd.pad(x, &[1, 2], Some(Literal::Float(0.0))),
        Step::Cat(o) => fd.cat(&[x, pick(*o, vals)], rank as i64 - 1, false),
        Step::Where(o) => {
            let y = pick(*o, vals);
            fd.binary(BinaryOp::Gt, x, y)
                .and_then(|c| fd.where_(c, x, y))
        }
        _ => return,
    };
    if let Ok(v) = r {
        vals.push(v);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn planning_never_panics(dims in prop::collection::vec(1i64..9, 1..4), bf16 in any::<bool>(), steps in prop::collection::vec(step(), 1..12), outs in prop::collection::vec(0usize..20, 1..4)) {
        let mut fd = FusionBuilder::new();
        let dt = if bf16 { DType::BFloat16 } else { DType::Float };
        let a = fd.tensor(&dims, dt).unwrap();
        let b = fd.tensor(&dims, DType::Float).unwrap();
        let mut vals = vec![a, b];
        for s in &steps {
            apply(&mut fd, &mut vals, s);
        }
        for o in outs {
            let _ = fd.add_output(vals[o % vals.len()]);
        }
        let f = fd.finish();
        f.validate().unwrap();
        match plan(&f, &vec![None; f.inputs.len()], Device::default()) {
            Ok(p) => {
                for (i, o) in p.outputs.iter().enumerate() {
                    if matches!(o.source, OutputSource::Written) {
                        let written = p.kernels.iter().any(|k| k.args.contains(&fusebench_codegen::KernelArg::Output(i)));
                        prop_assert!(written, "output {i} has no kernel: {:?}", p.kernels.iter().map(|k| &k.summary).collect::<Vec<_>>());
                    }
                }
            }
            Err(e) => {
                // Unsupported shapes are errors with a reason, not crashes.
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}
