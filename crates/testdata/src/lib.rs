//! Where tests find the shared data (`shared/corpus`, `shared/golden`: real
//! fusions and nvFuser's recorded outputs, kept beside the repository as
//! `../shared`, or wherever `FUSEBENCH_SHARED` says), and how its absence shows;
//! likewise for tests that need a GPU.
//!
//! Without the data, a test wrapped in [`needs_corpus!`] or [`needs_golden!`]
//! is ignored with its reason (`cargo test` prints `ignored, needs shared/...`
//! and counts it in the summary). Under CI (`CI=true`) it is not ignored: it
//! runs and fails naming the path it looked for. Run ignored ones anyway with
//! `cargo test -- --include-ignored`.
//!
//! A test wrapped in [`needs_gpu!`] is ignored with its reason when no NVIDIA
//! driver (`libcuda.so.1`) was found where the dynamic loader looks when the
//! tests were built, CI or not (CI has no GPU); `FUSEBENCH_GPU_TESTS=1` at
//! build time keeps it in. Test binaries built without a driver and carried to
//! a GPU machine run there with `--include-ignored`; each such test still
//! probes for the GPU at run time and says it skipped when there is none.

use std::path::{Path, PathBuf};

/// The shared directory: `FUSEBENCH_SHARED` when set, else `../shared`
/// beside the repository.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("FUSEBENCH_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// `shared_dir()/rel`, which must exist: a test that reaches here without it
/// fails naming the path (under CI, or run with `--include-ignored`).
pub fn require(rel: &str) -> PathBuf {
    let p = shared_dir().join(rel);
    assert!(
        p.exists(),
        "the shared data is missing: looked for {} (set FUSEBENCH_SHARED, or put shared/ beside \
         the repository; the corpus and golden fusions come from the project's shared directory)",
        p.display()
    );
    p
}

/// The `.py` scripts of `shared_dir()/rel`, sorted by name; the directory must exist.
pub fn scripts(rel: &str) -> Vec<PathBuf> {
    let dir = require(rel);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    v.sort();
    v
}

/// Tests reading `shared/corpus`: ignored with a reason when it is absent (but never under CI).
#[cfg(missing_corpus)]
#[macro_export]
macro_rules! needs_corpus {
    ($($item:item)*) => { $(
        #[ignore = "needs shared/corpus: set FUSEBENCH_SHARED or put shared/ beside the repository"]
        $item
    )* };
}

/// Tests reading `shared/corpus`: ignored with a reason when it is absent (but never under CI).
#[cfg(not(missing_corpus))]
#[macro_export]
macro_rules! needs_corpus {
    ($($item:item)*) => { $($item)* };
}

/// Tests reading `shared/golden`: ignored with a reason when it is absent (but never under CI).
#[cfg(missing_golden)]
#[macro_export]
macro_rules! needs_golden {
    ($($item:item)*) => { $(
        #[ignore = "needs shared/golden: set FUSEBENCH_SHARED or put shared/ beside the repository"]
        $item
    )* };
}

/// Tests reading `shared/golden`: ignored with a reason when it is absent (but never under CI).
#[cfg(not(missing_golden))]
#[macro_export]
macro_rules! needs_golden {
    ($($item:item)*) => { $($item)* };
}

/// Tests reading both `shared/corpus` and `shared/golden`.
#[cfg(any(missing_corpus, missing_golden))]
#[macro_export]
macro_rules! needs_shared {
    ($($item:item)*) => { $(
        #[ignore = "needs shared/corpus and shared/golden: set FUSEBENCH_SHARED or put shared/ beside the repository"]
        $item
    )* };
}

/// Tests reading both `shared/corpus` and `shared/golden`.
#[cfg(not(any(missing_corpus, missing_golden)))]
#[macro_export]
macro_rules! needs_shared {
    ($($item:item)*) => { $($item)* };
}

/// Tests that need a GPU: ignored with a reason when no driver was found at
/// build time (CI included; `FUSEBENCH_GPU_TESTS=1` keeps them in). Tests
/// that also read the shared data start with `and corpus;`, `and golden;` or
/// `and shared;`: without a GPU the GPU is the reason given, with one the data
/// macro decides (a test carries one `#[ignore]`).
#[cfg(missing_gpu)]
#[macro_export]
macro_rules! needs_gpu {
    (and $data:ident; $($item:item)*) => { $crate::needs_gpu! { $($item)* } };
    ($($item:item)*) => { $(
        #[ignore = "needs a GPU: no NVIDIA driver (libcuda.so.1) found when the tests were built"]
        $item
    )* };
}

/// Tests that need a GPU: ignored with a reason when no driver was found at
/// build time (CI included; `FUSEBENCH_GPU_TESTS=1` keeps them in). Tests
/// that also read the shared data start with `and corpus;`, `and golden;` or
/// `and shared;`: without a GPU the GPU is the reason given, with one the data
/// macro decides (a test carries one `#[ignore]`).
#[cfg(not(missing_gpu))]
#[macro_export]
macro_rules! needs_gpu {
    (and corpus; $($item:item)*) => { $crate::needs_corpus! { $($item)* } };
    (and golden; $($item:item)*) => { $crate::needs_golden! { $($item)* } };
    (and shared; $($item:item)*) => { $crate::needs_shared! { $($item)* } };
    ($($item:item)*) => { $($item)* };
}
