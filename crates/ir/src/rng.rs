//! The random ops (`uniform`, `normal`, `rand_like`, `randn_like`): their
//! type rule and where each op's Philox stream starts.
//!
//! nvFuser (csrc/ops/arith.cpp) gives `uniform`/`normal` the dtype asked for
//! and the shape given; `rand_like`/`randn_like` the dtype and shape of their
//! input, which must be a floating tensor. An op without `rng_seed` and
//! `rng_offset` draws from PyTorch's CUDA generator (csrc/rng.cpp): seed =
//! the generator's seed, offset = the generator's offset / 4 + the op's
//! number among the fusion's unseeded random ops (csrc/device_lower/
//! lower2device.cpp, `assignRNGOffset`), and one run advances the generator
//! by 4 per such op. fusebench has no generator: it runs unseeded ops as
//! nvFuser would right after `torch.manual_seed(0)`, i.e. seed 0 and offset
//! = that number (0 for the first).

use crate::infer::{extents, tensor, Graph, OutType};
use crate::op::Op;
use crate::{DType, Fusion, IrError, ValueDef, ValueId};

/// The dtypes nvFuser's runtime has random functions for.
pub fn supported_dtype(d: DType) -> bool {
    matches!(
        d,
        DType::Float | DType::Double | DType::Half | DType::BFloat16
    )
}

fn check_dtype(op: &str, d: DType) -> Result<(), IrError> {
    if supported_dtype(d) {
        Ok(())
    } else {
        Err(IrError::op(
            op,
            format!("random values are floating point (Float, Double, Half, BFloat16), got {d}"),
        ))
    }
}

pub(crate) fn infer(g: &Graph, name: &str, op: &Op) -> Result<Vec<OutType>, IrError> {
    match op {
        Op::Rng {
            a,
            b,
            shape,
            seed,
            offset,
            dtype,
            ..
        } => {
            check_dtype(name, *dtype)?;
            for (what, v) in [("first parameter", a), ("second parameter", b)] {
                let val = g.get(name, *v)?;
                if val.is_tensor() || val.dtype == DType::Bool {
                    return Err(IrError::op(
                        name,
                        format!("the {what} must be a number scalar, got {}", val.name),
                    ));
                }
            }
            if seed.is_some() != offset.is_some() {
                return Err(IrError::op(
                    name,
                    "rng_seed and rng_offset must be provided together",
                ));
            }
            for (what, v) in [("rng_seed", seed), ("rng_offset", offset)] {
                if let Some(v) = v {
                    let val = g.get(name, *v)?;
                    if val.is_tensor() || !val.dtype.is_integral() {
                        return Err(IrError::op(
                            name,
                            format!("{what} must be an integer scalar, got {}", val.name),
                        ));
                    }
                }
            }
            Ok(vec![OutType::tensor(*dtype, extents(name, "shape", shape)?)])
        }
        Op::RngLike { x, .. } => {
            let (xv, s) = tensor(g, name, "input", *x)?;
            check_dtype(name, xv.dtype)?;
            Ok(vec![OutType::tensor(xv.dtype, s.to_vec())])
        }
        _ => unreachable!("rng::infer on {}", op.name()),
    }
}

/// Where a random op's stream starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Start {
    /// `rng_seed` and `rng_offset` values of the fusion.
    Given { seed: ValueId, offset: ValueId },
    /// Unseeded: as nvFuser after `torch.manual_seed(0)`.
    Default { seed: u64, offset: u64 },
}

/// The start of the stream of the random op that defines `out`.
pub fn start(f: &Fusion, out: ValueId) -> Option<Start> {
    let ValueDef::Node { node, .. } = f.value(out).def else {
        return None;
    };
    match &f.nodes[node].op {
        Op::Rng {
            seed: Some(seed),
            offset: Some(offset),
            ..
        } => Some(Start::Given {
            seed: *seed,
            offset: *offset,
        }),
        Op::Rng { .. } | Op::RngLike { .. } => Some(Start::Default {
            seed: 0,
            offset: number(f, node),
        }),
        _ => None,
    }
}

/// The number of the unseeded random op at `node` among the fusion's
/// unseeded random ops: its count before it, or the number it had in the
/// fusion this one was cut from (`Fusion::unseeded_numbers`).
pub fn number(f: &Fusion, node: usize) -> u64 {
    match f.unseeded_numbers.iter().find(|&&(n, _)| n == node) {
        Some(&(_, k)) => k,
        None => f.nodes[..node].iter().filter(|n| is_unseeded(&n.op)).count() as u64,
    }
}

/// A random op that draws from the generator (no `rng_seed`/`rng_offset`).
pub fn is_unseeded(op: &Op) -> bool {
    matches!(op, Op::RngLike { .. } | Op::Rng { seed: None, .. })
}

/// nvFuser's `RNGOp::getPhiloxMultiple`: elements per Philox call (4 32-bit
/// outputs; a double takes two of them).
pub fn per_call(d: DType) -> u64 {
    if d == DType::Double {
        2
    } else {
        4
    }
}

/// What `check` says when a fusion draws from the generator.
pub fn unseeded_note(f: &Fusion) -> Option<String> {
    let names: Vec<&str> = f
        .nodes
        .iter()
        .filter(|n| is_unseeded(&n.op))
        .map(|n| f.value(n.outputs[0]).name.as_str())
        .collect();
    if names.is_empty() {
        return None;
    }
    let offsets = match names.len() {
        1 => "offset 0".to_string(),
        n => format!("offsets 0..{} in definition order", n - 1),
    };
    Some(format!(
        "random op(s) without rng_seed/rng_offset ({}) use seed 0 and {offsets}, \
         as nvFuser right after torch.manual_seed(0)",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FusionBuilder, Literal};

    #[test]
    fn unseeded_ops_take_offsets_in_order() {
        let mut b = FusionBuilder::new();
        let x = b.tensor(&[3, 5], DType::Half).unwrap();
        let (lo, hi) = (b.literal(Literal::Float(0.0)), b.literal(Literal::Float(1.0)));
        let (s, o) = (b.literal(Literal::Int(9)), b.literal(Literal::Int(2)));
        let seeded = Op::Rng {
            dist: crate::RngDist::Uniform,
            a: lo,
            b: hi,
            shape: vec![4],
            seed: Some(s),
            offset: Some(o),
            dtype: DType::Double,
        };
        let r0 = b.op(Op::RngLike { dist: crate::RngDist::Normal, x }, &[]).unwrap()[0];
        let r1 = b.op(seeded, &[]).unwrap()[0];
        let r2 = b.op(Op::RngLike { dist: crate::RngDist::Uniform, x }, &[]).unwrap()[0];
        for v in [r0, r1, r2] {
            b.add_output(v).unwrap();
        }
        let f = b.finish();
        assert_eq!(f.value(r0).dtype, DType::Half);
        assert_eq!(f.value(r1).shape, Some(vec![4]));
        assert_eq!(start(&f, r0), Some(Start::Default { seed: 0, offset: 0 }));
        assert_eq!(start(&f, r1), Some(Start::Given { seed: s, offset: o }));
        assert_eq!(start(&f, r2), Some(Start::Default { seed: 0, offset: 1 }));
        assert!(unseeded_note(&f).unwrap().contains("offsets 0..1"));
    }

    #[test]
    fn integer_dtypes_are_refused() {
        let mut b = FusionBuilder::new();
        let x = b.tensor(&[3], DType::Int).unwrap();
        let e = b.op(Op::RngLike { dist: crate::RngDist::Uniform, x }, &[]).unwrap_err();
        assert!(e.to_string().contains("rand_like"), "{e}");
    }
}
