//! Launch numbers that depend on the device: how many blocks a kernel takes
//! and how many rows each handles. One place, so a different GPU changes
//! them here and nowhere else.

use crate::device::Device;

/// A grid extent as the launch takes it; one past u32 saturates, so that the
/// check against the device's limits (`check_grids`) sees it rather than a
/// wrapped-around small number.
pub fn grid_dim(blocks: impl TryInto<u32>) -> u32 {
    blocks.try_into().unwrap_or(u32::MAX)
}

/// Every kernel's grid within the device's limits: a launch beyond them fails
/// (or, cast to 32 bits, runs a fraction of the work), so the plan is refused
/// with the kernel, the dim and the limit.
pub fn check_grids(kernels: &[crate::plan::Kernel], dev: &Device) -> Result<(), crate::error::CodegenError> {
    for k in kernels {
        for (d, (&n, &max)) in k.grid.iter().zip(&dev.max_grid).enumerate() {
            if n > max {
                let more = if n == u32::MAX { " or more" } else { "" };
                return Err(crate::error::CodegenError::TooLarge(format!(
                    "kernel {} ({}) needs {n}{more} blocks along grid dim {} and the GPU launches at most {max} \
                     ({} x {} x {} in all); a fusion this large is not split across launches yet",
                    k.name,
                    k.summary,
                    ["x", "y", "z"][d],
                    dev.max_grid[0],
                    dev.max_grid[1],
                    dev.max_grid[2]
                )));
            }
        }
    }
    Ok(())
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
        // Each block walks at least `column_sum_rows` rows (8), so the
        // partials stay small.
        (rows / dev.column_sum_rows.max(1) as usize)
            .max(1)
            .min(((dev.sm_count * dev.column_sum_blocks_per_sm) as usize / tiles).max(1))
    } else {
        // At least 256 threads per multiprocessor: blocks of short rows are
        // a warp or two, and two of them left the memory system idle while
        // they reduced (backward norms of 1000-column rows: 4 blocks of 64
        // threads per SM 15% faster than 2, measured on the H200; blocks of
        // 256 threads keep 2, which beat 1 and 4).
        // Blocks of more than 512 threads (rows re-read in each pass) run
        // one per multiprocessor: a second would not be resident at once
        // and would only double the partials.
        let per_sm = (dev.row_blocks_per_sm as usize)
            .max(256 / threads.max(1))
            .min((1024 / threads.max(1)).max(1));
        rows.min((dev.sm_count as usize * per_sm / tiles).max(1))
    }
}

/// Threads of a row re-read in each pass (`rowwise::Shape::reload`) of
/// `cols` in vectors of `width`, carrying `sums` column sums: as many as a
/// block has, so each thread holds the fewest columns, unless with two or
/// more sums per column the registers would not hold them: each thread under
/// 72 registers (the SM's registers over the block's threads), or its column
/// sums (`sums` x its vectors x `width`) leaving fewer than
/// `RELOAD_SPARE_REGISTERS` for the rest. Then half as many threads.
/// Measured on the H200 (backward LayerNorm, two column sums): with 1024
/// threads of 64 registers the row kernel spilled and took 109 us at 16384
/// bf16 and 124 us at 11008 f32 (928 threads), with 512 threads 100 and 105
/// us; at 14336 (896 threads, 72 registers) 1024 threads were 18% faster. At
/// 20480 bf16 (864 threads, 72 registers, 48 sums per thread, 256 bytes of
/// stack) asking for 512 was 33-38% faster: 512 threads cannot hold that row,
/// so the plan sums the columns in kernels of their own (six kernels). At
/// 9216-14336, bf16 and f32, with 32 sums per thread or fewer, 1024 were up
/// to 28% faster (round W, 46 backward norms). A backward RMSNorm (one sum)
/// was faster with 1024 threads at every length.
/// `FUSEBENCH_RELOAD_THREADS` sets it outright.
pub fn reload_threads(dev: &Device, cols: usize, width: usize, sums: usize) -> usize {
    if dev.reload_threads != 0 {
        return dev.reload_threads as usize;
    }
    let n = (cols / width.max(1)).max(1);
    let vectors = n.div_ceil(1024);
    let threads = n.div_ceil(vectors).div_ceil(32) * 32;
    let registers = dev.registers_per_sm as usize / threads;
    let held = sums * vectors * width.max(1);
    if sums >= 2 && (registers < 72 || held + RELOAD_SPARE_REGISTERS > registers) {
        512
    } else {
        1024
    }
}

/// Registers a re-read row kernel's thread needs besides its column sums:
/// addresses, a pass's row values, the row's own sums (`reload_threads`).
pub const RELOAD_SPARE_REGISTERS: usize = 40;

/// Rows a row-wise block handles at once (`rowwise::unroll` lowers it where
/// the rows do not divide).
pub fn row_unroll(dev: &Device) -> usize {
    dev.row_unroll as usize
}

/// Most blocks one multiprocessor holds at once (compute capability 8.0-9.0).
pub const MAX_BLOCKS_PER_SM: u32 = 32;
/// Registers are given to a warp in units of this many (compute capability 8.0-9.0).
const REGISTER_UNIT: u32 = 256;
/// Shared memory the system keeps per block (compute capability 8.0-9.0).
const SHARED_RESERVED_PER_BLOCK: u32 = 1024;

