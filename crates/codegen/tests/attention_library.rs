//! Flash attention run by cuDNN (crate::attention::library): where the device
//! plans it, an attention cuDNN reads as it lies is one call of the plan
//! with its operands' strides, no kernel of ours; what it cannot read falls
//! back to our kernels.

use fusebench_codegen::{plan, AttentionRole as R, Device, KernelArg, LibraryAttention, Plan};

mod common;

fn planned(body: &str, library: bool) -> Plan {
    let f = common::script(body);
    let dev = Device { attention_library: library, ..Device::default() };
    plan(&f, &common::declared_layouts(&f), dev).expect("plans")
}

fn define(name: &str, shape: &str, contiguity: &str) -> String {
    format!("    {name} = fd.define_tensor(shape={shape}, contiguity={contiguity}, dtype=DataType.BFloat16, is_cpu=False)\n")
}

fn strides(a: &LibraryAttention, role: R) -> (KernelArg, i64, [i64; 4]) {
    let t = a.tensors.iter().find(|t| t.role == role).unwrap_or_else(|| panic!("{role:?} missing"));
    (t.arg, t.offset, t.strides)
}

const ALL: &str = "[True, True, True, True]";

#[test]
fn an_attention_cudnn_reads_is_one_call_and_no_kernel() {
    let body = format!(
        "{}{}{}    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=True, scale=0.25)\n    fd.add_output(o)\n    fd.add_output(lse)\n    fd.add_output(seed)\n",
        define("q", "[2, 3, 77, 64]", ALL),
        define("k", "[2, 3, 77, 64]", ALL),
        define("v", "[2, 3, 77, 64]", ALL)
    );
    let p = planned(&body, true);
    assert!(p.kernels.is_empty(), "{:?}", p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    assert!(p.runs_library());
    let [a] = &p.attention[..] else { panic!("one call: {:?}", p.attention) };
    assert!(!a.backward && a.causal);
    assert_eq!((a.b, a.h, a.s_q, a.s_kv, a.d, a.d_v), (2, 3, 77, 77, 64, 64));
    assert_eq!(a.scale, 0.25);
    assert_eq!(strides(a, R::Q), (KernelArg::Input(0), 0, [3 * 77 * 64, 77 * 64, 64, 1]));
    assert_eq!(strides(a, R::O), (KernelArg::Output(0), 0, [3 * 77 * 64, 77 * 64, 64, 1]));
    // The log-sum-exp as cuDNN's [b, h, s, 1] statistics.
    assert_eq!(strides(a, R::Stats), (KernelArg::Output(1), 0, [3 * 77, 77, 1, 1]));
    // No dropout: the philox seed returned reads zero, set before the call.
    assert_eq!(a.zeroed, [KernelArg::Output(2)]);
    // Without the library the same fusion is our kernel.
    let own = planned(&body, false);
    assert_eq!(own.kernels.len(), 1);
    assert!(own.attention.is_empty());
}

#[test]
fn slices_of_a_fused_projection_are_read_where_they_lie() {
    let p = planned(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../cli/tests/fixtures/ops/attention/attn_fused_qkv_bf16.py"))
            .expect("fixture")
            .lines()
            .skip_while(|l| !l.contains("def nvfuser_fusion"))
            .skip(1)
            .take_while(|l| l.starts_with("    "))
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
        true,
    );
    let [a] = &p.attention[..] else { panic!("one call") };
    // qkv [2, 70, 3, 2, 64]: K is the second of the three, heads 64 apart,
    // rows 3 * 2 * 64 apart.
    assert_eq!(strides(a, R::K), (KernelArg::Input(0), 128, [70 * 384, 64, 384, 1]));
    // The permute and reshape after it: one kernel of ours.
    assert_eq!(p.kernels.len(), 1);
}

#[test]
fn the_backward_gets_its_float_intermediates_as_temporaries() {
    let body = format!(
        "{}{}{}{}{}    lse = fd.define_tensor(shape=[1, 2, 70], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)\n    seed = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.UInt64, is_cpu=False)\n    off = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.UInt64, is_cpu=False)\n    dq, dk, dv = fd.ops.sdpfa_bwd(g, q, k, v, o, lse, dropout_p=0.0, is_causal=False, philox_seed=seed, philox_offset=off, scale=None)\n    fd.add_output(dq)\n    fd.add_output(dk)\n    fd.add_output(dv)\n",
        define("g", "[1, 2, 70, 64]", ALL),
        define("q", "[1, 2, 70, 64]", ALL),
        define("k", "[1, 2, 70, 64]", ALL),
        define("v", "[1, 2, 70, 64]", ALL),
        define("o", "[1, 2, 70, 64]", ALL)
    );
    let p = planned(&body, true);
    let [a] = &p.attention[..] else { panic!("one call") };
    assert!(a.backward && !a.causal);
    // nvFuser's default scale: 1 / sqrt(the head dim).
    assert_eq!(a.scale, 0.125);
    assert_eq!(p.temps.len(), 2);
    assert_eq!((p.temps[0].elements, p.temps[1].elements), (2 * 70, 2 * 70 * 64));
    assert_eq!(strides(a, R::SoftmaxSum).0, KernelArg::Temp(0));
    assert_eq!(strides(a, R::DqAccum), (KernelArg::Temp(1), 0, [70 * 64 * 2, 70 * 64, 64, 1]));
    // A batch dim of extent 1 is given a dense stride.
    assert_eq!(strides(a, R::DO), (KernelArg::Input(0), 0, [2 * 70 * 64, 70 * 64, 64, 1]));
    assert_eq!(strides(a, R::DV), (KernelArg::Output(2), 0, [2 * 70 * 64, 70 * 64, 64, 1]));
}

#[test]
fn what_cudnn_cannot_read_runs_in_our_kernels() {
    let fwd = "    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=False)\n    fd.add_output(o)\n";
    // K and V shared by every head (broadcast); head dim 256; head dim 72 for
    // Q and K, 64 for V; three batch dims, not cuDNN's two.
    let cases = [
        (define("q", "[2, 4, 65, 64]", ALL), define("k", "[2, 1, 65, 64]", "[True, None, True, True]"), define("v", "[2, 1, 65, 64]", "[True, None, True, True]")),
        (define("q", "[1, 2, 70, 256]", ALL), define("k", "[1, 2, 70, 256]", ALL), define("v", "[1, 2, 70, 256]", ALL)),
        (define("q", "[1, 2, 70, 72]", ALL), define("k", "[1, 2, 70, 72]", ALL), define("v", "[1, 2, 70, 64]", ALL)),
        (define("q", "[2, 2, 3, 70, 64]", "[True, True, True, True, True]"), define("k", "[2, 2, 3, 70, 64]", "[True, True, True, True, True]"), define("v", "[2, 2, 3, 70, 64]", "[True, True, True, True, True]")),
    ];
    for (q, k, v) in cases {
        let p = planned(&format!("{q}{k}{v}{fwd}"), true);
        assert!(p.attention.is_empty(), "{q}{k}{v}");
        assert_eq!(p.kernels.len(), 1);
    }
}

#[test]
fn a_negative_or_scalar_input_scale_runs_in_our_kernels() {
    let qkv = format!("{}{}{}", define("q", "[1, 2, 70, 64]", ALL), define("k", "[1, 2, 70, 64]", ALL), define("v", "[1, 2, 70, 64]", ALL));
    let negative = format!("{qkv}    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=True, scale=-0.3)\n    fd.add_output(o)\n");
    let input = format!("{qkv}    s = fd.define_scalar(dtype=DataType.Double)\n    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=True, scale=s)\n    fd.add_output(o)\n");
    for body in [negative, input] {
        let p = planned(&body, true);
        assert!(p.attention.is_empty(), "{body}");
        assert_eq!(p.kernels.len(), 1);
    }
}

#[test]
fn library_calls_run_in_the_order_their_values_need() {
    use fusebench_codegen::LibraryCall::{Attention, Product};
    // Q from a product, the attention, a product of its result: three library
    // calls and no kernel between them.
    let body = format!(
        "{}{}{}    w = fd.define_tensor(shape=[64, 64], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n    q = fd.ops.matmul(x, w)\n    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=False, scale=0.125)\n    m = fd.ops.matmul(o, w)\n    fd.add_output(m)\n",
        define("x", "[1, 2, 64, 64]", ALL),
        define("k", "[1, 2, 64, 64]", ALL),
        define("v", "[1, 2, 64, 64]", ALL)
    );
    let p = planned(&body, true);
    assert_eq!((p.products.len(), p.attention.len()), (2, 1), "{:?}", p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    let all: Vec<_> = (0..=p.kernels.len()).flat_map(|k| p.calls_before(k)).collect();
    assert_eq!(all, [Product(0), Attention(0), Product(1)]);
}
