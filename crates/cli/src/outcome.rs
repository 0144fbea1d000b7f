//! What became of each file of a verb that runs many (`check`, `bench`): one
//! home for how a file's failure is caught, kept and counted. A file that
//! fails (an error, or a panic: a bug in fusebench must not hide the results
//! of the other files) is a failure with its message, the run goes on with
//! the next file, and the run exits with `exit::FAILED` when any failed.

use crate::exit;
use serde::{Deserialize, Serialize};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;

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
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(p) => Err(format!(
            "internal error (a bug in fusebench, please report it): {}",
            crate::panic_message(&p)
        )),
    }
}

/// The exit code of a run over files: `exit::FAILED` when any failed.
pub fn exit_code(failed: usize) -> ExitCode {
    ExitCode::from(if failed == 0 { exit::OK } else { exit::FAILED })
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
        assert_eq!(exit_code(0), ExitCode::from(exit::OK));
        assert_eq!(exit_code(2), ExitCode::from(exit::FAILED));
    }
}
