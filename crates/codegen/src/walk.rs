//! The fixed grid of a row kernel that walks the rows with sums over them (a
//! backward norm's weight gradients, `launch::row_blocks`): how many blocks
//! walk, and whether each re-reads its row in every pass from the next-row
//! copy in shared memory (`next_row.rs`) instead of holding it.
//!
//! Both follow from the registers a thread takes, known only once compiled;
//! compiling twice (`launch::refit`) took an RMSNorm backward's first compile
//! from 210 to 346 ms (NVRTC 12.9), past issue 14's 300 ms. So they are
//! estimated here from what a thread keeps: its column sums (one per sum over
//! rows per column it owns), the row's values it holds as floats (each
//! row-sized input, per row it takes at once), and a base for addresses and
//! the rows' statistics. Against ptxas (NVRTC 12.9, sm_90) on 109 backward
//! LayerNorms and RMSNorms (90 fresh, the corpus's): held rows of 16-bit
//! inputs and rows taken one at a time within 10 registers, of Float up to 18
//! short; rows taken two at a time up to 48 over (phi-2's 144 against 96: not
//! every input's values stay live). Re-read rows 64-116 where it says 64-88,
//! the highest at 512 threads, where the rule does not re-read.

use crate::device::Device;

/// Registers a thread takes besides what it holds of the row and its sums:
/// indices, the per-row inputs, loop state.
pub const HELD_BASE: usize = 40;
/// Besides, per reduction of each row (its accumulator and its result kept
/// for the outputs).
pub const PER_REDUCTION: usize = 8;
/// A re-reading thread's registers besides its column sums: one pass's
/// loaded vectors and values, indices, the rows' statistics.
pub const REREAD_BASE: usize = 48;
/// Added to the held estimate before widening the grid by it: the
/// estimates ran up to 18 short of ptxas on held rows of Float, and a grid
/// past what is resident runs a second, part-filled wave. Whether to re-read
/// is decided on the estimates as they are: a margin there re-read RMSNorms
/// of 320 threads whose held rows fit two blocks (91-95 registers).
pub const MARGIN: usize = 8;

/// A thread's registers: `held` row values kept as floats across passes
/// (0 where the row is re-read), `sums` column sums, `reductions` of each row.
pub fn registers(held: usize, sums: usize, reductions: usize, reread: bool) -> usize {
    if reread {
        sums + REREAD_BASE
    } else {
        held + sums + HELD_BASE + PER_REDUCTION * reductions
    }
}

/// What the walking grid is: its blocks, whether rows are re-read, and why
/// (for `emit`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    pub row_blocks: usize,
    pub reread: bool,
    pub why: String,
}

/// Blocks of `threads` one multiprocessor holds at `registers` a thread.
fn resident(dev: &Device, threads: usize, registers: usize) -> usize {
    crate::launch::resident(dev, threads as u32, registers as u32, 0).0 as usize
}

