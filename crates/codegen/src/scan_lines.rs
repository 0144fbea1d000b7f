//! A scan along the innermost dim (`Device::scan_lines`): each line is
//! scanned by a group of `t` threads sized to it (a power of two from 1 to
//! 512; several lines a block where `t` is under 256), each thread taking
//! `items` consecutive elements a step, scanning its own in order, then the
//! threads' totals across the group by shuffles (and through shared memory
//! past a warp). Lines too few to give every multiprocessor two blocks are
//! cut into chunks of whole steps over more blocks (`Device::scan_split`):
//! a first kernel, the same code storing nothing, finds each chunk's total,
//! and each chunk of the second starts from the line's start combined with
//! the totals of the chunks before it.
//!
//! Every combination keeps the earlier operand on the left, so cummax and
//! cummin keep the later of equal values as the one-thread walk does; a
//! float sum or product adds in another order than the walk, within the
//! bound the fuzzer holds both to (n Double epsilons of the prefix's
//! magnitudes).

use super::{Scan, Sink};
use crate::ctype;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::Kernel;

/// Threads a block holds where lines take fewer (several lines a block).
const BLOCK: usize = 256;
/// Threads a line takes at most: longer lines take more steps.
const MAX_THREADS: usize = 512;
/// Blocks per multiprocessor below which lines are cut into chunks.
const FILL: usize = 2;

/// How the lines are laid over threads and blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// Threads per line (a power of two).
    pub t: usize,
    /// Consecutive elements a thread takes a step.
    pub items: usize,
    /// Lines a block takes.
    pub per_block: usize,
    /// Chunks a line is cut into (1: none).
    pub chunks: usize,
    /// Elements of a chunk (a whole number of steps; the line where uncut).
    pub chunk: usize,
}

impl Layout {
    pub fn new(len: usize, lines: usize, items: usize, sm_count: usize, split: bool) -> Layout {
        let items = items.clamp(1, 16);
        let t = len.div_ceil(items).max(1).next_power_of_two().min(MAX_THREADS);
        let items = len.div_ceil(t).clamp(1, items);
        let per_block = (BLOCK / t).max(1);
        let step = t * items;
        let steps = len.div_ceil(step).max(1);
        let blocks = lines.div_ceil(per_block).max(1);
        let want = FILL * sm_count;
        let chunks = if split && per_block == 1 && blocks < want { want.div_ceil(blocks).min(steps) } else { 1 };
        let per_chunk = steps.div_ceil(chunks);
        let chunks = steps.div_ceil(per_chunk);
        let chunk = if chunks > 1 { per_chunk * step } else { len.max(1) };
        Layout { t, items, per_block, chunks, chunk }
    }

    fn threads(&self) -> usize {
        self.t * self.per_block
    }
}

/// The layout of scan `sc`'s lines on `dev`.
pub(super) fn layout(sc: &Scan, dev: &crate::device::Device) -> Layout {
    Layout::new(sc.len, sc.lines, dev.scan_items as usize, dev.sm_count as usize, dev.scan_split)
}

/// What a kernel of the scan does with its chunk.
enum Mode<'a> {
    /// Stores each chunk's total (not the line's last) in temp `tot`.
    Totals { tot: usize },
    /// Writes every prefix, starting each chunk from the totals before it.
    Prefixes { tot: Option<usize>, sink: &'a Sink<'a> },
}

/// The scan's kernels laid out as `lay`: where it cuts the lines, the kernel
/// finding the chunks' totals into `tot` (`Layout::chunks` - 1 a line,
/// given exactly then), then the prefixes.
pub(super) fn build(
    cx: &Context,
    sc: &Scan,
    lay: &Layout,
    tot: Option<usize>,
    sink: &Sink,
) -> Result<Vec<(String, Kernel)>, CodegenError> {
    let mut out = Vec::new();
    if let Some(tot) = tot {
        out.push(kernel(cx, sc, lay, Mode::Totals { tot })?);
    }
    out.push(kernel(cx, sc, lay, Mode::Prefixes { tot, sink })?);
    Ok(out)
}

