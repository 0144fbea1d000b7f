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

pub use crate::elementwise::{BinaryOp, Rule, TernaryOp, UnaryOp};

named_enum!(
    /// The distributions of the random ops (`fd.ops.uniform`, `fd.ops.normal`).
    RngDist { Uniform => "uniform", Normal => "normal" }
);

named_enum!(
    /// Reductions producing one tensor. `amax`/`amin` are accepted as spellings of max/min.
    ReduceOp { Sum => "sum", Max => "max", Min => "min", Prod => "prod" }
);

named_enum!(
    /// Inclusive scans along one dim (nvFuser's `scan` with Add/Mul/Min/Max).
    ScanOp { Cumsum => "cumsum", Cumprod => "cumprod", Cummin => "cummin", Cummax => "cummax" }
);

impl UnaryOp {
    /// Ops that nvFuser promotes integer inputs of to float (`float_op_config`).
    pub fn promotes_int_to_float(self) -> bool {
        matches!(self.rule(), Rule::Float | Rule::FloatOnly)
    }
}

impl RngDist {
    /// The `*_like` spelling: `rand_like`, `randn_like`.
    pub fn like_name(self) -> &'static str {
        match self {
            RngDist::Uniform => "rand_like",
            RngDist::Normal => "randn_like",
        }
    }
}

impl BinaryOp {
    /// The six comparisons (eq, ne, lt, le, gt, ge).
    pub fn is_comparison(self) -> bool {
        self.rule() == Rule::Compare
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
    /// An op of the table's ternary kind (lerp, clamp, threshold).
    Ternary {
        kind: TernaryOp,
        a: ValueId,
        b: ValueId,
        c: ValueId,
    },
    Where {
        cond: ValueId,
        a: ValueId,
        b: ValueId,
    },
    /// Float to an integer dtype truncates toward zero, saturates at the
    /// dtype's limits and sends NaN to 0, on the CPU and the GPU alike
    /// (C leaves those cases undefined; docs/fuzzing.md, "Float to integer").
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
    /// Indexing and ordering ops (`crate::op_index`).
    Index(crate::op_index::IndexOp),
    /// `uniform(minval, maxval, shape)` / `normal(mean, std, shape)`: nvFuser's
    /// Philox stream; without `seed`/`offset` PyTorch's generator is used (see `rng.rs`).
    Rng {
        dist: RngDist,
        a: ValueId,
        b: ValueId,
        shape: Vec<i64>,
        seed: Option<ValueId>,
        offset: Option<ValueId>,
        dtype: DType,
    },
    /// `rand_like(x)` / `randn_like(x)`: shape and dtype of `x`, unseeded.
    RngLike {
        dist: RngDist,
        x: ValueId,
    },
    /// `complex(real, imag)`, `real(x)`, `imag(x)`.
    Complex {
        kind: crate::dtype_ops::ComplexOp,
        xs: Vec<ValueId>,
    },
    /// Inclusive scan of `x` along `dim`; the first element is combined with
    /// `init` (a scalar) when given, else with the op's identity.
    Scan {
        kind: ScanOp,
        x: ValueId,
        dim: i64,
        init: Option<ValueId>,
    },
    /// `set`, and `segment_set` (`segment`): a copy of `x`. nvFuser also ends
    /// a segment at a `segment_set`; here it is the same copy.
    Set { x: ValueId, segment: bool },
    /// `stride_order`: a copy of `x` allocated in `stride_order` (the rank of
    /// each dim from the innermost, as in define_tensor); the values are `x`'s.
    StrideOrder { x: ValueId, stride_order: Vec<i64> },
    /// `size`: the extent of dim `dim` of `x`, an Index scalar known when the
    /// fusion is built (shapes are concrete here).
    Size { x: ValueId, dim: i64 },
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
    /// Attention and grouped/scaled products (`sdpfa_*`, `grouped_mm`, `scaled_mm`).
    Gemm(crate::op_gemm::GemmOp),
}

impl Op {
    /// The `fd.ops.NAME` spelling.
    /// Whether the op only moves or repeats its operand's elements (a view:
    /// broadcasts, expands, reshapes, permutes, squeezes, slices), computing
    /// nothing.
    pub fn is_view(&self) -> bool {
        matches!(
            self,
            Op::Broadcast { .. }
                | Op::BroadcastInDim { .. }
                | Op::Expand { .. }
                | Op::Reshape { .. }
                | Op::Permute { .. }
                | Op::Squeeze { .. }
                | Op::Slice { .. }
        )
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Unary { kind, .. } => kind.name(),
            Op::Binary { kind, .. } => kind.name(),
            Op::Ternary { kind, .. } => kind.name(),
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
            Op::Index(o) => o.name(),
            Op::Rng { dist, .. } => dist.name(),
            Op::RngLike { dist, .. } => dist.like_name(),
            Op::Complex { kind, .. } => kind.name(),
            Op::Scan { kind, .. } => kind.name(),
            Op::Set { segment: false, .. } => "set",
            Op::Set { segment: true, .. } => "segment_set",
            Op::StrideOrder { .. } => "stride_order",
            Op::Size { .. } => "size",
            Op::Matmul { .. } => "matmul",
            Op::Linear { .. } => "linear",
            Op::Gemm(o) => o.name(),
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
            | Op::Slice { x, .. }
            | Op::Set { x, .. }
            | Op::StrideOrder { x, .. }
            | Op::Size { x, .. } => vec![x],
            Op::Binary { a, b, .. } => vec![a, b],
            Op::Where { cond, a, b } => vec![cond, a, b],
            Op::Ternary { a, b, c, .. } => vec![a, b, c],
            Op::Pad { x, widths, value } => {
                let mut v = vec![x];
                v.extend(widths.iter_mut());
                v.extend(value.iter_mut());
                v
            }
            Op::Cat { xs, .. } => xs.iter_mut().collect(),
            Op::Full { fill, .. } => vec![fill],
            Op::IndexSelect { x, index, .. } => vec![x, index],
            Op::Index(o) => o.operands_mut(),
            Op::Rng {
                a, b, seed, offset, ..
            } => {
                let mut v = vec![a, b];
                v.extend(seed.iter_mut());
                v.extend(offset.iter_mut());
                v
            }
            Op::RngLike { x, .. } => vec![x],
            Op::Complex { xs, .. } => xs.iter_mut().collect(),
            Op::Scan { x, init, .. } => std::iter::once(x).chain(init.iter_mut()).collect(),
            Op::Matmul { a, b } => vec![a, b],
            Op::Linear { a, weight, bias } => {
                let mut v = vec![a, weight];
                v.extend(bias.iter_mut());
                v
            }
            Op::Gemm(o) => o.operands_mut(),
        }
    }

