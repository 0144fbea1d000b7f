//! How much host memory a run may take, checked before anything is allocated:
//! an allocation the system cannot give aborts the process (Rust's allocator
//! does not return an error), which would lose the file's name and every
//! later fusion's report.

use crate::ExecError;

/// Bytes this process can still allocate without swapping or being killed:
/// the kernel's `MemAvailable`, lowered to what is left under a cgroup v2
/// memory limit (a container sees the host's `MemAvailable`). `None` where
/// neither can be read (not Linux): then only sizes no allocation can hold
/// are refused.
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib.saturating_mul(1024))
    });
    let cgroup = || -> Option<u64> {
        let read = |name: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{name}")).ok();
        let max: u64 = read("memory.max")?.trim().parse().ok()?; // "max": no limit
        let used: u64 = read("memory.current")?.trim().parse().ok()?;
        Some(max.saturating_sub(used))
    };
    match (meminfo, cgroup()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The most one process may ask for at once on any system.
const ADDRESSABLE: u64 = isize::MAX as u64;

/// The bytes of `elements` elements of `size` bytes each, `None` past what
/// any allocation can hold.
pub fn bytes(elements: usize, size: usize) -> Option<u64> {
    (elements as u64)
        .checked_mul(size as u64)
        .filter(|&b| b <= ADDRESSABLE)
}

/// A human-readable size: "4.0 TiB (4398046511104 bytes)".
pub fn describe(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut v, mut u) = (bytes as f64, 0);
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {} ({bytes} bytes)", units[u])
    }
}

/// Checks that `needed` more bytes (for `what`) fit in `available` (as
/// [`available`] reads it), the error saying both.
pub fn fits(what: &str, needed: Option<u64>, available: Option<u64>) -> Result<(), ExecError> {
    let Some(needed) = needed else {
        return Err(ExecError::TooLarge(format!(
            "{what} needs more bytes than any allocation can hold"
        )));
    };
    match available {
        Some(a) if needed > a => Err(ExecError::TooLarge(format!(
            "{what} needs {} of host memory, and {} is available",
            describe(needed),
            describe(a)
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_that_overflow_are_refused() {
        assert_eq!(bytes(1 << 40, 4), Some(1 << 42));
        assert_eq!(bytes(usize::MAX, 2), None);
        assert!(fits("x", bytes(usize::MAX, 2), None).is_err());
        assert!(fits("x", Some(10), Some(9)).is_err());
        assert!(fits("x", Some(9), Some(9)).is_ok());
        assert!(fits("x", Some(1 << 50), None).is_ok());
    }

    #[test]
    fn available_memory_reads_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(available().is_some_and(|a| a > 0));
        }
    }

    #[test]
    fn sizes_read_plainly() {
        assert_eq!(describe(512), "512 bytes");
        assert_eq!(describe(1 << 42), "4.0 TiB (4398046511104 bytes)");
    }
}