/// How many blocks of a kernel one multiprocessor of `dev` holds at once, and what bounds it:
/// "threads", "blocks" (the hardware's per-SM block limit), "shared memory" or "registers".
/// `registers` per thread and `shared_bytes` per block (static and dynamic) as compiled.
pub fn resident(dev: &Device, threads: u32, registers: u32, shared_bytes: u32) -> (u32, &'static str) {
    let warps = threads.div_ceil(32).max(1);
    let per_warp = (registers * 32).div_ceil(REGISTER_UNIT) * REGISTER_UNIT;
    let by_registers = dev.registers_per_sm.checked_div(per_warp * warps).unwrap_or(u32::MAX);
    let by_threads = dev.max_threads_per_sm / threads.max(1);
    let by_shared = match shared_bytes {
        0 => u32::MAX,
        s => dev.shared_memory_per_sm / (s + SHARED_RESERVED_PER_BLOCK),
    };
    // On a tie the first named bounds it: fewer registers would not raise a
    // count the threads also cap.
    [
        (by_threads, "threads"),
        (MAX_BLOCKS_PER_SM, "blocks"),
        (by_shared, "shared memory"),
        (by_registers, "registers"),
    ]
    .into_iter()
    .min_by_key(|&(n, _)| n)
    .expect("four bounds")
}

/// A launch of `grid` blocks of `block` threads at `registers` a thread and
/// `shared_bytes` a block: what `resident` says of it, and the waves of its grid.
pub struct Occupancy {
    pub per_sm: u32,
    pub bound: &'static str,
    pub blocks: u64,
    pub waves: f64,
}

pub fn occupancy(dev: &Device, grid: [u32; 3], block: [u32; 3], registers: u32, shared_bytes: u32) -> Occupancy {
    let (per_sm, bound) = resident(dev, block.iter().product(), registers, shared_bytes);
    let blocks: u64 = grid.iter().map(|&g| g as u64).product();
    let waves = blocks as f64 / (per_sm.max(1) as u64 * dev.sm_count.max(1) as u64) as f64;
    Occupancy { per_sm, bound, blocks, waves }
}

/// Whether a setting of `dev` may plan a grid again for the blocks its
/// compiled kernel leaves resident (`refit`), so that the registers the
/// compiler gave must be read back.
pub fn refits(dev: &Device) -> bool {
    dev.fit_waves != crate::FitWaves::Off
}

/// Where a kernel whose grid was sized by blocks per multiprocessor
/// (`Kernel::fill`: an outer reduction's partials, `Device::outer_blocks_per_sm`;
/// a row kernel of sums over rows alone, `Device::column_sum_blocks_per_sm`)
/// compiles to more registers or shared memory than that many blocks leave,
/// so that its grid runs past one wave with the last part-filled: the device
/// to plan again with, that setting lowered to the fewest blocks resident
/// among such kernels (`Device::fit_waves` says which kinds). `compiled`: each kernel's
/// registers per thread and static shared memory, in the plan's order, as
/// the compiler gave them.
/// (A backward norm's grid walking the rows is widened before it is
/// compiled, by its estimated registers: `walk.rs`.)
pub fn refit(dev: &Device, plan: &crate::Plan, compiled: &[(u32, u32)]) -> Option<Device> {
    use crate::{plan::Fill, FitWaves};
    if !refits(dev) {
        return None;
    }
    let mut fit = *dev;
    let mut changed = false;
    for (k, &(registers, shared)) in plan.kernels.iter().zip(compiled) {
        let Some(fill) = k.fill else { continue };
        let o = occupancy(dev, k.grid, k.block, registers, shared + k.shared_bytes);
        let planned = match fill {
            Fill::Outer if dev.fit_waves != FitWaves::Off => &mut fit.outer_blocks_per_sm,
            Fill::ColumnSums if dev.fit_waves == FitWaves::All => &mut fit.column_sum_blocks_per_sm,
            _ => continue,
        };
        if o.per_sm >= 1 && o.per_sm < *planned && o.waves > 1.0 {
            *planned = o.per_sm;
            changed = true;
        }
    }
    changed.then_some(fit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_column_sums_take_half_the_threads_only_where_they_would_not_fit() {
        let dev = Device::default();
        // bf16, two sums: 11008 and 14336 keep their 704 and 896 threads (32
        // sums each, 93 and 73 registers); 16384 has 64 registers; 20480 has
        // 48 sums in 75 registers.
        for (cols, want) in [(9216, 1024), (11008, 1024), (14336, 1024), (16384, 512), (20480, 512)] {
            assert_eq!(reload_threads(&dev, cols, 8, 2), want, "bf16 {cols}");
        }
        // f32: 11008 at 928 threads has 70 registers; 14336 keeps 896.
        assert_eq!(reload_threads(&dev, 11008, 4, 2), 512);
        assert_eq!(reload_threads(&dev, 14336, 4, 2), 1024);
        // One sum: always the full block.
        assert_eq!(reload_threads(&dev, 20480, 8, 1), 1024);
    }
}
