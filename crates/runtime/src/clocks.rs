//! Reading (never setting) the GPU's clocks, temperature, power and throttle
//! reasons through NVML, loaded at run time like the driver. A machine
//! without NVML still measures; its samples simply carry no clock reading.

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::Nvml;

/// One reading of the device's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockReading {
    pub sm_mhz: u32,
    pub mem_mhz: u32,
    pub temperature_c: u32,
    pub power_w: f64,
    /// NVML's clock-throttle-reason bits, with the "GPU idle" bit cleared:
    /// between samples the GPU is briefly idle, which is not throttling.
    pub throttle_reasons: u64,
}

pub struct ClockReader {
    nvml: Nvml,
    index: u32,
}

/// NVML's nvmlClocksThrottleReasonGpuIdle.
const GPU_IDLE: u64 = 0x1;

impl ClockReader {
    /// NVML for device `index`, or why not (the library is absent, or the
    /// device is not found). Never panics.
    pub fn new(index: u32) -> Result<ClockReader, String> {
        let nvml = std::panic::catch_unwind(Nvml::init)
            .map_err(|_| "NVML panicked while loading".to_string())?
            .map_err(|e| format!("NVML (libnvidia-ml.so.1) not available: {e}"))?;
        nvml.device_by_index(index)
            .map_err(|e| format!("NVML has no device {index}: {e}"))?;
        Ok(ClockReader { nvml, index })
    }

    pub fn read(&self) -> Result<ClockReading, String> {
        let d = self
            .nvml
            .device_by_index(self.index)
            .map_err(|e| e.to_string())?;
        let reasons = d
            .current_throttle_reasons()
            .map(|r| r.bits())
            .map_err(|e| e.to_string())?;
        Ok(ClockReading {
            sm_mhz: d.clock_info(Clock::SM).map_err(|e| e.to_string())?,
            mem_mhz: d.clock_info(Clock::Memory).map_err(|e| e.to_string())?,
            temperature_c: d
                .temperature(TemperatureSensor::Gpu)
                .map_err(|e| e.to_string())?,
            power_w: d.power_usage().map_err(|e| e.to_string())? as f64 / 1000.0,
            throttle_reasons: reasons & !GPU_IDLE,
        })
    }
}

/// The driver release as NVML reports it ("580.159.04"), or why not.
pub fn driver_release() -> Result<String, String> {
    let nvml = std::panic::catch_unwind(Nvml::init)
        .map_err(|_| "NVML panicked while loading".to_string())?
        .map_err(|e| format!("NVML (libnvidia-ml.so.1) not available: {e}"))?;
    nvml.sys_driver_version().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_nvml_is_a_reason_not_a_panic() {
        match super::ClockReader::new(0) {
            Ok(r) => {
                let c = r.read().expect("a device NVML found can be read");
                assert!(c.sm_mhz > 0 && c.mem_mhz > 0);
            }
            Err(reason) => {
                eprintln!("skipped (no GPU here): {reason}");
                assert!(!reason.is_empty());
            }
        }
    }
}
