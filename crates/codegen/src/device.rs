//! What the planner knows about the GPU: the driver's properties (filled by
//! `fusebench_engine::planner_device` from the device's attributes, an H200's
//! without one) and the launch settings measured on it. Launch numbers are
//! derived from these in one place, `crate::launch`; the schedules' `fits`
//! quote them in their reasons.

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Device {
    /// Streaming multiprocessors.
    pub sm_count: u32,
    pub max_threads_per_block: u32,
    /// Threads a multiprocessor holds at once.
    pub max_threads_per_sm: u32,
    /// Most blocks a launch may have in x, y and z (CUDA's limits since
    /// compute capability 3.0: 2^31 - 1, 65535, 65535).
    pub max_grid: [u32; 3],
    /// Static shared memory a block may use without opting in.
    pub shared_memory_per_block: u32,
    pub shared_memory_per_sm: u32,
    pub registers_per_sm: u32,
    pub l2_bytes: u64,
    /// Row blocks per multiprocessor for kernels that also sum over rows:
    /// more blocks hide more latency but write more partial sums.
    pub row_blocks_per_sm: u32,
    /// Blocks per multiprocessor for normalizations without sums over rows;
    /// 0 gives every pair of rows its own block. Fewer, longer-lived blocks
    /// overlap one row's stores with the next row's loads.
    pub norm_blocks_per_sm: u32,
    /// Rows a row-wise block handles at once.
    pub row_unroll: u32,
    /// Threads per block of pointwise kernels.
    pub pointwise_block: u32,
    /// Vectors each thread of a pointwise kernel handles, a block apart (0:
    /// the schedule's own choice by size).
    pub pointwise_unroll: u32,
    /// Blocks per multiprocessor a small pointwise kernel narrows its
    /// vectors to reach.
    pub pointwise_blocks_per_sm: u32,
    /// Blocks per multiprocessor of a grid reduction's partial sums.
    pub grid_blocks_per_sm: u32,
    /// Blocks (of 256 threads) per multiprocessor of an outer reduction's
    /// partial sums.
    pub outer_blocks_per_sm: u32,
    /// A kernel whose grid is sized by blocks per multiprocessor
    /// (`Kernel::fill`: outer partials, sums over rows alone) and compiles to
    /// more registers than that many blocks leave, so its grid runs past one
    /// wave with the last part-filled, is planned again for the blocks that
    /// are resident (`launch::refit`; the engine compiles twice). Offline,
    /// 16 of 28 fresh outer partial kernels run 1.06-1.71 waves at 8
    /// blocks of 256 threads (36-48 registers: 5-6 resident), and 6 of 12
    /// bias gradients' row kernels 1.1-1.6. On the H200 (27th session) the
    /// outer partials so planned took 0.955 of the time over 15 fresh
    /// fusions, none slower; the bias gradients' row kernels were mixed
    /// (0.88-1.17). Off all the same: compiling twice took the first compile
    /// of a column-major logsumexp from 180 to 375 ms (NVRTC 12.9, two
    /// cores), past issue 14's 300 ms. Planned so without a second compile
    /// once the partials' code no longer depends on their grid.
    pub fit_waves: FitWaves,
    /// An outer reduction whose results are too few to give every
    /// multiprocessor `outer_blocks_per_sm` blocks narrows its blocks
    /// (`outer::Geometry`): fewer threads across the results, more down the
    /// reduced elements, so more blocks read at once.
    pub outer_narrow: bool,
    /// An outer reduction over few reduced elements folds them all in one
    /// block where narrower blocks still give half a block per
    /// multiprocessor (`outer::alone`): no combine kernel.
    pub outer_alone: bool,
    /// Threads of a row re-read in each pass (`rowwise::Shape::reload`); 0:
    /// the planner's rule (`launch::reload_threads`).
    pub reload_threads: u32,
    /// How row kernels read the small inputs their outputs broadcast over
    /// the rows (a norm's weight and bias). 0: where used, after the last
    /// block reduction; 1: into registers before the reductions (costs
    /// registers: occupancy fell on half the norms measured); 2: copied to
    /// shared memory as each block starts, so their latency overlaps the
    /// row's loads at no register cost (the seed RMSNorm 20.4 -> 19.0 us).
    pub row_prefetch: u32,
    /// Which schedule takes a stored sum over the rows of a row-major tensor.
    pub column_sums: ColumnSums,
    /// Iterations of a strided reduction loop whose loads are issued
    /// together (`strided::emit`): a loop unrolled by `#pragma unroll` still
    /// checks its bound before each load, so each thread had one load in
    /// flight. 1 keeps the plain loop.
    pub loads_in_flight: u32,
    /// The last block of a grid or outer reduction's partials combines them
    /// in the same kernel (`last_block`), rather than a combine kernel: 2.2%
    /// slower over 75 reductions on the H200, so off by default.
    pub last_block_combine: bool,
    /// Vectors each lane of a `contiguous` reduction folds at least before its
    /// group of lanes is widened.
    pub contiguous_per_lane: u32,
    /// Threads per multiprocessor the lane groups of a `contiguous`
    /// reduction are widened to fill, over all its results: 1024 gave a
    /// column-major 4096x7168 f32 sum over dim 0 a warp per result, each
    /// warp walking its 16 KB in eight steps (torch.compile gives each a
    /// block of 512 that reads it at once); 8192 gives it a block of 256.
    /// 8192 measured 0.981 of 1024 over 28 such reductions on the H200
    /// (0.855 to 1.016).
    pub contiguous_fill: u32,
    /// A stored reduction over elements contiguous in memory (the
    /// contiguous schedule) also writes the elementwise outputs laid out as
    /// its results by those elements, reading them once
    /// (`segment/decide.rs` `contiguous_joins`, `contiguous::build`'s `full`): a column-major
    /// backward RMSNorm's gradient beside its weight gradient, 7 transfers
    /// of the row-sized tensors down to 5. On: 0.787 of off over 11 fresh
    /// column-major backward RMSNorms (0.72-0.89, H200, session 26).
    pub contiguous_join: bool,
    /// A row the loop schedule walks more than once (persistent.rs) is kept
    /// in shared memory after its first read, as much of it as leaves room
    /// for two blocks per multiprocessor (`row_cache`).
    pub row_cache: bool,
    /// A row-wise kernel whose blocks walk many rows one after another (the
    /// backward norms' fixed grid) copies each thread's vectors of the next
    /// row to shared memory while the current row reduces (`next_row`): 0
    /// not, 1 its 16-byte vectors, 2 its per-row 4-byte values too (a
    /// backward RMSNorm's saved reciprocal, which each row waited for).
    pub next_row: u32,
    /// Accumulators each thread of a row kernel keeps per reduction and row,
    /// the thread's elements dealt among them in turn (`Passes::declare`):
    /// one accumulator chains every add or maximum of the row's elements
    /// behind the one before, and the block reduction waits on the chain.
    pub row_accumulators: u32,
    /// Row elements (times the row-sized tensors read) one block of a row
    /// kernel may hold in registers (`rowwise::BLOCK_HELD_MAX`); longer rows
    /// go to the loop schedule, which keeps them in shared memory. 8192
    /// measured 7.6% slower over 71 rows of 6144-16384 on the H200 (the
    /// loop's second pass from shared memory costs more than the blocks it
    /// adds), so the default stays.
    pub block_held: usize,
    /// Vectors each thread of a row kernel holding its row may take at most
    /// (`rowwise::Holding`): the fewest warps that hold the row within this
    /// and the registers. 32 leaves the registers the only bound; fewer
    /// spread a row over more threads (a plain row sum's loads over more
    /// blocks). Not measured yet.
    pub row_vectors: usize,
    /// A row kernel holding its row lets a thread take one vector past
    /// `rowwise::HELD_MAX`'s share (at most a quarter past it) where that
    /// leaves fewer thread slots idle (`rowwise::Holding::slack`): a row of
    /// 6400 bf16 as 160 threads x 5 vectors, as nvFuser lays it, not 200 of
    /// 224 x 4. Over 44 fresh row kernels it changes (H200): 0.970 of off
    /// (0.77 to 1.12; 33 faster, the slowest cross-entropies of 1664-2560
    /// rows, where the fewer threads no longer fill the GPU).
    pub row_slack: bool,
    /// A backward norm's row kernel walking the rows re-reads its row in
    /// each pass from the next row's copy in shared memory instead of
    /// holding it (`walk::plan`): 1 where its estimated registers held would
    /// leave fewer blocks resident than the grid plans and re-read would not;
    /// 2 always (where the copy is planned); 0 never.
    pub row_reread: u32,
    /// A row kernel's Float sums of one pass reduce over the block two at a
    /// time (`Passes::finish_all`, `fb_block_sum2_f`): one pair of barriers
    /// for both, the same additions in the same order.
    pub block_pairs: bool,
    /// A re-read row (`row_reread`) whose next row's two buffers do not fit
    /// re-reads from one, refilled as each row ends (next_row.rs), instead
    /// of holding its row.
    pub reread_one_buffer: bool,
    /// Kernels index in 32 bits where the largest element offset a tensor
    /// of the fusion reaches, times this, is below 2^31 (segment/mod.rs `try_plan`).
    pub index_margin: u64,
    /// A row kernel whose grid gives each block one iteration (every row
    /// kernel but those walking a fixed grid) is written without the loop
    /// over rows: with the loop the compiler keeps the vectors' addresses
    /// live across iterations that never come (an f32 LayerNorm of 10496
    /// held by 352 threads: 113 registers in the loop, 77 without, which
    /// is two blocks per multiprocessor instead of one). On: 0.983 of off
    /// over 26 fresh row fusions (0.69-1.05; that LayerNorm 476.6 -> 330.2
    /// us; 16-bit logsumexps lost 3-5%), H200, session 26.
    pub row_once: bool,
    /// The least blocks per multiprocessor a row kernel that holds its row
    /// declares (`__launch_bounds__`'s second number): 0 none, else the
    /// compiler caps each thread's registers to fit that many, spilling
    /// what does not fit. 3 measured 18.5% slower over the same 71 (up to
    /// 3.2x where 100-124 registers were cut to 40), so 0.
    pub row_min_blocks: u32,
    /// A row kernel whose fixed grid walks the rows with k >= 2 blocks per
    /// multiprocessor (`launch::row_blocks`, the backward norms' column
    /// sums) declares k as its least blocks per multiprocessor: without
    /// it the compiler may take more registers than k blocks leave, and
    /// the grid then runs in k waves of one block per multiprocessor (a
    /// backward LayerNorm of 4352 f16 at 288 threads: 121 registers, one
    /// block resident of the two planned; under the bound 94 and two
    /// spilled words). Not yet timed, so off.
    pub row_fit_grid: bool,
    /// A backward norm's fixed grid walking the rows (`plan::Fill::Walk`)
    /// takes as many blocks per multiprocessor as its estimated registers
    /// leave resident (`walk::plan`), as long as each block walks at least
    /// this many rows; 0: `row_blocks_per_sm` (2, or enough for 256 threads).
    /// The sixth fresh sample's RMSNorm backward f32 23040x1408 (0.92 of
    /// nvFuser) walked on 2 blocks of 96 threads per multiprocessor where 7
    /// were resident (0.29 waves). Session 28 measured the compiled form
    /// (every walk refit after compiling) winning where blocks walk many rows
    /// and losing where 2-8.
    pub walk_fill: u32,
    /// A matrix product's ReLU (or, for BFloat16, tanh GELU) consumer run in the BLAS
    /// library's epilogue (crate::epilogue_fn) rather than by a kernel that
    /// reads the product back: the fresh GEMM sample's GELU kernel cost 8-12%
    /// of the product alone at 4096 rows.
    pub product_epilogue: bool,
    /// Steps of k a grouped product keeps in shared memory, the one it
    /// multiplies and those loading ahead (crate::grouped_mm; 36 KiB each).
    pub grouped_stages: u32,
    /// A grouped product whose operands have k contiguous multiplies with
    /// Hopper's `wgmma` (prelude/grouped_mm.cu `fb_grouped_mm_wg`), each
    /// warpgroup 64 x 128 of the tile from 128-byte swizzled shared memory,
    /// instead of `mma.sync` from padded rows: the mma.sync kernel reached
    /// 295 TFLOP/s at 16384 x 4096 where the peers' CUTLASS kernel reaches
    /// 770. The engine turns it on for compute capability 9.0, which the
    /// runtime compiles for as sm_90a.
    pub grouped_wgmma: bool,
    /// How a grouped product reads an operand whose rows are contiguous (m
    /// of mat1, n of mat2: an expert weight held [in, out], a weight
    /// gradient's tokens). Off (element by element) until the other two
    /// have run on a GPU: written without one.
    pub grouped_mn: GroupedMn,
    /// Where `grouped_wgmma` runs and both operands have k contiguous: the
    /// tile width (128 or 256) of the warp-specialized grouped kernel
    /// (prelude/grouped_mm.cu `fb_grouped_mm_ws`: one thread copying steps of
    /// k with the tensor memory accelerator through tensor maps, two
    /// warpgroups multiplying, meeting at mbarriers, blocks walking the
    /// tiles); 0 the kernel whose every thread copies and multiplies, which
    /// reached 450 TFLOP/s at 16384 x 4096 where the peers' CUTLASS kernel,
    /// warp-specialized, reaches 770. On the H100 (session 39) 256 took 0.747
    /// of 0's time over six MoE shapes whose groups cut m (1223 -> 854 us at
    /// 16384 x 4096), 128 0.768; the same split with cp.async copies issued by
    /// a warpgroup lost (1.15 over twelve).
    pub grouped_ws: u32,
    /// Which ways of cutting the groups (m, n, k: `grouped_mm`'s CUT 0, 1, 2)
    /// take the warp-specialized kernel. Only m by default: it is the one
    /// checked on a GPU across the random and pattern sets (n on one small
    /// fusion; k stopped with an illegal instruction where a group's k range
    /// was not a multiple of 64, mended offline and not yet run again).
    pub grouped_ws_cuts: [bool; 3],
    /// The warp-specialized kernel also for operands whose rows are
    /// contiguous (under `GroupedMn::Wgmma`): the accelerator writes a box of
    /// 64 rows by 64 of k as the eight swizzle atoms the MN-major wgmma reads.
    /// Written without a GPU and not yet run, so off; the peers ran the
    /// MN-major MoE shapes in 0.49-1.30 of our time (session 39).
    pub grouped_ws_mn: bool,
    /// Warps per flash attention block, 16 queries each (crate::attention).
    pub attention_warps: u32,
    /// Keys flash attention takes per step.
    pub attention_keys: u32,
    /// Tiles of 16 queries each flash attention warp takes (one past head
    /// dims of 128). Two: every key and value fragment read from shared
    /// memory feeds two products; h128 s2048 bf16 ran in 969 us, not 1132
    /// (H200, 4 warps, 64 keys).
    pub attention_tiles: u32,
    /// Flash attention run by cuDNN's fused attention where it reads the
    /// operands as they lie (crate::attention::library), not by the kernels
    /// of ours: on the H200 its Hopper kernels took 0.42-0.56 of our time,
    /// within 3% of PyTorch's fastest backend (BENCHMARKS.md, session 34).
    /// Off by default; the engine turns it on for a GPU of compute capability
    /// 8.0 or later where cuDNN loads, `emit` where cuDNN loads, and
    /// `FUSEBENCH_ATTENTION` sets it.
    pub attention_library: bool,
    /// A row kernel that writes only statistics of its rows
    /// (`rowwise::Writes::Statistics`: a cross-entropy, a logsumexp) holds 16-bit
    /// rows as loaded and converts them again in each pass
    /// (`Lowerer::repack`), so a thread holds twice the elements in the same
    /// registers (`rowwise::held_halves`): a bf16 row of 14336 took 448
    /// threads x 32 floats at 70 registers, now 224 x 64 halves at 54
    /// (nvFuser: 256 x 56 at 64). Measured on the H200 over 10 such
    /// fusions: 0.88 (0.745 to 1.0), then 0.916 over 24 fresh ones; over all
    /// 16-bit row kernels, 1.039. Only where the rows give every thread the
    /// GPU holds four vectors or more (`rowwise::Holding::of`).
    pub row_packed: bool,
    /// `row_packed` for a row kernel that writes outputs over its rows from
    /// row reductions and no sums over rows (`rowwise::Writes::Normalized`:
    /// a LayerNorm, an RMSNorm), where every row-sized value it computes is
    /// a few instructions an element (`rowwise::recomputed_cheaply`) and the
    /// row is held as floats without it. The worst forward norm of the
    /// fifth fresh sample, LayerNorm bf16 26624x12544 (0.85 of nvFuser),
    /// holds 40 floats a thread in 320 threads at 95 registers, 2 blocks per
    /// multiprocessor; nvFuser holds 56 halves in 224 at 70, 4 per
    /// multiprocessor. Taken for rows of this many elements or more (0:
    /// never), at most `rowwise::PACKED_NORM_VECTORS` vectors a thread. Timed
    /// on 15 fresh norms in the twenty-eighth session, it won where it raised
    /// the blocks a multiprocessor holds, rows of 6272 to 14848 (0.87-0.93),
    /// and lost where it lowered them, rows of 1920 to 4864 (1.03-1.06); on
    /// 27 more in the thirtieth, rows of 6144-6400 lost up to 1.05 and from
    /// 6784 on it won or tied but for one row of 9 vectors a thread (1.57).
    pub row_packed_norms: usize,
    /// Threads per multiprocessor a row kernel holding its rows fills before
    /// a thread takes more vectors (`rowwise::Holding::filling`): 512 rows of
    /// 2560 f16 took 96 threads x 4 vectors each, 0.82 of torch.compile's 512
    /// threads per row. 0: the registers alone decide. 2048 measured 1.012
    /// over 40 rows of 256-2048 on the H200 (0.69 to 1.31), so 0.
    pub row_fill: u32,
    /// Vectors each thread of a kernel that writes one statistic of each row
    /// (`rowwise::Writes::OneStatistic`: a plain row sum) takes at most, one
    /// row per thread, where the row fits 512 threads so
    /// (`rowwise::Holding::summing`): a sum of 4096 rows of 2560 f32 took 96
    /// threads x 7 vectors, two rows per thread group, and 17.4 us on the
    /// H200; 224 x 3, one row each, 15.5. Over the 58 sums of 256-16384 rows
    /// it changed there: 0.927 (0.689 to 1.012). 0: as other row kernels.
    pub row_sum_vectors: usize,
    /// A pointwise kernel whose outermost dim is short and has an input
    /// broadcast over it walks that dim in each thread
    /// (`schedule::pointwise::walk`): RoPE 0.926 over 36 fusions. 0 never,
    /// 1 dims of at most 16, 2 longer dims too, in chunks of at most 16
    /// (RoPE of 18-56 heads: 0.872 of 1 over 8 fusions on the H200). 3 also
    /// walks the rows of a rank-2 kernel with an input broadcast over them
    /// by its layout, computing what reads only such inputs once per chunk
    /// (`schedule::pointwise::walk_layout_rows`, `Lowerer::hoist_invariant`),
    /// where the inputs read at full size are 16-bit; 4 whatever their
    /// dtypes. Over 40 fresh SiLU-mul and GELU backward fusions with a
    /// broadcast row (H200): bf16 and fp16 0.75-0.94 of 2 (one of 24 at
    /// 1.03), f32 1.05 (1.01-1.07 on 13 of 16).
    pub pointwise_walk: u32,
    /// A thread walking such rows issues every row's loads of its chunk
    /// before any row's arithmetic (`pointwise::build`); false: row by row.
    /// Over the same 40 (H200): 16-bit SiLU-mul 0.95-0.96 of row by row
    /// (more registers, 96-109, fewer threads, more loads in flight), GELU
    /// backward 1.00; f32 at walk 4 still 1.02-1.06 of no walk.
    pub walk_loads_first: bool,
    /// Rows each block of a row kernel with sums over rows and no row
    /// reductions (a bias gradient beside its gradient) walks at least
    /// (`launch::row_blocks`): fewer, longer blocks write fewer partials for
    /// the combine. 8: bf16 5000x2176 GELU backward with its bias gradient
    /// runs 528 x 2 blocks of about 10 rows and a 5 us combine of 528
    /// partials (nvFuser: 31 row splits, no combine kernel). Not yet timed
    /// otherwise.
    pub column_sum_rows: u32,
    /// Blocks per multiprocessor at most of such a row kernel
    /// (`launch::row_blocks`). 8, though at 224-256 threads and 32-56
    /// registers 5-7 are resident, so the grid runs in 1.1-1.6 waves
    /// (offline survey, session 26); not yet timed otherwise.
    pub column_sum_blocks_per_sm: u32,
    /// Transpose tiles (`transpose.rs`): 0, the planner's (64 wide where
    /// every multiprocessor still gets two blocks, else 32); 32 or 64.
    pub transpose_tile: u32,
    /// Bytes a transpose thread moves per access: 0 pairs 2-byte tiled reads
    /// (4 bytes) and stores one element at a time; 4, 8 or 16 widen both the
    /// tiled reads and the stores to that many bytes where the extents allow.
    /// 16 against 0 on the H200 over 52 fresh transposes (`fusebench bench`):
    /// 0.934 (0.757 to 1.025); bf16 12000x4608 column-major 82.3 -> 63.5 us
    /// (torch.compile 58.7). 8: 0.943.
    pub transpose_bytes: u32,
    /// Threads per transpose block.
    pub transpose_threads: u32,
    /// A scan along the innermost dim over lines of at least
    /// `scan::BLOCK_LINE` elements runs a block per line, scanning 1024
    /// elements a step across the block (`scan_blocks.rs`), instead of a
    /// thread per line walking it alone: a line of a cumsum over a vocabulary
    /// is one thread's 32000 dependent steps. On the H200 (2026-12-05)
    /// 0.011-0.74 of the thread per line's time on six shapes, 8 x 32000 to
    /// 32768 x 128 (`FUSEBENCH_SCAN_BLOCKS`).
    pub scan_blocks: bool,
    /// A scan along the innermost dim runs each line on a group of threads
    /// sized to it, from a part of a warp to 512 threads, several lines a
    /// block (`scan_lines.rs`), taking the place of `scan_blocks`, which
    /// left 32768 lines of 128 at 0.09 of torch.compile's speed on the H100.
    /// Written without a GPU (session 40 was lent none): off until run.
    pub scan_lines: bool,
    /// Consecutive elements each thread of a line scan takes in a step.
    pub scan_items: u32,
    /// Lines too few to give every multiprocessor two blocks are cut into
    /// chunks over more blocks, a first kernel finding each chunk's total
    /// (8 x 32000: 8 blocks walking 32000 elements each took 26.6 us on
    /// the H100, torch.compile 5.2).
    pub scan_split: bool,
    /// Outputs computed elementwise from a scan alone are written by the
    /// scan's kernel, and the scan is stored only where something else
    /// reads it (a cumsum output is a stored temporary and a copy, twice the
    /// copy's traffic). Written without a GPU: off until run.
    pub scan_epilogue: bool,
    /// A scan along the innermost dim whose operand lies across its lines (a
    /// column-major input) reads tiles of neighbouring lines through shared
    /// memory and writes the prefixes along the lines (`scan_tiles.rs`),
    /// both coalesced. Written without a GPU: off until run.
    pub scan_tiles: bool,
    /// An output that reshapes a value computed over a normalization's rows
    /// (a group norm's [N, G, C / G, H, W] back to [N, C, H, W]) is planned
    /// before its reshape, the same row-major buffer, so the row kernel
    /// writes it rather than a pointwise kernel that reads the input again
    /// (`reshaped.rs`). Not yet timed on a GPU: off until run.
    pub reshaped_outputs: bool,
    /// Outputs with one element per result computed from a stored mean and
    /// variance alone (a batch norm's rsqrt(var + eps) and running
    /// statistics) are written by the kernel that finishes them, as plain
    /// sums' are (`epilogue.rs`), instead of a pointwise kernel of about a
    /// microsecond. Not yet run on a GPU: off until run.
    pub stat_epilogue: bool,
    /// A row reduction kept on chip by a row kernel and read by later
    /// elementwise kernels too is stored by that row kernel
    /// (`Rows::stored`), not computed first by a kernel of its own that
    /// reads the input again. Not yet run on a GPU: off until run.
    pub rows_store: bool,
    /// A mean and variance split over blocks (`grid.rs`) in one read of the
    /// input (`grid_moments.rs`) instead of two rounds. Written without a
    /// GPU: off until run.
    pub grid_moments: bool,
    /// Plain reductions of different values over the same elements, all on
    /// the grid or all on the outer schedule, computed by one kernel and one combine
    /// (`Work::Stored::siblings`). Written without a GPU: off until run.
    pub siblings: bool,
    /// How every kernel reads global memory (`FUSEBENCH_LOADS`); None: the
    /// planner's choice, streaming loads where a reduction's partial kernel
    /// reads its input for the last time (`Context::read_once`), the
    /// read-only path elsewhere.
    pub load_hint: Option<LoadHint>,
}

