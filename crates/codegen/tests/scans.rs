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

/// Few long lines, an outer dim of them, many short lines.
const LONG_SHORT_AND_OUTER: &str = "    t0 = fd.define_tensor(shape=[8, 32000], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    t1 = fd.define_tensor(shape=[4096, 127], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    c = fd.ops.cumsum(t0, dim=1)
    d = fd.ops.cumsum(t0, dim=0)
    e = fd.ops.cumsum(t1, dim=1)
    fd.add_output(c)
    fd.add_output(d)
    fd.add_output(e)
";

/// `Device::scan_blocks` (the default): a scan along the innermost dim over
/// lines of 128 or more is a block per line (256 threads); one along an outer
/// dim, or over shorter lines, stays a thread per line, as with the knob off.
#[test]
fn scan_blocks_take_innermost_lines_a_block_each() {
    let body = LONG_SHORT_AND_OUTER;
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

/// `Device::scan_lines`: a scan along the innermost dim takes
/// a group of threads a line sized to it, several short lines a block, and
/// few long lines are cut into chunks whose totals a first kernel finds; one
/// along an outer dim stays a thread per line.
#[test]
fn scan_lines_take_threads_by_their_length() {
    let body = LONG_SHORT_AND_OUTER;
    let f = common::script(body);
    let layouts = vec![None; f.inputs.len()];
    let lines = Device { scan_lines: true, ..Device::default() };
    let on = plan(&f, &layouts, lines).unwrap();
    let scans: Vec<_> = on.kernels.iter().filter(|k| k.schedule == Schedule::Scan).collect();
    assert_eq!(scans.len(), 4, "{scans:#?}");
    // 8 lines of 32000 on 132 multiprocessors: 8 chunks of 4096 each, the
    // first kernel finding the 7 totals before each line's last chunk.
    assert_eq!((scans[0].grid[0], scans[0].block[0]), (8 * 7, 512), "{scans:#?}");
    assert_eq!((scans[1].grid[0], scans[1].block[0]), (8 * 8, 512), "{scans:#?}");
    assert!(on.temps.iter().any(|t| t.what == "chunk totals of c" && t.elements == 8 * 7), "{:#?}", on.temps);
    assert_eq!(scans[2].block[0], 128, "along dim 0: a thread per line, {scans:#?}");
    // Lines of 127: 16 threads x 8 elements, 16 lines a block of 256.
    assert_eq!((scans[3].grid[0], scans[3].block[0]), (256, 256), "{scans:#?}");
    let whole = plan(&f, &layouts, Device { scan_split: false, ..lines }).unwrap();
    let scans: Vec<_> = whole.kernels.iter().filter(|k| k.schedule == Schedule::Scan).collect();
    assert_eq!((scans.len(), scans[0].grid[0]), (3, 8), "not cut: {scans:#?}");
}

/// `Device::scan_tiles`: a scan along the innermost dim of a column-major
/// input (consecutive lines neighbours in memory) reads tiles of 32 lines
/// through shared memory; the same scan of a row-major input, of an input
/// read both ways, or over too few lines for the multiprocessors does not.
#[test]
fn scan_tiles_take_lines_read_across() {
    let body = "    t0 = fd.define_tensor(shape=[32768, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0, 1])
    t1 = fd.define_tensor(shape=[32768, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    t2 = fd.define_tensor(shape=[200, 4096], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])
    c = fd.ops.cumsum(t0, dim=1)
    d = fd.ops.cumsum(t1, dim=1)
    a = fd.ops.add(t0, t1)
    e = fd.ops.cumsum(a, dim=1)
    g = fd.ops.cumsum(t2, dim=1)
    fd.add_output(c)
    fd.add_output(d)
    fd.add_output(e)
    fd.add_output(g)
";
    let f = common::script(body);
    let layouts = common::declared_layouts(&f);
    let across = |p: &Plan| -> Vec<bool> {
        p.kernels
            .iter()
            .filter(|k| k.schedule == Schedule::Scan)
            .map(|k| k.summary.contains("read across its lines"))
            .collect()
    };
    let on = plan(&f, &layouts, Device { scan_tiles: true, ..Device::default() }).unwrap();
    assert_eq!(across(&on), [true, false, false, false], "{:#?}", on.kernels);
    let tiled = on.kernels.iter().find(|k| k.summary.contains("read across")).unwrap();
    assert_eq!((tiled.grid[0], tiled.block[0]), (32768 / 32, 256), "{tiled:#?}");
    let off = plan(&f, &layouts, Device::default()).unwrap();
    assert_eq!(across(&off), [false; 4], "{:#?}", off.kernels);
}

/// Outputs computed elementwise from a scan alone (the scan itself, its
/// cast, a product with an input) are written by the scan's kernel, with no
/// temporary where nothing else reads the scan; a scan a reduction also
/// reads is stored for it.
#[test]
fn a_scan_writes_the_outputs_computed_from_it_alone() {
    let planned = |body: &str| {
        let f = common::script(body);
        plan(&f, &vec![None; f.inputs.len()], Device { scan_epilogue: true, ..Device::default() }).unwrap()
    };
    let p = planned(
        "    t0 = fd.define_tensor(shape=[1024, 4096], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    c = fd.ops.cumsum(t0, dim=1)
    d = fd.ops.cast(c, dtype=DataType.Float)
    e = fd.ops.mul(d, t0)
    fd.add_output(c)
    fd.add_output(e)
",
    );
    assert_eq!(p.kernels.len(), 1, "{:#?}", p.kernels);
    assert!(p.temps.is_empty(), "{:#?}", p.temps);
    let p = planned(
        "    t0 = fd.define_tensor(shape=[1024, 4096], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    c = fd.ops.cumsum(t0, dim=1)
    s = fd.ops.sum(c, dims=[1])
    fd.add_output(c)
    fd.add_output(s)
",
    );
    assert!(p.temps.iter().any(|t| t.what == "c (stored)"), "{:#?}", p.temps);
    assert_eq!(p.kernels.iter().filter(|k| k.schedule == Schedule::Scan).count(), 1, "{:#?}", p.kernels);
    let f = common::script(
        "    t0 = fd.define_tensor(shape=[1024, 4096], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    c = fd.ops.cumsum(t0, dim=1)
    fd.add_output(c)
",
    );
    let off = plan(&f, &[None], Device::default()).unwrap();
    assert_eq!(off.kernels.len(), 2, "off: the scan stored and copied, {:#?}", off.kernels);
}

/// An output that reads two scans, or a scan reshaped, is not written by a
/// scan's kernel: each scan is stored and a kernel of its own writes it.
#[test]
fn an_output_of_two_scans_or_a_reshaped_scan_has_a_kernel_of_its_own() {
    let f = common::script(
        "    t0 = fd.define_tensor(shape=[64, 1000], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    c = fd.ops.cumsum(t0, dim=1)
    m = fd.ops.cummax(t0, dim=1)
    d = fd.ops.sub(c, m)
    r = fd.ops.reshape(c, new_shape=[64000])
    fd.add_output(d)
    fd.add_output(r)
",
    );
    let p = plan(&f, &[None], Device { scan_epilogue: true, ..Device::default() }).unwrap();
    assert_eq!(p.kernels.iter().filter(|k| k.schedule == Schedule::Scan).count(), 2, "{:#?}", p.kernels);
    assert_eq!(p.kernels.len(), 4, "two scans, then the two outputs' kernels: {:#?}", p.kernels);
    assert!(p.temps.iter().any(|t| t.what == "c (stored)") && p.temps.iter().any(|t| t.what == "m (stored)"), "{:#?}", p.temps);
}