fn kernel(cx: &Context, l: &Scan, lay: &Layout, mode: Mode) -> Result<(String, Kernel), CodegenError> {
    let len = l.len;
    let Layout { t, items, per_block, chunks, chunk } = *lay;
    let threads = lay.threads();
    let ty = ctype::reg(l.acc);
    let id = l.identity();
    // The totals kernel leaves out each line's last chunk, whose total nothing reads.
    let grid_chunks = match mode {
        Mode::Totals { .. } => chunks - 1,
        Mode::Prefixes { .. } => chunks,
    };
    let (mut lw, params) = match &mode {
        Mode::Totals { .. } => cx.lowerer(),
        Mode::Prefixes { sink, .. } => sink.lowerer(cx),
    };
    let width = t.min(32);
    let warps_per_line = t.div_ceil(32);
    if t > 32 {
        lw.line(&format!("__shared__ {ty} wt[{}];", threads / 32));
    }
    lw.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;");
    lw.line(&format!("const int t = threadIdx.x & {};", t - 1));
    lw.line(&format!(
        "const long long lo = (long long)(blockIdx.x / {grid_chunks}) * {per_block} + threadIdx.x / {t};"
    ));
    lw.line("const long long li = 0;");
    lw.line(&format!("const long long c = blockIdx.x % {grid_chunks};"));
    lw.line(&format!("const bool live = lo < {};", l.lines));
    lw.line(&format!("const long long end = min((c + 1) * {chunk}, (long long){len});"));
    // Chunks' totals start bare.
    let start = match &mode {
        Mode::Totals { .. } => id.clone(),
        Mode::Prefixes { .. } => l.start(&mut lw)?,
    };
    lw.line(&format!("{ty} carry = {start};"));
    if let Mode::Prefixes { tot: Some(tot), .. } = &mode {
        // Lines are cut only a block each, so every thread here is live.
        lw.line(&format!(
            "for (long long w = 0; w < c; ++w) {{ {} }}",
            l.step("carry", &format!("tmp{tot}[lo * {} + w]", chunks - 1))
        ));
    }
    let tile = t * items;
    lw.open(&format!("for (long long base = c * {chunk}; base < end; base += {tile}) {{"));
    lw.line(&format!("{ty} v[{items}];"));
    lw.open(&format!("for (int j = 0; j < {items}; ++j) {{"));
    lw.line(&format!("const long long k = base + t * {items} + j;"));
    let idx = l.load(&mut lw, "v[j]", "live && k < end")?;
    lw.close("}");
    lw.line(&format!("for (int j = 1; j < {items}; ++j) {}", l.op("v[j]", "v[j - 1]", "v[j]")));
    // The thread's total scanned across its lanes of the warp (inclusive),
    // then, past a warp, the warps' totals through shared memory.
    lw.line(&format!("{ty} s = v[{}];", items - 1));
    l.across_lanes(&mut lw, width);
    let first = format!("(threadIdx.x / {t}) * {warps_per_line}");
    if let Mode::Prefixes { sink, .. } = &mode {
        lw.line(&format!("{ty} before = __shfl_up_sync(0xffffffffu, s, 1, {width});"));
        lw.line(&format!("if ((lane & {}) == 0) before = {id};", width - 1));
        if t > 32 {
            lw.line("if (lane == 31) wt[warp] = s;");
            lw.line("__syncthreads();");
        }
        // What comes before this thread's elements: the carry, the warps before, the lanes before.
        lw.line(&format!("{ty} p = carry;"));
        if t > 32 {
            lw.line(&format!("for (int w = {first}; w < warp; ++w) {{ {} }}", l.step("p", "wt[w]")));
        }
        lw.line(&l.step("p", "before"));
        lw.open(&format!("for (int j = 0; j < {items}; ++j) {{"));
        lw.line(&format!("const long long k = base + t * {items} + j;"));
        lw.open("if (live && k < end) {");
        sink.write_after(&mut lw, l, "p", "v[j]", &idx)?;
        lw.close("}");
        lw.close("}");
    } else if t > 32 {
        lw.line("if (lane == 31) wt[warp] = s;");
        lw.line("__syncthreads();");
    }
    // The step's total joins the carry.
    if t > 32 {
        lw.line(&format!("for (int w = {first}; w < {first} + {warps_per_line}; ++w) {{ {} }}", l.step("carry", "wt[w]")));
        lw.line("__syncthreads();");
    } else {
        lw.line(&format!("{{ const {ty} w = __shfl_sync(0xffffffffu, s, {}, {width}); {} }}", width - 1, l.step("carry", "w")));
    }
    lw.close("}");
    if let Mode::Totals { tot } = mode {
        lw.line(&format!("if (t == 0) tmp{tot}[lo * {} + c] = carry;", chunks - 1));
    }
    let what = match mode {
        Mode::Totals { .. } => "the totals of",
        Mode::Prefixes { .. } => "",
    };
    let name = match mode {
        Mode::Totals { .. } => format!("fb_s{}_t", l.node),
        Mode::Prefixes { .. } => format!("fb_s{}", l.node),
    };
    let blocks = l.lines.div_ceil(per_block).max(1) * grid_chunks;
    let cut = if chunks > 1 { format!(", cut in {chunks} chunks of {chunk}") } else { String::new() };
    let summary = format!(
        "{what}{}{}: {} lines of {len}, {t} threads a line x {items} elements a step, {per_block} lines a block{cut}",
        if what.is_empty() { "" } else { " " },
        l.named(cx.f),
        l.lines,
    );
    Ok(l.kernel(name, lw, params, blocks, threads as u32, summary))
}

#[cfg(test)]
mod tests {
    use super::Layout;

    #[test]
    fn lines_take_threads_by_their_length_and_few_lines_are_cut() {
        // Short lines: part of a warp each, several lines a block.
        let l = Layout::new(128, 32768, 8, 132, true);
        assert_eq!((l.t, l.items, l.per_block, l.chunks), (16, 8, 16, 1));
        // A line of 5: one thread, all five.
        let l = Layout::new(5, 1000, 8, 132, true);
        assert_eq!((l.t, l.items, l.per_block, l.chunks), (1, 5, 256, 1));
        // Many long lines: 512 threads, no cut.
        let l = Layout::new(4096, 32768, 8, 132, true);
        assert_eq!((l.t, l.items, l.per_block, l.chunks), (512, 8, 1, 1));
        // Few long lines: cut so every multiprocessor gets two blocks, in whole steps.
        let l = Layout::new(32000, 8, 8, 132, true);
        assert_eq!((l.t, l.items, l.chunks, l.chunk), (512, 8, 8, 4096));
        let l = Layout::new(32000, 64, 8, 132, true);
        assert_eq!((l.chunks, l.chunk), (4, 8192));
        assert!(l.chunks * l.chunk >= 32000 && (l.chunks - 1) * l.chunk < 32000);
        // Off: never cut.
        assert_eq!(Layout::new(32000, 8, 8, 132, false).chunks, 1);
    }
}
