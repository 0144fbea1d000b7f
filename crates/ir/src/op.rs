//! The operations of a fusion, named as nvFuser's `fd.ops.*` names them.

use crate::{DType, ValueId};
use serde::{Deserialize, Serialize};

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($var:ident => $s:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
        pub enum $name { $($var),* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$var),*];
            /// The `fd.ops.NAME` spelling.
            pub fn name(self) -> &'static str { match self { $($name::$var => $s),* } }
            pub fn from_name(s: &str) -> Option<$name> {
                match s { $($s => Some($name::$var),)* _ => None }
            }
        }
    };
}

named_enum!(
    /// Elementwise ops of one operand.
    UnaryOp {
        Neg => "neg", Abs => "abs", Reciprocal => "reciprocal", Rsqrt => "rsqrt", Sqrt => "sqrt",
        Exp => "exp", Log => "log", Tanh => "tanh", Erf => "erf", Sigmoid => "sigmoid",
    }
);

named_enum!(
    /// Elementwise ops of two operands.
    BinaryOp {
        Add => "add", Sub => "sub", Mul => "mul", Div => "div", Pow => "pow",
        Maximum => "maximum", Minimum => "minimum",
        Eq => "eq", Ne => "ne", Lt => "lt", Le => "le", Gt => "gt", Ge => "ge",
    }
);

named_enum!(
    /// Reductions producing one tensor. `amax`/`amin` are accepted as spellings of max/min.
    ReduceOp { Sum => "sum", Max => "max", Min => "min" }
);

impl UnaryOp {
    /// Ops that nvFuser promotes integer inputs of to float (`float_op_config`).
    pub fn promotes_int_to_float(self) -> bool {
        !matches!(self, UnaryOp::Neg | UnaryOp::Abs)
    }
}

impl BinaryOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// One operation. Operands are values of the fusion; integer lists that fix
/// shapes are literals as the script wrote them (negative dims allowed).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Unary {
        kind: UnaryOp,
        x: ValueId,
    },
    Binary {
        kind: BinaryOp,
        a: ValueId,
        b: ValueId,
    },
    Where {
        cond: ValueId,
        a: ValueId,
        b: ValueId,
    },
    Cast {
        x: ValueId,
        dtype: DType,
    },
    Reduce {
        kind: ReduceOp,
        x: ValueId,
        dims: Vec<i64>,
        keepdim: bool,
        dtype: Option<DType>,
    },
    /// Outputs: mean, sum of squared deviations (M2), count.
    Welford {
        x: ValueId,
        dims: Vec<i64>,
    },
    /// Outputs: variance, mean.
    VarMean {
        x: ValueId,
        dims: Vec<i64>,
        correction: i64,
        keepdim: bool,
    },
    Broadcast {
        x: ValueId,
        is_broadcast_dim: Vec<bool>,
    },
    BroadcastInDim {
        x: ValueId,
        shape: Vec<i64>,
        broadcast_dims: Vec<i64>,
    },
    Expand {
        x: ValueId,
        shape: Vec<i64>,
    },
    Reshape {
        x: ValueId,
        new_shape: Vec<i64>,
    },
    Permute {
        x: ValueId,
        dims: Vec<i64>,
    },
    Squeeze {
        x: ValueId,
        dims: Vec<i64>,
    },
    Slice {
        x: ValueId,
        start: Vec<i64>,
        end: Vec<i64>,
        strides: Vec<i64>,
        manual_normalization: bool,
    },
    /// `widths` are pairs (before, after) starting from the last dimension, as in
    /// `torch.nn.functional.pad`; each is a constant integer scalar.
    Pad {
        x: ValueId,
        widths: Vec<ValueId>,
        value: Option<ValueId>,
    },
    /// With `manual_padding`, every input is already padded to the output extent
    /// along `dim` by a `pad`, and each position takes the input whose unpadded
    /// range covers it.
    Cat {
        xs: Vec<ValueId>,
        dim: i64,
        manual_padding: bool,
    },
    Full {
        shape: Vec<i64>,
        fill: ValueId,
        dtype: DType,
    },
    IndexSelect {
        x: ValueId,
        index: ValueId,
        dim: i64,
    },
    /// `torch.matmul`: 1-D operands gain and then lose a dim, batch dims broadcast.
    Matmul {
        a: ValueId,
        b: ValueId,
    },
    /// `a @ weight^T + bias`; weight is [*batch, out, in].
    Linear {
        a: ValueId,
        weight: ValueId,
        bias: Option<ValueId>,
    },
}

