//! pytest-benchmark's JSON: `machine_info`, `commit_info`, `benchmarks[]` with
//! `stats` in seconds (min, max, mean, stddev, median, quartiles, outliers,
//! ops, rounds, and the raw `data`) and free-form `extra_info`. fusebench
//! writes every sample into `data` and its fingerprints and the whole
//! record into `extra_info`, so `pytest-benchmark compare` reads the times
//! and reading it back keeps every number.

use super::num;
use crate::{Entry, Origin, ReportError, Tool};
use fusebench_measure::{stats::quantile_sorted, Measurement};
use serde_json::{json, Value};

pub fn write(records: &[Measurement]) -> Value {
    let benchmarks: Vec<Value> = records
        .iter()
        .map(|m| {
            let mut s: Vec<f64> = m.samples.iter().map(|x| x.time_us * 1e-6).collect();
            let data = s.clone();
            s.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let n = s.len();
            let mean = s.iter().sum::<f64>() / n as f64;
            let stddev = if n > 1 {
                (s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
            } else {
                0.0
            };
            let (q1, q3) = (quantile_sorted(&s, 0.25), quantile_sorted(&s, 0.75));
            let iqr = q3 - q1;
            let (lo_fence, hi_fence) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
            let ld15iqr = s.iter().copied().find(|&x| x >= lo_fence).unwrap_or(s[0]);
            let hd15iqr = s.iter().rev().copied().find(|&x| x <= hi_fence).unwrap_or(s[n - 1]);
            let iqr_out = s.iter().filter(|&&x| x < lo_fence || x > hi_fence).count();
            let sd_out = s.iter().filter(|&&x| (x - mean).abs() > stddev).count();
            let policy = serde_json::to_value(m.cache).unwrap_or(Value::Null);
            json!({
                "group": policy,
                "name": m.subject.name,
                "fullname": format!("fusebench::{}", m.subject.name),
                "params": null,
                "param": null,
                "extra_info": {
                    "gpu": m.environment.gpu_name,
                    "definition_hash": m.subject.definition_hash,
                    "inputs_hash": m.subject.inputs_hash,
                    "kernels": m.kernels.iter().map(|k| json!({"name": k.name, "code_hash": k.code_hash, "grid": k.grid, "block": k.block})).collect::<Vec<_>>(),
                    "bytes": m.bytes,
                    "device_bytes": m.device_bytes,
                    "fusebench_record": serde_json::from_str::<Value>(&m.to_json()).unwrap_or(Value::Null),
                },
                "options": { "disable_gc": false, "timer": "CUPTI kernel records", "min_rounds": 10, "max_time": 1.0, "min_time": 0.05, "warmup": m.warmup > 0 },
                "stats": {
                    "min": s[0], "max": s[n - 1], "mean": mean, "stddev": stddev, "rounds": n,
                    "median": quantile_sorted(&s, 0.5), "iqr": iqr, "q1": q1, "q3": q3,
                    "iqr_outliers": iqr_out, "stddev_outliers": sd_out,
                    "outliers": format!("{sd_out};{iqr_out}"), "ld15iqr": ld15iqr, "hd15iqr": hd15iqr,
                    "ops": 1.0 / mean, "total": s.iter().sum::<f64>(), "data": data, "iterations": 1,
                },
            })
        })
        .collect();
    let gpu = records
        .first()
        .map(|m| m.environment.gpu_name.clone())
        .unwrap_or_default();
    json!({
        "machine_info": { "node": "", "processor": "", "machine": "", "python_implementation": "fusebench",
                          "python_version": "", "system": "", "release": "", "cpu": {}, "gpu": gpu },
        "commit_info": {},
        "benchmarks": benchmarks,
        "datetime": "",
        "version": "5.1.0",
    })
}

pub fn read(v: &Value, path: &str) -> Result<Vec<Entry>, ReportError> {
    let machine = v["machine_info"]["gpu"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| {
            v["machine_info"]["cpu"]["brand_raw"]
                .as_str()
                .map(str::to_string)
        })
        .or_else(|| v["machine_info"]["node"].as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown machine".into());
    let mut out = Vec::new();
    for b in v["benchmarks"].as_array().into_iter().flatten() {
        let rec = &b["extra_info"]["fusebench_record"];
        if rec.is_object() {
            let m = Measurement::from_json(&rec.to_string())
                .map_err(|e| ReportError::file(path, e.to_string()))?;
            out.push(Entry::from_record(&m, path));
            continue;
        }
        let name = b["fullname"]
            .as_str()
            .or_else(|| b["name"].as_str())
            .unwrap_or("")
            .to_string();
        let st = &b["stats"];
        let data: Vec<f64> = st["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(num)
            .map(|s| s * 1e6)
            .collect();
        let entry = match Entry::from_samples(
            b["name"].as_str().unwrap_or("").into(),
            format!("pytest-benchmark|{name}"),
            machine.clone(),
            data,
            Origin::host_clock(Tool::PytestBenchmark),
            path,
        ) {
            Some(e) => e,
            None => {
                let (mean, sd, n) = (
                    num(&st["mean"]).unwrap_or(f64::NAN),
                    num(&st["stddev"]).unwrap_or(0.0),
                    num(&st["rounds"]).unwrap_or(1.0),
                );
                Entry::from_summary(
                    b["name"].as_str().unwrap_or("").into(),
                    format!("pytest-benchmark|{name}"),
                    machine.clone(),
                    mean * 1e6,
                    sd / mean,
                    n as usize,
                    Origin::host_clock(Tool::PytestBenchmark),
                    path,
                )
            }
        };
        out.push(entry);
    }
    Ok(out)
}
