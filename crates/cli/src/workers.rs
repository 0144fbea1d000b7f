//! `bench --devices all|0,1,...`: one worker process per GPU of this host,
//! each pinned to its GPU with `CUDA_VISIBLE_DEVICES` and given its shard of
//! the fusions (`shard.rs`), their JSON results merged into one run. Workers
//! rather than threads: each GPU gets a process of its own, as it would
//! under a scheduler, and one that fails cannot take the others down.

use crate::shard::Shard;
use fusebench_measure::{differ, Summary};
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::process::{Command, Stdio};

#[derive(clap::Args, Default)]
pub struct DeviceArgs {
    /// Spread the fusions over several GPUs of this host, one worker process each (pinned with
    /// CUDA_VISIBLE_DEVICES): `all`, or ordinals or UUIDs, comma-separated (0,1). Their results
    /// are merged into one run; with --shard, this host's shard is split among them.
    #[arg(long, value_name = "all|0,1,...")]
    pub devices: Option<String>,
    /// With --devices: every GPU times every fusion (none is dealt out), and the table shows each
    /// fusion's time on each GPU and their spread, to tell GPUs of one kind apart.
    #[arg(long, requires = "devices")]
    pub every_gpu: bool,
}

/// The GPUs `spec` names: `all` (counted by `count`) or a comma-separated
/// list of ordinals or UUIDs, each once.
pub fn parse(spec: &str, count: impl FnOnce() -> Result<usize, String>) -> Result<Vec<String>, String> {
    if spec.trim() == "all" {
        let n = count()?;
        if n == 0 {
            return Err("no GPU found".into());
        }
        return Ok((0..n).map(|i| i.to_string()).collect());
    }
    let mut out: Vec<String> = Vec::new();
    for d in spec.split(',').map(str::trim) {
        let ok = d.parse::<usize>().is_ok() || (d.starts_with("GPU-") && d.len() > 4);
        if !ok {
            return Err(format!(
                "{d:?} is not a GPU ordinal or UUID (expected all, or a list such as 0,1 or GPU-xxxxxxxx-...)"
            ));
        }
        if out.iter().any(|x| x == d) {
            return Err(format!("GPU {d} is named twice"));
        }
        out.push(d.to_string());
    }
    Ok(out)
}

/// The shard worker `d` of `devices` takes within this host's `host` shard:
/// shard I of N split D ways is shards I*D .. I*D+D-1 of N*D, so that hosts
/// with D GPUs each together still cover every fusion once.
pub fn worker_shard(host: Option<Shard>, d: usize, devices: usize) -> Shard {
    let h = host.unwrap_or(Shard { index: 0, count: 1 });
    Shard {
        index: h.index * devices + d,
        count: h.count * devices,
    }
}

/// The worker's command line: the parent's, less what the parent does itself
/// (`--devices`, `--every-gpu`, `--shard`, `--out`, `--save`, `--json`), plus
/// `--json` and its shard (none: every fusion).
pub fn worker_args(args: &[OsString], shard: Option<Shard>) -> Vec<OsString> {
    const WITH_VALUE: [&str; 4] = ["--devices", "--shard", "--out", "--jsonl"];
    const FLAGS: [&str; 3] = ["--save", "--json", "--every-gpu"];
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        let s = a.to_string_lossy();
        if WITH_VALUE.contains(&s.as_ref()) {
            skip = true;
            continue;
        }
        if FLAGS.contains(&s.as_ref()) || WITH_VALUE.iter().any(|w| s.starts_with(&format!("{w}="))) {
            continue;
        }
        out.push(a.clone());
    }
    out.push("--json".into());
    if let Some(shard) = shard {
        out.push("--shard".into());
        out.push(format!("{}/{}", shard.index, shard.count).into());
    }
    out
}

/// What one worker did: its GPU, its exit code, and its JSON result (None
/// when it printed none: it could not start, or was refused).
pub struct Worker {
    pub device: String,
    pub code: Option<i32>,
    pub doc: Option<Value>,
}

/// Runs `exe args_for(d)` once per device at the same time, each with
/// `CUDA_VISIBLE_DEVICES` set to its device, and waits for all.
pub fn run(exe: &OsStr, devices: &[String], args_for: impl Fn(usize) -> Vec<OsString>) -> std::io::Result<Vec<Worker>> {
    let mut children = Vec::new();
    for (d, dev) in devices.iter().enumerate() {
        let child = Command::new(exe)
            .args(args_for(d))
            .env("CUDA_VISIBLE_DEVICES", dev)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        children.push((dev.clone(), child));
    }
    let mut out = Vec::new();
    for (device, child) in children {
        let o = child.wait_with_output()?;
        out.push(Worker {
            device,
            code: o.status.code(),
            doc: serde_json::from_slice(&o.stdout).ok(),
        });
    }
    Ok(out)
}