/// Which kernels sized by blocks per multiprocessor are planned again for
/// what is resident (`FUSEBENCH_FIT_WAVES`, `launch::refit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FitWaves {
    Off,
    /// An outer reduction's partials: also no more blocks than the slots.
    Outer,
    /// Those and a row kernel of sums over rows alone (a bias gradient).
    All,
}

/// How a grouped product reads an operand whose rows are contiguous
/// (`FUSEBENCH_GROUPED_MN`, crate::grouped_mm).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedMn {
    /// Element by element, two bytes a thread, stored transposed.
    Off,
    /// Copied 16 bytes a thread along the rows, held [k][row] and read by
    /// `ldmatrix.trans` into `mma.sync`, also where `wgmma` takes
    /// k-contiguous operands (prelude/grouped_mm.cu `FB_GMM_MN`).
    MmaSync,
    /// The same copies into MN-major swizzled atoms read by `wgmma` with its
    /// transpose bits where `Device::grouped_wgmma`; else as `MmaSync`.
    Wgmma,
}

/// Which schedule takes a stored sum over the rows of a row-major tensor
/// (`FUSEBENCH_COLUMN_SUMS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnSums {
    /// Column tiles walking the rows (`rowwise`), which also write the
    /// elementwise outputs over the same rows x columns.
    Rowwise,
    /// The outer reduction's blocks of 32 x 8 threads folded in shared
    /// memory, fewer partials: 4% faster over 53 column sums on the H200, up
    /// to 5% slower at 8192 rows and more (twelfth session); but an
    /// elementwise output over the same rows (a GELU backward's gradient
    /// beside its bias gradient) then takes a kernel of its own, which reads
    /// the inputs and computes the values again.
    Outer,
    /// The tiles where elementwise outputs over the same rows join them, the
    /// outer blocks otherwise.
    Joined,
}

