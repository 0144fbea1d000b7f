//! nvbench's JSON: `meta`, `devices`, `benchmarks[].states[].summaries[]`,
//! each summary a tag (`nv/cold/time/gpu/mean`, ...) with typed values
//! written as strings, times in seconds. fusebench writes one benchmark per
//! fusion, one state per device, the summaries nvbench's own tools read, and
//! the whole fusebench record as a hidden summary so that reading it back
//! keeps every number.

use super::num;
use crate::{Entry, Origin, ReportError};
use fusebench_measure::{CachePolicy, Measurement};
use serde_json::{json, Value};

const RECORD_TAG: &str = "fusebench/record";

fn summary(tag: &str, name: &str, hint: &str, ty: &str, value: String) -> Value {
    json!({ "tag": tag, "name": name, "hint": hint, "description": name,
            "data": [{ "name": "value", "type": ty, "value": value }] })
}

/// The records as one nvbench JSON document.
pub fn write(records: &[Measurement]) -> Value {
    let mut devices: Vec<(String, &Measurement)> = Vec::new();
    for m in records {
        if !devices.iter().any(|(u, _)| *u == m.environment.gpu_uuid) {
            devices.push((m.environment.gpu_uuid.clone(), m));
        }
    }
    let device_json: Vec<Value> = devices
        .iter()
        .enumerate()
        .map(|(i, (_, m))| {
            json!({ "id": i, "name": m.environment.gpu_name, "number_of_sms": m.environment.sm_count,
                    "l2_cache_size": m.environment.l2_bytes, "uuid": m.environment.gpu_uuid })
        })
        .collect();
    let benchmarks: Vec<Value> = records
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let dev = devices
                .iter()
                .position(|(u, _)| *u == m.environment.gpu_uuid)
                .unwrap_or(0);
            // nvbench's two kinds: isolated (cold) and back to back (batch).
            let kind = if m.cache == CachePolicy::Cold {
                "cold"
            } else {
                "batch"
            };
            let s = &m.summary;
            let rel_stdev = {
                let mean = s.mean;
                let var = m
                    .samples
                    .iter()
                    .map(|x| (x.time_us - mean).powi(2))
                    .sum::<f64>()
                    / (m.samples.len().saturating_sub(1).max(1)) as f64;
                var.sqrt() / mean
            };
            let mut sums = vec![
                summary(
                    &format!("nv/{kind}/sample_size"),
                    "Samples",
                    "sample_size",
                    "int64",
                    s.n.to_string(),
                ),
                summary(
                    &format!("nv/{kind}/time/gpu/mean"),
                    "GPU Time",
                    "duration",
                    "float64",
                    format!("{:e}", s.mean * 1e-6),
                ),
                summary(
                    &format!("nv/{kind}/time/gpu/min"),
                    "Min GPU Time",
                    "duration",
                    "float64",
                    format!("{:e}", s.min * 1e-6),
                ),
                summary(
                    &format!("nv/{kind}/time/gpu/max"),
                    "Max GPU Time",
                    "duration",
                    "float64",
                    format!("{:e}", s.max * 1e-6),
                ),
                summary(
                    &format!("nv/{kind}/time/gpu/median"),
                    "Median GPU Time",
                    "duration",
                    "float64",
                    format!("{:e}", s.median * 1e-6),
                ),
                summary(
                    &format!("nv/{kind}/time/gpu/stdev/relative"),
                    "Noise",
                    "percentage",
                    "float64",
                    format!("{rel_stdev:e}"),
                ),
            ];
            if let Some(b) = m.bytes {
                sums.push(summary(
                    "nv/cold/bw/global/bytes_per_second",
                    "GlobalMem BW",
                    "byte_rate",
                    "float64",
                    format!("{:e}", b as f64 / (s.median * 1e-6)),
                ));
            }
            if let Some(mhz) = m.median_sm_mhz() {
                sums.push(summary(
                    &format!("nv/{kind}/sm_clock_rate/mean"),
                    "Clock Rate",
                    "frequency",
                    "float64",
                    format!("{:e}", mhz * 1e6),
                ));
            }
            let mut rec = summary(RECORD_TAG, "fusebench record", "", "string", m.to_json());
            rec["hide"] = json!("The full fusebench measurement record (docs/result-schema.md).");
            sums.push(rec);
            json!({
                "name": m.subject.name, "index": i, "devices": [dev], "axes": null,
                "states": [{ "name": format!("Device={dev}"), "device": dev, "type_config_index": 0,
                             "axis_values": null, "summaries": sums, "is_skipped": false }]
            })
        })
        .collect();
    json!({
        "meta": { "argv": ["fusebench"], "version": { "json": { "major": 1, "minor": 0, "patch": 0, "string": "1.0.0" },
                  "fusebench": { "string": env!("CARGO_PKG_VERSION") } } },
        "devices": device_json,
        "benchmarks": benchmarks,
    })
}

/// The value of the summary with `tag` in a state.
fn value(state: &Value, tag: &str) -> Option<Value> {
    state["summaries"]
        .as_array()?
        .iter()
        .find(|s| s["tag"] == tag)?["data"]
        .as_array()?
        .iter()
        .find(|d| d["name"] == "value")
        .map(|d| d["value"].clone())
}

pub fn read(v: &Value, path: &str) -> Result<Vec<Entry>, ReportError> {
    let device_name = |id: &Value| -> String {
        v["devices"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["id"] == *id)
            .and_then(|d| d["name"].as_str())
            .unwrap_or("unknown device")
            .to_string()
    };
    let mut out = Vec::new();
    for b in v["benchmarks"].as_array().into_iter().flatten() {
        let bname = b["name"].as_str().unwrap_or("");
        for st in b["states"].as_array().into_iter().flatten() {
            if st["is_skipped"] == true {
                continue;
            }
            if let Some(rec) = value(st, RECORD_TAG).and_then(|r| r.as_str().map(str::to_string)) {
                let m = Measurement::from_json(&rec)
                    .map_err(|e| ReportError::file(path, e.to_string()))?;
                out.push(Entry::from_record(&m, path));
                continue;
            }
            // A file nvbench wrote: the cold GPU time, else the batch one.
            let kind = if value(st, "nv/cold/time/gpu/mean").is_some() {
                "cold"
            } else {
                "batch"
            };
            // The median where nvbench reports one (newer versions), else the mean.
            let Some(center_s) = ["median", "mean"].iter().find_map(|s| {
                value(st, &format!("nv/{kind}/time/gpu/{s}"))
                    .as_ref()
                    .and_then(num)
            }) else {
                continue;
            };
            let noise = value(st, &format!("nv/{kind}/time/gpu/stdev/relative"))
                .as_ref()
                .and_then(num)
                .unwrap_or(0.0);
            let n = value(st, &format!("nv/{kind}/sample_size"))
                .as_ref()
                .and_then(num)
                .unwrap_or(1.0) as usize;
            let state = st["name"].as_str().unwrap_or("");
            out.push(Entry::from_summary(
                format!("{bname} [{state}]"),
                format!("nvbench|{bname}|{state}|{kind}"),
                device_name(&st["device"]),
                center_s * 1e6,
                noise,
                n,
                Origin::nvbench(kind == "cold"),
                path,
            ));
        }
    }
    Ok(out)
}
