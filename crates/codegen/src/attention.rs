//! `sdpfa_fwd` and `sdpfa_bwd` on the GPU: kernels of the device prelude's
//! flash attention (`prelude/attention.cu`, `prelude/attention_bwd.cu`),
//! placed by the product stages of `gemm.rs` like a matrix product: their
//! operands are read where they lie and their results are buffers later
//! stages read. The backward is two kernels (dQ with D = rowsum(dO * O) into
//! a temporary, then dK and dV), 64 rows a block, 4 warps.
//!
//! Each kernel is a template instantiated by a small wrapper that bakes in
//! the head dims, the causal flag, the scale, the lengths and every stride,
//! and is a translation unit of its own (`plan::Module`), named by a hash of
//! its wrapper: compiled beside the fusion's module, and once for every
//! fusion with the same attention (a model's layers). Lengths and strides as
//! arguments instead, one unit per head dim and dtype, measured 1.058x
//! slower (BENCHMARKS.md, session 33): the backward's kernels, at the edge
//! of the registers, lost blocks or spilled. The
//! forward's block is `Device::attention_warps` warps of
//! `Device::attention_tiles` tiles of 16 queries of one batch row (`[*N, H]`),
//! walking the keys `Device::attention_keys` at a time.

use crate::gemm::Place;
use crate::plan::{code_hash, Choice, Kernel, KernelArg, Module, Schedule, Temp};
use crate::{CodegenError, Device};
use fusebench_ir::op_gemm::{attention_dims, GemmOp};
use fusebench_ir::{DType, Fusion, Literal, Node, Op, ValueId};

/// What an attention node or a grouped product becomes in the plan.
pub(crate) struct Placed {
    pub kernels: Vec<Kernel>,
    /// Source joined to the fusion's module.
    pub text: String,
    /// Translation units of their own (attention's, `plan::Module`).
    pub modules: Vec<Module>,
    /// The temporary the kernels share (the backward's D).
    pub temp: Option<Temp>,
}

/// Widest head dim planned: Q, K and V tiles of 64 rows fit the shared
/// memory a block may opt into (227 KiB on sm_90) up to 256.
const MAX_HEAD: usize = 256;

fn unsupported(m: String) -> CodegenError {
    CodegenError::Unsupported(m)
}

/// The scale: a constant or a scalar input of the fusion.
#[derive(Clone, Copy)]
enum Scale {
    Constant(f64),
    Input(usize),
}

fn constant(f: &Fusion, op: &str, v: ValueId, what: &str) -> Result<Literal, CodegenError> {
    f.value(v).constant.ok_or_else(|| {
        unsupported(format!(
            "{op}'s {what} ({}) is not a constant: the GPU kernel is compiled for one value",
            f.value(v).name
        ))
    })
}

/// Causal flag and scale of a flash call (`default_dim`: the head dim
/// nvFuser's default scale reads), and its batch rows (the grid's y), with
/// what the kernels cannot run refused.
fn flags(
    f: &Fusion,
    op: &str,
    (dropout_p, is_causal, scale): (Option<ValueId>, Option<ValueId>, Option<ValueId>),
    default_dim: usize,
    (batch, l, s, e, ev): (&[usize], usize, usize, usize, usize),
) -> Result<(bool, Scale, usize), CodegenError> {
    if let Some(p) = dropout_p {
        let p = constant(f, op, p, "dropout_p")?.as_f64();
        if p != 0.0 {
            return Err(unsupported(format!(
                "{op} with dropout_p = {p}: its mask is PyTorch's Philox stream inside the flash kernel; only 0 runs"
            )));
        }
    }
    let causal = match is_causal {
        Some(c) => constant(f, op, c, "is_causal")?.as_bool(),
        None => false,
    };
    if causal && l != s {
        return Err(unsupported(format!(
            "{op} causal with {l} queries and {s} keys: only equal lengths run (as on the CPU reference)"
        )));
    }
    if e > MAX_HEAD || ev > MAX_HEAD {
        return Err(unsupported(format!("{op} with head dims {e} and {ev}: the GPU kernel takes up to {MAX_HEAD}")));
    }
    if [l, s, e, ev].contains(&0) {
        return Err(unsupported(format!(
            "{op} with an extent of 0 ({l} queries, {s} keys, head dims {e} and {ev}): the kernels are not planned for empty tensors"
        )));
    }
    let scale = match scale {
        None => Scale::Constant(1.0 / (default_dim as f64).sqrt()),
        Some(v) => match f.value(v).constant {
            Some(c) => Scale::Constant(c.as_f64()),
            None => match f.inputs.iter().position(|&i| i == v) {
                Some(i) => Scale::Input(i),
                None => {
                    return Err(unsupported(format!(
                        "{op}'s scale ({}) computed in the fusion: the kernel takes a constant or a scalar input",
                        f.value(v).name
                    )))
                }
            },
        },
    };
    let nb: usize = batch.iter().product();
    if nb == 0 || nb > 65535 {
        return Err(unsupported(format!("{op} over {nb} batch rows (the grid's y holds 1 to 65535)")));
    }
    Ok((causal, scale, nb))
}

