//! Launch numbers that depend on the device: how many blocks a kernel takes
//! and how many rows each handles. One place, so a different GPU changes
//! them here and nowhere else.

use crate::device::Device;

/// Blocks a split reduction (`grid`, `outer`) aims for over all its results:
/// about four per multiprocessor, enough to keep every one busy.
pub fn split_blocks(sm_count: u32) -> usize {
    sm_count as usize * 4
}

/// Blocks along the rows of a row-wise kernel of `rows` rows in `tiles`
/// column tiles of `threads` threads; 0 gives every group of unrolled rows
/// its own block. Without sums over rows (`outer`), each block takes a few
/// rows and leaves; with them, a fixed number of blocks walk all rows (fewer
/// partials).
pub fn row_blocks(dev: &Device, rows: usize, (tiles, threads): (usize, usize), inner: bool, outer: bool) -> usize {
    if !outer {
        if dev.norm_blocks_per_sm == 0 {
            0
        } else {
            (rows / 2)
                .max(1)
                .min((dev.sm_count * dev.norm_blocks_per_sm) as usize)
        }
    } else if !inner {
        // Each block walks at least 8 rows, so the partials stay small.
        (rows / 8)
            .max(1)
            .min(((dev.sm_count * 8) as usize / tiles).max(1))
    } else {
        // At least 256 threads per multiprocessor: blocks of short rows are
        // a warp or two, and two of them left the memory system idle while
        // they reduced (backward norms of 1000-column rows: 4 blocks of 64
        // threads per SM 15% faster than 2, measured on the H200; blocks of
        // 256 threads keep 2, which beat 1 and 4).
        let per_sm = (dev.row_blocks_per_sm as usize).max(256 / threads.max(1));
        rows.min((dev.sm_count as usize * per_sm / tiles).max(1))
    }
}

/// Rows a row-wise block handles at once (`rowwise::unroll` lowers it where
/// the rows do not divide).
pub fn row_unroll(dev: &Device) -> usize {
    dev.row_unroll as usize
}
