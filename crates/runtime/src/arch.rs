//! Which NVRTC target a device gets.
//!
//! cudarc's `CompileOptions.arch` wants a `&'static str`, so the names are static: literals for
//! the architectures that exist today, and a leaked string (once per architecture, per
//! process) for any that appear later.

use std::collections::HashMap;
use std::sync::Mutex;

use cudarc::nvrtc::sys as nsys;
use serde::{Deserialize, Serialize};

/// What NVRTC produces for the target: a CUBIN runs as is, PTX is JIT-compiled by the driver
/// at load time (slower to load, and the code may differ from the CUBIN path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ImageKind {
    Cubin,
    Ptx,
}

impl ImageKind {
    pub fn extension(self) -> &'static str {
        match self {
            ImageKind::Cubin => "cubin",
            ImageKind::Ptx => "ptx",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The value of `--gpu-architecture`.
    pub arch: &'static str,
    pub image: ImageKind,
}

/// "sm_90" for (9, 0): real architecture, NVRTC emits a CUBIN for it.
pub fn sm_arch(major: u32, minor: u32) -> &'static str {
    match (major, minor) {
        (7, 0) => "sm_70",
        (7, 2) => "sm_72",
        (7, 5) => "sm_75",
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 7) => "sm_87",
        (8, 9) => "sm_89",
        (9, 0) => "sm_90",
        (10, 0) => "sm_100",
        (10, 1) => "sm_101",
        (10, 3) => "sm_103",
        (11, 0) => "sm_110",
        (12, 0) => "sm_120",
        (12, 1) => "sm_121",
        _ => intern("sm", major, minor),
    }
}

/// The CUBIN target for a device of `major.minor` compiled for itself: its
/// architecture-specific form where one exists ("sm_90a": Hopper's wgmma,
/// setmaxnreg and the like, which `__CUDA_ARCH_FEAT_SM90_ALL` guards in the
/// source), whose code runs on that compute capability alone; else `sm_arch`.
pub fn sm_arch_specific(major: u32, minor: u32) -> &'static str {
    match (major, minor) {
        (9, 0) => "sm_90a",
        _ => sm_arch(major, minor),
    }
}

/// "compute_90" for (9, 0): virtual architecture, NVRTC emits PTX only.
pub fn compute_arch(major: u32, minor: u32) -> &'static str {
    match (major, minor) {
        (7, 5) => "compute_75",
        (8, 0) => "compute_80",
        (8, 6) => "compute_86",
        (8, 9) => "compute_89",
        (9, 0) => "compute_90",
        (10, 0) => "compute_100",
        (12, 0) => "compute_120",
        _ => intern("compute", major, minor),
    }
}

type Names = HashMap<(&'static str, u32, u32), &'static str>;

fn intern(prefix: &'static str, major: u32, minor: u32) -> &'static str {
    static NAMES: Mutex<Option<Names>> = Mutex::new(None);
    let mut guard = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    map.entry((prefix, major, minor))
        .or_insert_with(|| Box::leak(format!("{prefix}_{major}{minor}").into_boxed_str()))
}

/// The device's own CUBIN when this NVRTC knows the architecture; otherwise PTX for the
/// newest older architecture it knows, which the driver JIT-compiles (a device newer than the
/// toolkit). `supported` holds NVRTC's numbers (90 for sm_90); None when it could not be asked.
pub fn choose_target(cc: (u32, u32), supported: Option<&[u32]>) -> Result<Target, String> {
    let (major, minor) = cc;
    let wanted = major * 10 + minor;
    let Some(list) = supported else {
        return Ok(Target {
            arch: sm_arch_specific(major, minor),
            image: ImageKind::Cubin,
        });
    };
    if list.contains(&wanted) {
        return Ok(Target {
            arch: sm_arch_specific(major, minor),
            image: ImageKind::Cubin,
        });
    }
    match list.iter().copied().filter(|a| *a < wanted).max() {
        Some(older) => Ok(Target {
            arch: compute_arch(older / 10, older % 10),
            image: ImageKind::Ptx,
        }),
        None => Err(format!(
            "this NVRTC supports none of the architectures up to sm_{wanted} (it supports {list:?})"
        )),
    }
}

/// NVRTC's supported real architectures, or None if the query is unavailable.
pub(crate) fn supported_archs() -> Option<Vec<u32>> {
    let mut n: std::ffi::c_int = 0;
    // SAFETY: writes one int; the caller has checked that libnvrtc loads.
    unsafe { nsys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .ok()?;
    if n <= 0 {
        return None;
    }
    let mut archs = vec![0 as std::ffi::c_int; n as usize];
    // SAFETY: the buffer holds the `n` entries NVRTC said it would write.
    unsafe { nsys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .ok()?;
    Some(
        archs
            .into_iter()
            .filter(|a| *a > 0)
            .map(|a| a as u32)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_capabilities_map_to_literals() {
        assert_eq!(sm_arch(9, 0), "sm_90");
        assert_eq!(sm_arch(8, 9), "sm_89");
        assert_eq!(sm_arch(10, 0), "sm_100");
        assert_eq!(sm_arch(12, 1), "sm_121");
        assert_eq!(compute_arch(9, 0), "compute_90");
    }

    #[test]
    fn unknown_capabilities_are_interned_once() {
        let a = sm_arch(13, 7);
        let b = sm_arch(13, 7);
        assert_eq!(a, "sm_137");
        assert!(
            std::ptr::eq(a, b),
            "a second lookup must not leak a second string"
        );
        assert_eq!(compute_arch(6, 1), "compute_61");
    }

    #[test]
    fn target_is_cubin_for_a_supported_device() {
        let list = [75, 80, 86, 89, 90, 100, 120];
        let t = choose_target((9, 0), Some(&list)).unwrap();
        assert_eq!(
            t,
            Target {
                arch: "sm_90a",
                image: ImageKind::Cubin
            }
        );
        // Without the list we still ask for the device's own CUBIN.
        assert_eq!(choose_target((9, 0), None).unwrap().arch, "sm_90a");
        // Architecture-specific only where the device has such a form.
        assert_eq!(choose_target((8, 0), Some(&list)).unwrap().arch, "sm_80");
    }

    /// `DeviceInfo::arch` names the target a device NVRTC supports is compiled
    /// for (the GPU test `device_info_serializes` compares them).
    #[test]
    fn the_device_names_the_target_it_is_compiled_for() {
        for cc in [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)] {
            let list = [cc.0 * 10 + cc.1];
            assert_eq!(choose_target(cc, Some(&list)).unwrap().arch, sm_arch_specific(cc.0, cc.1), "{cc:?}");
        }
    }

    #[test]
    fn device_newer_than_nvrtc_falls_back_to_ptx() {
        let list = [75, 80, 86, 89, 90];
        let t = choose_target((10, 0), Some(&list)).unwrap();
        assert_eq!(
            t,
            Target {
                arch: "compute_90",
                image: ImageKind::Ptx
            }
        );
        assert!(choose_target((7, 0), Some(&list)).is_err());
    }
}
