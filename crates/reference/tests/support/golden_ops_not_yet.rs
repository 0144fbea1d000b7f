//! Golden-ops cases the CPU reference cannot run or match yet, each with why
//! (see tests/golden_ops.rs). Remove a case once it passes: the test fails
//! while a listed case passes. Regenerate the reasons with
//! `GOLDEN_OPS_NOT_YET=print cargo test -p fusebench-reference --test golden_ops -- --nocapture`.

pub const NOT_YET: &[(&str, &str)] = &[
    ("add_output_alias_int64_counter", "out0: 4 of 4 elements outside tolerance, max abs err 5.000e0, max rel err 0.000e0; first at [0]: 36,..."),
    ("binary_bitwise_right_shift_uint64", "parse: fd.ops.bitwise_right_shift: bitwise_right_shift on UInt64 is not supported: fusebench compute..."),
    ("binary_gcd_uint64", "parse: fd.ops.gcd: gcd on UInt64 is not supported: fusebench computes only these ops on UInt64: add,..."),
    ("binary_mod_uint64", "parse: fd.ops.mod: mod on UInt64 is not supported: fusebench computes only these ops on UInt64: add,..."),
    ("cast_e5m2_to_e5m2", "out0: 2 of 15 elements differ (exact op); first at 2: 57344, nvFuser inf"),
    ("iota_scalar_inputs", "parse: fd.ops.iota: length c0 must be a constant known when the fusion is built"),
    ("max_broadcast_input_f32", "parse: fd.ops.squeeze: dim 0 has extent 5; only extent-1 dims can be squeezed"),
    ("min_broadcast_input_f32", "parse: fd.ops.squeeze: dim 0 has extent 5; only extent-1 dims can be squeezed"),
    ("preprocess_grouped_matmul_input_sf_f32", "parse: refused: its output is a swizzled, padded block-scale buffer its [m, k] shape does not describe; nvFuser's recorded out0 holds uninitialized padding"),
    ("prod_broadcast_input_f32", "parse: fd.ops.squeeze: dim 0 has extent 5; only extent-1 dims can be squeezed"),
    ("rand_like_bf16", "out0: 34 of 35 elements outside tolerance, max abs err 8.643e-1, max rel err 2.608e1; first at [0, 0..."),
    ("rand_like_f32", "out0: 35 of 35 elements outside tolerance, max abs err 8.127e-1, max rel err 2.418e1; first at [0, 0..."),
    ("rand_like_f64", "out0: 35 of 35 elements outside tolerance, max abs err 7.814e-1, max rel err 1.119e1; first at [0, 0..."),
    ("randn_like_bf16", "out0: 35 of 35 elements outside tolerance, max abs err 3.156e0, max rel err 5.478e2; first at [0, 0]..."),
    ("randn_like_f32", "out0: 35 of 35 elements outside tolerance, max abs err 3.242e0, max rel err 2.409e1; first at [0, 0]..."),
    ("randn_like_f64", "out0: 35 of 35 elements outside tolerance, max abs err 3.902e0, max rel err 2.914e2; first at [0, 0]..."),
    ("sdpfa_bwd_bf16", "out1 (grad_query): 8 of 288 beyond 2 bf16 ulps: flash rounds dS to bf16 before dQ = dS.K, whose terms cancel, and dq is ill-conditioned in O (ours differs by an ulp); checked within that rounding in tests/attention_gemm.rs"),
    ("squeeze_expanded_f32", "parse: fd.ops.squeeze: dim 1 has extent 3; only extent-1 dims can be squeezed"),
    ("sum_broadcast_input_f32", "parse: fd.ops.squeeze: dim 0 has extent 5; only extent-1 dims can be squeezed"),
    ("unary_isnan_uint64", "parse: fd.ops.isnan: isnan on UInt64 is not supported: fusebench computes only these ops on UInt64: ..."),
    ("unary_isreal_uint64", "parse: fd.ops.isreal: isreal on UInt64 is not supported: fusebench computes only these ops on UInt64..."),
    ("unary_real_e5m2", "out0: 2 of 35 elements differ (exact op); first at 2: 57344, nvFuser inf"),
    ("var_mean_int64", "parse: fd.ops.welford: input tv0 must be floating point, got Int"),
    ("welford_int64", "parse: fd.ops.welford: input tv0 must be floating point, got Int"),
    ("where_f32_scalar_branch", "parse: expected torch.randn(...) before .as_strided, found `torch.randint(0, 2, (35,), dtype=torch.b..."),
];
