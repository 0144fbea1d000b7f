//! How bf16 and fp16 outputs are stored: row kernels convert a value once
//! and two lanes per instruction; pointwise kernels keep rounding each lane
//! and converting it (the form that measured fastest for them).

use fusebench_codegen::{plan, Device, Plan};

mod common;
use common::{kernels, script};

/// `x * w` over rows of `cols` bf16, cast back to bf16, with or without a
/// row reduction in front (an RMSNorm's scale).
fn scaled(rows: usize, cols: usize, norm: bool) -> Plan {
    let scale = if norm {
        "    xx = fd.ops.mul(x, x)\n    s = fd.ops.sum(xx, dims=[1], keepdim=True)\n    r = fd.ops.rsqrt(s)\n    rb = fd.ops.expand(r, shape=[2048, 4096])\n    n = fd.ops.mul(x, rb)\n    y = fd.ops.mul(n, w)\n"
    } else {
        "    y = fd.ops.mul(x, w)\n"
    };
    let f = script(&format!(
        "    t = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n    v = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n    x = fd.ops.cast(t, dtype=DataType.Float)\n    w = fd.ops.cast(v, dtype=DataType.Float)\n{scale}    o = fd.ops.cast(y, dtype=DataType.BFloat16)\n    fd.add_output(o)\n"
    ));
    plan(&f, &[None, None], Device::default()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn row_kernels_convert_each_value_once_two_lanes_at_a_time() {
    let p = scaled(2048, 4096, true);
    let k = kernels(&p);
    // Eight lanes per store: four paired conversions of the values before
    // their rounding (the rounded registers are left unused, and dropped by
    // the compiler), no lane converted on its own.
    let pairs = k.matches("fb_f2bf2(").count();
    assert!(pairs > 0 && pairs.is_multiple_of(4), "{k}");
    assert!(k.contains("fb_f2bf2(fb_lo") && k.contains(", (float)(v"), "{k}");
    assert!(!k.contains("= fb_f2bf("), "{k}");
}

#[test]
fn pointwise_kernels_round_each_lane_then_convert_it() {
    let p = scaled(2048, 4096, false);
    let k = kernels(&p);
    assert!(!k.contains("fb_f2bf2("), "{k}");
    assert_eq!(k.matches("fb_rbf(").count(), 8, "{k}");
    assert_eq!(k.matches("= fb_f2bf(").count(), 8, "{k}");
}
