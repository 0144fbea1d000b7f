//! The fusion IR of fusebench: a typed, validated fusion with nvFuser's
//! semantics for dtypes, promotion, broadcasting, reductions and resize ops.
//!
//! `frontend` parses scripts into it through [`FusionBuilder`]; `reference`
//! runs it; the JSON form is [`Fusion::to_json`] / [`Fusion::from_json`].

pub mod analysis;
pub mod builder;
pub mod dtype;
pub mod error;
pub mod fusion;
pub mod gemm;
pub mod infer;
pub mod op;
pub mod recipe;
pub mod round;
pub mod scalar;
pub mod traffic;
pub mod value;

pub use builder::FusionBuilder;
pub use dtype::DType;
pub use error::IrError;
pub use fusion::{Fusion, Node, ScriptInfo, Syntax};
pub use op::{BinaryOp, Op, ReduceOp, UnaryOp};
pub use recipe::{InputIssue, InputRecipe};
pub use traffic::{traffic, InputShape, InputTraffic, Traffic};
pub use value::{Literal, TensorDecl, Value, ValueDef, ValueId};
