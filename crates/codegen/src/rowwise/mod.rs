//! The row-wise schedule: a fusion seen as rows x columns, each thread owning
//! one vector of columns for every row its block visits. Values a thread
//! loads stay in its registers across the passes of a row (an RMSNorm reads x
//! from DRAM once), and sums over rows (the backward passes' weight
//! gradients) accumulate per thread across rows, leaving one partial per
//! block for a combine kernel. Covers normalizations whose row fits one block
//! (inner persistent), their backward passes with column sums (inner-outer),
//! and pointwise work with column sums (columns tiled over blocks). Here what
//! a thread holds and how a row is laid out are planned; `build.rs` lowers it.

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{lane_arrays, signature_fitting, store_lane_arrays, Context};
use crate::lower::{Lanes, Lowerer};
use crate::next_row::NextRow;
use crate::passes::{Accs, Passes};
use crate::persistent::{push_row_outputs, RowTarget};
use crate::plan::{Kernel, Schedule};
use crate::reduction::{self, Kind, Reduction};
use crate::strided::guarded;
use crate::{ctype, view};
use fusebench_ir::{DType, ValueId};
use std::ops::{Add, Mul};

mod build;
pub use build::{build, walk_registers};

pub struct Spec<'a> {
    pub rows: usize,
    pub cols: usize,
    /// Innermost extent shared by every shape in the kernel.
    pub last: usize,
    pub width: usize,
    /// Reductions over the columns of each row.
    pub inner: &'a [Reduction],
    /// Sums over all rows, each with the temp its per-block partials go to.
    pub outer: &'a [(Reduction, usize)],
    /// Reductions to one element of a per-row value, each with the temp its
    /// partials go to: one per row group of a block, at
    /// `blockIdx.x * groups_per_block + group`.
    pub totals: &'a [(Reduction, usize)],
    /// Where the kernel is one block of one row group: the outputs that read
    /// only the totals, written here (`totals::finish`), and `totals`' temps
    /// are their results rather than partials.
    pub finish: Option<&'a [(ValueId, usize)]>,
    /// Outputs over rows x columns: (value, output position).
    pub full: &'a [(ValueId, usize)],
    pub per_row: &'a [(ValueId, RowTarget)],
    /// Blocks along the rows; 0 for one block per group of unrolled rows.
    pub row_blocks: usize,
    /// Rows each block iteration handles together (fewer when rows do not divide).
    pub unroll: usize,
    /// Rows past the registers may be re-read in each pass (`Shape::reload`)
    /// by this many threads (`launch::reload_threads`).
    pub reload: Option<usize>,
    /// A fixed grid walking the rows with sums over them: whether a held row
    /// is re-read in each pass instead (`walk::plan`), and why, for `emit`.
    pub walk: Option<&'a crate::walk::Walk>,
}

impl Spec<'_> {
    /// Whether each row is reduced or written per row in one block (whole
    /// rows), rather than only summed over the rows in column tiles.
    fn whole_row(&self) -> bool {
        !self.inner.is_empty() || !self.per_row.is_empty()
    }
}

/// How a row is laid over a block's threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Threads per row, a whole number of warps (full-mask shuffles).
    pub threads: usize,
    /// Of those, the threads that hold part of the row; the rest idle,
    /// passing the identity to the reductions.
    pub active: usize,
    /// Vectors each active thread holds per row: vector k of thread t is the
    /// row's vector k * active + t (a warp reads consecutive vectors).
    pub vectors: usize,
    /// Blocks along the row (pointwise work with column sums only).
    pub tiles: usize,
    /// The row is longer than the registers hold: each pass re-reads its
    /// part of the row (from L1, which holds a block's row between passes)
    /// instead of keeping it, and only the sums over rows stay in registers.
    pub reload: bool,
    /// 16-bit rows are held as loaded and converted again in each pass
    /// (`Holding::packed`, `Lowerer::repack`).
    pub packed: bool,
}

/// Row elements one thread may hold in registers (fp32 values, times the
/// tensors of rows x columns read): 64K registers per multiprocessor over
/// up to 2048 threads leave 32 per thread at full occupancy, and a held row
/// of 32 values at 1024 threads per block still runs two warps per
/// scheduler. Longer rows go to the loop schedule (persistent.rs).
pub const HELD_MAX: usize = 32;

