//! Errors of the runtime, and the guard that turns cudarc panics into errors.

use std::panic::{catch_unwind, AssertUnwindSafe};

use cudarc::driver::result::DriverError;
use cudarc::nvrtc::result::NvrtcError;

use crate::device::Unavailable;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No usable GPU stack on this machine; the reason is meant for a person.
    #[error("GPU unavailable: {0}")]
    Unavailable(Unavailable),

    /// A driver call failed; `context` says which operation.
    #[error("{context}: {error}")]
    Driver { context: String, error: String },

    /// A cuBLASLt call failed, or the library is missing; `context` says which operation.
    #[error("{context}: {error}")]
    Blas { context: String, error: String },

    /// An NVRTC call other than the compilation itself failed.
    #[error("{context}: {error}")]
    Nvrtc { context: String, error: String },

    /// NVRTC rejected the source. `log` is NVRTC's own text.
    #[error(
        "NVRTC compilation failed:\n{log}\n--- source near the first error ---\n{source_excerpt}"
    )]
    Compile { log: String, source_excerpt: String },

    #[error("kernel `{name}` not found in the module ({hint})")]
    KernelNotFound { name: String, hint: String },

    /// Found when the stream was synchronized: launches are asynchronous, so the fault may
    /// come from any launch since the previous synchronize.
    #[error("kernel {kernel} failed: {error} ({launches} launch(es) since the previous synchronize; the fault can be in any of them)")]
    KernelFailed {
        kernel: String,
        launches: u64,
        error: String,
    },

    /// The caller asked for something that would fail or corrupt memory (bad sizes, bad launch).
    #[error("invalid request: {0}")]
    Invalid(String),

    /// cudarc panicked (a missing library or symbol); caught so callers see an error.
    #[error("{context}: cudarc panicked: {message}")]
    Panicked { context: String, message: String },
}

/// cudarc's Display is `Debug`; this gives "CUDA_ERROR_X: description".
pub(crate) fn describe_driver(e: &DriverError) -> String {
    let desc = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "no description".into());
    format!("{:?}: {desc}", e.0)
}

pub(crate) fn describe_nvrtc(e: &NvrtcError) -> String {
    format!("{:?}", e.0)
}

pub(crate) trait DriverContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, RuntimeError>;
}

impl<T> DriverContext<T> for Result<T, DriverError> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, RuntimeError> {
        self.map_err(|e| RuntimeError::Driver {
            context: context(),
            error: describe_driver(&e),
        })
    }
}

impl<T> DriverContext<T> for Result<T, NvrtcError> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, RuntimeError> {
        self.map_err(|e| RuntimeError::Nvrtc {
            context: context(),
            error: describe_nvrtc(&e),
        })
    }
}

/// cudarc loads libraries and symbols lazily and panics when one is missing; this is the
/// second line of defence after the explicit library checks in `device`.
pub(crate) fn guard<T>(
    context: &str,
    f: impl FnOnce() -> Result<T, RuntimeError>,
) -> Result<T, RuntimeError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(RuntimeError::Panicked {
            context: context.to_string(),
            message: panic_message(payload.as_ref()),
        }),
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_panics_into_errors() {
        let r: Result<(), _> = guard("probing", || panic!("Missing symbol cuFoo"));
        match r {
            Err(RuntimeError::Panicked { context, message }) => {
                assert_eq!(context, "probing");
                assert!(message.contains("cuFoo"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(guard("x", || Ok(3)).unwrap(), 3);
    }
}