/// The cache hint of global loads. nvFuser's pointwise kernels load with
/// `ld.global.cs` (evict first), Triton's with plain `ld.global`, ours
/// through the read-only path; which one leaves the L2 best for the rest
/// of a kernel is measured, not assumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadHint {
    /// `__ldg`: the read-only (non-coherent) path.
    ReadOnly,
    /// `__ldcs`: streaming, likely read once, evicted first.
    Streaming,
    /// A plain dereference.
    Plain,
}

impl LoadHint {
    pub fn intrinsic(self) -> &'static str {
        match self {
            LoadHint::ReadOnly => "__ldg",
            LoadHint::Streaming => "__ldcs",
            LoadHint::Plain => "",
        }
    }
}

impl Default for Device {
    /// An H200 (the driver's attributes, cuDeviceGetAttribute), for planning
    /// without a device at hand.
    fn default() -> Self {
        Device {
            sm_count: 132,
            max_threads_per_block: 1024,
            max_threads_per_sm: 2048,
            max_grid: [i32::MAX as u32, 65535, 65535],
            shared_memory_per_block: 48 * 1024,
            shared_memory_per_sm: 228 * 1024,
            registers_per_sm: 64 * 1024,
            l2_bytes: 60 * 1024 * 1024,
            row_blocks_per_sm: 2,
            norm_blocks_per_sm: 0,
            row_unroll: 2,
            pointwise_block: 128,
            pointwise_unroll: 0,
            pointwise_blocks_per_sm: 4,
            grid_blocks_per_sm: 4,
            outer_blocks_per_sm: 8,
            fit_waves: FitWaves::Off,
            outer_narrow: true,
            outer_alone: true,
            reload_threads: 0,
            row_prefetch: 2,
            column_sums: ColumnSums::Joined,
            loads_in_flight: 4,
            last_block_combine: false,
            contiguous_per_lane: 4,
            contiguous_fill: 8192,
            contiguous_join: true,
            row_cache: true,
            next_row: 2,
            row_accumulators: 1,
            block_held: crate::rowwise::BLOCK_HELD_MAX,
            row_vectors: 32,
            row_slack: true,
            row_reread: 1,
            block_pairs: true,
            reread_one_buffer: true,
            index_margin: 8,
            row_once: true,
            row_min_blocks: 0,
            row_fit_grid: false,
            walk_fill: 16,
            product_epilogue: true,
            grouped_stages: 2,
            grouped_wgmma: false,
            grouped_mn: GroupedMn::Wgmma,
            grouped_ws: 256,
            grouped_ws_cuts: [true, false, false],
            grouped_ws_mn: false,
            attention_warps: 4,
            attention_keys: 64,
            attention_tiles: 2,
            attention_library: false,
            row_packed: true,
            row_packed_norms: 6784,
            row_fill: 0,
            row_sum_vectors: 3,
            pointwise_walk: 3,
            walk_loads_first: true,
            column_sum_rows: 8,
            column_sum_blocks_per_sm: 8,
            transpose_tile: 0,
            transpose_bytes: 16,
            transpose_threads: 256,
            scan_blocks: true,
            scan_lines: false,
            scan_items: 8,
            scan_split: true,
            scan_epilogue: false,
            scan_tiles: false,
            reshaped_outputs: false,
            stat_epilogue: false,
            rows_store: false,
            grid_moments: false,
            siblings: false,
            load_hint: None,
        }
    }
}
