//! On-disk cache of compiled kernel images, so a fusion seen before costs a file read instead
//! of an NVRTC run (hundreds of milliseconds).
//!
//! The key is SHA-256 (stable across Rust releases and machines, unlike std's hasher) over
//! everything that changes the binary: source, target, driver and NVRTC versions, options.
//! Writes go to a temporary file in the same directory and are renamed into place, so a
//! reader sees either no entry or a whole one, even with concurrent writers.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::arch::ImageKind;

/// Bumped whenever the meaning of an entry changes, which orphans the old entries.
pub const CACHE_FORMAT: &str = "fusebench-kernel-cache-v1";

/// Everything that determines the compiled image.
#[derive(Debug, Clone, Copy)]
pub struct CacheKeyParts<'a> {
    pub source: &'a str,
    pub arch: &'a str,
    pub driver_version: i32,
    pub nvrtc_version: (u32, u32),
    pub options: &'a [String],
}

/// 64 hex digits.
pub fn cache_key(p: &CacheKeyParts<'_>) -> String {
    let mut h = Sha256::new();
    // Each field is length-prefixed so that no two different inputs hash the same bytes.
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(CACHE_FORMAT.as_bytes());
    field(p.source.as_bytes());
    field(p.arch.as_bytes());
    field(&p.driver_version.to_le_bytes());
    field(&p.nvrtc_version.0.to_le_bytes());
    field(&p.nvrtc_version.1.to_le_bytes());
    field(&(p.options.len() as u64).to_le_bytes());
    for o in p.options {
        field(o.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache directory: `$FUSEBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/fusebench/kernels`, else
/// `$HOME/.cache/fusebench/kernels`. `var` reads the environment (a parameter so tests need not
/// change the process environment).
pub fn default_cache_dir(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("FUSEBENCH_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    // The XDG spec says relative values are to be ignored.
    if let Some(xdg) = set("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(xdg.join("fusebench").join("kernels"));
    }
    set("HOME").map(|home| {
        PathBuf::from(home)
            .join(".cache")
            .join("fusebench")
            .join("kernels")
    })
}

#[derive(Debug, Clone)]
pub struct CachedImage {
    pub kind: ImageKind,
    pub bytes: Vec<u8>,
    pub path: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCache {
    dir: Option<PathBuf>,
}

impl KernelCache {
    /// From the environment; `FUSEBENCH_NO_KERNEL_CACHE=1` turns it off (for measuring compile
    /// times). An invalid FUSEBENCH_* setting is an error naming what is accepted.
    pub fn from_env() -> Result<Self, crate::RuntimeError> {
        let k = fusebench_knobs::get().map_err(|e| crate::RuntimeError::Invalid(e.to_string()))?;
        if k.no_kernel_cache {
            return Ok(Self::disabled());
        }
        Ok(Self {
            dir: default_cache_dir(|name| match name {
                "FUSEBENCH_CACHE_DIR" => k.cache_dir.clone().map(Into::into),
                other => std::env::var_os(other),
            }),
        })
    }

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: Some(dir.into()),
        }
    }

    pub fn disabled() -> Self {
        Self { dir: None }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    pub fn entry_path(&self, key: &str, kind: ImageKind) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{key}.{}", kind.extension())))
    }

    /// A valid entry for `key`, preferring a CUBIN. An entry that fails the sanity check is
    /// deleted so the next compile rewrites it; any I/O problem reads as a miss.
    pub fn load(&self, key: &str) -> Option<CachedImage> {
        for kind in [ImageKind::Cubin, ImageKind::Ptx] {
            let path = self.entry_path(key, kind)?;
            let Ok(bytes) = fs::read(&path) else { continue };
            if looks_valid(kind, &bytes) {
                return Some(CachedImage { kind, bytes, path });
            }
            let _ = fs::remove_file(&path);
        }
        None
    }

    /// Writes the entry atomically and returns its path.
    pub fn store(&self, key: &str, kind: ImageKind, bytes: &[u8]) -> io::Result<PathBuf> {
        let (Some(dir), Some(path)) = (self.dir.as_ref(), self.entry_path(key, kind)) else {
            return Err(io::Error::other("kernel cache is disabled"));
        };
        fs::create_dir_all(dir)?;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{key}.{}.{n}.tmp", std::process::id()));
        let write = || -> io::Result<()> {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        };
        write().inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })?;
        Ok(path)
    }

    pub fn remove(&self, key: &str) {
        for kind in [ImageKind::Cubin, ImageKind::Ptx] {
            if let Some(p) = self.entry_path(key, kind) {
                let _ = fs::remove_file(p);
            }
        }
    }
}

/// Guards against truncated or foreign files: the driver should never see garbage.
fn looks_valid(kind: ImageKind, bytes: &[u8]) -> bool {
    match kind {
        ImageKind::Cubin => bytes.len() > 64 && bytes.starts_with(b"\x7fELF"),
        ImageKind::Ptx => {
            let text = String::from_utf8_lossy(bytes);
            text.contains(".version") && text.contains(".target")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(source: &'a str, options: &'a [String]) -> CacheKeyParts<'a> {
        CacheKeyParts {
            source,
            arch: "sm_90",
            driver_version: 13000,
            nvrtc_version: (13, 0),
            options,
        }
    }

    fn fake_cubin() -> Vec<u8> {
        let mut b = b"\x7fELF".to_vec();
        b.extend(std::iter::repeat_n(7u8, 200));
        b
    }

    #[test]
    fn key_is_stable_across_builds() {
        // A fixed input must keep its key: a change here silently invalidates every cache.
        let opts = vec!["--std=c++17".to_string()];
        let k = cache_key(&parts("__global__ void k() {}", &opts));
        assert_eq!(k.len(), 64);
        assert!(k.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(k, cache_key(&parts("__global__ void k() {}", &opts)));
        // Computed independently (Python hashlib over the same length-prefixed fields).
        assert_eq!(
            k, "2a22b0894134f52e5e37bc7c02e5086be3a8efc22a8cd4010114d5acd333640e",
            "update only with a CACHE_FORMAT bump"
        );
    }

    #[test]
    fn key_changes_with_every_input() {
        let opts = vec!["--std=c++17".to_string()];
        let base = parts("src", &opts);
        let k = cache_key(&base);
        let other_opts = vec!["--std=c++17".to_string(), "-lineinfo".to_string()];
        let variants = [
            CacheKeyParts {
                source: "src2",
                ..base
            },
            CacheKeyParts {
                arch: "sm_89",
                ..base
            },
            CacheKeyParts {
                driver_version: 12080,
                ..base
            },
            CacheKeyParts {
                nvrtc_version: (12, 8),
                ..base
            },
            CacheKeyParts {
                options: &other_opts,
                ..base
            },
        ];
        for v in variants {
            assert_ne!(cache_key(&v), k, "{v:?}");
        }
        // Length prefixes keep ("ab","c") and ("a","bc") apart.
        let o1 = vec!["ab".to_string(), "c".to_string()];
        let o2 = vec!["a".to_string(), "bc".to_string()];
        assert_ne!(cache_key(&parts("s", &o1)), cache_key(&parts("s", &o2)));
    }

    #[test]
    fn directory_precedence() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(*v))
            }
        };
        assert_eq!(
            default_cache_dir(env(&[
                ("FUSEBENCH_CACHE_DIR", "/x"),
                ("XDG_CACHE_HOME", "/y"),
                ("HOME", "/h")
            ])),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(
            default_cache_dir(env(&[
                ("FUSEBENCH_CACHE_DIR", ""),
                ("XDG_CACHE_HOME", "/y"),
                ("HOME", "/h")
            ])),
            Some(PathBuf::from("/y/fusebench/kernels"))
        );
        assert_eq!(
            default_cache_dir(env(&[("XDG_CACHE_HOME", "relative"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/fusebench/kernels"))
        );
        assert_eq!(default_cache_dir(env(&[])), None);
    }

    #[test]
    fn store_then_load_round_trips_without_leftovers() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(tmp.path().join("nested").join("kernels"));
        let key = "ab".repeat(32);
        assert!(cache.load(&key).is_none());
        let bytes = fake_cubin();
        let path = cache.store(&key, ImageKind::Cubin, &bytes).unwrap();
        assert_eq!(path, cache.entry_path(&key, ImageKind::Cubin).unwrap());
        let got = cache.load(&key).unwrap();
        assert_eq!(
            (got.kind, got.bytes, got.path),
            (ImageKind::Cubin, bytes.clone(), path.clone())
        );
        // Overwriting an existing entry works (rename replaces).
        cache.store(&key, ImageKind::Cubin, &bytes).unwrap();
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            names,
            vec![format!("{key}.cubin")],
            "no temporary files may remain"
        );
        cache.remove(&key);
        assert!(cache.load(&key).is_none());
    }

    #[test]
    fn ptx_entries_and_corrupt_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(tmp.path());
        let key = "cd".repeat(32);
        let ptx = b"//\n.version 9.0\n.target sm_90\n.address_size 64\n\0";
        cache.store(&key, ImageKind::Ptx, ptx).unwrap();
        assert_eq!(cache.load(&key).unwrap().kind, ImageKind::Ptx);
        // A truncated CUBIN is not handed to the driver and is removed.
        let bad = cache.entry_path(&key, ImageKind::Cubin).unwrap();
        fs::write(&bad, b"\x7fEL").unwrap();
        assert_eq!(cache.load(&key).unwrap().kind, ImageKind::Ptx);
        assert!(!bad.exists());
    }

    #[test]
    fn disabled_cache_misses_and_refuses_writes() {
        let cache = KernelCache::disabled();
        assert!(cache.dir().is_none());
        assert!(cache.load("00").is_none());
        assert!(cache.store("00", ImageKind::Cubin, &fake_cubin()).is_err());
    }

    #[test]
    fn unwritable_directory_is_an_error_not_a_panic() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("not-a-dir");
        fs::write(&file, b"x").unwrap();
        let cache = KernelCache::at(file.join("kernels"));
        assert!(cache.store("ef", ImageKind::Cubin, &fake_cubin()).is_err());
        assert!(cache.load("ef").is_none());
    }
}