/// The walk for `rows` rows by blocks of `threads` planned as `row_blocks`,
/// a thread estimated at `held` registers holding its row and `reread`
/// re-reading it (None: not re-read, Float rows with 64-bit indices).
///
/// - Re-read (`Device::row_reread` 1) where holding the row leaves fewer
///   blocks resident than the grid plans and re-reading leaves all of them:
///   a backward LayerNorm of 6016 f16 held at 125 registers ran one block of
///   384 threads per multiprocessor where two were planned, two waves (the
///   sixth fresh sample's worst, 0.84 of nvFuser); re-read, 80 and two
///   (0.93-0.95 of held). Where held rows fit the grid, re-reading measured
///   0.99-1.20x slower (recomputed values, more shared-memory reads). Not
///   Float rows with 64-bit indices: under the launch bound the compiler
///   spills their 64-bit column offsets. Backward norms of Float sliced
///   tensors (64-bit) spilled 48-148 bytes a thread re-read and ran
///   1.08-1.24x slower than held at 5632-6912 columns (H200), the same rows
///   row-major (32-bit, 0-40 bytes) 0.97x; 16-bit rows with 64-bit indices
///   compiled re-read with no spill (a LayerNorm of 26624 x 5632 bf16: 0.89
///   of held).
/// - Otherwise more blocks (`Device::walk_fill`: as many as the estimate
///   leaves resident, each walking at least that many rows): more blocks in
///   flight hide more of each row's reductions, and the combine then reads
///   more partials, which lost where blocks walked 2-8 rows.
pub fn plan(dev: &Device, rows: usize, threads: usize, row_blocks: usize, held: usize, reread: Option<usize>) -> Walk {
    let sms = dev.sm_count.max(1) as usize;
    let planned = row_blocks.div_ceil(sms);
    let on_held = resident(dev, threads, held);
    let on_reread = reread.map_or(0, |r| resident(dev, threads, r));
    let rereads = match (dev.row_reread, reread) {
        (0, _) | (_, None) => false,
        (1, _) => on_held < planned && on_reread >= planned,
        _ => true,
    };
    let estimate = match reread {
        Some(r) => format!("registers estimated {held} held, {r} re-read"),
        None => format!("registers estimated {held} held, not re-read: Float rows with 64-bit indices"),
    };
    if rereads {
        // The kernel declares the planned blocks in its launch bounds: the
        // compiler's count moves by a unit or more with the code around it (a
        // backward RMSNorm of 7424 bf16 at 480 threads took 66 registers
        // where 64 were estimated: one block, 1.08x slower than held; a
        // LayerNorm of 5632 f32 took 79 at 14336 rows and 117 at 26624).
        // Bound, every re-read walk of 20 compiled fits its planned blocks,
        // 15 with no spill, 4 with 4 bytes and one with 48.
        let why = format!("{estimate}: {on_held} blocks of {planned} resident held, {on_reread} re-read and asked for");
        return Walk { row_blocks, reread: true, why };
    }
    let min_rows = dev.walk_fill as usize;
    let fill = match min_rows {
        0 => planned,
        m => resident(dev, threads, held + MARGIN).min(rows / (sms * m)).max(planned),
    };
    let row_blocks = if fill > planned { (sms * fill).min(rows) } else { row_blocks };
    let why = match fill > planned {
        true => format!("{estimate}: {fill} blocks per multiprocessor walk, each at least {min_rows} rows"),
        false => estimate,
    };
    Walk { row_blocks, reread: false, why }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rereads_only_where_held_rows_leave_the_grid_two_waves() {
        let dev = Device::default();
        // LayerNorm backward f16 x6016: 384 threads x 16 values, two sums,
        // two row reductions. Held: 16 x 2 + 32 + 40 + 16 = 120 (ptxas 125),
        // one block resident of two; re-read 32 + 48 = 80 (ptxas 80), two.
        let (held, reread) = (registers(32, 32, 2, false), Some(registers(0, 32, 2, true)));
        assert_eq!((held, reread), (120, Some(80)));
        let w = plan(&dev, 10752, 384, 264, held, reread);
        assert!(w.reread && w.row_blocks == 264, "{w:?}");
        // At 256 threads two held blocks fit: held.
        let w = plan(&dev, 10752, 256, 264, held, reread);
        assert!(!w.reread, "{w:?}");
        // Off: never.
        let off = Device { row_reread: 0, ..Device::default() };
        assert!(!plan(&off, 10752, 384, 264, held, reread).reread);
        // Float rows with 64-bit indices: held, and the estimate says why.
        let wide = plan(&dev, 10752, 384, 264, held, None);
        assert!(!wide.reread && wide.why.contains("not re-read: Float rows with 64-bit indices"), "{wide:?}");
    }

    #[test]
    fn widens_the_grid_only_where_each_block_still_walks_many_rows() {
        let dev = Device { walk_fill: 16, ..Device::default() };
        // RMSNorm backward f32 x1408: 96 threads, 16 values, one sum: 96
        // estimated, 6 blocks resident (ptxas: 95, 7).
        let held = registers(32, 16, 1, false);
        let w = plan(&dev, 23040, 96, 264, held, Some(registers(0, 16, 1, true)));
        assert_eq!(w.row_blocks, 132 * 6, "{w:?}");
        // 2048 rows: 15 rows a block at 8 per multiprocessor; left at 2.
        assert_eq!(plan(&dev, 2048, 96, 264, held, Some(64)).row_blocks, 264);
        // 6144 rows: at most 3 per multiprocessor walk 16 rows each.
        assert_eq!(plan(&dev, 6144, 96, 264, held, Some(64)).row_blocks, 132 * 2);
        assert_eq!(plan(&dev, 8448, 96, 264, held, Some(64)).row_blocks, 132 * 4);
        let off = Device { walk_fill: 0, ..dev };
        assert_eq!(plan(&off, 23040, 96, 264, held, Some(64)).row_blocks, 264);
    }
}
