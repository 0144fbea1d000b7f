//! A reduction node seen the way schedules need it: what it reads, over which
//! dims, how it combines, and the C for its accumulator.

use crate::ctype;
use crate::kernel::acc_dtype;
use fusebench_ir::{infer, DType, Fusion, Literal, Op, ReduceOp, ValueId};

/// Largest reduced extent computed inline.
pub const INLINE_MAX: usize = 16;

#[derive(Clone, Debug, PartialEq)]
pub enum Combine {
    Sum,
    Max,
    Min,
    Prod,
}

#[derive(Clone, Debug)]
pub struct Reduction {
    pub node: usize,
    pub x: ValueId,
    /// Normalized, sorted reduced dims of `x`.
    pub dims: Vec<usize>,
    /// Sum/max/min: one output. Welford: mean, M2, count. VarMean: var, mean.
    pub outputs: Vec<ValueId>,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Plain(Combine),
    Welford,
    VarMean { correction: i64 },
}

impl Reduction {
    pub fn of(f: &Fusion, node: usize) -> Option<Reduction> {
        let n = &f.nodes[node];
        let (x, dims, kind) = match &n.op {
            Op::Reduce { kind, x, dims, .. } => (
                *x,
                dims,
                Kind::Plain(match kind {
                    ReduceOp::Sum => Combine::Sum,
                    ReduceOp::Max => Combine::Max,
                    ReduceOp::Min => Combine::Min,
                    ReduceOp::Prod => Combine::Prod,
                }),
            ),
            Op::Welford { x, dims } => (*x, dims, Kind::Welford),
            Op::VarMean {
                x,
                dims,
                correction,
                ..
            } => (
                *x,
                dims,
                Kind::VarMean {
                    correction: *correction,
                },
            ),
            _ => return None,
        };
        let rank = f.value(x).rank();
        let dims = infer::norm_dims("reduction", dims, rank).expect("validated");
        Some(Reduction {
            node,
            x,
            dims,
            outputs: n.outputs.clone(),
            kind,
        })
    }

    /// Elements combined into each result.
    pub fn count(&self, f: &Fusion) -> usize {
        let s = f.value(self.x).shape.as_ref().unwrap();
        self.dims.iter().map(|&d| s[d]).product()
    }

    /// Extents of the input's dims that are not reduced, in order: the
    /// results' shape without the reduced dims.
    pub fn kept_extents(&self, f: &Fusion) -> Vec<usize> {
        let s = f.value(self.x).shape.as_ref().unwrap();
        (0..s.len()).filter(|d| !self.dims.contains(d)).map(|d| s[d]).collect()
    }

    /// Whether the reduced dims are the trailing dims of the input.
    pub fn is_inner(&self, f: &Fusion) -> bool {
        let rank = f.value(self.x).rank();
        !self.dims.is_empty()
            && self
                .dims
                .iter()
                .enumerate()
                .all(|(k, &d)| d == rank - self.dims.len() + k)
    }

    /// The dtype values are converted to before combining.
    pub fn value_dtype(&self, f: &Fusion) -> DType {
        match self.kind {
            Kind::Plain(_) => f.value(self.outputs[0]).dtype,
            _ => f.value(self.outputs[0]).dtype,
        }
    }

    /// Accumulator dtype.
    pub fn acc(&self, f: &Fusion) -> DType {
        match &self.kind {
            Kind::Plain(c) => acc_for(c, self.value_dtype(f)),
            _ => acc_dtype(self.value_dtype(f)),
        }
    }

    /// Element `x` of the reduced input (a C expression of its register
    /// type) in the accumulator's type: through the value dtype first, as
    /// the reduction's result is defined.
    pub fn to_acc(&self, f: &Fusion, x: &str) -> String {
        let v = ctype::convert(f.value(self.x).dtype, self.value_dtype(f), x);
        ctype::convert(self.value_dtype(f), self.acc(f), &v)
    }

    /// Small plain reductions are computed where they are read, in a loop,
    /// instead of by a kernel of their own.
    pub fn inline(&self, f: &Fusion) -> bool {
        matches!(self.kind, Kind::Plain(_)) && self.count(f) <= INLINE_MAX
    }

    /// Passes over the data: mean-based statistics need the mean first.
    pub fn passes(&self) -> usize {
        match self.kind {
            Kind::Plain(_) => 1,
            _ => 2,
        }
    }
}

/// Accumulator dtype of combine `c` over values of dtype `d`.
pub fn acc_for(c: &Combine, d: DType) -> DType {
    match c {
        // A long f32 product drifts: multiplying a running product just above
        // 1 by a factor just below it lands on a rounding tie, broken low
        // every time (70001 factors in [0.9999, 1.0001] came out 5e-4 low).
        // Float products therefore accumulate in double, and complex products
        // (nvFuser: complex multiply, identity 1+0i) in complex double.
        Combine::Prod if d.is_float() => DType::Double,
        Combine::Prod if d.is_complex() => DType::ComplexDouble,
        _ => acc_dtype(d),
    }
}

/// Identity of a combine in accumulator type `acc`.
pub fn init(c: &Combine, acc: DType) -> String {
    match (c, acc) {
        (Combine::Sum, d) => ctype::literal(d, Literal::Int(0)),
        (Combine::Prod, d) => ctype::literal(d, Literal::Int(1)),
        (Combine::Max, DType::Int) => "(-9223372036854775807LL - 1)".into(),
        (Combine::Min, DType::Int) => "9223372036854775807LL".into(),
        (Combine::Max, d) => ctype::literal(d, Literal::Float(f64::NEG_INFINITY)),
        (Combine::Min, d) => ctype::literal(d, Literal::Float(f64::INFINITY)),
    }
}

/// `acc = acc (op) v`.
pub fn step(c: &Combine, acc: DType, a: &str, v: &str) -> String {
    let suffix = suffix(acc);
    match c {
        // The prelude's complex types have + and * but no compound assignment.
        Combine::Sum if acc.is_complex() => format!("{a} = {a} + ({v});"),
        Combine::Prod if acc.is_complex() => format!("{a} = {a} * ({v});"),
        Combine::Sum => format!("{a} += {v};"),
        Combine::Prod => format!("{a} *= {v};"),
        Combine::Max => format!("{a} = fb_max{suffix}({a}, {v});"),
        Combine::Min => format!("{a} = fb_min{suffix}({a}, {v});"),
    }
}

/// Name of the block-wide reduction helper in the prelude.
pub fn block_fn(c: &Combine, acc: DType) -> String {
    let op = match c {
        Combine::Sum => "sum",
        Combine::Max => "max",
        Combine::Min => "min",
        Combine::Prod => "prod",
    };
    format!("fb_block_{op}_{}", suffix(acc))
}

/// The shared scratch passed to the block helper (complex helpers keep
/// their own and ignore it).
pub fn smem_name(acc: DType) -> &'static str {
    match acc {
        DType::Double => "fb_sd",
        DType::Int => "fb_si",
        _ => "fb_sf",
    }
}

fn suffix(acc: DType) -> &'static str {
    match acc {
        DType::ComplexDouble => "cd",
        DType::ComplexFloat => "cf",
        DType::Double => "d",
        DType::Int => "i",
        _ => "f",
    }
}