/// Vectors a thread of a norm's row held as loaded takes at most
/// (`Device::row_packed_norms`): an RMSNorm of 15360 bf16 at 9 a thread took
/// 153 registers, one block of 224 threads per multiprocessor, and ran 1.57x
/// slower than as floats (H200, NVRTC 12.9); at 8 or fewer the packed norms
/// measured took 52-96.
pub const PACKED_NORM_VECTORS: usize = 8;

/// Vectors a thread takes where a row of `cols` 16-bit elements is held as
/// loaded (the widest vector dividing the row; usize::MAX where it does not fit).
fn packed_vectors(dev: &crate::device::Device, f: &fusebench_ir::Fusion, rows: usize, cols: usize) -> usize {
    let width = [8, 4, 2, 1].into_iter().find(|&w| cols.is_multiple_of(w)).unwrap_or(1);
    let h = Holding { packed: true, ..Holding::halves(dev, held_halves(f, rows, cols, true)) };
    shape_held(cols, width, true, h, None).map_or(usize::MAX, |s| s.vectors)
}

/// Threads a plain row sum is spread over at most (`Holding::summing`).
pub const SUM_THREADS: usize = 512;

/// Row elements one block may hold: a quarter of the register file, so
/// that a 1024-thread block is not pushed past 64 registers per thread
/// (512 threads x 32 values, or 1024 x 16). The planner's default for
/// `Device::block_held`.
pub const BLOCK_HELD_MAX: usize = 16384;

/// What a row kernel may hold: the tensors of rows x columns it reads, in
/// halves of a 32-bit register per element (`held_halves`), the row
/// elements a block may hold (`Device::block_held`) and the vectors each
/// thread may hold (`Device::row_vectors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holding {
    pub halves: usize,
    pub per_block: usize,
    pub vectors: usize,
    /// Rows, and the threads the GPU holds at once that they should fill
    /// (`Device::row_fill`; 0: no such bound): a thread then takes at most
    /// the vectors that leave none of those threads idle.
    pub fill: (usize, usize),
    /// 16-bit rows are held as loaded (`Device::row_packed`): `halves`
    /// counts them at one each.
    pub packed: bool,
    /// Vectors a thread takes at most where the kernel writes one statistic
    /// of each row (`Device::row_sum_vectors`; 0: no such bound).
    pub sum_vectors: usize,
    /// A thread may take one vector past the registers' share where that
    /// leaves fewer thread slots idle (`Device::row_slack`).
    pub slack: bool,
}

impl Holding {
    /// What a row kernel over `rows x cols` of `f` that writes `writes` may
    /// hold on `dev`.
    pub fn of(dev: &crate::device::Device, f: &fusebench_ir::Fusion, rows: usize, cols: usize, writes: Writes) -> Holding {
        // Held as loaded, a thread takes twice the vectors, so half the
        // threads hold the rows: only where the rows give every thread the
        // GPU holds four 16-byte vectors of halves or more. Fewer (2048 rows
        // of 4096 bf16) left threads idle: 1.11x slower on the H200.
        let threads = dev.sm_count as usize * dev.max_threads_per_sm as usize;
        // A norm's output (`Writes::Normalized`, `Device::row_packed_norms`)
        // reads the row once more after its reductions: held as loaded, what
        // the passes computed from it is computed again, so only where that
        // is a few instructions an element (`recomputed_cheaply`), and only
        // rows already held as floats (rows moved from the loop schedule
        // into registers so lost up to 1.31x in the twenty-second session).
        let packed = dev.row_packed
            && rows * cols >= 4 * 8 * threads
            && match writes {
                Writes::Statistics => true,
                Writes::Normalized => {
                    dev.row_packed_norms > 0
                        && cols >= dev.row_packed_norms
                        && packed_vectors(dev, f, rows, cols) <= PACKED_NORM_VECTORS
                        && cols * held_halves(f, rows, cols, false) <= 2 * dev.block_held
                        && recomputed_cheaply(f, rows * cols)
                        && !sums_over_rows(f, rows, cols)
                }
                _ => false,
            };
        // A plain row sum reads each element once and keeps nothing for a
        // later pass: more threads with fewer vectors each read it faster,
        // with many rows (4096 rows of 2560 f32: 17.4 -> 15.5 us on the H200)
        // and with few (768 rows of 2816 f32: 7.0 -> 5.1 us).
        let sum = writes == Writes::OneStatistic;
        Holding {
            fill: (rows, dev.sm_count as usize * dev.row_fill as usize),
            packed,
            sum_vectors: if sum { dev.row_sum_vectors } else { 0 },
            ..Holding::halves(dev, held_halves(f, rows, cols, packed))
        }
    }

