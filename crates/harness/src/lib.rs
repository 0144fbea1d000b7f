//! fusebench's one measurement path. A [`Subject`] (a prepared fusion, a step
//! of a program, a Python callable, a copy) says who it is and what it
//! launches; the [`Harness`] owns everything else: the cache policy
//! (`policy/`), the method (`method/`), the stopping rule (`fusebench_measure`'s
//! registry), clock readings, the completeness check of CUPTI's records
//! (`complete`), the copy ceiling timed the same way (`ceiling`) and the
//! record. Every front end (`fusebench bench`, `run`, `compare`, `peak`, the
//! Python module) is argument handling and printing around it.

mod ceiling;
pub mod clocks;
pub mod complete;
mod error;
pub mod fingerprint;
mod fusion;
mod harness;
pub mod method;
pub mod policy;
mod subject;

pub use fusebench_knobs::Flush;
pub use error::HarnessError;
pub use fusion::FusionSubject;
pub use harness::{Harness, Measured, Options};
pub use method::Choice;
pub use subject::{KernelFacts, Launch, Subject};