    pub fn num_outputs(&self) -> usize {
        match self {
            Op::Welford { .. } => 3,
            Op::VarMean { .. } => 2,
            Op::Index(o) => o.num_outputs(),
            Op::Gemm(o) => o.num_outputs(),
            _ => 1,
        }
    }

    /// Every op name the frontend accepts after `fd.ops.`, for error messages,
    /// but the ones it builds from other ops (the frontend's `COMPOSITES`).
    pub fn supported_names() -> Vec<&'static str> {
        let mut v: Vec<&'static str> = UnaryOp::ALL.iter().map(|o| o.name()).collect();
        v.extend(BinaryOp::ALL.iter().map(|o| o.name()));
        v.extend(TernaryOp::ALL.iter().map(|o| o.name()));
        v.extend(ReduceOp::ALL.iter().map(|o| o.name()));
        v.extend(ScanOp::ALL.iter().map(|o| o.name()));
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
            "uniform",
            "normal",
            "rand_like",
            "randn_like",
            "complex",
            "real",
            "imag",
            // Vectors of sizes: `shape`, `tensor_sizes` and `at` read into
            // `size` values (see the frontend's `ops_defn`).
            "set",
            "segment_set",
            "stride_order",
            "size",
            "shape",
            "tensor_sizes",
            "at",
            "matmul",
            "linear",
        ]);
        v.extend(crate::op_index::IndexOp::NAMES);
        v.extend(crate::op_gemm::GemmOp::NAMES);
        v
    }
}
