//! A matrix product's elementwise consumer taken into the BLAS library's
//! epilogue (a ReLU, a tanh GELU), so that no kernel reads the product back.
//!
//! The consumer is found by what it computes, not by how it is spelled: the
//! elementwise ops that read only the product's result (and constants) form
//! a function of one value; where exactly one of their values is read by
//! anything else, has the product's dtype and the product's shape, and the
//! function equals one the library applies at every sample point, the
//! product writes that value itself and the ops are left unread.
//!
//! The library applies the function to the f32 accumulator before rounding
//! to the output dtype; the fusion rounds the product first. A GELU is taken
//! for BFloat16 outputs only (the library's GELU put Half outputs two units
//! from the fusion's, outside Half's tolerance; a ReLU is exact), and only
//! where its value is an output that nothing else reads: a second product
//! summing such values (an MLP) went past BFloat16's tolerance. The two differ
//! by at most about a unit of the output dtype (the GELU's slope is at most
//! 1.13), within the tolerance every GPU result is checked against.

use fusebench_ir::{DType, Fusion, FusionBuilder, Literal, Op, ValueDef, ValueId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What the library applies to a product's result before writing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Epilogue {
    #[default]
    None,
    /// max(x, 0).
    Relu,
    /// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    GeluTanh,
}

impl Epilogue {
    pub fn is_none(&self) -> bool {
        *self == Epilogue::None
    }

    fn apply(self, x: f64) -> f64 {
        match self {
            Epilogue::None => x,
            Epilogue::Relu => x.max(0.0),
            Epilogue::GeluTanh => {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
            }
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Epilogue::None => "none",
            Epilogue::Relu => "ReLU",
            Epilogue::GeluTanh => "GELU (tanh)",
        }
    }
}

fn elementwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } | Op::Where { .. } | Op::Cast { .. }
    )
}

/// Values of the sample points, as multiples of one: both signs, from where
/// the GELU is nearly zero to where it is nearly the identity.
const POINTS: [f64; 17] = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 8.0, 16.0, 50.0, 100.0, 1000.0];

/// What the library computes of a product's result in place of its
/// consumer: `epilogue(alpha * x)`, written as `value`; the consumer's nodes.
pub struct Found {
    pub epilogue: Epilogue,
    pub alpha: f64,
    pub value: ValueId,
    pub nodes: BTreeSet<usize>,
}

