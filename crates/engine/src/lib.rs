//! The GPU engine: a fusion and its inputs in, kernels planned by
//! `fusebench-codegen`, compiled and launched through `fusebench-runtime`,
//! outputs back as reference tensors so they compare with the CPU directly.
//! Timing is not here: `fusebench-harness` measures a prepared fusion.

mod error;
mod inplace;
mod prepared;
mod products;
mod transfer;

pub use error::EngineError;
pub use inplace::InPlace;
pub use prepared::{device_of, input_layouts, planner_device, Bound, Engine, Prepared, POISONS};
