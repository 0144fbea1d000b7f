//! Where tests find the shared data (`shared/corpus`, `shared/golden`: real
//! fusions and nvFuser's recorded outputs, kept beside the repository as
//! `../shared`, or wherever `FUSEBENCH_SHARED` says), and how its absence shows.
//!
//! Without the data, a test wrapped in [`needs_corpus!`] or [`needs_golden!`]
//! is ignored with its reason (`cargo test` prints `ignored, needs shared/...`
//! and counts it in the summary). Under CI (`CI=true`) it is not ignored: it
//! runs and fails naming the path it looked for. Run ignored ones anyway with
//! `cargo test -- --include-ignored`.

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
