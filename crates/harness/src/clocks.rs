//! The clock reading each sample carries, and where the measurement was taken.

use fusebench_measure::{Clocks, Environment};
use fusebench_runtime::{ClockReader, DeviceInfo};

/// The GPU's clocks now, for the sample just taken; none without a reader,
/// and a failed reading leaves the sample without clocks rather than failing it.
pub fn read(reader: Option<&ClockReader>) -> Option<Clocks> {
    reader.and_then(|c| c.read().ok()).map(|c| Clocks {
        sm_mhz: c.sm_mhz,
        mem_mhz: c.mem_mhz,
        temperature_c: c.temperature_c,
        power_w: c.power_w,
        throttle_reasons: c.throttle_reasons,
    })
}

/// The environment fingerprint of every record: the GPU, the driver release
/// (from NVML; empty where NVML is absent), the CUDA API version the driver
/// supports, NVRTC's version (the libraries a subject runs are added per
/// measurement, `Subject::libraries`).
pub fn environment(info: &DeviceInfo) -> Environment {
    Environment {
        gpu_name: info.name.clone(),
        gpu_uuid: info.uuid.clone(),
        pci_bus: info.pci_bus_id.clone().unwrap_or_default(),
        driver: fusebench_runtime::driver_release().unwrap_or_default(),
        cuda: info.driver_version_string(),
        nvrtc: format!("{}.{}", info.nvrtc_version.0, info.nvrtc_version.1),
        sm_count: info.sm_count,
        l2_bytes: info.l2_cache_bytes,
        fusebench_version: env!("CARGO_PKG_VERSION").into(),
        libraries: String::new(),
    }
}
