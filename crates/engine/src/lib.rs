//! The GPU engine: a fusion and its inputs in, kernels planned by
//! `fusebench-codegen`, compiled and launched through `fusebench-runtime`,
//! outputs back as reference tensors so they compare with the CPU directly.

mod env;
mod error;
mod prepared;
mod program;
mod time;
mod transfer;

pub use env::{environment, read_clocks};
pub use error::EngineError;
pub use prepared::{Bound, Engine, Prepared};
pub use program::{time_program, ProgramTimes};
pub use time::{cold_input_sets, cold_setup, copy_ceiling, copy_time, rotation_copies, Timed};
