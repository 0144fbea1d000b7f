//! Results in the forms other tools read (nvbench, pytest-benchmark, Google
//! Benchmark), comparisons of two sets of results that can gate a CI job,
//! and markdown and SVG reports. Every reader turns a file into `Entry`s,
//! the one shape `diff` and the reports work on.

pub mod diff;
mod entry;
mod error;
pub mod formats;
pub mod markdown;
pub mod svg;

pub use diff::{diff, Across, Diff, Pair, Verdict};
pub use entry::{Entry, Origin, Tool};
pub use error::ReportError;
pub use formats::{load, load_paths};