/// An operand as a kernel reads it: buffer, element offset, row stride and
/// a stride per dim of the common batch (0 where it broadcasts).
struct Read {
    arg: KernelArg,
    offset: i64,
    row: i64,
    batch: Vec<i64>,
}

/// `v` (`[*b, rows, cols]`) read with its last dim at unit stride and, for
/// 16-bit tiles copied 8 elements at a time, rows 16-byte aligned; `None`
/// where it must be copied densely first.
fn read(place: &Place, shape: &[usize], batch: &[usize], tiled: bool) -> Option<Read> {
    let (arg, st, off) = place;
    let r = shape.len();
    let row = if r >= 2 { st[r - 2] } else { 0 };
    let aligned = !tiled || (off % 8 == 0 && row % 8 == 0);
    if (shape[r - 1] > 1 && st[r - 1] != 1) || !aligned || st.iter().any(|&x| x < 0) {
        return None;
    }
    let tail = if tiled { 2 } else { 1 };
    let lead = batch.len() - (r - tail);
    let batch = (0..batch.len())
        .map(|i| if i < lead || shape[i - lead] == 1 { 0 } else { st[i - lead] })
        .collect();
    Some(Read { arg: *arg, offset: *off, row, batch })
}

/// The wrapper's code placing each operand (named) at its batch row
/// `blockIdx.y`, innermost batch dim first: `long long NAMEo`.
fn batch_offsets(batch: &[usize], reads: &[(&str, &Read)]) -> String {
    let mut c = String::from("    long long b = blockIdx.y;\n");
    for (n, r) in reads {
        c.push_str(&format!("    long long {n}o = {};\n", r.offset));
    }
    for (d, &extent) in batch.iter().enumerate().rev() {
        if extent <= 1 {
            continue;
        }
        let steps: Vec<String> = reads
            .iter()
            .filter(|(_, r)| r.batch[d] != 0)
            .map(|(n, r)| format!("{n}o += i * {};", r.batch[d]))
            .collect();
        if !steps.is_empty() {
            c.push_str(&format!("    {{ const long long i = b % {extent}; {} }}\n", steps.join(" ")));
        }
        c.push_str(&format!("    b /= {extent};\n"));
    }
    c
}

/// The scale's spellings: for people, times log2(e) in the kernel (a
/// literal or from the `scale` parameter, which it then adds), and itself.
fn scale_code(scale: Scale, params: &mut Vec<String>, args: &mut Vec<KernelArg>) -> (String, String, String) {
    let log2e = std::f64::consts::LOG2_E;
    match scale {
        Scale::Constant(c) => (format!("{c}"), format!("{:e}f", (c * log2e) as f32), format!("{:e}f", c as f32)),
        Scale::Input(i) => {
            params.push("double scale".into());
            args.push(KernelArg::Scalar(i));
            (format!("input {i}"), format!("(float)(scale * {log2e:e})"), "(float)scale".into())
        }
    }
}

fn elem(dtype: DType) -> &'static str {
    if dtype == DType::BFloat16 {
        "fb_bf16"
    } else {
        "fb_f16"
    }
}

/// The name of a kernel `what` (with `tag`, its dtype and head dims, for
/// people) whose wrapper has `params` and `body`: the same attention in any
/// fusion gets the same name, and so the same unit and cache entry.
fn unit_name(what: &str, tag: &str, threads: usize, params: &[String], body: &str) -> String {
    let hash = code_hash(&format!("{threads}\n{}\n{body}", params.join(", ")));
    format!("fb_attn_{what}_{tag}_{hash}")
}


