//! Is there a usable GPU here, and what is it.
//!
//! Every path checks for the libraries before calling into them: cudarc panics (rather than
//! returning an error) when `libcuda` or `libnvrtc` cannot be loaded.

use std::ffi::c_int;
use std::fmt;

use cudarc::driver::{result as dr, sys as dsys};
use cudarc::nvrtc::sys as nsys;
use serde::{Deserialize, Serialize};

use crate::arch::sm_arch_specific;
use crate::error::{guard, DriverContext, RuntimeError};

/// Why no GPU work can run here, in words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unavailable {
    NoDriver,
    NoNvrtc(String),
    NoDevice(String),
    /// A probe step failed in a way the other variants do not describe.
    ProbeFailed(String),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NoDriver => {
                write!(f, "no CUDA driver (libcuda.so.1) found on this machine")
            }
            Unavailable::NoNvrtc(d) => write!(f, "NVRTC (libnvrtc.so.13 / .12) not found: {d}"),
            Unavailable::NoDevice(d) => write!(f, "driver found but no device: {d}"),
            Unavailable::ProbeFailed(d) => write!(f, "GPU probe failed: {d}"),
        }
    }
}

impl std::error::Error for Unavailable {}

pub type Availability = Result<DeviceInfo, Unavailable>;

/// What the engine and the reports need to know about the device. Attributes that a driver
/// may not report are `Option`s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// In nvidia-smi's form, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
    pub uuid: String,
    pub pci_bus_id: Option<String>,
    pub compute_capability: (u32, u32),
    /// The NVRTC target for this device, its architecture-specific form where
    /// it has one: "sm_90a" for an H100 or H200, "sm_80" for an A100.
    pub arch: String,
    pub sm_count: u32,
    pub l2_cache_bytes: u64,
    pub max_shared_memory_per_block: u32,
    /// Reachable only after raising the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES.
    pub max_shared_memory_per_block_optin: u32,
    pub max_shared_memory_per_sm: u32,
    pub registers_per_sm: u32,
    pub registers_per_block: u32,
    pub max_threads_per_sm: u32,
    pub max_threads_per_block: u32,
    /// Most blocks of a launch in x, y and z.
    #[serde(default = "max_grid")]
    pub max_grid: [u32; 3],
    pub warp_size: u32,
    pub sm_clock_khz: Option<u32>,
    pub memory_clock_khz: Option<u32>,
    pub memory_bus_width_bits: Option<u32>,
    pub ecc_enabled: Option<bool>,
    pub total_memory_bytes: u64,
    /// As cuDriverGetVersion reports it: 1000 * major + 10 * minor (13000 for 13.0).
    pub driver_version: i32,
    pub nvrtc_version: (u32, u32),
}

/// CUDA's grid limits since compute capability 3.0, for records written
/// before the device's own were kept.
fn max_grid() -> [u32; 3] {
    [i32::MAX as u32, 65535, 65535]
}

