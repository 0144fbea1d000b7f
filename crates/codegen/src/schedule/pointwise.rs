//! `pointwise` in the registry: any elementwise outputs of one shape, a
//! vector of innermost elements per thread. Fits every elementwise
//! candidate, so it comes last: more specific schedules go before it.

use super::{Candidate, Reason, Schedule, Work};
use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::Kernel;

pub struct Pointwise;

impl Schedule for Pointwise {
    fn name(&self) -> &'static str {
        "pointwise"
    }

    fn takes(&self, work: &Work) -> bool {
        matches!(work, Work::Elementwise { .. })
    }

    fn fits(&self, c: &Candidate, _cx: &Context, dev: &Device) -> Result<Reason, Reason> {
        let Work::Elementwise { shape, outputs } = &c.work else {
            return Err("has reductions".into());
        };
        Ok(format!(
            "{} elementwise over {shape:?} ({} elements): a vector of innermost elements per thread, blocks of {}",
            super::count(outputs.len(), "output"),
            shape.iter().product::<usize>(),
            dev.pointwise_block
        ))
    }

    fn build(
        &self,
        c: &Candidate,
        dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError> {
        let Work::Elementwise { shape, outputs } = &c.work else {
            return Err(CodegenError::NoFit(format!(
                "pointwise: {} has reductions",
                c.name
            )));
        };
        let walked = match walk(c, shape, dev) {
            1 => walk_layout_rows(c, cx, shape, dev),
            g => g,
        };
        let launch = (dev.pointwise_block, unroll(c, shape, dev), walked);
        out.push(crate::pointwise::build(cx, &c.name, shape, outputs, launch)?);
        Ok(())
    }
}

/// Vectors per thread: the knob's when set; else two for kernels of at least
/// 16M elements reading two or more inputs of that size, all of 16-bit types
/// (H200, bf16: SiLU-mul and GELU backward 2-5% faster at 2048x11008 and
/// 32768x4096; at 2048x4096 and below, and with one large input, one vector
/// was as fast or faster). A 32-bit input keeps one: over 28 SiLU-mul, GELU
/// and SiLU-mul backward fusions of 16M-134M elements, f32 was 0.5-2.7%
/// faster with one vector in every case, row- and column-major and with a
/// broadcast input (round X), while bf16 went both ways (-3.7% to +4.8%).
/// An input broadcast over the rows counts at its logical size: with two
/// vectors bf16 SiLU-mul and GELU backward with a broadcast input were 2-5%
/// faster (round W).
///
/// Two also where the kernel writes rows gathered by an index (embedding,
/// index_select along dim 0) and at least `GATHER_TWO_BYTES`: each thread's
/// value load waits for its index load, and a second vector puts two such
/// chains in flight (H200, 24 embeddings of 896-17408 ids x 1600-13568,
/// bf16 and f32: 0.93-0.96 of one vector from 40 MB, 0.98-1.06 below).
fn unroll(c: &Candidate, shape: &[usize], dev: &Device) -> u32 {
    if dev.pointwise_unroll > 0 {
        return dev.pointwise_unroll;
    }
    let n: usize = shape.iter().product();
    if gathered_bytes(c, n) >= GATHER_TWO_BYTES {
        return 2;
    }
    let large: Vec<_> = c
        .f
        .inputs
        .iter()
        .map(|&i| c.f.value(i))
        .filter(|v| v.is_tensor() && v.numel() == n)
        .collect();
    if n >= 16 << 20 && large.len() >= 2 && large.iter().all(|v| v.dtype.size_bytes() <= 2) {
        2
    } else {
        1
    }
}

/// Bytes written from which a kernel of gathered rows takes two vectors a
/// thread.
const GATHER_TWO_BYTES: usize = 32 << 20;

/// Bytes of the largest output of `n` elements gathered row by row (an
/// embedding, an index_select along dim 0); 0 where there is none.
fn gathered_bytes(c: &Candidate, n: usize) -> usize {
    use fusebench_ir::op_index::IndexOp;
    use fusebench_ir::Op;
    c.f.nodes
        .iter()
        .filter(|node| match &node.op {
            Op::Index(IndexOp::EmbeddingFwd { .. }) => true,
            Op::IndexSelect { x, dim, .. } => {
                let rank = c.f.value(*x).shape.as_ref().map_or(0, Vec::len);
                fusebench_ir::infer::norm_dim("index_select", *dim, rank) == Ok(0)
            }
            _ => false,
        })
        .flat_map(|node| node.outputs.iter().map(|&o| c.f.value(o)))
        .filter(|v| v.numel() == n)
        .map(|v| n * v.dtype.size_bytes())
        .max()
        .unwrap_or(0)
}