impl Op {
    /// The `fd.ops.NAME` spelling.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Unary { kind, .. } => kind.name(),
            Op::Binary { kind, .. } => kind.name(),
            Op::Where { .. } => "where",
            Op::Cast { .. } => "cast",
            Op::Reduce { kind, .. } => kind.name(),
            Op::Welford { .. } => "welford",
            Op::VarMean { .. } => "var_mean",
            Op::Broadcast { .. } => "broadcast",
            Op::BroadcastInDim { .. } => "broadcast_in_dim",
            Op::Expand { .. } => "expand",
            Op::Reshape { .. } => "reshape",
            Op::Permute { .. } => "permute",
            Op::Squeeze { .. } => "squeeze",
            Op::Slice { .. } => "slice",
            Op::Pad { .. } => "pad",
            Op::Cat { .. } => "cat",
            Op::Full { .. } => "full",
            Op::IndexSelect { .. } => "index_select",
            Op::Matmul { .. } => "matmul",
            Op::Linear { .. } => "linear",
        }
    }

    /// Every value the op reads, in argument order.
    pub fn operands(&self) -> Vec<ValueId> {
        // One list of operands per op: derived from `operands_mut` on a copy.
        self.clone()
            .operands_mut()
            .into_iter()
            .map(|v| *v)
            .collect()
    }

    /// The op's operands, in argument order, to rewrite in place (e.g. when
    /// duplicate values are merged).
    pub fn operands_mut(&mut self) -> Vec<&mut ValueId> {
        match self {
            Op::Unary { x, .. }
            | Op::Cast { x, .. }
            | Op::Reduce { x, .. }
            | Op::Welford { x, .. }
            | Op::VarMean { x, .. }
            | Op::Broadcast { x, .. }
            | Op::BroadcastInDim { x, .. }
            | Op::Expand { x, .. }
            | Op::Reshape { x, .. }
            | Op::Permute { x, .. }
            | Op::Squeeze { x, .. }
            | Op::Slice { x, .. } => vec![x],
            Op::Binary { a, b, .. } => vec![a, b],
            Op::Where { cond, a, b } => vec![cond, a, b],
            Op::Pad { x, widths, value } => {
                let mut v = vec![x];
                v.extend(widths.iter_mut());
                v.extend(value.iter_mut());
                v
            }
            Op::Cat { xs, .. } => xs.iter_mut().collect(),
            Op::Full { fill, .. } => vec![fill],
            Op::IndexSelect { x, index, .. } => vec![x, index],
            Op::Matmul { a, b } => vec![a, b],
            Op::Linear { a, weight, bias } => {
                let mut v = vec![a, weight];
                v.extend(bias.iter_mut());
                v
            }
        }
    }

    pub fn num_outputs(&self) -> usize {
        match self {
            Op::Welford { .. } => 3,
            Op::VarMean { .. } => 2,
            _ => 1,
        }
    }

    /// Every op name the frontend accepts after `fd.ops.`, for error messages.
    pub fn supported_names() -> Vec<&'static str> {
        let mut v: Vec<&'static str> = UnaryOp::ALL.iter().map(|o| o.name()).collect();
        v.extend(BinaryOp::ALL.iter().map(|o| o.name()));
        v.extend(ReduceOp::ALL.iter().map(|o| o.name()));
        v.extend([
            "amax",
            "amin",
            "where",
            "cast",
            "welford",
            "var_mean",
            "broadcast",
            "broadcast_in_dim",
            "expand",
            "reshape",
            "permute",
            "squeeze",
            "slice",
            "pad",
            "cat",
            "full",
            "index_select",
            "matmul",
            "linear",
        ]);
        v
    }
}
