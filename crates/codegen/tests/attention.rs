//! Flash attention (crate::attention): one kernel of the prelude's template
//! per `sdpfa_fwd` and two per `sdpfa_bwd`, each a translation unit of its
//! own named by its wrapper, placed between stages like a matrix product,
//! reading their operands where they lie; and what they refuse, with why.

use fusebench_codegen::{plan, Device, KernelArg, Plan, Schedule};

mod common;

fn planned(body: &str) -> Result<Plan, String> {
    let f = common::script(body);
    plan(&f, &common::declared_layouts(&f), Device::default()).map_err(|e| e.to_string())
}

/// The translation unit holding kernel `name`.
fn unit<'a>(p: &'a Plan, name: &str) -> &'a str {
    p.units(false).into_iter().find(|(_, names)| names.contains(&name)).map(|u| u.0).expect("a unit holds every kernel")
}

/// Every unit's source, the fusion's own module first.
fn all_units(p: &Plan) -> String {
    p.units(false).iter().map(|u| u.0).collect::<Vec<_>>().join("\n")
}

fn qkv(shape: &str, dtype: &str) -> String {
    ["q", "k", "v"]
        .iter()
        .map(|n| format!("    {n} = fd.define_tensor(shape={shape}, contiguity=[True, True, True, True], dtype=DataType.{dtype}, is_cpu=False)\n"))
        .collect()
}

const OUT: &str = "    fd.add_output(o)\n    fd.add_output(lse)\n";

#[test]
fn one_kernel_per_attention_with_its_shape_and_flags_baked_in_a_unit_of_its_own() {
    let body = format!(
        "{}    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=True, scale=0.25)\n{OUT}",
        qkv("[2, 3, 130, 64]", "BFloat16")
    );
    let p = planned(&body).unwrap();
    assert_eq!(p.kernels.len(), 1);
    assert!(p.products.is_empty());
    let k = &p.kernels[0];
    assert_eq!(k.schedule, Schedule::Attention);
    // 4 warps of two 16-query tiles: 128 queries per block, one batch row
    // (batch x heads) per grid row.
    assert_eq!((k.grid, k.block), ([2, 6, 1], [128, 1, 1]));
    assert_eq!(k.args, [KernelArg::Input(0), KernelArg::Input(1), KernelArg::Input(2), KernelArg::Output(0), KernelArg::Output(1)]);
    // Q's 128 rows, K's and V's 64, each of 64 + 8 16-bit elements.
    assert_eq!(k.shared_bytes, (128 + 64 + 64) * 72 * 2);
    assert!(k.name.starts_with("fb_attn_fwd_bf16_64x64_"), "{}", k.name);
    let src = unit(&p, &k.name);
    assert!(src.contains("fb_flash_fwd<true, 64, 64, true, 4, 64, 2, true>"), "{src}");
    // The scale times log2(e), in the kernel's base-2 softmax.
    assert!(src.contains(&format!("{:e}f", (0.25 * std::f64::consts::LOG2_E) as f32)), "{src}");
    assert!(src.contains("mma.sync.aligned.m16n8k16"), "the prelude's attention section is in the unit");
    assert_eq!(p.units(false).len(), 1, "the fusion's own module holds no kernel");
    assert!(!p.source.contains("fb_flash_fwd"));
    // The same attention in another fusion (a layer before it): the same
    // unit, so one entry of the kernel cache.
    let other = format!(
        "{}    x = fd.ops.mul(q, q)\n    y = fd.ops.cast(x, dtype=DataType.BFloat16)\n    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, is_causal=True, scale=0.25)\n    fd.add_output(o)\n    fd.add_output(y)\n",
        qkv("[2, 3, 130, 64]", "BFloat16")
    );
    let p2 = planned(&other).unwrap();
    let k2 = p2.kernels.iter().find(|k| k.schedule == Schedule::Attention).unwrap();
    assert_eq!((&k2.name, unit(&p2, &k2.name), &k2.code_hash), (&k.name, src, &k.code_hash));
    assert_eq!(p2.units(false).len(), 2, "the fusion's kernel and the attention's");
    // Another length: another kernel.
    let longer = planned(&format!(
        "{}    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, is_causal=True, scale=0.25)\n{OUT}",
        qkv("[2, 3, 131, 64]", "BFloat16")
    ))
    .unwrap();
    assert_ne!(longer.kernels[0].name, k.name);
}

#[test]
fn two_identical_attention_calls_share_their_unit() {
    let body = format!(
        "{}    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v)\n    o2, lse2, seed2, off2 = fd.ops.sdpfa_fwd(o, k, v)\n    fd.add_output(o2)\n",
        qkv("[1, 2, 32, 64]", "Half")
    );
    let p = planned(&body).unwrap();
    assert_eq!(p.kernels.len(), 2);
    assert_eq!(p.kernels[0].name, p.kernels[1].name);
    assert_eq!((p.modules.len(), p.units(false).len()), (1, 1));
}