impl DeviceInfo {
    /// Driver version as "major.minor".
    pub fn driver_version_string(&self) -> String {
        format!(
            "{}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        )
    }
}

/// cuInit, then the devices the driver shows.
fn count_devices() -> Result<i32, Unavailable> {
    let as_reason = |e: RuntimeError| match e {
        RuntimeError::Driver { error, .. } => Unavailable::NoDevice(error),
        other => Unavailable::ProbeFailed(other.to_string()),
    };
    guard("initializing the CUDA driver", || {
        dr::init().ctx(|| "cuInit".into())
    })
    .map_err(as_reason)?;
    guard("counting devices", || {
        dr::device::get_count().ctx(|| "cuDeviceGetCount".into())
    })
    .map_err(as_reason)
}

/// The GPUs this process may use (those CUDA_VISIBLE_DEVICES leaves), with
/// no context created: what `bench --devices all` spreads over. Never panics.
pub fn device_count() -> Result<usize, Unavailable> {
    check_libraries()?;
    Ok(count_devices()?.max(0) as usize)
}

/// Probe device 0. Never panics.
pub fn probe() -> Availability {
    probe_ordinal(0)
}

pub fn probe_ordinal(ordinal: usize) -> Availability {
    check_libraries()?;
    init_driver(ordinal)?;
    guard("querying device attributes", || DeviceInfo::query(ordinal))
        .map_err(|e| Unavailable::ProbeFailed(e.to_string()))
}

/// cuInit and the device count: where "driver present, no usable device" shows up (no GPU,
/// CUDA_VISIBLE_DEVICES hiding it, a driver/library mismatch).
pub(crate) fn init_driver(ordinal: usize) -> Result<(), Unavailable> {
    let count = count_devices()?;
    if count <= 0 {
        return Err(Unavailable::NoDevice(
            "cuDeviceGetCount reports 0 devices".into(),
        ));
    }
    if ordinal >= count as usize {
        return Err(Unavailable::NoDevice(format!(
            "device {ordinal} requested, only {count} visible (CUDA_VISIBLE_DEVICES may hide others)"
        )));
    }
    Ok(())
}

/// Both libraries must load before anything calls into cudarc.
pub(crate) fn check_libraries() -> Result<(), Unavailable> {
    // SAFETY: this only tries to dlopen the library by name and drops the handle.
    if !unsafe { dsys::is_culib_present() } {
        return Err(Unavailable::NoDriver);
    }
    check_nvrtc()
}

/// NVRTC alone must load (what compiling with no GPU needs).
pub(crate) fn check_nvrtc() -> Result<(), Unavailable> {
    // SAFETY: this only tries to dlopen the library by name and drops the handle.
    if !unsafe { nsys::is_culib_present() } {
        return Err(Unavailable::NoNvrtc(
            "the loader found no libnvrtc.so / libnvrtc.so.13 / libnvrtc.so.12; put the CUDA \
             toolkit's lib directory (or that of NVIDIA's nvrtc wheel for Python, \
             nvidia/cuda_nvrtc/lib) on LD_LIBRARY_PATH or in ld.so.conf"
                .into(),
        ));
    }
    Ok(())
}

impl DeviceInfo {
    /// Reads everything without creating a context (contexts cost time and device memory).
    /// Callers must have checked the libraries and called cuInit.
    pub(crate) fn query(ordinal: usize) -> Result<DeviceInfo, RuntimeError> {
        let dev = dr::device::get(ordinal as c_int).ctx(|| format!("cuDeviceGet({ordinal})"))?;
        let attr = |a: dsys::CUdevice_attribute| -> Result<i32, RuntimeError> {
            // SAFETY: `dev` came from cuDeviceGet.
            unsafe { dr::device::get_attribute(dev, a) }
                .ctx(|| format!("cuDeviceGetAttribute({a:?})"))
        };
        // Attributes NVIDIA has deprecated may error or read 0 on newer drivers.
        let optional = |a| attr(a).ok().filter(|v| *v > 0).map(|v| v as u32);
        use dsys::CUdevice_attribute::*;
        let u = |v: i32| v.max(0) as u32;
        let major = u(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?);
        let minor = u(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?);
        Ok(DeviceInfo {
            ordinal,
            name: dr::device::get_name(dev).ctx(|| "cuDeviceGetName".into())?,
            uuid: format_uuid(&dr::device::get_uuid(dev).ctx(|| "cuDeviceGetUuid".into())?),
            pci_bus_id: pci_bus_id(dev),
            compute_capability: (major, minor),
            arch: sm_arch_specific(major, minor).to_string(),
            sm_count: u(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?),
            l2_cache_bytes: u(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?) as u64,
            max_shared_memory_per_block: u(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?),
            max_shared_memory_per_block_optin: u(attr(
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?),
            max_shared_memory_per_sm: u(attr(
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            )?),
            registers_per_sm: u(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?),
            registers_per_block: u(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?),
            max_threads_per_sm: u(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?),
            max_threads_per_block: u(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?),
            max_grid: [
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?),
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?),
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?),
            ],
            warp_size: u(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?),
            sm_clock_khz: optional(CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            memory_clock_khz: optional(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            memory_bus_width_bits: optional(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
            ecc_enabled: attr(CU_DEVICE_ATTRIBUTE_ECC_ENABLED).ok().map(|v| v != 0),
            // SAFETY: `dev` came from cuDeviceGet.
            total_memory_bytes: unsafe { dr::device::total_mem(dev) }
                .ctx(|| "cuDeviceTotalMem".into())? as u64,
            driver_version: driver_version()?,
            nvrtc_version: nvrtc_version()?,
        })
    }
}

pub(crate) fn driver_version() -> Result<i32, RuntimeError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    unsafe { dsys::cuDriverGetVersion(&mut v) }
        .result()
        .ctx(|| "cuDriverGetVersion".into())?;
    Ok(v)
}

pub(crate) fn nvrtc_version() -> Result<(u32, u32), RuntimeError> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: writes two ints.
    unsafe { nsys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .ctx(|| "nvrtcVersion".into())?;
    Ok((major.max(0) as u32, minor.max(0) as u32))
}

fn pci_bus_id(dev: dsys::CUdevice) -> Option<String> {
    let mut buf = [0 as std::ffi::c_char; 32];
    // SAFETY: the buffer length is passed; the driver NUL-terminates within it.
    let r = unsafe { dsys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as c_int, dev) };
    if r.result().is_err() {
        return None;
    }
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

pub(crate) fn format_uuid(uuid: &dsys::CUuuid) -> String {
    let b: Vec<u8> = uuid.bytes.iter().map(|c| *c as u8).collect();
    let hex =
        |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics_and_explains() {
        match probe() {
            Ok(info) => {
                eprintln!("GPU present: {} ({})", info.name, info.arch);
                assert!(info.sm_count > 0);
            }
            Err(reason) => {
                let text = reason.to_string();
                eprintln!("probe reason: {text}");
                assert!(!text.is_empty());
                // On a machine without the driver the reason must name the library.
                if !unsafe { dsys::is_culib_present() } {
                    assert_eq!(reason, Unavailable::NoDriver);
                    assert!(text.contains("libcuda.so.1"), "{text}");
                }
            }
        }
    }

    #[test]
    fn uuid_has_nvidia_smi_shape() {
        let mut u = dsys::CUuuid { bytes: [0; 16] };
        for (i, b) in u.bytes.iter_mut().enumerate() {
            *b = (i as u8 * 17) as std::ffi::c_char;
        }
        assert_eq!(format_uuid(&u), "GPU-00112233-4455-6677-8899-aabbccddeeff");
    }

    #[test]
    fn reasons_read_well() {
        assert_eq!(
            Unavailable::NoDriver.to_string(),
            "no CUDA driver (libcuda.so.1) found on this machine"
        );
        assert!(Unavailable::NoNvrtc("x".into())
            .to_string()
            .starts_with("NVRTC (libnvrtc.so.13 / .12) not found: "));
        assert!(Unavailable::NoDevice("CUDA_ERROR_NO_DEVICE".into())
            .to_string()
            .starts_with("driver found but no device: "));
    }
}