/// For product result `r` (of dtype `dtype`, not a fusion output, read by no
/// one else): what the library can compute of it in place of its consumer.
pub fn find(f: &Fusion, r: ValueId) -> Option<Found> {
    let dtype = f.value(r).dtype;
    if !matches!(dtype, DType::BFloat16 | DType::Half | DType::Float) || f.outputs.contains(&r) {
        return None;
    }
    let shape = f.value(r).shape.clone()?;
    // The elementwise ops that read only r, each other and scalars.
    let mut inside: BTreeSet<ValueId> = BTreeSet::from([r]);
    let mut nodes = BTreeSet::new();
    for (i, n) in f.nodes.iter().enumerate() {
        if !elementwise(&n.op) {
            continue;
        }
        let ops = n.op.operands();
        let reads_inside = ops.iter().any(|v| inside.contains(v));
        let rest_scalar = ops.iter().all(|v| inside.contains(v) || f.value(*v).constant.is_some() && !f.value(*v).is_tensor());
        if reads_inside && rest_scalar && n.outputs.iter().all(|&o| f.value(o).shape.as_ref() == Some(&shape)) {
            nodes.insert(i);
            inside.extend(n.outputs.iter().copied());
        }
    }
    // Every read of r is inside; exactly one value leaves.
    let mut leaving = BTreeSet::new();
    for (i, n) in f.nodes.iter().enumerate() {
        for v in n.op.operands() {
            if inside.contains(&v) && !nodes.contains(&i) {
                leaving.insert(v);
            }
        }
    }
    leaving.extend(f.outputs.iter().filter(|v| inside.contains(v)));
    let e = match leaving.into_iter().collect::<Vec<_>>()[..] {
        [e] if e != r && f.value(e).dtype == dtype => e,
        _ => return None,
    };
    // A GELU's value is a unit off the fusion's here and there; read by more
    // work (a second product sums many of them), the differences add up past
    // the output's tolerance. Only a ReLU, exact, may feed more work.
    let read_on = f.nodes.iter().any(|n| n.op.operands().contains(&e));
    // The library's GELU is less exact than the reference's: on the H200,
    // Half outputs two units apart from the fusion's on 0.1-0.2% of the
    // elements (outside Half's tolerance), well within BFloat16's.
    let want: &[Epilogue] = if dtype == DType::BFloat16 && !read_on {
        &[Epilogue::Relu, Epilogue::GeluTanh]
    } else {
        &[Epilogue::Relu]
    };
    let computes = |g: &dyn Fn(f64) -> f64| {
        POINTS.iter().flat_map(|&p| [p, -p]).all(|x| {
            let x = fusebench_ir::scalar::round_to(x, dtype);
            match evaluate(f, r, e, &nodes, x) {
                Some(got) => close(got, fusebench_ir::scalar::round_to(g(x), dtype), dtype),
                None => false,
            }
        })
    };
    let found = |epilogue, alpha| Found { epilogue, alpha, value: e, nodes: nodes.clone() };
    if let Some(k) = want.iter().copied().find(|&k| computes(&|x| k.apply(x))) {
        return Some(found(k, 1.0));
    }
    // A constant scale (attention's 1/sqrt(d)) is the product's alpha. Its
    // value read before the last cast rounds it, so alpha is the constant.
    let before_cast = match &f.producer(e)?.op {
        Op::Cast { x, .. } if inside.contains(x) => *x,
        _ => e,
    };
    let c = evaluate(f, r, before_cast, &nodes, 1.0)?;
    // Scaled before rounding rather than after: a unit off here and there,
    // unless the scale is a power of two (exact).
    let exact = c.abs().log2().fract() == 0.0;
    (c.is_finite() && c != 0.0 && (exact || !read_on) && computes(&|x| c * x)).then(|| found(Epilogue::None, c))
}

/// Within one unit of `dtype` (and of its smallest normal step near zero).
fn close(got: f64, want: f64, dtype: DType) -> bool {
    let ulp = match dtype {
        DType::BFloat16 => 2f64.powi(-7),
        DType::Half => 2f64.powi(-10),
        _ => 2f64.powi(-22),
    };
    (got - want).abs() <= ulp * want.abs().max(2f64.powi(-10)) || got == want
}

/// The value of `e` where `r` is `x`: the consumer's ops applied to scalars,
/// folded as the fusion is built.
fn evaluate(f: &Fusion, r: ValueId, e: ValueId, nodes: &BTreeSet<usize>, x: f64) -> Option<f64> {
    let mut b = FusionBuilder::new();
    let mut map = std::collections::HashMap::new();
    map.insert(r, b.define_scalar(None, Some(Literal::Float(x)), f.value(r).dtype));
    for &i in nodes {
        let n = &f.nodes[i];
        let mut op = n.op.clone();
        for o in op.operands_mut() {
            *o = match map.get(o) {
                Some(&v) => v,
                None => {
                    let val = f.value(*o);
                    match val.def {
                        ValueDef::Literal => b.literal(val.constant?),
                        _ => b.define_scalar(None, val.constant, val.dtype),
                    }
                }
            };
        }
        let outs = b.op(op, &[]).ok()?;
        for (&o, &v) in n.outputs.iter().zip(&outs) {
            map.insert(o, v);
        }
    }
    let g = b.finish();
    Some(g.value(*map.get(&e)?).constant?.as_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gelu_is_the_tanh_form() {
        assert_eq!(Epilogue::GeluTanh.apply(0.0), 0.0);
        assert!((Epilogue::GeluTanh.apply(1.0) - 0.841_192).abs() < 1e-6);
        assert!((Epilogue::GeluTanh.apply(-3.0) + 0.003_637).abs() < 1e-6);
    }
}