    pub fn halves(dev: &crate::device::Device, halves: usize) -> Holding {
        Holding {
            halves,
            per_block: dev.block_held,
            vectors: dev.row_vectors.max(1),
            fill: (0, 0),
            packed: false,
            sum_vectors: 0,
            slack: dev.row_slack,
        }
    }

    /// The most vectors a thread of a row of `n` vectors takes under
    /// `sum_vectors`: none past it, unless the row would then take more than
    /// `SUM_THREADS` threads; then no such bound. On the H200, rows past
    /// that ran slower so: 1195 threads (4096 x 14336 f32) 1.23x, 854
    /// (1536 x 10240 f32) 1.04x, 534 (12800 16-bit) 0.97-1.06x.
    fn summing(&self, n: usize) -> usize {
        match self.sum_vectors {
            0 => usize::MAX,
            v if n.div_ceil(v) > SUM_THREADS => usize::MAX,
            v => v,
        }
    }

    /// The most vectors a thread of a row of `n` vectors takes while the
    /// rows fill `fill`'s threads (at least what 1024 threads need).
    fn filling(&self, n: usize) -> usize {
        match self.fill {
            (_, 0) => usize::MAX,
            (rows, threads) => (rows * n).div_ceil(threads).max(n.div_ceil(1024)).max(1),
        }
    }
}

/// Threads per row and vectors per thread for a row of `cols` elements in
/// vectors of `width`, within what `holding` allows (the tensors of rows x
/// columns read, the elements a block and the vectors a thread hold); None
/// when the row does not fit. Whole rows (reduced in one block): the fewest warps
/// that cover the row with at most as many vectors per thread as the
/// registers allow. Many vectors per thread keep many loads in flight per
/// thread, and few warps per row make the block reductions (the serial part
/// of a normalization) short: on the H200, 160 threads x 4 vectors per row
/// of 5120 bf16 ran a LayerNorm 1.8x faster than 640 x 1. Otherwise (column
/// sums over rows) whole warps tile the row exactly.
///
/// With `reload`, a whole row past the registers is still laid out, re-read
/// in each pass (`Shape::reload`) by `reload` threads, as long as each
/// thread's columns (what its sums over rows hold) stay within `HELD_MAX`:
/// a backward norm's weight gradients then stay in the row kernel, which
/// reads the row from DRAM once, instead of a kernel of their own that reads
/// it again.
///
/// With `spread` (`spread`: few rows, a block each, and one block-wide
/// reduction per row) a whole row is laid over up to `SPREAD_THREADS`
/// threads with the fewest vectors each.
pub fn shape(
    cols: usize,
    width: usize,
    whole_row: bool,
    holding: Holding,
    reload: Option<usize>,
    spread: bool,
) -> Option<Shape> {
    let sh = shape_held(cols, width, whole_row, holding, reload)?;
    if !spread || !whole_row || sh.reload || sh.vectors == 1 {
        return Some(sh);
    }
    let n = cols / width;
    let vectors = n.div_ceil(SPREAD_THREADS);
    if vectors >= sh.vectors {
        return Some(sh);
    }
    let active = n.div_ceil(vectors);
    Some(Shape {
        threads: active.div_ceil(32) * 32,
        active,
        vectors,
        tiles: 1,
        reload: false,
        packed: sh.packed,
    })
}

/// Threads a row of few rows is spread over at most (`shape`).
pub const SPREAD_THREADS: usize = 512;

