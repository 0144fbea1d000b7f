//! A scan along the innermost dim whose operand lies across it
//! (`Device::scan_tiles`): a column-major input, where consecutive lines
//! are neighbours in memory and a line's elements are far apart. The line
//! kernels read such a line element by element, a sector each; the thread
//! per line reads coalesced but writes the row-major prefixes a line apart.
//! Here a block takes `p` neighbouring lines and walks them a tile of `k`
//! elements each at a time: the tile is read with consecutive threads on
//! consecutive lines (coalesced), held in shared memory, and each warp scans
//! its lines 32 elements a pass across its lanes, writing consecutive
//! prefixes (coalesced). Every combination keeps the earlier operand on the
//! left, as the other scan kernels do.

use super::{Scan, Sink};
use crate::ctype;
use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::Context;
use crate::lower::Lowerer;
use crate::plan::Kernel;

const THREADS: usize = 256;
/// Elements each thread reads a step: the tile holds THREADS x this.
const READS: usize = 8;

/// Lines a block takes: 32 where that still gives every multiprocessor two
/// blocks, fewer (16, or 8 for types of 4 bytes or more, a 32-byte sector
/// of neighbouring lines) where lines are fewer. `None` where the lines
/// would not give half the multiprocessors a block even so: the line
/// kernels cut few lines over more blocks.
pub(super) fn lines_per_block(lines: usize, least: usize, sm_count: usize) -> Option<usize> {
    let p = [32, 16, 8].into_iter().find(|&p| p >= least && lines.div_ceil(p) >= 2 * sm_count).unwrap_or(least);
    (lines.div_ceil(p) * 2 >= sm_count).then_some(p)
}

/// Where scan `sc` reads its operand across its lines: every read that
/// moves along the scanned dim does so by more than one element and is
/// consecutive along the innermost line dim. The least lines a block should
/// take for a whole sector of them, or `None` (a read consecutive along
/// the scanned dim, a gathered read, no line dim).
pub(super) fn across(cx: &Context, sc: &Scan) -> Option<usize> {
    let (dim, s) = (sc.dim, &sc.s);
    let line_dim = (0..dim).rev().find(|&d| s[d] > 1)?;
    let var = |d: usize| format!("q{d}");
    let idx: Vec<Ix> = (0..s.len()).map(|d| if s[d] == 1 { Ix::c(0) } else { Ix::var(var(d)) }).collect();
    let (mut lw, _) = cx.lowerer();
    lw.loads = Some(Vec::new());
    lw.value_at(sc.x, &idx).ok()?;
    let mut least = 0;
    for (v, i, _) in lw.loads.take().unwrap_or_default() {
        let b = lw.buffers.get(&v)?;
        let off = Lowerer::offset(b, &i);
        let (ck, _) = off.linear_in(&var(dim))?;
        let (cl, _) = off.linear_in(&var(line_dim))?;
        match (ck.abs(), cl.abs()) {
            (0, _) => {}
            (1, _) => return None,
            (_, 1) => least = least.max(if b.dtype.size_bytes() < 4 { 16 } else { 8 }),
            _ => return None,
        }
    }
    (least > 0).then_some(least)
}

pub(super) fn build(cx: &Context, l: &Scan, p: usize, sink: &Sink) -> Result<(String, Kernel), CodegenError> {
    let (len, lines) = (l.len, l.lines);
    let ty = ctype::reg(l.acc);
    let k = THREADS * READS / p;
    let per_warp = p / (THREADS / 32);
    let (mut lw, params) = sink.lowerer(cx);
    // A row of the tile per element, padded to an odd count so that a warp
    // reading down a line's column meets every bank once.
    lw.line(&format!("__shared__ {ty} tile[{k}][{}];", p + 1));
    lw.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;");
    // 32-bit indices where every offset fits (`Lowerer::idx_type`).
    let it = lw.idx_type;
    lw.line(&format!("const {it} first = ({it})blockIdx.x * {p};"));
    lw.line(&format!("const {it} li = 0;"));
    let start = l.start(&mut lw)?;
    lw.line(&format!("{ty} carry[{per_warp}];"));
    lw.line(&format!("for (int q = 0; q < {per_warp}; ++q) carry[q] = {start};"));
    lw.open(&format!("for ({it} base = 0; base < {len}; base += {k}) {{"));
    lw.open(&format!("for (int r = 0; r < {READS}; ++r) {{"));
    lw.line(&format!("const int e = r * {THREADS} + threadIdx.x;"));
    lw.line(&format!("const {it} lo = first + e % {p};"));
    lw.line(&format!("const {it} k = base + e / {p};"));
    lw.line(&format!("{ty} x;"));
    let idx = l.load(&mut lw, "x", &format!("lo < {lines} && k < {len}"))?;
    lw.line(&format!("tile[e / {p}][e % {p}] = x;"));
    lw.close("}");
    lw.line("__syncthreads();");
    lw.open(&format!("for (int q = 0; q < {per_warp}; ++q) {{"));
    lw.line(&format!("const int ln = warp * {per_warp} + q;"));
    lw.line(&format!("const {it} lo = first + ln;"));
    lw.open(&format!("for (int pass = 0; pass < {}; ++pass) {{", k / 32));
    lw.line(&format!("const {it} k = base + pass * 32 + lane;"));
    lw.line(&format!("{ty} s = tile[pass * 32 + lane][ln];"));
    l.across_lanes(&mut lw, 32);
    lw.open(&format!("if (lo < {lines} && k < {len}) {{"));
    sink.write_after(&mut lw, l, "carry[q]", "s", &idx)?;
    lw.close("}");
    lw.line(&format!("{{ const {ty} w = __shfl_sync(0xffffffffu, s, 31); {} }}", l.step("carry[q]", "w")));
    lw.close("}");
    lw.close("}");
    lw.line("__syncthreads();");
    lw.close("}");
    let summary = format!(
        "{}, read across its lines: {lines} lines of {len}, {p} neighbouring lines a block in tiles of {k} elements through shared memory",
        l.named(cx.f)
    );
    Ok(l.kernel(format!("fb_s{}", l.node), lw, params, lines.div_ceil(p), THREADS as u32, summary))
}

#[cfg(test)]
mod tests {
    use super::lines_per_block;

    #[test]
    fn blocks_take_fewer_lines_where_lines_are_few() {
        assert_eq!(lines_per_block(32768, 8, 132), Some(32));
        assert_eq!(lines_per_block(8448, 8, 132), Some(32));
        assert_eq!(lines_per_block(5000, 8, 132), Some(16));
        assert_eq!(lines_per_block(4096, 8, 132), Some(8));
        assert_eq!(lines_per_block(1000, 8, 132), Some(8));
        // 16-bit reads take 16 neighbouring lines at least (a 32-byte sector).
        assert_eq!(lines_per_block(2000, 16, 132), Some(16));
        assert_eq!(lines_per_block(1000, 16, 132), None);
        // Too few for half the multiprocessors: the line kernels cut them.
        assert_eq!(lines_per_block(256, 8, 132), None);
    }
}