#[test]
fn the_prelude_section_comes_only_with_attention() {
    let p = planned(
        "    x = fd.define_tensor(shape=[4, 8], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    y = fd.ops.exp(x)\n    fd.add_output(y)\n",
    )
    .unwrap();
    assert!(!p.source.contains("fb_flash_fwd"));
}

#[test]
fn past_head_dims_of_128_a_warp_takes_one_tile_of_queries() {
    let body = format!("{}    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v)\n{OUT}", qkv("[1, 2, 100, 256]", "BFloat16"));
    let p = planned(&body).unwrap();
    let k = &p.kernels[0];
    assert_eq!(k.grid, [2, 2, 1], "64 queries per block");
    assert!(unit(&p, &k.name).contains("fb_flash_fwd<true, 256, 256, false, 4, 64, 1, true>"));
    assert_eq!(k.shared_bytes, (64 + 64 + 64) * 264 * 2);
}

#[test]
fn a_sliced_and_permuted_projection_is_read_in_place() {
    let mut body =
        "    qkv = fd.define_tensor(shape=[2, 70, 3, 2, 64], contiguity=[True, True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)\n"
            .to_string();
    for (i, n) in ["q", "k", "v"].iter().enumerate() {
        body += &format!(
            "    {n}s = fd.ops.slice(qkv, start_indices=[0, 0, {i}, 0, 0], end_indices=[2, 70, {}, 2, 64], strides=[1, 1, 1, 1, 1])\n    {n}r = fd.ops.squeeze({n}s, dims=[2])\n    {n} = fd.ops.permute({n}r, dims=[0, 2, 1, 3])\n",
            i + 1
        );
    }
    body += "    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v)\n    fd.add_output(o)\n";
    let p = planned(&body).unwrap();
    assert_eq!(p.kernels.len(), 1, "no copies: {:?}", p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    let src = unit(&p, &p.kernels[0].name);
    // k and v start 64 and 128 elements in; rows step over the 3 x 2 x 64 projection; heads step 64.
    assert!(src.contains("long long qo = 0;\n    long long ko = 128;\n    long long vo = 256;"), "{src}");
    assert!(src.contains("qo += i * 64; ko += i * 64; vo += i * 64;"), "{src}");
    assert!(src.contains(", 70, 70, 384, 384, 384, "), "{src}");
}

#[test]
fn an_operand_without_unit_stride_is_copied_first_by_its_stage() {
    // q's head dim is not innermost in memory: written densely before the kernel.
    let body = "    qt = fd.define_tensor(shape=[1, 2, 32, 40], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    k = fd.define_tensor(shape=[1, 2, 40, 32], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    q = fd.ops.permute(qt, dims=[0, 1, 3, 2])
    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, k)
    fd.add_output(o)
";
    let p = planned(body).unwrap();
    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(p.kernels[1].schedule, Schedule::Attention);
    assert_ne!(p.kernels[0].schedule, Schedule::Attention);
}

#[test]
fn work_before_and_after_runs_in_kernels_of_its_stage() {
    let body = format!(
        "{}    qf = fd.ops.cast(q, dtype=DataType.Float)\n    q2 = fd.ops.mul(qf, 0.5)\n    q3 = fd.ops.cast(q2, dtype=DataType.BFloat16)\n    o, lse, seed, off = fd.ops.sdpfa_fwd(q3, k, v, is_causal=True)\n    of = fd.ops.cast(o, dtype=DataType.Float)\n    r = fd.ops.add(of, qf)\n    fd.add_output(r)\n",
        qkv("[1, 2, 96, 64]", "BFloat16")
    );
    let p = planned(&body).unwrap();
    let s: Vec<Schedule> = p.kernels.iter().map(|k| k.schedule).collect();
    assert_eq!(s.len(), 3, "{s:?}");
    assert_eq!(s[1], Schedule::Attention);
    // The attention's result is the plan's own output, read by the last kernel.
    let o = p.kernels[1].args[3];
    assert!(p.kernels[2].args.contains(&o), "{:?} reads {o:?}", p.kernels[2].args);
    assert!(p.kernels[2].name.starts_with("fb_s1_"));
}

#[test]
fn philox_outputs_get_buffers_only_where_read() {
    let body = format!(
        "{}    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v)\n    fd.add_output(o)\n    fd.add_output(seed)\n    fd.add_output(off)\n",
        qkv("[1, 1, 16, 16]", "Half")
    );
    let p = planned(&body).unwrap();
    let k = &p.kernels[0];
    // q, k, v, o, lse (hidden), seed, offset.
    assert_eq!(k.args.len(), 7, "{:?}", k.args);
    assert!(unit(&p, &k.name).contains("seed[i] = 0ull"));
    assert!(unit(&p, &k.name).contains("fb_flash_fwd<false, 16, 16, false, 4, 64, 2, true>"));
}