/// Whether `shape` spreads each of `rows` rows, reduced by `reductions`
/// block-wide reductions (row reductions and totals), over more threads:
/// with fewer rows than multiprocessors the kernel is a round trip or two
/// long, and fewer vectors per thread shorten each thread's serial work, but
/// each block-wide reduction grows with the warps. Measured on the H200 (a
/// row of 4096 bf16, 128 or 256 threads against 512): a sum of 8 rows 2.02
/// -> 1.82 us, RMSNorm of 1 row and softmax backward of 1 and 8 rows within
/// 2%, cross-entropy of 1 row (three reductions) 2.37 -> 2.88 us.
pub fn spread(rows: usize, reductions: usize, dev: &crate::device::Device) -> bool {
    rows < dev.sm_count as usize && reductions <= 1
}

/// `shape` for rows that fill the GPU: the fewest warps that hold the row.
fn shape_held(
    cols: usize,
    width: usize,
    whole_row: bool,
    holding: Holding,
    reload: Option<usize>,
) -> Option<Shape> {
    if width == 0 || !cols.is_multiple_of(width) || cols == 0 {
        return None;
    }
    let n = cols / width;
    if !whole_row {
        // Whole warps tiling the row exactly, unless that leaves blocks of
        // one or two warps (1376 vectors = 43 x 32); then tiles of up to 256
        // threads, the last one's tail idle.
        let exact = (1..=8).rev().map(|w| w * 32).find(|b| n.is_multiple_of(*b));
        let threads = match exact {
            Some(b) if b >= 128 || n <= 256 => b,
            _ => {
                let tiles = n.div_ceil(256);
                n.div_ceil(tiles).div_ceil(32) * 32
            }
        };
        return Some(Shape {
            threads,
            active: threads,
            vectors: 1,
            tiles: n.div_ceil(threads),
            reload: false,
            packed: false,
        });
    }
    let halves = holding.halves.max(1);
    let max_vectors = (2 * HELD_MAX / (width * halves)).max(1).min(holding.vectors).min(holding.filling(n)).min(holding.summing(n));
    let fewest_warps = |max_vectors: usize| {
        (1..=32).map(|w| w * 32).find_map(|warps_threads| {
            let vectors = n.div_ceil(warps_threads);
            let active = n.div_ceil(vectors);
            let threads = active.div_ceil(32) * 32;
            (vectors <= max_vectors && threads * vectors * width * halves <= 2 * holding.per_block).then_some(Shape {
                threads,
                active,
                vectors,
                tiles: 1,
                reload: false,
                packed: holding.packed,
            })
        })
    };
    let mut kept = fewest_warps(max_vectors);
    // `Holding::slack`: one more vector a thread, at most a quarter past
    // `HELD_MAX`, where its warps cover the row with fewer idle slots (800
    // vectors: 160 threads x 5, not 200 of 224 x 4).
    let more = max_vectors + 1;
    if holding.slack && more * width * halves * 4 <= 2 * HELD_MAX * 5 && more <= holding.vectors.min(holding.filling(n)).min(holding.summing(n)) {
        if let (Some(k), Some(m)) = (&kept, fewest_warps(more)) {
            if m.vectors == more && m.threads * m.vectors < k.threads * k.vectors {
                kept = Some(m);
            }
        }
    }
    let Some(threads) = reload.filter(|_| kept.is_none()) else {
        return kept;
    };
    // Re-read by `threads` threads (`Device::reload_threads`): more hold
    // fewer columns' sums each, fewer leave each thread more registers.
    let vectors = n.div_ceil(threads.max(32));
    let active = n.div_ceil(vectors);
    (vectors * width <= HELD_MAX).then_some(Shape {
        threads: active.div_ceil(32) * 32,
        active,
        vectors,
        tiles: 1,
        reload: true,
        packed: false,
    })
}

/// Rows one block holds at once: short rows share a block (each row's
/// threads reduce among themselves), so blocks are not a warp or two, while
/// at least two blocks per multiprocessor stay busy. Kernels that also sum
/// over rows keep one row per block (one partial per block).
fn rows_per_block(rows: usize, outer: bool, sh: &Shape, sm_count: usize) -> usize {
    if outer || sh.tiles > 1 || sh.threads > 128 {
        return 1;
    }
    let mut r = 256 / sh.threads;
    while r > 1 && rows.div_ceil(r) < 2 * sm_count {
        r /= 2;
    }
    r.max(1)
}

