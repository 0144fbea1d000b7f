use thiserror::Error;

#[derive(Error, Debug)]
pub enum ReportError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("writing the SVG: {0}")]
    Svg(String),
}

impl ReportError {
    pub fn file(path: &str, message: impl Into<String>) -> ReportError {
        ReportError::File {
            path: path.to_string(),
            message: message.into(),
        }
    }
}