#[test]
fn a_scale_given_as_an_input_is_a_kernel_argument() {
    let body = format!(
        "{}    s = fd.define_scalar(dtype=DataType.Double)\n    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, scale=s)\n{OUT}",
        qkv("[1, 2, 40, 48]", "BFloat16")
    );
    let p = planned(&body).unwrap();
    assert_eq!(p.kernels[0].args.last(), Some(&KernelArg::Scalar(3)));
    assert!(all_units(&p).contains("(float)(scale * "));
    // Its sign is not known: the scores are scaled before their max.
    assert!(all_units(&p).contains(", 4, 64, 2, false>("));
}

#[test]
fn what_the_kernel_cannot_run_is_refused_with_why() {
    let cases = [
        ("[1, 2, 16, 16]", "dropout_p=0.1", "dropout_p = 0.1"),
        ("[1, 2, 16, 320]", "", "up to 256"),
        ("[1, 2, 0, 16]", "", "an extent of 0"),
        ("[1, 2, 16, 0]", "", "an extent of 0"),
        ("[0, 2, 16, 16]", "", "0 batch rows"),
    ];
    for (shape, arg, says) in cases {
        let body = format!("{}    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, {arg})\n{OUT}", qkv(shape, "BFloat16"));
        let e = planned(&body).unwrap_err();
        assert!(e.contains(says), "{e}");
    }
    // A causal mask over unequal lengths, and a flag that is not a constant.
    let body = "    q = fd.define_tensor(shape=[1, 1, 8, 16], contiguity=[None, None, True, True], dtype=DataType.BFloat16, is_cpu=False)
    k = fd.define_tensor(shape=[1, 1, 12, 16], contiguity=[None, None, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, k, is_causal=True)
    fd.add_output(o)
";
    assert!(planned(body).unwrap_err().contains("only equal lengths"));
    let body = format!(
        "{}    c = fd.define_scalar(dtype=DataType.Bool)\n    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, is_causal=c)\n{OUT}",
        qkv("[1, 2, 16, 16]", "BFloat16")
    );
    assert!(planned(&body).unwrap_err().contains("is not a constant"));
}

#[test]
fn attention_beside_a_linear_runs_both() {
    let body = format!(
        "    x = fd.define_tensor(shape=[8, 8], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n{}    l = fd.ops.linear(x, x)\n    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v)\n    fd.add_output(o)\n    fd.add_output(l)\n",
        qkv("[1, 2, 4, 8]", "BFloat16")
    );
    let p = planned(&body).unwrap();
    assert_eq!(p.products.len(), 1);
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.kernels[0].schedule, Schedule::Attention);
}

#[test]
fn the_backward_is_two_kernels_sharing_d() {
    let body = format!(
        "{}    g = fd.define_tensor(shape=[1, 2, 70, 64], contiguity=[None, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, is_causal=True)
    dq, dk, dv = fd.ops.sdpfa_bwd(g, q, k, v, o, lse, dropout_p=0.0, is_causal=True, philox_seed=seed, philox_offset=off)
    fd.add_output(dq)
    fd.add_output(dk)
    fd.add_output(dv)
",
        qkv("[1, 2, 70, 64]", "BFloat16")
    );
    let p = planned(&body).unwrap();
    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    for (name, what) in names.iter().zip(["fwd", "dq", "dkv"]) {
        assert!(name.starts_with(&format!("fb_attn_{what}_bf16_64x64_")), "{name}");
    }
    assert_eq!(p.units(false).len(), 3, "each kernel a unit of its own, compiled at once");
    // D = rowsum(dO * O) in one temporary, written by the first and read by the second.
    assert_eq!((p.temps.len(), p.temps[0].elements), (1, 2 * 70));
    assert!(p.kernels[1].args.contains(&KernelArg::Temp(0)) && p.kernels[2].args.contains(&KernelArg::Temp(0)));
    // The forward's output and log-sum-exp are the plan's own outputs, read by both.
    let (o, lse) = (p.kernels[0].args[3], p.kernels[0].args[4]);
    assert!(p.kernels[1].args.contains(&o) && p.kernels[1].args.contains(&lse));
    assert_eq!(p.kernels[1].args[6], KernelArg::Output(0), "dq");
    assert_eq!(p.kernels[2].args[6..8], [KernelArg::Output(1), KernelArg::Output(2)], "dk, dv");
    let src = unit(&p, names[1]);
    assert!(src.contains("fb_flash_bwd_dq<true, 64, 64, true, 64>"), "{src}");
    assert!(unit(&p, names[2]).contains("void fb_flash_bwd_dkv("), "the backward's prelude section");
}
