use thiserror::Error;

#[derive(Error, Debug, Clone, PartialEq)]
pub enum CodegenError {
    /// The fusion uses something the engine has no kernel for yet.
    #[error("not supported by the GPU engine: {0}")]
    Unsupported(String),
    /// A schedule's assumptions do not hold for this fusion; the segmenter
    /// falls back to a more general schedule when it sees this.
    #[error("schedule does not fit: {0}")]
    NoFit(String),
    /// Larger than the device can launch.
    #[error("too large for the GPU: {0}")]
    TooLarge(String),
}