/// `bf16_128x128`: the dtype and head dims, in a kernel's name.
fn tag(dtype: DType, e: usize, ev: usize) -> String {
    format!("{}_{e}x{ev}", if dtype == DType::BFloat16 { "bf16" } else { "f16" })
}

/// A kernel of `threads` a block calling a template of the prelude; with
/// `min_blocks` the compiler keeps its registers within what lets that many
/// blocks share a multiprocessor.
pub(crate) fn wrapper(name: &str, threads: usize, min_blocks: usize, params: &[String], body: &str) -> String {
    let bounds = if min_blocks > 0 { format!("{threads}, {min_blocks}") } else { threads.to_string() };
    format!(
        "extern \"C\" __global__ void __launch_bounds__({bounds}) {name}({}) {{\n{body}}}\n",
        params.join(", ")
    )
}

/// The kernel of `n` (an `sdpfa_fwd`), reading its operands at `place` and
/// writing `outs` (attention, log-sum-exp, and the philox seed and offset
/// where anything reads them), in a unit of its own; or the operand the
/// kernel cannot read as laid out, to be copied densely first.
pub(crate) fn kernel(
    f: &Fusion,
    n: &Node,
    place: &dyn Fn(ValueId) -> Result<Place, CodegenError>,
    outs: &[Option<KernelArg>],
    dev: Device,
) -> Result<Result<Placed, ValueId>, CodegenError> {
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
    let (causal, scale, nb) = flags(f, "sdpfa_fwd", (dropout_p, is_causal, scale), e, (&batch, l, s, e, ev))?;
    let mut ops = vec![];
    for (v, sh) in [(query, &sq), (key, &sk), (value, &sv)] {
        match read(&place(v)?, sh, &batch, true) {
            Some(r) => ops.push(r),
            None => return Ok(Err(v)),
        }
    }
    let (Some(o), Some(lse)) = (outs[0], outs[1]) else {
        unreachable!("the attention and its log-sum-exp always have buffers")
    };
    let el = elem(dtype);
    let mut params = vec![
        format!("const {el}* __restrict__ q"),
        format!("const {el}* __restrict__ k"),
        format!("const {el}* __restrict__ v"),
        format!("{el}* __restrict__ o"),
        "float* __restrict__ lse".to_string(),
    ];
    let mut args = vec![ops[0].arg, ops[1].arg, ops[2].arg, o, lse];
    let mut zero = String::new();
    for (i, what) in [(2, "seed"), (3, "offset")] {
        if let Some(a) = outs.get(i).copied().flatten() {
            params.push(format!("unsigned long long* __restrict__ {what}"));
            args.push(a);
            let count = if i == 2 { 2 } else { 1 };
            zero.push_str(&format!("        for (int i = 0; i < {count}; ++i) {what}[i] = 0ull;\n"));
        }
    }
    let (scale_text, scale_log2, _) = scale_code(scale, &mut params, &mut args);
    // Two tiles of queries per warp hold twice the scores and outputs in
    // registers: past head dims of 128 they spill (ptxas, sm_90), so one.
    let wide = e.max(ev).div_ceil(16) * 16 > 128;
    let tiles = if wide { 1 } else { dev.attention_tiles as usize };
    let (warps, keys) = (dev.attention_warps as usize, dev.attention_keys as usize);
    let (queries, threads) = (16 * warps * tiles, 32 * warps);
    let mut body = batch_offsets(&batch, &[("q", &ops[0]), ("k", &ops[1]), ("v", &ops[2])]);
    if !zero.is_empty() {
        // PyTorch leaves the philox outputs unwritten without dropout; the
        // reference writes zeros, and so does this.
        body.push_str("    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {\n");
        body.push_str(&zero);
        body.push_str("    }\n");
    }
    body.push_str(&format!(
        "    fb_flash_fwd<{bf}, {e}, {ev}, {causal}, {warps}, {keys}, {tiles}, {pos}>(q + qo, k + ko, v + vo, o + (long long)blockIdx.y * {ol}, \
         lse + (long long)blockIdx.y * {l}, {l}, {s}, {qs}, {ks}, {vs}, {scale_log2});\n",
        bf = dtype == DType::BFloat16,
        pos = matches!(scale, Scale::Constant(c) if c > 0.0),
        ol = l * ev,
        qs = ops[0].row,
        ks = ops[1].row,
        vs = ops[2].row,
    ));
    let kname = unit_name("fwd", &tag(dtype, e, ev), threads, &params, &body);
    let module = Module::alone(&kname, &wrapper(&kname, threads, 0, &params, &body));
    let pad = |d: usize| d.div_ceil(16) * 16 + 8;
    let shared_bytes = (2 * ((queries + keys) * pad(e) + keys * pad(ev))) as u32;
    let kernel = Kernel {
        code_hash: code_hash(&module.source),
        choice: Some(Choice::only(
            "attention",
            format!(
                "sdpfa_fwd: FlashAttention-2's scheme, {queries} queries per block, keys {keys} at a time, mma.sync with f32 accumulation; {APART}"
            ),
        )),
        shared_bytes,
        ..Kernel::new(
            kname,
            Schedule::Attention,
            [l.div_ceil(queries) as u32, nb as u32, 1],
            [threads as u32, 1, 1],
            args,
            format!(
                "flash attention {} = softmax({scale_text} {} x {}^T{}) x {}: batch {nb}, {l} queries, {s} keys, head dims {e}/{ev}, {dtype}",
                name(n.outputs[0]),
                name(query),
                name(key),
                if causal { ", causal mask" } else { "" },
                name(value)
            ),
        )
    };
    Ok(Ok(Placed { kernels: vec![kernel], text: String::new(), modules: vec![module], temp: None }))
}

