//! `sdpfa_fwd` on the GPU: one kernel of the device prelude's flash
//! attention (`prelude/attention.cu`), placed by the product stages of
//! `gemm.rs` like a matrix product: its operands are read where they lie and
//! its results are buffers later stages read.
//!
//! The kernel is a template instantiated per fusion by a small wrapper that
//! bakes in the head dims, the causal flag, the scale and every stride: a
//! block of `Device::attention_warps` warps per 16 queries each of one batch
//! row (`[*N, H]`), walking the keys `Device::attention_keys` at a time.

use crate::plan::{code_hash, Choice, Kernel, KernelArg, Schedule};
use crate::{CodegenError, Device};
use fusebench_ir::op_gemm::{attention_dims, GemmOp};
use fusebench_ir::{DType, Fusion, Literal, Node, Op, ValueId};

/// Where a value lies: buffer, logical strides, element offset.
pub(crate) type Place = (KernelArg, Vec<i64>, i64);

/// Widest head dim planned: Q, K and V tiles of 64 rows fit the shared
/// memory a block may opt into (227 KiB on sm_90) up to 256.
const MAX_HEAD: usize = 256;

fn unsupported(m: String) -> CodegenError {
    CodegenError::Unsupported(m)
}

/// The node's flags: causal, and the scale as a constant or a scalar input.
enum Scale {
    Constant(f64),
    Input(usize),
}

fn constant(f: &Fusion, v: ValueId, what: &str) -> Result<Literal, CodegenError> {
    f.value(v).constant.ok_or_else(|| {
        unsupported(format!(
            "sdpfa_fwd's {what} ({}) is not a constant: the GPU kernel is compiled for one value",
            f.value(v).name
        ))
    })
}

