use thiserror::Error;

#[derive(Error, Debug)]
pub enum EngineError {
    #[error("no GPU: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Codegen(#[from] fusebench_codegen::CodegenError),
    #[error(transparent)]
    Runtime(#[from] fusebench_runtime::RuntimeError),
    #[error("{0}")]
    Tensor(#[from] fusebench_host::ExecError),
    #[error("inputs: {0}")]
    Inputs(String),
    /// More device memory than is free (checked before allocating).
    #[error("too large: {0}")]
    TooLarge(String),
    /// A library the fusion needs that could not be loaded (cuBLASLt for matrix products).
    #[error("{0}")]
    Library(String),
    /// A FUSEBENCH_* setting that is not accepted.
    #[error("{0}")]
    Settings(String),
}