/// What `emit` says of where an attention kernel is compiled.
const APART: &str = "a unit of its own, compiled beside the fusion's and shared by every fusion with this attention";

/// Rows the backward's loop takes per step (`prelude/attention_bwd.cu`'s BN).
const BWD_STEP: usize = 64;

/// One of the backward's kernels: 4 warps, in a unit of its own, `text`
/// its wrapper.
fn bwd_kernel(name: String, grid: [u32; 3], args: Vec<KernelArg>, summary: String, why: &str, text: &str, shared: usize) -> (Kernel, Module) {
    let module = Module::alone(&name, text);
    let kernel = Kernel {
        code_hash: code_hash(&module.source),
        choice: Some(Choice::only("attention", format!("{why}; {APART}"))),
        shared_bytes: shared as u32,
        ..Kernel::new(name, Schedule::Attention, grid, [128, 1, 1], args, summary)
    };
    (kernel, module)
}

/// The two kernels of `n` (an `sdpfa_bwd`), each in a unit of its own,
/// with the temporary of D (`temp`: its index in the joined plan) they share;
/// or the operand to copy densely first.
pub(crate) fn backward(
    f: &Fusion,
    n: &Node,
    place: &dyn Fn(ValueId) -> Result<Place, CodegenError>,
    outs: &[KernelArg],
    temp: usize,
) -> Result<Result<Placed, ValueId>, CodegenError> {
    let Op::Gemm(GemmOp::SdpfaBwd {
        grad_output,
        query,
        key,
        value,
        output,
        logsumexp,
        dropout_p,
        is_causal,
        scale,
        ..
    }) = n.op
    else {
        unreachable!("attention::backward takes sdpfa_bwd only")
    };
    let op = "sdpfa_bwd";
    let name = |v: ValueId| f.value(v).name.clone();
    let shape = |v: ValueId| f.value(v).shape.clone().unwrap_or_default();
    let (sq, sk, sv) = (shape(query), shape(key), shape(value));
    let (batch, l, s, e, ev) = attention_dims(op, &sq, &sk, &sv).map_err(|e| unsupported(e.to_string()))?;
    // nvFuser's default scale reads the last dim of grad_output (Ev).
    let (causal, scale, nb) = flags(f, op, (dropout_p, is_causal, scale), ev, (&batch, l, s, e, ev))?;
    let dtype = f.value(query).dtype;
    let operands = [(grad_output, true), (query, true), (key, true), (value, true), (output, true), (logsumexp, false)];
    let mut reads = vec![];
    for (v, tiled) in operands {
        let sh = shape(v);
        let tail = if tiled { 2 } else { 1 };
        // Gradients of an operand broadcast over batch dims would be sums over them.
        if sh.len() != batch.len() + tail || sh[..batch.len()] != batch[..] {
            return Err(unsupported(format!(
                "{op} with {} {sh:?} broadcast over the batch dims {batch:?}: its gradient would be summed over them",
                name(v)
            )));
        }
        match read(&place(v)?, &sh, &batch, tiled) {
            Some(r) => reads.push(r),
            None => return Ok(Err(v)),
        }
    }
    let [dout, q, k, v, o, lse] = [0, 1, 2, 3, 4, 5].map(|i| &reads[i]);
    let el = elem(dtype);
    let bf = dtype == DType::BFloat16;
    let (dq, dk, dv) = (outs[0], outs[1], outs[2]);
    let d = KernelArg::Temp(temp);
    let mut placed = Placed { kernels: vec![], text: String::new(), modules: vec![], temp: None };
    let pad = |x: usize| x.div_ceil(16) * 16 + 8;
    let tiles16 = 2 * (64 * (pad(e) + pad(ev)) + 2 * BWD_STEP * (pad(e) + pad(ev)));
    let offsets = |names: &[(&str, &Read)]| batch_offsets(&batch, names);
    // dQ and D.
    {
        let mut params = vec![
            format!("const {el}* __restrict__ q"),
            format!("const {el}* __restrict__ k"),
            format!("const {el}* __restrict__ v"),
            format!("const {el}* __restrict__ o"),
            format!("const {el}* __restrict__ dout"),
            "const float* __restrict__ lse".into(),
            format!("{el}* __restrict__ dq"),
            "float* __restrict__ dsum".into(),
        ];
        let mut args = vec![q.arg, k.arg, v.arg, o.arg, dout.arg, lse.arg, dq, d];
        let (scale_text, scale_log2, scale_f) = scale_code(scale, &mut params, &mut args);
        let mut body = offsets(&[("q", q), ("k", k), ("v", v), ("o", o), ("dout", dout), ("lse", lse)]);
        body.push_str(&format!(
            "    fb_flash_bwd_dq<{bf}, {e}, {ev}, {causal}, {BWD_STEP}>(q + qo, k + ko, v + vo, o + oo, dout + douto, lse + lseo, \
             dq + (long long)blockIdx.y * {dql}, dsum + (long long)blockIdx.y * {l}, {l}, {s}, {qs}, {ks}, {vs}, {os}, {dos}, {scale_log2}, {scale_f});\n",
            dql = l * e,
            qs = q.row,
            ks = k.row,
            vs = v.row,
            os = o.row,
            dos = dout.row,
        ));
        let summary = format!(
            "flash attention backward {} (scale {scale_text}{}): dQ of 64 queries a block, and D = rowsum({} * {}); batch {nb}, {l} queries, {s} keys, head dims {e}/{ev}, {dtype}",
            name(n.outputs[0]),
            if causal { ", causal mask" } else { "" },
            name(grad_output),
            name(output)
        );
        let why = "sdpfa_bwd: FlashAttention-2's scheme without atomics, dQ by blocks of queries walking the keys";
        let kname = unit_name("dq", &tag(dtype, e, ev), 128, &params, &body);
        let text = wrapper(&kname, 128, 0, &params, &body);
        let (kernel, module) = bwd_kernel(kname, [l.div_ceil(64) as u32, nb as u32, 1], args, summary, why, &text, tiles16 + 4 * 128);
        placed.kernels.push(kernel);
        placed.modules.push(module);
    }
    // dK and dV.
    {
        let mut params = vec![
            format!("const {el}* __restrict__ q"),
            format!("const {el}* __restrict__ k"),
            format!("const {el}* __restrict__ v"),
            format!("const {el}* __restrict__ dout"),
            "const float* __restrict__ lse".into(),
            "const float* __restrict__ dsum".into(),
            format!("{el}* __restrict__ dk"),
            format!("{el}* __restrict__ dv"),
        ];
        let mut args = vec![q.arg, k.arg, v.arg, dout.arg, lse.arg, d, dk, dv];
        let (_, scale_log2, scale_f) = scale_code(scale, &mut params, &mut args);
        let mut body = offsets(&[("q", q), ("k", k), ("v", v), ("dout", dout), ("lse", lse)]);
        body.push_str(&format!(
            "    fb_flash_bwd_dkv<{bf}, {e}, {ev}, {causal}, {BWD_STEP}>(q + qo, k + ko, v + vo, dout + douto, lse + lseo, \
             dsum + (long long)blockIdx.y * {l}, dk + (long long)blockIdx.y * {dkl}, dv + (long long)blockIdx.y * {dvl}, \
             {l}, {s}, {qs}, {ks}, {vs}, {dos}, {scale_log2}, {scale_f});\n",
            dkl = s * e,
            dvl = s * ev,
            qs = q.row,
            ks = k.row,
            vs = v.row,
            dos = dout.row,
        ));
        let summary = format!(
            "flash attention backward {}, {}: dK and dV of 64 keys a block, walking the queries",
            name(n.outputs[1]),
            name(n.outputs[2])
        );
        let why = "sdpfa_bwd: FlashAttention-2's scheme without atomics, dK and dV by blocks of keys walking the queries";
        let kname = unit_name("dkv", &tag(dtype, e, ev), 128, &params, &body);
        let text = wrapper(&kname, 128, 0, &params, &body);
        let (kernel, module) = bwd_kernel(kname, [s.div_ceil(64) as u32, nb as u32, 1], args, summary, why, &text, tiles16 + 4 * 4 * BWD_STEP);
        placed.kernels.push(kernel);
        placed.modules.push(module);
    }
    placed.temp = Some(Temp {
        dtype: DType::Float,
        elements: nb * l,
        what: format!("D = rowsum(dO * O) of {} (sdpfa_bwd)", name(n.outputs[0])),
        zeroed: false,
    });
    Ok(Ok(placed))
}