/// Rows a block of the row-wise kernel holds at once (`rows_per_block`), for
/// whoever sizes its per-group partials before building it.
pub fn groups_per_block(
    cx: &Context,
    rows: usize,
    cols: usize,
    width: usize,
    outer: &[(Reduction, usize)],
    (whole_row, reductions, written): (bool, usize, Writes),
    reload: Option<usize>,
) -> Result<usize, CodegenError> {
    let spread = spread(rows, reductions, &cx.dev);
    let sh = shape(cols, width, whole_row, Holding::of(&cx.dev, cx.f, rows, cols, written), reload, spread).ok_or_else(|| {
        CodegenError::NoFit(format!("a row of {cols} does not fit a block of {width}-wide vectors"))
    })?;
    Ok(rows_per_block(rows, !outer.is_empty(), &sh, cx.dev.sm_count as usize))
}

/// Tensors of rows x columns the fusion reads: each holds its part of a row
/// in registers.
pub fn held(f: &fusebench_ir::Fusion, rows: usize, cols: usize) -> usize {
    row_inputs(f, rows, cols).count().max(1)
}

fn row_inputs(f: &fusebench_ir::Fusion, rows: usize, cols: usize) -> impl Iterator<Item = fusebench_ir::ValueId> + '_ {
    f.inputs
        .iter()
        .copied()
        .filter(move |&i| f.value(i).is_tensor() && f.value(i).numel() == rows * cols)
}

/// What a row kernel with `full` outputs over rows x columns, `outer` sums
/// over rows and `inner` row reductions writes. Where it writes only
/// statistics of its rows from two or more reductions, what its later
/// passes read is the rows as loaded (and the statistics), which
/// `Device::row_packed` holds as loaded. Where later passes read values computed from the rows (a
/// softmax's exponentials for its output, a dropout's draws, the column
/// sums' products), holding the loaded halves instead meant computing those
/// again or holding both: 1.31-1.44x slower over those on the H200.
pub fn writes(full: usize, outer: usize, inner: usize) -> Writes {
    match (full, outer, inner) {
        (0, 0, 1) => Writes::OneStatistic,
        (0, 0, n) if n >= 2 => Writes::Statistics,
        (f, 0, n) if f >= 1 && n >= 1 => Writes::Normalized,
        _ => Writes::Rows,
    }
}

/// Whether `f` reduces a value of rows x columns to one per column (a norm
/// backward's weight gradient). Such a sum joins the row kernel after its
/// schedule was chosen (`segment/`), which then writes `Writes::Rows`; a
/// row kernel that may be joined so is not held as loaded, so that the
/// shape `emit` gives as the schedule's reason is the one built.
fn sums_over_rows(f: &fusebench_ir::Fusion, rows: usize, cols: usize) -> bool {
    use fusebench_ir::Op;
    f.nodes.iter().any(|n| {
        let (x, dims) = match &n.op {
            Op::Reduce { x, dims, .. } | Op::Welford { x, dims } | Op::VarMean { x, dims, .. } => (*x, dims),
            _ => return false,
        };
        // Kept: the innermost dim (a row reduction reduces it).
        let rank = f.value(x).shape.as_ref().map_or(0, |s| s.len()) as i64;
        let keeps_last = !dims.iter().any(|&d| d == rank - 1 || d == -1);
        keeps_last && f.value(x).numel() == rows * cols && n.outputs.iter().any(|&o| f.value(o).numel() == cols)
    })
}

