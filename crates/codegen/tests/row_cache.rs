//! Rows too long for the registers are kept in shared memory between the
//! passes of the loop schedule: the first pass that reads a vector stores it,
//! later passes read it back, as much of the row as two blocks per
//! multiprocessor leave room for.

use fusebench_codegen::{plan, Device, Plan, Schedule};

mod common;
use common::script;

/// Softmax over rows of `cols` bf16: three walks of the row (max, sum, write).
fn softmax(rows: usize, cols: usize, dev: Device) -> Plan {
    let f = script(&format!(
        "    x = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    a = fd.ops.cast(x, dtype=DataType.Float)
    m = fd.ops.max(a, dims=[1], keepdim=True)
    mb = fd.ops.expand(m, shape=[{rows}, {cols}])
    d = fd.ops.sub(a, mb)
    e = fd.ops.exp(d)
    s = fd.ops.sum(e, dims=[1], keepdim=True)
    sb = fd.ops.expand(s, shape=[{rows}, {cols}])
    y = fd.ops.div(e, sb)
    o = fd.ops.cast(y, dtype=DataType.BFloat16)
    fd.add_output(o)
"
    ));
    plan(&f, &[None], dev).unwrap_or_else(|e| panic!("{e}"))
}

fn kernel_source(p: &Plan) -> &str {
    &p.source[p.source.find("fb_n0(").unwrap()..]
}

#[test]
fn a_long_row_is_read_once_from_global_memory() {
    let p = softmax(2048, 32064, Device::default());
    let k = &p.kernels[0];
    assert_eq!(k.schedule, Schedule::InnerPersistent);
    // The whole row of bf16, padded to 16 bytes.
    assert_eq!(k.shared_bytes, 32064 * 2);
    assert!(k.summary.contains("first 32064"), "{}", k.summary);
    let src = kernel_source(&p);
    // The first pass loads from global memory (four batched copies and the
    // remainder) and stores each vector; the other two read shared memory.
    assert_eq!(src.matches("__ldg(").count(), 5, "{src}");
    assert_eq!(src.matches("= *reinterpret_cast<const uint4*>(&w").count(), 5, "{src}");
    assert_eq!(src.matches("= *reinterpret_cast<const uint4*>(&reinterpret_cast<fb_bf16*>(fb_rcache").count(), 10, "{src}");
    // No bounds: the whole row fits.
    assert!(!src.contains("if (ii <"), "{src}");
}

#[test]
fn a_row_too_long_for_the_budget_keeps_a_prefix() {
    let p = softmax(2048, 131072, Device::default());
    let k = &p.kernels[0];
    let budget = Device::default().shared_memory_per_sm as usize / 2 - 2048;
    assert!(k.shared_bytes as usize <= budget && k.shared_bytes > 0, "{}", k.shared_bytes);
    let cap = k.shared_bytes as usize / 2;
    // A whole number of the block's sweeps (512 threads x 8 elements).
    assert_eq!(cap % 4096, 0, "{cap}");
    let src = kernel_source(&p);
    assert!(src.contains(&format!("if (ii < {cap}) {{")), "{src}");
    // Past the prefix the later passes read global memory again.
    assert!(src.contains("} else {"), "{src}");
    assert_eq!(src.matches("__ldg(").count(), 15, "{src}");
}

#[test]
fn the_knob_turns_it_off_and_a_row_read_once_has_none() {
    let off = Device {
        row_cache: false,
        ..Device::default()
    };
    let p = softmax(2048, 32064, off);
    assert_eq!(p.kernels[0].shared_bytes, 0);
    assert!(!p.source.contains("fb_rcache"));
    // A sum over each long row reads it once: nothing to keep.
    let f = script("    x = fd.define_tensor(shape=[64, 65536], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    y = fd.ops.sum(x, dims=[1])\n    fd.add_output(y)\n");
    let p = plan(&f, &[None], Device::default()).unwrap();
    assert!(p.kernels.iter().all(|k| k.shared_bytes == 0));
    assert!(!p.source.contains("fb_rcache"));
    // Rows that fit the registers keep the row-wise schedule.
    let p = softmax(2048, 4096, Device::default());
    assert!(p.kernels.iter().all(|k| k.shared_bytes == 0));
}

#[test]
fn a_dropout_sum_is_kept_as_computed_not_drawn_again() {
    // Dropout + residual + LayerNorm over long rows: the masked sum h draws
    // random numbers and reads two row-sized inputs, so the first pass keeps
    // it and the variance pass reads it back; only the pass that writes the
    // mask draws again.
    let f = script(
        "    t0 = fd.define_tensor(shape=[2048, 16384], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    t1 = fd.define_tensor(shape=[2048, 16384], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    f0 = fd.ops.cast(t0, dtype=DataType.Float)
    f1 = fd.ops.cast(t1, dtype=DataType.Float)
    lo = fd.define_scalar(0.0, dtype=DataType.Double)
    hi = fd.define_scalar(1.0, dtype=DataType.Double)
    u = fd.ops.uniform(lo, hi, shape=[2048, 16384], dtype=DataType.Float)
    keep = fd.ops.lt(u, 0.9)
    km = fd.ops.cast(keep, dtype=DataType.Float)
    xk = fd.ops.mul(f0, km)
    h = fd.ops.add(f1, xk)
    var, mean = fd.ops.var_mean(h, dims=[1], correction=0, keepdim=True)
    mb = fd.ops.expand(mean, shape=[2048, 16384])
    d = fd.ops.sub(h, mb)
    o = fd.ops.cast(d, dtype=DataType.BFloat16)
    fd.add_output(o)
    fd.add_output(var)
    fd.add_output(keep)
",
    );
    let p = plan(&f, &[None, None], Device::default()).unwrap();
    let k = &p.kernels[0];
    assert_eq!(k.schedule, Schedule::InnerPersistent);
    // One f32 per element of the row.
    assert_eq!(k.shared_bytes, 16384 * 4);
    assert!(k.summary.contains("values later passes re-read"), "{}", k.summary);
    let src = kernel_source(&p);
    // Lane-major slots: consecutive threads, consecutive words.
    assert!(src.contains("reinterpret_cast<float*>(fb_rcache + 0)[7 * 2048 + ii / 8] = "), "{src}");
    assert!(src.contains("= reinterpret_cast<float*>(fb_rcache + 0)[7 * 2048 + ii / 8];"), "{src}");
    // Draws in the first pass only (its five loop bodies, two Philox blocks
    // per 8 elements), which also writes the mask: it reads no reduction.
    assert_eq!(src.matches("fb_philox(").count(), 10, "{src}");
    // Without the cache the output's pass draws again (the variance pass
    // too: five bodies each).
    let off = Device {
        row_cache: false,
        ..Device::default()
    };
    let p = plan(&f, &[None, None], off).unwrap();
    assert_eq!(kernel_source(&p).matches("fb_philox(").count(), 30);
}
