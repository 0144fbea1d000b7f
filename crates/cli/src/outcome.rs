//! What became of each file of a verb that runs many (`check`, `bench`): one
//! home for how a file's failure is caught, kept and counted. A file that
//! fails (an error, or a panic: a bug in fusebench must not hide the results
//! of the other files) is a failure with its message, the run goes on with
//! the next file, and the run exits with `exit::FAILED` when any failed, or
//! with `exit::USAGE` when one needed a library that could not be loaded
//! (cuBLASLt for matrix products), as a run with no GPU does.

use crate::exit;
use serde::{Deserialize, Serialize};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set when a file failed for want of a library (`EngineError::Library`).
static LIBRARY_MISSING: AtomicBool = AtomicBool::new(false);

/// A file that failed, and why (what was being done, and what went wrong).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Failure {
    pub file: String,
    pub error: String,
}

/// `work` run for one file; its error or panic comes back as the message.
pub fn attempt<T>(work: impl FnOnce() -> anyhow::Result<T>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => {
            if wants_library(&e) {
                LIBRARY_MISSING.store(true, Ordering::Relaxed);
            }
            Err(format!("{e:#}"))
        }
        Err(p) => Err(format!(
            "internal error (a bug in fusebench, please report it): {}",
            crate::panic_message(&p)
        )),
    }
}

/// Whether `e` is, or was caused by, a library that could not be loaded.
fn wants_library(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| matches!(c.downcast_ref(), Some(fusebench_engine::EngineError::Library(_))))
}

/// The exit code of a run over files: `exit::FAILED` when any failed,
/// `exit::USAGE` when one failed for want of a library.
pub fn exit_code(failed: usize) -> ExitCode {
    code(failed, LIBRARY_MISSING.load(Ordering::Relaxed))
}

fn code(failed: usize, library_missing: bool) -> ExitCode {
    ExitCode::from(match failed {
        0 => exit::OK,
        _ if library_missing => exit::USAGE,
        _ => exit::FAILED,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_and_panics_are_failures_with_their_message() {
        assert_eq!(attempt(|| Ok(3)), Ok(3));
        let e =
            attempt::<()>(|| Err(anyhow::anyhow!("too large").context("preparing"))).unwrap_err();
        assert_eq!(e, "preparing: too large");
        let e = attempt::<()>(|| panic!("index out of range")).unwrap_err();
        assert!(
            e.contains("a bug in fusebench") && e.ends_with("index out of range"),
            "{e}"
        );
        assert_eq!(code(0, false), ExitCode::from(exit::OK));
        assert_eq!(code(2, false), ExitCode::from(exit::FAILED));
    }

    #[test]
    fn a_missing_library_is_a_usage_error() {
        let e = anyhow::Error::new(fusebench_engine::EngineError::Library("cuBLASLt could not be loaded".into()))
            .context("preparing");
        assert!(wants_library(&e));
        assert!(!wants_library(&anyhow::anyhow!("too large").context("preparing")));
        assert_eq!(code(1, true), ExitCode::from(exit::USAGE));
        assert_eq!(code(0, true), ExitCode::from(exit::OK));
    }
}