/// Whether every value of `full` elements (the rows x columns) that `f`
/// computes is a few instructions an element: casts, views, `where`, and
/// adds, subtracts, products, quotients, negations, extrema and
/// comparisons; no transcendental function and no random draw. Such values,
/// a norm's centred and scaled rows, cost little to compute again from rows
/// held as loaded; a softmax's exponentials computed again cost 1.31-1.37x
/// (the twenty-second session).
pub fn recomputed_cheaply(f: &fusebench_ir::Fusion, full: usize) -> bool {
    use fusebench_ir::{BinaryOp as B, Op, UnaryOp as U};
    f.nodes.iter().all(|n| {
        let big = n.outputs.iter().any(|&o| f.value(o).is_tensor() && f.value(o).numel() == full);
        match &n.op {
            Op::Rng { .. } | Op::RngLike { .. } => false,
            _ if !big => true,
            Op::Cast { .. } | Op::Where { .. } => true,
            Op::Unary { kind, .. } => matches!(kind, U::Neg | U::Abs),
            Op::Binary { kind, .. } => matches!(
                kind,
                B::Add | B::Sub | B::Mul | B::Div | B::Truediv | B::Maximum | B::Minimum | B::Eq | B::Ne | B::Lt | B::Le | B::Gt | B::Ge
            ),
            op => op.is_view(),
        }
    })
}

/// What a row kernel writes, which decides what it may hold (`writes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// Sums over rows (with or without outputs over rows x columns), or
    /// outputs over rows x columns with no row reduction.
    Rows,
    /// Outputs over rows x columns from row reductions and no sums over rows
    /// (a norm's or a softmax's output): 16-bit rows may be held as loaded
    /// where what the passes compute from them is cheap to compute again
    /// (`Device::row_packed_norms`).
    Normalized,
    /// Statistics of each row from two or more reductions (a cross-entropy,
    /// a logsumexp): 16-bit rows may be held as loaded.
    Statistics,
    /// One reduction of each row (a plain row sum): the row may be spread
    /// over more threads (`Device::row_sum_vectors`).
    OneStatistic,
}

/// The 16-bit tensors of rows x columns the fusion reads.
fn packed_inputs(f: &fusebench_ir::Fusion, rows: usize, cols: usize) -> Vec<fusebench_ir::ValueId> {
    row_inputs(f, rows, cols).filter(|&i| f.value(i).dtype.size_bytes() == 2).collect()
}

/// What the tensors of rows x columns the fusion reads hold per element, in
/// halves of a 32-bit register: two each, or one for a 16-bit tensor where
/// rows are `packed` (held as loaded, converted again in each pass:
/// `Lowerer::repack`).
pub fn held_halves(f: &fusebench_ir::Fusion, rows: usize, cols: usize, packed: bool) -> usize {
    match row_inputs(f, rows, cols).map(|i| if packed && f.value(i).dtype.size_bytes() == 2 { 1 } else { 2 }).sum() {
        0 => 2,
        n => n,
    }
}

/// A normalization or row reduction the loop schedule was given
/// (persistent.rs), built row-wise instead when its row fits the registers:
/// rows share blocks and several are in flight per thread. None when it
/// does not fit.
pub fn instead_of_loop(
    cx: &Context,
    name: &str,
    spec: &crate::persistent::Spec,
    unroll: usize,
) -> Option<Result<(String, Kernel), CodegenError>> {
    let f = cx.f;
    let rows: usize = spec.rows_shape.iter().product();
    let cols: usize = spec.inner_shape.iter().product();
    let last = *spec.inner_shape.last()?;
    let dtypes = f.values.iter().filter(|v| v.is_tensor()).map(|v| v.dtype);
    let width = crate::kernel::vector_width(last, dtypes);
    let written = writes(spec.full.len(), 0, spec.reductions.len());
    shape(cols, width, true, Holding::of(&cx.dev, f, rows, cols, written), None, spread(rows, spec.reductions.len(), &cx.dev))?;
    // Complex products keep the schedule they were written for.
    if spec.reductions.iter().any(|r| r.acc(f).is_complex()) {
        return None;
    }
    // Totals are kept per row by the loop schedule, per row group here.
    if !spec.totals.is_empty() {
        return None;
    }
    let rs = Spec {
        rows,
        cols,
        last,
        width,
        inner: spec.reductions,
        outer: &[],
        totals: &[],
        finish: None,
        full: spec.full,
        per_row: spec.per_row,
        row_blocks: 0,
        unroll,
        reload: None,
        walk: None,
    };
    match build(cx, name, &rs) {
        Err(CodegenError::NoFit(_)) => None,
        built => Some(built),
    }
}
