use thiserror::Error;

/// Why a fusion or one of its ops is not valid.
#[derive(Error, Debug, Clone, PartialEq)]
pub enum IrError {
    /// An op whose operands or arguments break its rules.
    #[error("fd.ops.{op}: {message}")]
    Op { op: String, message: String },
    /// A `define_tensor` / `define_scalar` / `add_output` that is not valid.
    #[error("{what}: {message}")]
    Definition { what: String, message: String },
    /// A stored fusion (JSON) that does not describe a valid fusion.
    #[error("fusion JSON: {0}")]
    Json(String),
}

impl IrError {
    pub fn op(op: &str, message: impl Into<String>) -> Self {
        IrError::Op {
            op: op.to_string(),
            message: message.into(),
        }
    }
    pub fn def(what: &str, message: impl Into<String>) -> Self {
        IrError::Definition {
            what: what.to_string(),
            message: message.into(),
        }
    }
}
