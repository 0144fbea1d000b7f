//! Decides at build time whether tests that read the shared data are marked
//! ignored: libtest cannot skip at run time, and a test that returns early
//! reads "ok". Under CI (CI=true) nothing is ignored, so a missing copy fails
//! with the path looked for.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rerun-if-env-changed=FUSEBENCH_SHARED");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(missing_corpus)");
    println!("cargo::rustc-check-cfg=cfg(missing_golden)");
    let shared = std::env::var_os("FUSEBENCH_SHARED").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared")
    });
    // Rerun when the data appears or goes (a missing path reruns this script
    // on every build, which is cheap: dependents rebuild only if its output changes).
    for dir in ["corpus", "golden"] {
        println!("cargo::rerun-if-changed={}", shared.join(dir).display());
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if ci {
        return;
    }
    if !shared.join("corpus").is_dir() {
        println!("cargo::rustc-cfg=missing_corpus");
    }
    if !shared.join("golden").is_dir() {
        println!("cargo::rustc-cfg=missing_golden");
    }
}
