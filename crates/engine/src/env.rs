//! The environment fingerprint every measurement record carries.

use fusebench_measure::Environment;
use fusebench_runtime::DeviceInfo;

pub fn environment(info: &DeviceInfo) -> Environment {
    Environment {
        gpu_name: info.name.clone(),
        gpu_uuid: info.uuid.clone(),
        driver: info.driver_version_string(),
        cuda: format!("NVRTC {}.{}", info.nvrtc_version.0, info.nvrtc_version.1),
        sm_count: info.sm_count,
        l2_bytes: info.l2_cache_bytes,
        fusebench_version: env!("CARGO_PKG_VERSION").into(),
    }
}
