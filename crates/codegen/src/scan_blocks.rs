//! A scan along the innermost dim, a block per line (`Device::scan_blocks`):
//! the line is walked 1024 elements a step, each of 256 threads taking 4
//! consecutive ones (coalesced, and a thread's own 4 scanned in order), the
//! threads' totals scanned across each warp by shuffles and across the 8
//! warps through shared memory, then each prefix is the carry of the steps
//! before, the warps and lanes before, and the thread's own. Every
//! combination keeps the earlier operand on the left, so cummax and cummin
//! keep the later of equal values as the one-thread walk does; a float sum or
//! product adds in another order than the walk, within the bound the fuzzer
//! holds both to (n Double epsilons of the prefix's magnitudes).

use super::{Scan, Sink};
use crate::ctype;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::Kernel;

const THREADS: usize = 256;
const ITEMS: usize = 4;

pub(super) fn build(cx: &Context, l: &Scan, sink: &Sink) -> Result<(String, Kernel), CodegenError> {
    let len = l.len;
    let ty = ctype::reg(l.acc);
    let (mut lw, params) = sink.lowerer(cx);
    lw.line(&format!("__shared__ {ty} wt[{}];", THREADS / 32));
    lw.line("const long long lo = blockIdx.x;");
    lw.line("const long long li = 0;");
    lw.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;");
    let start = l.start(&mut lw)?;
    lw.line(&format!("{ty} carry = {start};"));
    let tile = THREADS * ITEMS;
    lw.open(&format!("for (long long base = 0; base < {len}; base += {tile}) {{"));
    lw.line(&format!("{ty} v[{ITEMS}];"));
    lw.open(&format!("for (int j = 0; j < {ITEMS}; ++j) {{"));
    lw.line(&format!("const long long k = base + threadIdx.x * {ITEMS} + j;"));
    let idx = l.load(&mut lw, "v[j]", &format!("k < {len}"))?;
    lw.close("}");
    lw.line(&format!("for (int j = 1; j < {ITEMS}; ++j) {}", l.op("v[j]", "v[j - 1]", "v[j]")));
    // The thread's total scanned across the warp (inclusive), then the
    // warps' totals through shared memory.
    lw.line(&format!("{ty} s = v[{}];", ITEMS - 1));
    l.across_lanes(&mut lw, 32);
    lw.line("if (lane == 31) wt[warp] = s;");
    lw.line(&format!("{ty} before = __shfl_up_sync(0xffffffffu, s, 1);"));
    lw.line(&format!("if (lane == 0) before = {};", l.identity()));
    lw.line("__syncthreads();");
    // What comes before this thread's elements: the carry, the warps before, the lanes before.
    lw.line(&format!("{ty} p = carry;"));
    lw.line(&format!("for (int w = 0; w < warp; ++w) {{ {} }}", l.step("p", "wt[w]")));
    lw.line(&l.step("p", "before"));
    lw.open(&format!("for (int j = 0; j < {ITEMS}; ++j) {{"));
    lw.line(&format!("const long long k = base + threadIdx.x * {ITEMS} + j;"));
    lw.open(&format!("if (k < {len}) {{"));
    sink.write_after(&mut lw, l, "p", "v[j]", &idx)?;
    lw.close("}");
    lw.close("}");
    lw.line(&format!("for (int w = 0; w < {}; ++w) {{ {} }}", THREADS / 32, l.step("carry", "wt[w]")));
    lw.line("__syncthreads();");
    lw.close("}");
    let summary = format!("{}: {} lines of {len}, a block per line, {} elements a step", l.named(cx.f), l.lines, THREADS * ITEMS);
    Ok(l.kernel(format!("fb_s{}", l.node), lw, params, l.lines.max(1), THREADS as u32, summary))
}