/// The kernel of `n` (an `sdpfa_fwd`, node `index`), reading its operands
/// at `place` and writing `outs` (attention, log-sum-exp, and the philox
/// seed and offset where anything reads them); or the operand the kernel
/// cannot read as laid out, to be copied densely first.
pub(crate) fn kernel(
    f: &Fusion,
    n: &Node,
    index: usize,
    place: &dyn Fn(ValueId) -> Result<Place, CodegenError>,
    outs: &[Option<KernelArg>],
    dev: Device,
) -> Result<Result<(Kernel, String), ValueId>, CodegenError> {
    let Op::Gemm(GemmOp::SdpfaFwd {
        query,
        key,
        value,
        dropout_p,
        is_causal,
        scale,
    }) = n.op
    else {
        unreachable!("attention::kernel takes sdpfa_fwd only")
    };
    let name = |v: ValueId| f.value(v).name.clone();
    let shape = |v: ValueId| f.value(v).shape.clone().unwrap_or_default();
    let (sq, sk, sv) = (shape(query), shape(key), shape(value));
    let (batch, l, s, e, ev) = attention_dims("sdpfa_fwd", &sq, &sk, &sv).map_err(|e| unsupported(e.to_string()))?;
    let dtype = f.value(query).dtype;
    if let Some(p) = dropout_p {
        let p = constant(f, p, "dropout_p")?.as_f64();
        if p != 0.0 {
            return Err(unsupported(format!(
                "sdpfa_fwd with dropout_p = {p}: its mask is PyTorch's Philox stream inside the flash kernel; only 0 runs"
            )));
        }
    }
    let causal = match is_causal {
        Some(c) => constant(f, c, "is_causal")?.as_bool(),
        None => false,
    };
    if causal && l != s {
        return Err(unsupported(format!(
            "sdpfa_fwd causal with {l} queries and {s} keys: only equal lengths run (as on the CPU reference)"
        )));
    }
    if e > MAX_HEAD || ev > MAX_HEAD {
        return Err(unsupported(format!(
            "sdpfa_fwd with head dims {e} and {ev}: the GPU kernel takes up to {MAX_HEAD}"
        )));
    }
    let scale = match scale {
        None => Scale::Constant(1.0 / (e as f64).sqrt()),
        Some(v) => match f.value(v).constant {
            Some(c) => Scale::Constant(c.as_f64()),
            None => match f.inputs.iter().position(|&i| i == v) {
                Some(i) => Scale::Input(i),
                None => {
                    return Err(unsupported(format!(
                        "sdpfa_fwd's scale ({}) computed in the fusion: the kernel takes a constant or a scalar input",
                        name(v)
                    )))
                }
            },
        },
    };
    let nb: usize = batch.iter().product();
    if nb > 65535 {
        return Err(unsupported(format!("sdpfa_fwd over {nb} batch rows (the grid's y holds 65535)")));
    }
    // Each operand: last dim at unit stride, rows 16-byte aligned (the
    // tiles are copied 8 elements at a time), batch dims at any stride.
    let mut ops = vec![];
    for (v, sh) in [(query, &sq), (key, &sk), (value, &sv)] {
        let (arg, st, off) = place(v)?;
        let r = sh.len();
        let aligned = off % 8 == 0 && st[r - 2] % 8 == 0 && st[r - 2] >= 0;
        if st[r - 1] != 1 || !aligned || st.iter().any(|&x| x < 0) {
            return Ok(Err(v));
        }
        // Strides per dim of the common batch (0 where the operand broadcasts).
        let lead = batch.len() - (r - 2);
        let bs: Vec<i64> = (0..batch.len())
            .map(|i| if i < lead || sh[i - lead] == 1 { 0 } else { st[i - lead] })
            .collect();
        ops.push((arg, off, st[r - 2], bs));
    }
    let (Some(o), Some(lse)) = (outs[0], outs[1]) else {
        unreachable!("the attention and its log-sum-exp always have buffers")
    };
    let kname = format!("fb_attn{index}");
    let elem = if dtype == DType::BFloat16 { "fb_bf16" } else { "fb_f16" };
    let mut params = vec![
        format!("const {elem}* __restrict__ q"),
        format!("const {elem}* __restrict__ k"),
        format!("const {elem}* __restrict__ v"),
        format!("{elem}* __restrict__ o"),
        "float* __restrict__ lse".to_string(),
    ];
    let mut args = vec![ops[0].0, ops[1].0, ops[2].0, o, lse];
    let mut zero = String::new();
    for (i, what) in [(2, "seed"), (3, "offset")] {
        if let Some(a) = outs.get(i).copied().flatten() {
            params.push(format!("unsigned long long* __restrict__ {what}"));
            args.push(a);
            let count = if i == 2 { 2 } else { 1 };
            zero.push_str(&format!("        for (int i = 0; i < {count}; ++i) {what}[i] = 0ull;\n"));
        }
    }
    let log2e = std::f64::consts::LOG2_E;
    let scale_text = match scale {
        Scale::Constant(c) => format!("{c}"),
        Scale::Input(i) => format!("input {i}"),
    };
    let scale_expr = match scale {
        Scale::Constant(c) => format!("{:e}f", (c * log2e) as f32),
        Scale::Input(i) => {
            params.push("double scale".into());
            args.push(KernelArg::Scalar(i));
            format!("(float)(scale * {log2e:e})")
        }
    };
    // Two tiles of queries per warp hold twice the scores and outputs in
    // registers: past head dims of 128 they spill (ptxas, sm_90), so one.
    let wide = e.max(ev).div_ceil(16) * 16 > 128;
    let tiles = if wide { 1 } else { dev.attention_tiles as usize };
    let (warps, keys) = (dev.attention_warps as usize, dev.attention_keys as usize);
    let (queries, threads) = (16 * warps * tiles, 32 * warps);
    let mut body = String::new();
    // The batch row's offset in each operand, innermost batch dim first.
    body.push_str("    long long b = blockIdx.y;\n");
    body.push_str(&format!(
        "    long long qo = {}, ko = {}, vo = {};\n",
        ops[0].1, ops[1].1, ops[2].1
    ));
    for (d, &extent) in batch.iter().enumerate().rev() {
        let (a, b, c) = (ops[0].3[d], ops[1].3[d], ops[2].3[d]);
        if extent > 1 && (a, b, c) != (0, 0, 0) {
            body.push_str(&format!(
                "    {{ const long long i = b % {extent}; qo += i * {a}; ko += i * {b}; vo += i * {c}; }}\n"
            ));
        }
        if extent > 1 {
            body.push_str(&format!("    b /= {extent};\n"));
        }
    }
    if !zero.is_empty() {
        // PyTorch leaves the philox outputs unwritten without dropout; the
        // reference writes zeros, and so does this.
        body.push_str("    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {\n");
        body.push_str(&zero);
        body.push_str("    }\n");
    }
    body.push_str(&format!(
        "    fb_flash_fwd<{bf}, {e}, {ev}, {causal}, {warps}, {keys}, {tiles}, {pos}>(q + qo, k + ko, v + vo, o + (long long)blockIdx.y * {ol}, \
         lse + (long long)blockIdx.y * {l}, {l}, {s}, {qs}, {ks}, {vs}, {scale_expr});\n",
        bf = dtype == DType::BFloat16,
        pos = matches!(scale, Scale::Constant(c) if c > 0.0),
        ol = l * ev,
        qs = ops[0].2,
        ks = ops[1].2,
        vs = ops[2].2,
    ));
    let src = format!(
        "extern \"C\" __global__ void __launch_bounds__({threads}) {kname}({}) {{\n{body}}}\n",
        params.join(", ")
    );
    let pad = |d: usize| d.div_ceil(16) * 16 + 8;
    let shared_bytes = (2 * ((queries + keys) * pad(e) + keys * pad(ev))) as u32;
    let kernel = Kernel {
        name: kname,
        schedule: Schedule::Attention,
        grid: [l.div_ceil(queries) as u32, nb as u32, 1],
        block: [threads as u32, 1, 1],
        args,
        summary: format!(
            "flash attention {} = softmax({scale_text} {} x {}^T{}) x {}: batch {nb}, {l} queries, {s} keys, head dims {e}/{ev}, {dtype}",
            name(n.outputs[0]),
            name(query),
            name(key),
            if causal { ", causal mask" } else { "" },
            name(value)
        ),
        code_hash: code_hash(&format!("{src}{}", crate::prelude::ATTENTION)),
        choice: Some(Choice::only(
            "attention",
            format!(
                "sdpfa_fwd: FlashAttention-2's scheme, {queries} queries per block, keys {keys} at a time, mma.sync with f32 accumulation"
            ),
        )),
        shared_bytes,
        fill: None,
    };
    Ok(Ok((kernel, src)))
}
