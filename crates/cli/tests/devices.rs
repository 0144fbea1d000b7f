//! `bench --devices`: a worker process per GPU. Without a GPU every worker is
//! refused with the reason, and the parent says which gave no results and
//! exits 2; `all` without a driver is a usage error. (On the GPU machine the
//! workers run: `scripts/gpu.sh` and BENCHMARKS.md.)

mod common;
use common::*;

#[test]
fn without_a_gpu_each_worker_is_refused_and_the_run_exits_2() {
    if fusebench_runtime::probe().is_ok() {
        eprintln!("skipped: a GPU is present");
        return;
    }
    let o = fusebench(&["bench", "examples/", "--devices", "0,1"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    // Both workers ran and said why, once each.
    assert_eq!(t.matches("needs a GPU").count(), 2, "{t}");
    assert!(t.contains("2 workers gave no results: GPU 0 (exit 2), GPU 1 (exit 2)"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
}

#[test]
fn all_without_a_driver_and_bad_lists_are_usage_errors() {
    if fusebench_runtime::probe().is_ok() {
        eprintln!("skipped: a GPU is present");
        return;
    }
    let o = fusebench(&["bench", "examples/", "--devices", "all"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--devices all: counting GPUs"), "{}", text(&o));
    let o = fusebench(&["bench", "examples/", "--devices", "0,0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("named twice"), "{}", text(&o));
}

#[test]
fn every_gpu_needs_devices_and_its_workers_are_refused_without_a_gpu() {
    let o = fusebench(&["bench", "examples/", "--every-gpu"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--devices"), "{}", text(&o));
    if fusebench_runtime::probe().is_ok() {
        eprintln!("skipped the rest: a GPU is present");
        return;
    }
    let o = fusebench(&["bench", "examples/", "--devices", "0,1", "--every-gpu"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("each timing every fusion"), "{t}");
    assert!(t.contains("2 workers gave no results"), "{t}");
}