/// Positions of the outermost dim each thread walks (`pointwise::build`; 1:
/// none): all of them where the knob allows it, the dim is short (at most
/// `WALK_MAX`), an input of more than one element is broadcast over it
/// (RoPE's cos and sin over the heads, loaded once per thread instead of
/// once per head), and each position still gives every multiprocessor
/// `pointwise_blocks_per_sm` blocks. With the knob at 2 (the default), a
/// longer dim is walked in chunks: its largest divisor up to `WALK_MAX`.
///
/// Measured on the H200 over 36 RoPE fusions (768-2048 wide, 8192-16384
/// tokens): f32 0.77-0.97 of the time without the walk, bf16 0.86-0.96, but
/// fp16 0.96-1.14 (12288x1024 30.4 -> 34.5 us), not explained; so no walk
/// where an input is fp16. Chunks: 0.872 of no walk over 8 RoPE fusions of
/// 18-56 heads (12288 tokens, bf16 and f32; 48 heads 184.4 -> 160.7 us).
fn walk(c: &Candidate, shape: &[usize], dev: &Device) -> usize {
    use fusebench_ir::{DType, Op};
    let Some(&e) = shape.first() else { return 1 };
    if dev.pointwise_walk == 0 || shape.len() < 3 || e < 2 {
        return 1;
    }
    let g = match e {
        e if e <= WALK_MAX => e,
        _ if dev.pointwise_walk >= 2 => (2..=WALK_MAX).rev().find(|g| e.is_multiple_of(*g)).unwrap_or(1),
        _ => 1,
    };
    if g < 2 || c.f.inputs.iter().any(|&i| c.f.value(i).dtype == DType::Half) {
        return 1;
    }
    let per_copy: usize = shape[1..].iter().product();
    // Blocks of one position, at 8 elements a thread (16-bit vectors).
    let blocks = per_copy / 8 / dev.pointwise_block as usize;
    if blocks < (dev.sm_count * dev.pointwise_blocks_per_sm) as usize {
        return 1;
    }
    let over_dim0 = c.f.nodes.iter().any(|n| match &n.op {
        Op::BroadcastInDim { x, shape: to, broadcast_dims } => {
            let to: Vec<usize> = to.iter().map(|&d| d as usize).collect();
            to == shape && !broadcast_dims.contains(&0) && c.f.value(*x).numel() > 1
        }
        _ => false,
    });
    if over_dim0 { g } else { 1 }
}

/// Rows each pointwise thread walks where an input is a row given broadcast
/// by its layout (stride 0 over the rows, as a bias or a gate row that
/// `expand` made [rows, n]): with `pointwise_walk` at 3, a rank-2 kernel walks
/// its rows in chunks of the largest divisor up to `WALK_MAX`, and the
/// lowering computes what reads only such rows once per chunk
/// (`Lowerer::hoist_invariant`): a SiLU-mul of a broadcast row computed
/// its SiLU once per row (85% of copy on the H200, Triton's the same way 97%).
/// Only where the chunks still give every multiprocessor
/// `pointwise_blocks_per_sm` blocks. At 3 only where every input read at
/// full size is 16-bit or narrower: f32 SiLU-mul and GELU backward ran 5%
/// slower walked (H200, 13 of 16 fresh fusions 1.01-1.07), their math no
/// limit at twice the bytes per element. 1: no walk.
fn walk_layout_rows(c: &Candidate, cx: &Context, shape: &[usize], dev: &Device) -> usize {
    let &[rows, n] = shape else { return 1 };
    if dev.pointwise_walk < 3 || rows < 2 {
        return 1;
    }
    let numel = rows * n;
    let wide = c.f.inputs.iter().map(|&i| c.f.value(i)).any(|v| v.is_tensor() && v.numel() == numel && v.dtype.size_bytes() > 2);
    if dev.pointwise_walk == 3 && wide {
        return 1;
    }
    let row_of_layout = c.f.inputs.iter().zip(&cx.layouts).any(|(&i, l)| {
        let v = c.f.value(i);
        v.shape.as_deref() == Some(shape) && l.as_ref().is_some_and(|(st, _)| st.len() == 2 && st[0] == 0 && st[1] != 0)
    });
    if !row_of_layout {
        return 1;
    }
    // The longest chunk whose threads (8 elements each, 16-bit vectors; one
    // per vector of each chunk) still fill the GPU.
    let fill = (dev.sm_count * dev.pointwise_blocks_per_sm) as usize;
    (2..=WALK_MAX.min(rows))
        .rev()
        .find(|&g| rows.is_multiple_of(g) && n / 8 * (rows / g) / dev.pointwise_block as usize >= fill)
        .unwrap_or(1)
}

/// The longest outermost dim a pointwise thread walks (`walk`): each
/// position is a copy of the kernel's body.
const WALK_MAX: usize = 16;