/// Head dims cuDNN's fused attention takes here: multiples of 8 up to 128,
/// the same for Q/K and V.
fn library_head(e: usize, ev: usize) -> bool {
    e == ev && e.is_multiple_of(8) && e <= 128
}

/// `[b, h, s, d]` strides of `v` read where it lies, with the batch dims
/// `[N, H]` its own (no broadcast) and every stride and the offset a
/// multiple of `align` elements (16 bytes); `None` where cuDNN cannot read it.
fn library_read(place: &Place, shape: &[usize], batch: &[usize], align: i64) -> Option<(KernelArg, i64, [i64; 4])> {
    let (arg, st, off) = place;
    if shape.len() != 4 || shape[..2] != batch[..] || st.iter().any(|&x| x < 0) {
        return None;
    }
    if shape[3] > 1 && st[3] != 1 {
        return None;
    }
    // A dim of extent 1 may have any stride; cuDNN is given a dense one.
    let mut s = [st[0], st[1], st[2], 1];
    for d in (0..3).rev() {
        if shape[d] == 1 {
            s[d] = s[d + 1] * shape[d + 1] as i64;
        }
    }
    // Q, K, V, O and dO are read by tiles of rows: every row 16-byte
    // aligned. The log-sum-exp, one Float a row, only needs its start so.
    let rows = if shape[3] > 1 { &s[..3] } else { &[][..] };
    if off % align != 0 || rows.iter().any(|x| x % align != 0) {
        return None;
    }
    Some((*arg, *off, s))
}

