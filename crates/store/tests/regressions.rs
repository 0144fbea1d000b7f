//! Regressions compare each record with the latest earlier record of the same
//! identity (benchmark, method and set-up, GPU), never with whatever row
//! happens to come before it.

mod common;

use common::{measurement, quiet};
use fusebench_measure::{CachePolicy, Measurement, Method};
use fusebench_store::{regressions, Regression, Store, Stored};

/// Records with ids 1, 2, ... in the order given, taken one hour apart.
fn stored(ms: Vec<Measurement>) -> Vec<Stored> {
    ms.into_iter()
        .enumerate()
        .map(|(i, mut m)| {
            m.taken_at = 1_764_480_000 + 3600 * i as u64;
            Stored {
                id: i as i64 + 1,
                measurement: m,
            }
        })
        .collect()
}

fn cold(base: f64) -> Measurement {
    measurement("f", &quiet(base), 0)
}

fn warm(base: f64) -> Measurement {
    let mut m = cold(base);
    m.cache = CachePolicy::Warm;
    m
}

fn pairs(r: &[Regression]) -> Vec<(i64, i64)> {
    r.iter().map(|r| (r.before, r.after)).collect()
}

#[test]
fn regressions_need_more_than_noise() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.sqlite")).unwrap();
    store.save(&measurement("f", &quiet(20.0), 1)).unwrap();
    store.save(&measurement("f", &quiet(20.05), 2)).unwrap(); // within noise
    let slow = store.save(&measurement("f", &quiet(21.0), 3)).unwrap(); // 5% slower
    let h = store.history("f").unwrap().records;
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
fn interleaved_cold_and_warm_records_are_each_compared_with_their_own() {
    // cold, warm, cold 5% slower, warm: the slower cold record follows a warm one.
    let h = stored(vec![cold(20.0), warm(10.0), cold(21.0), warm(10.0)]);
    assert_eq!(pairs(&regressions(&h, 0.02)), [(1, 3)]);
}

#[test]
fn another_method_or_set_up_is_not_a_regression() {
    // Events times carry the launch overhead CUPTI's do not: slower, but not a change.
    let mut events = cold(22.5);
    events.method = Method::CudaEvents;
    let mut cupti = cold(20.0);
    cupti.method = Method::Cupti;
    let mut read_flush = cold(21.0);
    read_flush.method = Method::Cupti;
    read_flush.cold_setup = Some("read flush of 120 MiB".into());
    let mut write_flush = cold(23.0);
    write_flush.method = Method::Cupti;
    write_flush.cold_setup = Some("write flush of 120 MiB".into());
    let h = stored(vec![cupti, events, read_flush, write_flush]);
    assert_eq!(regressions(&h, 0.02), []);
}

#[test]
fn another_gpu_context_or_shape_is_not_a_regression() {
    let mut other_gpu = cold(25.0);
    other_gpu.environment.gpu_uuid = "GPU-2".into();
    let mut in_program = cold(26.0);
    in_program.context = Some("program p, fusion 1 of 2".into());
    let mut bigger = cold(40.0);
    bigger.subject.inputs[0].shape = vec![8, 1024];
    let h = stored(vec![cold(20.0), other_gpu, in_program, bigger, cold(20.1)]);
    assert_eq!(regressions(&h, 0.02), []);
}

#[test]
fn the_latest_earlier_record_is_the_reference() {
    // 20 -> 22 is a regression; 22 -> 22 is not, though 22 is slower than 20.
    let h = stored(vec![cold(20.0), cold(22.0), warm(5.0), cold(22.0)]);
    assert_eq!(pairs(&regressions(&h, 0.02)), [(1, 2)]);
    // Time order decides, not the order of the list.
    let mut shuffled = h.clone();
    shuffled.reverse();
    assert_eq!(pairs(&regressions(&shuffled, 0.02)), [(1, 2)]);
}
