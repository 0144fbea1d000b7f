//! The fusion IR of fusebench: a typed, validated fusion with nvFuser's
//! semantics for dtypes, promotion, broadcasting, reductions and resize ops.
//!
//! `frontend` parses scripts into it through [`FusionBuilder`]; `reference`
//! runs it; the JSON form is [`Fusion::to_json`] / [`Fusion::from_json`].

pub mod alloc_order;
pub mod analysis;
pub mod builder;
pub mod complex_math;
pub mod dtype;
pub mod dtype_ops;
pub mod elementwise;
pub mod error;
pub mod fusion;
pub mod gemm;
pub mod infer;
pub mod math;
pub mod op;
pub mod op_gemm;
pub mod op_index;
pub mod random;
pub mod recipe;
pub mod rng;
pub mod round;
pub mod scalar;
pub mod traffic;
pub mod value;

pub use builder::FusionBuilder;
pub use dtype::DType;
pub use error::IrError;
pub use fusion::{Fusion, Node, OutputAlias, OutputLayout, ScriptInfo, Syntax};
pub use op_gemm::GemmOp;
pub use op_index::IndexOp;
pub use op::{BinaryOp, Op, ReduceOp, RngDist, ScanOp, TernaryOp, UnaryOp};
pub use recipe::{InputIssue, InputRecipe};
pub use traffic::{traffic, traffic_with_views, InputShape, InputTraffic, Traffic};
pub use value::{Literal, TensorDecl, Value, ValueDef, ValueId};
