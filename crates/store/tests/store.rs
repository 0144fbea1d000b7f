//! The results store as a user relies on it: what is saved comes back whole,
//! a failed measurement stores nothing, and a run killed mid-write leaves the
//! database consistent.

use fusebench_measure::{
    CachePolicy, Clocks, Environment, Measurement, Method, Sample, Stop, Subject,
};
use fusebench_store::{default_path, regressions, Store, StoreError};
use std::process::Command;

fn measurement(name: &str, times: &[f64], taken_at: u64) -> Measurement {
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
            inputs: vec![],
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

#[test]
fn saved_measurements_come_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/results.sqlite");
    let mut store = Store::open(&path).unwrap();
    let m = measurement("rmsnorm", &[20.0, 19.5, 20.5, 20.1], 100);
    let id = store.save(&m).unwrap();
    store.save(&measurement("other", &[5.0], 101)).unwrap();
    drop(store);
    let store = Store::open(&path).unwrap();
    let h = store.history("rmsnorm").unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].id, id);
    assert_eq!(h[0].measurement, m);
    assert_eq!(h[0].measurement.throttled_samples, 1);
    assert_eq!(
        store.history("def-rmsnorm").unwrap().len(),
        1,
        "by definition hash too"
    );
    assert_eq!(store.counts().unwrap(), (2, 5));
}

#[test]
fn a_failed_measurement_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.sqlite")).unwrap();
    let mut m = measurement("bad", &[1.0, 2.0], 1);
    m.samples[1].time_us = f64::NAN;
    assert!(matches!(store.save(&m), Err(StoreError::Measurement(_))));
    m.samples.clear();
    assert!(store.save(&m).is_err());
    assert_eq!(store.counts().unwrap(), (0, 0));
}

#[test]
fn a_newer_database_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    drop(Store::open(&path).unwrap());
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute("UPDATE meta SET value = '99' WHERE key = 'db_version'", [])
        .unwrap();
    drop(c);
    let e = Store::open(&path).err().expect("refused");
    assert!(e.to_string().contains("database version 99"), "{e}");
}

#[test]
fn regressions_need_more_than_noise() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.sqlite")).unwrap();
    let quiet = |base: f64| {
        (0..40)
            .map(|i| base + (i % 5) as f64 * 0.05)
            .collect::<Vec<_>>()
    };
    store.save(&measurement("f", &quiet(20.0), 1)).unwrap();
    store.save(&measurement("f", &quiet(20.05), 2)).unwrap(); // within noise
    let slow = store.save(&measurement("f", &quiet(21.0), 3)).unwrap(); // 5% slower
    let h = store.history("f").unwrap();
    let r = regressions(&h, 0.02);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].after, slow);
    assert!(r[0].ratio > 1.04 && r[0].ratio < 1.06);
    assert!(
        regressions(&h, 0.10).is_empty(),
        "5% is below a 10% threshold"
    );
}

#[test]
fn default_path_follows_the_environment() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(
        default_path(env(&[("FUSEBENCH_DB", "/x/db.sqlite"), ("HOME", "/h")]))
            .unwrap()
            .to_str(),
        Some("/x/db.sqlite")
    );
    assert_eq!(
        default_path(env(&[("XDG_DATA_HOME", "/d"), ("HOME", "/h")]))
            .unwrap()
            .to_str(),
        Some("/d/fusebench/results.sqlite")
    );
    assert_eq!(
        default_path(env(&[("HOME", "/h")])).unwrap().to_str(),
        Some("/h/.local/share/fusebench/results.sqlite")
    );
    assert!(default_path(env(&[])).is_none());
}

/// The child half of the next test: writes half a measurement inside a
/// transaction and dies before committing.
#[test]
fn child_killed_mid_write() {
    let Ok(path) = std::env::var("FUSEBENCH_STORE_CHILD") else {
        return;
    };
    let mut c = rusqlite::Connection::open(&path).unwrap();
    let tx = c.transaction().unwrap();
    tx.execute(
        "INSERT INTO measurements (taken_at, subject_name, definition_hash, inputs_hash, gpu_name, gpu_uuid, method, cache, n,
             median_us, ci_low_us, ci_high_us, record) VALUES (9, 'half', 'h', 'i', 'g', 'u', 'cupti', 'cold', 1, 1, 1, 1, '{}')",
        [],
    )
    .unwrap();
    std::process::abort();
}

#[test]
fn a_killed_run_leaves_the_database_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut store = Store::open(&path).unwrap();
    store
        .save(&measurement("kept", &[1.0, 2.0, 3.0], 1))
        .unwrap();
    drop(store);
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_killed_mid_write", "--nocapture"])
        .env("FUSEBENCH_STORE_CHILD", &path)
        .status()
        .unwrap();
    assert!(!status.success(), "the child must die mid-write");
    let store = Store::open(&path).unwrap();
    assert_eq!(
        store.counts().unwrap(),
        (1, 3),
        "the half-written measurement is gone"
    );
    assert_eq!(store.history("half").unwrap().len(), 0);
    let c = rusqlite::Connection::open(&path).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}
