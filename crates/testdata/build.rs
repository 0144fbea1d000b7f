//! Decides at build time whether tests that read the shared data, or that
//! need a GPU, are marked ignored: libtest cannot skip at run time, and a test
//! that returns early reads "ok". Under CI (CI=true) no data test is ignored,
//! so a missing copy fails with the path looked for; GPU tests are ignored
//! there too when no driver is found (CI has no GPU).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The NVIDIA driver's library, which `fusebench_runtime` loads.
const DRIVER: &str = "libcuda.so.1";

fn main() {
    println!("cargo::rerun-if-env-changed=FUSEBENCH_SHARED");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(missing_corpus)");
    println!("cargo::rustc-check-cfg=cfg(missing_golden)");
    println!("cargo::rustc-check-cfg=cfg(missing_gpu)");
    if !gpu_tests() {
        println!("cargo::rustc-cfg=missing_gpu");
    }
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

/// Whether the GPU tests are built to run: `FUSEBENCH_GPU_TESTS=1` forces
/// them in (a GPU machine whose driver lives elsewhere), `0` marks them
/// ignored, and unset it is whether the dynamic loader would find the driver.
fn gpu_tests() -> bool {
    println!("cargo::rerun-if-env-changed=FUSEBENCH_GPU_TESTS");
    println!("cargo::rerun-if-env-changed=LD_LIBRARY_PATH");
    match std::env::var("FUSEBENCH_GPU_TESTS").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        Ok(v) => panic!(
            "FUSEBENCH_GPU_TESTS={v:?} is not accepted: FUSEBENCH_GPU_TESTS takes 0 or 1 (default: \
             whether an NVIDIA driver, {DRIVER}, is found when the tests are built)"
        ),
        Err(_) => driver_found(),
    }
}

/// Whether `DRIVER` is where the dynamic loader looks: its cache (`ldconfig
/// -p`), `LD_LIBRARY_PATH`, or the usual library directories.
fn driver_found() -> bool {
    // Installing a driver updates the loader's cache: look again then.
    if Path::new("/etc/ld.so.cache").exists() {
        println!("cargo::rerun-if-changed=/etc/ld.so.cache");
    }
    let cached = ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .iter()
        .any(|ldconfig| {
            Command::new(ldconfig).arg("-p").output().is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.trim_start().starts_with(&format!("{DRIVER} ")))
            })
        });
    let from_env = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let usual = [
        "/lib",
        "/lib64",
        "/usr/lib",
        "/usr/lib64",
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/local/nvidia/lib64",
        "/usr/local/nvidia/lib",
        "/usr/lib/wsl/lib",
        "/run/opengl-driver/lib",
    ];
    cached
        || from_env
            .split(':')
            .filter(|d| !d.is_empty())
            .chain(usual)
            .any(|d| Path::new(d).join(DRIVER).exists())
}
