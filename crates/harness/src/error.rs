use thiserror::Error;

#[derive(Error, Debug)]
pub enum HarnessError {
    #[error(transparent)]
    Runtime(#[from] fusebench_runtime::RuntimeError),
    #[error(transparent)]
    Engine(#[from] fusebench_engine::EngineError),
    /// A sample whose kernel records do not match what was launched: rejected, never summed.
    #[error("{0}")]
    Incomplete(String),
    /// A measurement asked for that cannot be made (a method that cannot time a subject).
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Record(#[from] fusebench_measure::MeasureError),
    /// A FUSEBENCH_* setting that is not accepted.
    #[error(transparent)]
    Settings(#[from] fusebench_knobs::KnobError),
    /// The subject's own work failed (a Python exception, say); kept whole for the caller.
    #[error("{0}")]
    Subject(Box<dyn std::error::Error + Send + Sync>),
}

impl HarnessError {
    pub(crate) fn driver(what: &str, e: impl std::fmt::Display) -> HarnessError {
        HarnessError::Runtime(fusebench_runtime::RuntimeError::Invalid(format!(
            "{what}: {e}"
        )))
    }
}
