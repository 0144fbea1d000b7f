//! Measurements as the store's tests need them.
#![allow(dead_code)]

use fusebench_measure::{
    CachePolicy, Clocks, Environment, InputLayout, Measurement, Method, Sample, Stop, Subject,
};

/// A cold, events-timed measurement of `name` on GPU-1 with these sample times.
pub fn measurement(name: &str, times: &[f64], taken_at: u64) -> Measurement {
    let samples = times
        .iter()
        .enumerate()
        .map(|(i, &t)| Sample {
            time_us: t,
            clocks: Some(Clocks {
                sm_mhz: 1980,
                mem_mhz: 3201,
                temperature_c: 40,
                power_w: 310.5,
                throttle_reasons: (i == 1) as u64,
            }),
            events_us: None,
        })
        .collect();
    Measurement::new(
        Subject {
            name: name.into(),
            definition_hash: format!("def-{name}"),
            inputs_hash: "in".into(),
            inputs: vec![InputLayout {
                dtype: "bfloat16".into(),
                shape: vec![4, 1024],
                strides: vec![1024, 1],
                byte_offset: 0,
            }],
        },
        Method::CudaEvents,
        CachePolicy::Cold,
        "fixed count".into(),
        Stop::Count,
        3,
        Environment {
            gpu_name: "NVIDIA H200".into(),
            gpu_uuid: "GPU-1".into(),
            sm_count: 132,
            ..Default::default()
        },
        vec![],
        samples,
        taken_at,
    )
    .unwrap()
}

/// 40 samples around `base` whose interval of the median is about +-0.25%.
pub fn quiet(base: f64) -> Vec<f64> {
    (0..40).map(|i| base + (i % 5) as f64 * 0.05).collect()
}

/// The file's bytes, and which files are beside it.
pub fn snapshot(path: &std::path::Path) -> (Vec<u8>, Vec<String>) {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (std::fs::read(path).unwrap_or_default(), names)
}
