//! `--shard I/N`: the shards of a directory are disjoint and together the
//! whole of it, whatever the order they run in; a bad shard is a usage error
//! that says what is accepted; and a directory of shard result files reads
//! as one run.

mod common;
use common::*;
use std::collections::BTreeSet;

const DIR: &str = "crates/cli/tests/fixtures/ops/reduce";

fn files_of(args: &[&str]) -> Vec<String> {
    let o = fusebench(args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["reports"].as_array().unwrap().iter().map(|r| r["file"].as_str().unwrap().to_string()).collect()
}

#[test]
fn shards_split_a_directory_without_overlap_or_loss() {
    let all: BTreeSet<String> = files_of(&["check", DIR, "--json"]).into_iter().collect();
    assert!(all.len() >= 10);
    let mut seen = BTreeSet::new();
    for i in 0..3 {
        let spec = format!("{i}/3");
        for f in files_of(&["check", DIR, "--json", "--shard", &spec]) {
            assert!(seen.insert(f.clone()), "{f} in two shards");
        }
    }
    assert_eq!(seen, all);
}

#[test]
fn a_shard_past_the_count_or_without_an_array_index_is_refused() {
    let o = fusebench(&["check", DIR, "--shard", "3/3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("0/3 to 2/3"), "{}", text(&o));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fusebench"))
        .args(["check", DIR, "--shard", "auto"])
        .current_dir(root())
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("SLURM_ARRAY_TASK_ID"), "{}", text(&o));
}

#[test]
fn a_slurm_array_task_takes_its_shard() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fusebench"))
        .args(["check", DIR, "--json", "--shard", "auto"])
        .current_dir(root())
        .env("SLURM_ARRAY_TASK_ID", "2")
        .env("SLURM_ARRAY_TASK_MIN", "1")
        .env("SLURM_ARRAY_TASK_COUNT", "3")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("shard 1/3"), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mine: Vec<&str> = v["reports"].as_array().unwrap().iter().map(|r| r["file"].as_str().unwrap()).collect();
    let direct = files_of(&["check", DIR, "--json", "--shard", "1/3"]);
    assert_eq!(mine, direct);
}

#[test]
fn a_directory_of_shard_files_reports_as_one_run() {
    // Two shards' `bench --out` files, each holding one record (recorded on an H200).
    let dir = tmp_dir("shards", "report");
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    for (i, rec) in ["seed-cold-a", "seed-warm"].iter().enumerate() {
        let text = std::fs::read_to_string(root().join(format!("examples/results/{rec}.json"))).unwrap();
        let record: serde_json::Value = serde_json::from_str(&text).unwrap();
        let doc = serde_json::json!({
            "gpu": {}, "rows": [{ "file": "seed_rmsnorm_legacy.py", "record": record }],
            "failures": [], "shard": { "index": i, "count": 2 }
        });
        std::fs::write(runs.join(format!("shard-{i}-of-2.json")), doc.to_string()).unwrap();
    }
    let out = dir.join("r");
    let o = fusebench(&["report", runs.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    // One row from each shard's file.
    assert_eq!(md.matches("| seed_rmsnorm_legacy.py |").count(), 2, "{md}");
}

#[test]
fn history_reads_runs_of_shard_files() {
    let dir = tmp_dir("shards", "history");
    // Two runs, each a directory of shard files; the second run's shard 0 holds nothing.
    for (run, recs) in [("run1", vec![vec!["seed-cold-a"], vec![]]), ("run2", vec![vec![], vec!["seed-cold-b"]])] {
        let d = dir.join(run);
        std::fs::create_dir_all(&d).unwrap();
        for (i, shard) in recs.iter().enumerate() {
            let rows: Vec<serde_json::Value> = shard
                .iter()
                .map(|rec| {
                    let text = std::fs::read_to_string(root().join(format!("examples/results/{rec}.json"))).unwrap();
                    serde_json::json!({ "file": "seed_rmsnorm_legacy.py", "record": serde_json::from_str::<serde_json::Value>(&text).unwrap() })
                })
                .collect();
            let doc = serde_json::json!({ "gpu": {}, "rows": rows, "failures": [], "shard": { "index": i, "count": 2 } });
            std::fs::write(d.join(format!("shard-{i}-of-2.json")), doc.to_string()).unwrap();
        }
    }
    let (r1, r2) = (dir.join("run1"), dir.join("run2"));
    let args = ["history", "seed_rmsnorm_legacy.py", "--results", r1.to_str().unwrap(), "--results", r2.to_str().unwrap(), "--json"];
    let o = fusebench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    let t0 = rows[0]["measurement"]["taken_at"].as_u64().unwrap();
    let t1 = rows[1]["measurement"]["taken_at"].as_u64().unwrap();
    assert!(t0 <= t1, "oldest first");
    // A fusion the runs do not hold: exit 2, said.
    let o = fusebench(&["history", "nothing.py", "--results", r1.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("no measurements of \"nothing.py\""), "{}", text(&o));
}
