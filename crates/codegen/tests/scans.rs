//! Scans (`cumsum`, `cumprod`, `cummin`, `cummax`) have a kernel of their own
//! that stores the result for its readers. One of a value computed from a
//! reduction (once refused) runs after the reductions it reads are stored,
//! just before its first reader.

use fusebench_codegen::{plan, Device, Plan, Schedule};

mod common;

fn planned(body: &str) -> Plan {
    let f = common::script(body);
    let layouts = vec![None; f.inputs.len()];
    plan(&f, &layouts, Device::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn position(p: &Plan, s: Schedule) -> usize {
    p.kernels.iter().position(|k| k.schedule == s).unwrap_or_else(|| panic!("no {s:?} kernel: {:#?}", p.kernels))
}

/// A running sum of a row minus its maximum: the maximum, kept on chip where
/// nothing else reads it, is stored for the scan instead.
#[test]
fn a_scan_of_a_row_reduction_runs_after_the_reduction_is_stored() {
    let p = planned(
        "    t0 = fd.define_tensor(shape=[300, 1000], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    m = fd.ops.max(t0, dims=[1], keepdim=True)
    d = fd.ops.sub(t0, m)
    c = fd.ops.cumsum(d, dim=1)
    fd.add_output(c)
",
    );
    let scan = position(&p, Schedule::Scan);
    assert!(scan >= 1, "the maximum is stored before the scan: {:#?}", p.kernels);
    assert!(p.temps.iter().any(|t| t.what == "m (stored)"), "{:#?}", p.temps);
}

/// A scan of a total read by an output of that total alone: the output is not
/// written by the total's own kernel (the scan runs between them).
#[test]
fn an_output_of_a_scan_of_a_total_is_not_the_totals_epilogue() {
    let p = planned(
        "    t0 = fd.define_tensor(shape=[65, 15], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    s = fd.ops.sum(t0, dims=[0, 1], keepdim=True)
    m = fd.ops.min(s, dims=[-2])
    c = fd.ops.cummax(m, dim=0)
    e = fd.ops.exp(c)
    fd.add_output(e)
",
    );
    let scan = position(&p, Schedule::Scan);
    assert!(scan >= 1 && scan + 1 < p.kernels.len(), "sum, scan, then the output's kernel: {:#?}", p.kernels);
}

/// `Device::scan_blocks` (the default): a scan along the innermost dim over
/// lines of 128 or more is a block per line (256 threads); one along an outer
/// dim, or over shorter lines, stays a thread per line, as with the knob off.
#[test]
fn scan_blocks_take_innermost_lines_a_block_each() {
    let body = "    t0 = fd.define_tensor(shape=[8, 32000], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    t1 = fd.define_tensor(shape=[4096, 127], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    c = fd.ops.cumsum(t0, dim=1)
    d = fd.ops.cumsum(t0, dim=0)
    e = fd.ops.cumsum(t1, dim=1)
    fd.add_output(c)
    fd.add_output(d)
    fd.add_output(e)
";
    let on = planned(body);
    let scans: Vec<_> = on.kernels.iter().filter(|k| k.schedule == Schedule::Scan).collect();
    assert_eq!((scans[0].grid[0], scans[0].block[0]), (8, 256), "{scans:#?}");
    assert_eq!(scans[1].block[0], 128, "along dim 0: a thread per line, {scans:#?}");
    assert_eq!(scans[2].block[0], 128, "lines of 127: a thread per line, {scans:#?}");
    let f = common::script(body);
    let layouts = vec![None; f.inputs.len()];
    let off = plan(&f, &layouts, Device { scan_blocks: false, ..Device::default() }).unwrap();
    let scans: Vec<_> = off.kernels.iter().filter(|k| k.schedule == Schedule::Scan).collect();
    assert_eq!(scans[0].block[0], 128, "off: {scans:#?}");
}