/// Dense `[b, h, s, d]` strides.
fn dense4(d: [usize; 4]) -> [i64; 4] {
    [(d[1] * d[2] * d[3]) as i64, (d[2] * d[3]) as i64, d[3] as i64, 1]
}

/// What the library path makes of an attention node.
pub(crate) struct LibraryPlaced {
    pub call: crate::plan::LibraryAttention,
    pub temps: Vec<Temp>,
}

/// `n` (an `sdpfa_fwd` or `sdpfa_bwd`) as a call of cuDNN's fused attention
/// where the device plans it (`Device::attention_library`) and cuDNN reads
/// it as it lies: `[N, H, L, E]` operands with no broadcast, head dims of 8
/// to 128, every row and batch stride 16-byte aligned, a positive constant
/// scale. `None` otherwise:
/// the kernels of ours run it. `outs` as `own_kernels` gives them; `temp`
/// the index its first temporary will have.
pub(crate) fn library(
    f: &Fusion,
    n: &Node,
    place: &dyn Fn(ValueId) -> Result<Place, CodegenError>,
    outs: &[Option<KernelArg>],
    temp: usize,
    dev: Device,
) -> Result<Option<LibraryPlaced>, CodegenError> {
    use crate::plan::{AttentionOperand, AttentionRole as R, LibraryAttention};
    if !dev.attention_library {
        return Ok(None);
    }
    let (backward, query, key, value, knobs, extra) = match n.op {
        Op::Gemm(GemmOp::SdpfaFwd { query, key, value, dropout_p, is_causal, scale }) => {
            (false, query, key, value, (dropout_p, is_causal, scale), None)
        }
        Op::Gemm(GemmOp::SdpfaBwd { grad_output, query, key, value, output, logsumexp, dropout_p, is_causal, scale, .. }) => {
            (true, query, key, value, (dropout_p, is_causal, scale), Some((grad_output, output, logsumexp)))
        }
        _ => return Ok(None),
    };
    let op = if backward { "sdpfa_bwd" } else { "sdpfa_fwd" };
    let shape = |v: ValueId| f.value(v).shape.clone().unwrap_or_default();
    let (sq, sk, sv) = (shape(query), shape(key), shape(value));
    let (batch, l, s, e, ev) = attention_dims(op, &sq, &sk, &sv).map_err(|e| unsupported(e.to_string()))?;
    let dtype = f.value(query).dtype;
    if batch.len() != 2 || !library_head(e, ev) || !matches!(dtype, DType::BFloat16 | DType::Half) {
        return Ok(None);
    }
    // nvFuser's default scale reads the last dim of grad_output (Ev) in the backward.
    let (causal, scale, _) = flags(f, op, knobs, if backward { ev } else { e }, (&batch, l, s, e, ev))?;
    // cuDNN's engines take the row maximum of the unscaled scores: a negative
    // scale gave NaN (H200, cuDNN 9.14, measured), and a scalar input's sign
    // is not known when planning.
    let scale = match scale {
        Scale::Constant(c) if c > 0.0 => c,
        _ => return Ok(None),
    };
    let (nb, nh) = (batch[0], batch[1]);
    let mut tensors = vec![];
    let mut operand = |role: R, v: ValueId, align: i64| -> Result<bool, CodegenError> {
        let mut sh = shape(v);
        if role == R::Stats {
            sh.push(1);
        }
        match library_read(&place(v)?, &sh, &batch, align) {
            Some((arg, offset, strides)) => {
                tensors.push(AttentionOperand { role, arg, offset, strides });
                Ok(true)
            }
            None => Ok(false),
        }
    };
    let mut readable = operand(R::Q, query, 8)? && operand(R::K, key, 8)? && operand(R::V, value, 8)?;
    if let Some((dout, out, lse)) = extra {
        readable = readable && operand(R::DO, dout, 8)? && operand(R::O, out, 8)? && operand(R::Stats, lse, 4)?;
    }
    if !readable {
        return Ok(None);
    }
    let mut written = |role: R, a: Option<KernelArg>, dims: [usize; 4]| {
        let arg = a.expect("an attention's results always have buffers");
        tensors.push(AttentionOperand { role, arg, offset: 0, strides: dense4(dims) });
    };
    let mut temps = vec![];
    let mut zeroed = vec![];
    let name = |v: ValueId| f.value(v).name.clone();
    let summary = if backward {
        written(R::DQ, outs[0], [nb, nh, l, e]);
        written(R::DK, outs[1], [nb, nh, s, e]);
        written(R::DV, outs[2], [nb, nh, s, ev]);
        let what = |w: &str| format!("{w} of {} (sdpfa_bwd in cuDNN)", name(n.outputs[0]));
        temps.push(Temp { dtype: DType::Float, elements: nb * nh * l, what: what("D = rowsum(dO * O)"), zeroed: false });
        temps.push(Temp { dtype: DType::Float, elements: nb * nh * l * e, what: what("dQ's Float accumulator"), zeroed: false });
        written(R::SoftmaxSum, Some(KernelArg::Temp(temp)), [nb, nh, l, 1]);
        written(R::DqAccum, Some(KernelArg::Temp(temp + 1)), [nb, nh, l, e]);
        format!("flash attention backward {}, {}, {}", name(n.outputs[0]), name(n.outputs[1]), name(n.outputs[2]))
    } else {
        written(R::O, outs[0], [nb, nh, l, ev]);
        written(R::Stats, outs[1], [nb, nh, l, 1]);
        zeroed.extend(outs.iter().skip(2).flatten().copied());
        format!(
            "flash attention {} = softmax(scale {} x {}^T) x {}",
            name(n.outputs[0]),
            name(query),
            name(key),
            name(value)
        )
    };
    let call = LibraryAttention {
        summary,
        backward,
        dtype,
        b: nb,
        h: nh,
        s_q: l,
        s_kv: s,
        d: e,
        d_v: ev,
        causal,
        scale,
        tensors,
        zeroed,
        before: 0,
        after_products: 0,
    };
    Ok(Some(LibraryPlaced { call, temps }))
}