/// The workers' results as one: rows and failures in the order of `order`
/// (the file names as the parent listed them), each worker's GPU kept.
pub fn merge(workers: &[Worker], order: &[String]) -> Value {
    let mut rows: Vec<Value> = Vec::new();
    let mut failures: Vec<Value> = Vec::new();
    let mut gpus: Vec<Value> = Vec::new();
    for w in workers {
        let Some(doc) = &w.doc else { continue };
        rows.extend(doc["rows"].as_array().cloned().unwrap_or_default());
        failures.extend(doc["failures"].as_array().cloned().unwrap_or_default());
        gpus.push(serde_json::json!({ "device": w.device, "gpu": doc["gpu"] }));
    }
    let rank = |name: &str| order.iter().position(|o| o == name || o.ends_with(&format!("/{name}"))).unwrap_or(usize::MAX);
    rows.sort_by_key(|r| rank(r["file"].as_str().unwrap_or("")));
    failures.sort_by_key(|f| rank(f["file"].as_str().unwrap_or("")));
    serde_json::json!({ "gpus": gpus, "rows": rows, "failures": failures })
}

/// Each fusion's time on every GPU that timed it (`--every-gpu`), in the order
/// of `order`: the medians with their 95% intervals, the spread (slowest over
/// fastest, less 1) and whether the intervals meet (no two GPUs differ beyond
/// their noise, `fusebench_measure::differ`).
pub fn spread(workers: &[Worker], order: &[String]) -> Value {
    let mut by_file: Vec<(String, Vec<(String, Summary)>)> = Vec::new();
    for w in workers {
        let Some(doc) = &w.doc else { continue };
        for r in doc["rows"].as_array().into_iter().flatten() {
            let file = r["file"].as_str().unwrap_or("").to_string();
            let Ok(summary) = serde_json::from_value::<Summary>(r["record"]["summary"].clone()) else { continue };
            let gpu = (w.device.clone(), summary);
            match by_file.iter_mut().find(|(f, _)| *f == file) {
                Some((_, g)) => g.push(gpu),
                None => by_file.push((file, vec![gpu])),
            }
        }
    }
    let rank = |name: &str| order.iter().position(|o| o == name || o.ends_with(&format!("/{name}"))).unwrap_or(usize::MAX);
    by_file.sort_by_key(|(f, _)| rank(f));
    let fusions: Vec<Value> = by_file
        .into_iter()
        .map(|(file, gpus)| {
            let (lo, hi) = gpus.iter().fold((f64::INFINITY, 0f64), |(a, b), (_, s)| (a.min(s.median), b.max(s.median)));
            let apart = gpus.iter().enumerate().any(|(i, (_, a))| gpus[i + 1..].iter().any(|(_, b)| differ(a, b)));
            let several = gpus.len() > 1;
            let gpus: Vec<Value> = gpus
                .iter()
                .map(|(d, s)| serde_json::json!({ "device": d, "median_us": s.median, "ci_low_us": s.ci_low, "ci_high_us": s.ci_high }))
                .collect();
            serde_json::json!({
                "file": file,
                "gpus": gpus,
                "spread": if several && lo > 0.0 { serde_json::json!(hi / lo - 1.0) } else { Value::Null },
                "intervals_overlap": several && !apart,
            })
        })
        .collect();
    Value::Array(fusions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_by_count_list_or_uuid() {
        assert_eq!(parse("all", || Ok(2)).unwrap(), ["0", "1"]);
        assert_eq!(parse("0, 2", || unreachable!()).unwrap(), ["0", "2"]);
        assert_eq!(parse("GPU-d8ce9134-0a14", || unreachable!()).unwrap(), ["GPU-d8ce9134-0a14"]);
        assert!(parse("all", || Ok(0)).is_err());
        assert!(parse("all", || Err("no driver".into())).unwrap_err().contains("no driver"));
        assert!(parse("0,0", || Ok(2)).unwrap_err().contains("twice"));
        assert!(parse("0,gpu1", || Ok(2)).unwrap_err().contains("\"gpu1\""));
        assert!(parse("", || Ok(2)).is_err());
    }

    #[test]
    fn a_hosts_shard_splits_among_its_gpus_and_hosts_still_cover_everything() {
        let mut seen = Vec::new();
        for h in 0..3 {
            for d in 0..2 {
                let s = worker_shard(Some(Shard { index: h, count: 3 }), d, 2);
                assert_eq!(s.count, 6);
                seen.push(s.index);
            }
        }
        seen.sort();
        assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
        assert_eq!(worker_shard(None, 1, 2), Shard { index: 1, count: 2 });
    }

    #[test]
    fn workers_run_the_parents_command_less_what_the_parent_does() {
        let args: Vec<OsString> = ["bench", "dir/", "--devices", "all", "--save", "--out=r/", "--jsonl", "rows.jsonl", "--shard", "1/3", "--kernels", "--json", "--max-time", "0.5"]
            .iter()
            .map(OsString::from)
            .collect();
        let w = worker_args(&args, Some(Shard { index: 3, count: 6 }));
        let w: Vec<String> = w.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(w, ["bench", "dir/", "--kernels", "--max-time", "0.5", "--json", "--shard", "3/6"]);
        // --every-gpu: every worker times every fusion, so no shard of its own.
        let args: Vec<OsString> = ["bench", "dir/", "--devices", "0,1", "--every-gpu", "--json"].iter().map(OsString::from).collect();
        let w: Vec<String> = worker_args(&args, None).iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(w, ["bench", "dir/", "--json"]);
    }

    #[test]
    fn the_spread_of_each_fusion_over_the_gpus() {
        let row = |f: &str, m: f64, lo: f64, hi: f64| {
            let summary = Summary {
                n: 10,
                min: lo,
                median: m,
                p90: hi,
                max: hi,
                mean: m,
                ci_low: lo,
                ci_high: hi,
                rel_ci: (hi - lo) / 2.0 / m,
                outliers_low: 0,
                outliers_high: 0,
            };
            serde_json::json!({ "file": f, "ours_us": m, "record": { "summary": summary } })
        };
        let doc = |rows: Vec<Value>| serde_json::json!({ "rows": rows, "failures": [] });
        let workers = [
            Worker { device: "0".into(), code: Some(0), doc: Some(doc(vec![row("b.py", 10.0, 9.9, 10.1), row("a.py", 5.0, 4.95, 5.05)])) },
            Worker { device: "1".into(), code: Some(0), doc: Some(doc(vec![row("a.py", 5.5, 5.45, 5.55), row("b.py", 10.05, 10.0, 10.2)])) },
        ];
        let order: Vec<String> = ["d/a.py", "d/b.py"].iter().map(|s| s.to_string()).collect();
        let s = spread(&workers, &order);
        let s = s.as_array().unwrap();
        assert_eq!(s[0]["file"], "a.py");
        assert!((s[0]["spread"].as_f64().unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(s[0]["intervals_overlap"], false, "5.05 < 5.45: the GPUs differ");
        assert_eq!(s[1]["intervals_overlap"], true, "10.0-10.1 is in both");
        assert_eq!(s[1]["gpus"].as_array().unwrap().len(), 2);
        // One GPU alone has no spread.
        let one = spread(&workers[..1], &order);
        assert!(one[0]["spread"].is_null() && one[0]["intervals_overlap"] == false);
    }

    #[test]
    fn merged_rows_keep_the_parents_order_and_every_gpu() {
        let doc = |rows: &[&str], gpu: &str| {
            serde_json::json!({ "gpu": gpu, "failures": [],
                "rows": rows.iter().map(|f| serde_json::json!({ "file": f })).collect::<Vec<_>>() })
        };
        let workers = [
            Worker { device: "0".into(), code: Some(0), doc: Some(doc(&["c.py", "a.py"], "A")) },
            Worker { device: "1".into(), code: Some(2), doc: None },
            Worker { device: "2".into(), code: Some(0), doc: Some(doc(&["b.py"], "B")) },
        ];
        let order: Vec<String> = ["d/a.py", "d/b.py", "d/c.py"].iter().map(|s| s.to_string()).collect();
        let m = merge(&workers, &order);
        let files: Vec<&str> = m["rows"].as_array().unwrap().iter().map(|r| r["file"].as_str().unwrap()).collect();
        assert_eq!(files, ["a.py", "b.py", "c.py"]);
        assert_eq!(m["gpus"].as_array().unwrap().len(), 2);
    }
}
