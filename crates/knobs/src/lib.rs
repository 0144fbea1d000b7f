//! Every `FUSEBENCH_*` environment variable fusebench reads, declared once in
//! [`DECLARED`], parsed into one typed [`Knobs`] and validated as a whole: an
//! unknown name or a value outside what a knob accepts (`FUSEBENCH_FLUSH=Read`)
//! is an error naming what is accepted, never a silent default. A new knob is
//! one line in `DECLARED` and one field (and one `match` arm) in `Knobs`.
//!
//! An empty value counts as unset (`FUSEBENCH_DB= fusebench ...`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use thiserror::Error;

/// What a knob changes, and so which measurement records carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Affects {
    /// What runs before a cold sample: every cold record (and its copy ceiling).
    ColdSetup,
    /// The kernels the planner makes: every record of a fusion fusebench planned.
    Kernels,
    /// Where things are kept, or diagnostics: no measurement.
    Nothing,
}

/// One declared knob.
#[derive(Clone, Copy, Debug)]
pub struct Declared {
    pub name: &'static str,
    /// What it accepts, as an error message says it.
    pub accepts: &'static str,
    /// Its value when unset, in words.
    pub default: &'static str,
    pub affects: Affects,
    pub doc: &'static str,
}

const fn knob(
    name: &'static str,
    accepts: &'static str,
    default: &'static str,
    affects: Affects,
    doc: &'static str,
) -> Declared {
    Declared {
        name,
        accepts,
        default,
        affects,
        doc,
    }
}

/// Every knob, in the order `--help` texts and docs list them.
pub const DECLARED: &[Declared] = &[
    knob("FUSEBENCH_FLUSH", "read or write", "read", Affects::ColdSetup,
        "how a cold sample evicts L2: by reading a buffer twice the L2 (clean lines: the CLI and kernel_time agree within 1%) or by writing it (dirty lines, as nvbench and Triton do; the kernel pays their write-back, by a share that differs between front ends)"),
    knob("FUSEBENCH_FLUSH_MIB", "a whole number of MiB, at least 1", "twice the L2, at least 8 MiB", Affects::ColdSetup,
        "a larger L2 flush buffer, for experiments on what else a flush evicts"),
    knob("FUSEBENCH_EVICT_CODE", "0 or 1", "1", Affects::ColdSetup,
        "1: a cold sample first runs a long kernel on every SM, evicting the instruction caches; 0 leaves them warm"),
    knob("FUSEBENCH_TLB_GIB", "a whole number of GiB", "0", Affects::ColdSetup,
        "also evict address translations before a cold sample by touching a buffer of this size"),
    knob("FUSEBENCH_COLD_SETS", "a whole number from 1 to 64", "4", Affects::ColdSetup,
        "placements of the inputs a cold sample cycles through"),
    knob("FUSEBENCH_COLD_WAIT", "0 or 1", "0", Affects::ColdSetup,
        "1: a cold sample waits on the host for the flush to finish before launching the measured kernels (as a Python callable's sample does), leaving the GPU idle between them"),
    knob("FUSEBENCH_EVENTS", "0 or 1", "1", Affects::ColdSetup,
        "1: CUDA events are recorded around the measured kernels, whose elapsed time every CUPTI sample carries as a cross-check; 0: none (the events method records them regardless)"),
    knob("FUSEBENCH_ROW_BLOCKS_PER_SM", "a whole number from 1 to 64", "the planner's (2)", Affects::Kernels,
        "blocks per SM of row reductions (tuning experiments)"),
    knob("FUSEBENCH_NORM_BLOCKS_PER_SM", "a whole number from 0 to 64 (0: one row per block)", "the planner's (0)", Affects::Kernels,
        "blocks per SM of normalizations (tuning experiments)"),
    knob("FUSEBENCH_ROW_UNROLL", "a whole number from 1 to 16", "the planner's (2)", Affects::Kernels,
        "rows per thread block iteration in row kernels (tuning experiments)"),
    knob("FUSEBENCH_POINTWISE_BLOCK", "128, 256, 512 or 1024", "the planner's (128)", Affects::Kernels,
        "threads per block of pointwise kernels (tuning experiments)"),
    knob("FUSEBENCH_POINTWISE_UNROLL", "a whole number from 1 to 8", "the planner's (2 for 16M elements and two 16-bit inputs that large, else 1)", Affects::Kernels,
        "vectors per thread of pointwise kernels, a block apart (tuning experiments)"),
    knob("FUSEBENCH_POINTWISE_BLOCKS_PER_SM", "a whole number from 1 to 32", "the planner's (4)", Affects::Kernels,
        "blocks per SM a small pointwise kernel narrows its vectors to reach (tuning experiments)"),
    knob("FUSEBENCH_GRID_BLOCKS_PER_SM", "a whole number from 1 to 32", "the planner's (4)", Affects::Kernels,
        "blocks per SM of a grid reduction's partial sums (tuning experiments)"),
    knob("FUSEBENCH_FIT_WAVES", "off, outer or all (0 and 1 read as off and all)", "the planner's (off)", Affects::Kernels,
        "all: a kernel whose grid is sized by blocks per multiprocessor (an outer reduction's partials, a row kernel of sums over rows alone) and compiles to more registers than that many blocks leave is planned again for the blocks that are resident, so its grid ends within one wave; outer: the outer partials alone (tuning experiments)"),
    knob("FUSEBENCH_OUTER_BLOCKS_PER_SM", "a whole number from 1 to 32", "the planner's (8)", Affects::Kernels,
        "blocks per SM of an outer reduction's partial sums (tuning experiments)"),
    knob("FUSEBENCH_OUTER_NARROW", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: an outer reduction with too few results to fill the GPU gives each block fewer results and more threads down the reduced elements (down to 64-byte row segments); 0: always 32 threads across (tuning experiments)"),
    knob("FUSEBENCH_OUTER_ALONE", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: an outer reduction over at most 512 elements folds them all in one block, with no combine kernel, where narrower blocks still give half a block per SM; 0: split over blocks as any other (tuning experiments)"),
    knob("FUSEBENCH_RELOAD_THREADS", "256, 512 or 1024", "the planner's (1024, or 512 where two column sums would not fit the registers)", Affects::Kernels,
        "threads of a row re-read in each pass by a backward norm past the registers (tuning experiments)"),
    knob("FUSEBENCH_ROW_PREFETCH", "0, 1 or 2", "the planner's (2)", Affects::Kernels,
        "how a row kernel reads the small inputs its outputs broadcast over the rows (a norm's weight): 0 after the row's reductions, 1 into registers before them, 2 copied to shared memory as each block starts (tuning experiments)"),
    knob("FUSEBENCH_COLUMN_SUMS", "rowwise, outer or joined", "the planner's (joined)", Affects::Kernels,
        "which schedule takes a stored sum over the rows of a row-major tensor: column tiles walking the rows (which also write the elementwise outputs over the same rows), the outer reduction's blocks of 32 x 8 threads, or joined: the tiles where such outputs join them, else the outer blocks (tuning experiments)"),
    knob("FUSEBENCH_LOADS_IN_FLIGHT", "a whole number from 1 to 16", "the planner's (4)", Affects::Kernels,
        "iterations of a strided reduction loop (grid and outer reductions, long rows) whose loads each thread issues together; 1: the plain loop (tuning experiments)"),
    knob("FUSEBENCH_COMBINE", "kernel or last-block", "the planner's (kernel)", Affects::Kernels,
        "how a grid or outer reduction's partials are combined: by a kernel of their own, or by the last block to store its partials, in the same kernel (tuning experiments)"),
    knob("FUSEBENCH_CONTIGUOUS_PER_LANE", "a whole number from 1 to 64", "the planner's (4)", Affects::Kernels,
        "vectors each lane of a reduction over elements contiguous in memory folds before more lanes share a result (tuning experiments)"),
    knob("FUSEBENCH_CONTIGUOUS_FILL", "a whole number from 256 to 65536", "the planner's (8192)", Affects::Kernels,
        "threads per multiprocessor the lane groups of a reduction over elements contiguous in memory are widened to fill, over all its results; more: wider groups, each result read by more lanes at once (tuning experiments)"),
    knob("FUSEBENCH_CONTIGUOUS_JOIN", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a reduction over elements contiguous in memory also writes the elementwise outputs laid out as its results by those elements (a column-major backward RMSNorm's gradient beside its weight gradient), reading them once; 0: they are written apart, one more read of the inputs (tuning experiments)"),
    knob("FUSEBENCH_NEXT_ROW", "0, 1 or 2", "the planner's (2)", Affects::Kernels,
        "row kernels that walk many rows copy the next row to shared memory while the current one reduces: 0 not, 1 its 16-byte vectors, 2 its per-row 4-byte values too (tuning experiments)"),
    knob("FUSEBENCH_ROW_CACHE", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a row too long for the registers is kept in shared memory between its passes (as much of it as fits two blocks per multiprocessor); 0: every pass reads it again from global memory (tuning experiments)"),
    knob("FUSEBENCH_ROW_ACCUMULATORS", "a whole number from 1 to 8", "the planner's (1)", Affects::Kernels,
        "accumulators each thread of a row kernel keeps per reduction, its elements dealt among them in turn: independent chains of adds (or maxima) instead of one (tuning experiments)"),
    knob("FUSEBENCH_BLOCK_HELD", "a whole number from 1024 to 65536", "the planner's (16384)", Affects::Kernels,
        "row elements (times the row-sized tensors read) one block of a row kernel holds in registers; longer rows go to the loop schedule, which keeps them in shared memory (tuning experiments)"),
    knob("FUSEBENCH_ROW_VECTORS", "a whole number from 1 to 32", "the planner's (32: the registers decide)", Affects::Kernels,
        "vectors each thread of a row kernel holding its row takes at most; fewer spread the row over more threads (tuning experiments)"),
    knob("FUSEBENCH_ROW_ONCE", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a row kernel whose grid gives every block one iteration is written without the loop over rows, which kept addresses live across iterations that never come; 0: always the loop (tuning experiments)"),
    knob("FUSEBENCH_ROW_SLACK", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a row kernel holding its row lets a thread take one vector past the registers' share (at most a quarter more) where its warps then leave fewer thread slots idle (a row of 800 vectors as 160 threads x 5, not 200 of 224 x 4); 0: never (tuning experiments)"),
    knob("FUSEBENCH_ROW_REREAD", "0, 1 or 2", "the planner's (1)", Affects::Kernels,
        "a backward norm's row kernel walking the rows re-reads its row in each pass from the next row's shared-memory copy instead of holding it: 1 where its registers, estimated, would leave fewer blocks resident than the grid plans and re-reading leaves all; 2 always; 0 never (tuning experiments)"),
    knob("FUSEBENCH_REREAD_ONE_BUFFER", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a backward norm's row re-read in each pass whose next row's two shared-memory buffers do not fit the planned blocks re-reads from one buffer, refilled as each row ends; 0: it holds its row instead (tuning experiments)"),
    knob("FUSEBENCH_INDEX_MARGIN", "1 to 8", "the planner's (8)", Affects::Kernels,
        "kernels index in 32 bits where the largest element offset any tensor of the fusion reaches, times this, is below 2^31; else in 64 (tuning experiments)"),
    knob("FUSEBENCH_BLOCK_PAIRS", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a row kernel's Float sums of one pass reduce over the block two at a time, one pair of barriers for both; 0: one at a time (tuning experiments)"),
    knob("FUSEBENCH_ROW_FIT_GRID", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1: a row kernel whose fixed grid walks the rows with two or more blocks per multiprocessor declares that many as its least blocks per multiprocessor, so that the compiler caps its registers to keep them all resident (tuning experiments)"),
    knob("FUSEBENCH_ROW_MIN_BLOCKS", "a whole number from 0 to 8", "the planner's (0)", Affects::Kernels,
        "blocks per multiprocessor a row kernel holding its row asks the compiler to fit (launch bounds), registers capped to match and spilled past that; 0: no such bound (tuning experiments)"),
    knob("FUSEBENCH_ROW_PACKED", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a row kernel that writes only statistics of its rows (a cross-entropy, a logsumexp) holds 16-bit rows in registers as loaded and converts them again in each pass, so each thread holds twice the elements, where the rows give each of the GPU's threads four 16-byte vectors or more; 0: held as floats (tuning experiments)"),
    knob("FUSEBENCH_WALK_FILL", "a whole number from 0 to 1024", "the planner's (16)", Affects::Kernels,
        "a backward norm's fixed grid walking the rows takes as many blocks per multiprocessor as its estimated registers leave resident, as long as each block walks at least this many rows; 0: the planned 2 (or enough for 256 threads) (tuning experiments)"),
    knob("FUSEBENCH_PRODUCT_EPILOGUE", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a matrix product's elementwise consumer that is a ReLU (or, for BFloat16 products, a tanh GELU) of its result alone runs in the BLAS library's epilogue, and a constant scale of it is the product's alpha, applied before the product is rounded to its dtype; 0: in a kernel of ours that reads the product back (tuning experiments)"),
    knob("FUSEBENCH_GROUPED_STAGES", "2, 3 or 4", "the planner's (2)", Affects::Kernels,
        "steps of 64 of k a grouped_mm block keeps in shared memory, 36 KiB each: more load further ahead, fewer blocks fit a multiprocessor (tuning experiments)"),
    knob("FUSEBENCH_GROUPED_WGMMA", "0 or 1", "the planner's (1 on compute capability 9.0)", Affects::Kernels,
        "1: a grouped_mm whose operands have k contiguous multiplies with Hopper's wgmma from 128-byte swizzled tiles (compiled for sm_90a); 0: mma.sync (tuning experiments)"),
    knob("FUSEBENCH_GROUPED_WS", "0, 128 or 256", "the planner's (256)", Affects::Kernels,
        "a grouped_mm whose operands have k contiguous, where wgmma runs: 128 or 256, the warp-specialized kernel (one thread copying steps of k into stages with the tensor memory accelerator, two warpgroups multiplying them as they fill, meeting at mbarriers; blocks walking the tiles, 128 x that many columns each); 0: the kernel whose every thread copies and multiplies (on the H100, 256 took 0.747 of 0's time over six MoE shapes whose groups cut m)"),
    knob("FUSEBENCH_GROUPED_WS_CUTS", "m, n, k or a comma-separated list of them", "the planner's (m)", Affects::Kernels,
        "which ways of cutting the groups take FUSEBENCH_GROUPED_WS's warp-specialized kernel: m (tokens sorted by expert, the forward), n, k (the weights' gradients); the others keep the kernel whose every thread copies and multiplies. Only m has been checked on a GPU across the fuzzer's and the pattern sets (n on one small fusion; k's mended form not yet run), so only m by default (tuning experiments)"),
    knob("FUSEBENCH_GROUPED_WS_MN", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1: FUSEBENCH_GROUPED_WS's warp-specialized kernel also takes grouped_mm operands whose rows are contiguous (an expert weight held [in, out], a weight gradient's tokens), copied by the tensor memory accelerator as MN-major boxes of 64 rows and read transposed by wgmma; 0: they keep the kernel whose every thread copies (written without a GPU, not yet run, so 0)"),
    knob("FUSEBENCH_GROUPED_MN", "0, 1 or 2", "the planner's (2)", Affects::Kernels,
        "a grouped_mm operand whose rows (m of mat1, n of mat2) are contiguous, an expert weight held [in, out] or the tokens of a weight gradient: 1, copied 16 bytes a thread with cp.async and read transposed by ldmatrix into mma.sync; 2, the same into MN-major swizzled tiles read by wgmma where it runs (compute capability 9.0), else as 1; 0: element by element (on the H200, 1 took 0.263 and 2 0.202 of 0's time over 12 MoE shapes)"),
    knob("FUSEBENCH_ATTENTION_WARPS", "2, 4 or 8", "the planner's (4)", Affects::Kernels,
        "warps per block of flash attention, each taking 16 queries: more share each tile of keys and values loaded, fewer blocks fit a multiprocessor (tuning experiments)"),
    knob("FUSEBENCH_ATTENTION", "auto, cudnn or own", "auto", Affects::Kernels,
        "who runs flash attention (sdpfa_fwd, sdpfa_bwd): cudnn, its fused attention where it reads the operands as they lie; own, the kernels of ours; auto: cudnn on a GPU where libcudnn loads, own in planning without a GPU"),
    knob("FUSEBENCH_ATTENTION_TILES", "1 or 2", "the planner's (2; 1 past head dims of 128)", Affects::Kernels,
        "tiles of 16 queries each warp of flash attention takes: two feed every key and value fragment read from shared memory to twice the products, in twice the registers (tuning experiments)"),
    knob("FUSEBENCH_ATTENTION_KEYS", "32, 64 or 128", "the planner's (64)", Affects::Kernels,
        "keys flash attention takes per step: more hold more scores in registers and rescale the output less often (tuning experiments)"),
    knob("FUSEBENCH_ROW_PACKED_NORMS", "a row length from 0 to 1048576", "the planner's (6784)", Affects::Kernels,
        "rows of this many elements or more (0: none, 1: all): FUSEBENCH_ROW_PACKED's holding also for a row kernel that writes outputs over its rows from row reductions and no sums over rows (a LayerNorm, an RMSNorm), where each row-sized value it computes is a few instructions an element (no transcendental function, no random draw) and the row is held as floats without it; its outputs convert the row again (tuning experiments)"),
    knob("FUSEBENCH_ROW_FILL", "a whole number from 0 to 2048", "the planner's (0)", Affects::Kernels,
        "threads per multiprocessor a row kernel holding its rows fills before a thread takes more vectors: few rows spread over more threads each; 0: the registers alone decide (tuning experiments)"),
    knob("FUSEBENCH_ROW_SUM_VECTORS", "a whole number from 0 to 32", "the planner's (3)", Affects::Kernels,
        "vectors each thread of a kernel that writes one statistic of each row (a plain row sum) takes at most, one row per thread, where the row fits 512 threads so; 0: as other row kernels (tuning experiments)"),
    knob("FUSEBENCH_POINTWISE_WALK", "0, 1, 2, 3 or 4", "the planner's (3)", Affects::Kernels,
        "1: a pointwise kernel whose outermost dim is short (at most 16) and has an input broadcast over it walks that dim in each thread, loading the broadcast input once (not where an input is fp16); 2: a longer such dim too, in chunks of its largest divisor up to 16; 3: also a rank-2 kernel with an input broadcast over its rows by its layout (stride 0) whose inputs read at full size are all 16-bit, rows walked in chunks and what reads only such inputs computed once per chunk; 4: that walk whatever the dtypes; 0: a thread per vector (tuning experiments)"),
    knob("FUSEBENCH_WALK_LOADS_FIRST", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a pointwise thread walking the rows of a row broadcast by its layout issues the loads of every row of its chunk before any row's arithmetic; 0: row by row (tuning experiments)"),
    knob("FUSEBENCH_COLUMN_SUM_BLOCKS_PER_SM", "a whole number from 1 to 32", "the planner's (8)", Affects::Kernels,
        "blocks per multiprocessor at most of a row kernel with sums over rows and no row reductions (a bias gradient beside its gradient); more than its registers let be resident at once run in a second, partial wave (tuning experiments)"),
    knob("FUSEBENCH_COLUMN_SUM_ROWS", "a whole number from 1 to 1024", "the planner's (8)", Affects::Kernels,
        "rows each block of a row kernel with sums over rows and no row reductions (a bias gradient beside its gradient) walks at least: more rows, fewer partials for the combine (tuning experiments)"),
    knob("FUSEBENCH_SCAN_BLOCKS", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: a scan (cumsum, cumprod, cummin, cummax) along the innermost dim over lines of 128 or more runs a block per line, 1024 elements a step scanned across the block; 0: a thread per line"),
    knob("FUSEBENCH_SCAN_LINES", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1: a scan along the innermost dim runs each line on a group of threads sized to it (a part of a warp for short lines, up to 512 threads), several lines a block, in place of FUSEBENCH_SCAN_BLOCKS (written without a GPU, not yet run); 0: as FUSEBENCH_SCAN_BLOCKS says"),
    knob("FUSEBENCH_SCAN_ITEMS", "a whole number from 1 to 16", "the planner's (8)", Affects::Kernels,
        "consecutive elements each thread of a line scan takes in a step (tuning experiments)"),
    knob("FUSEBENCH_SCAN_SPLIT", "0 or 1", "the planner's (1)", Affects::Kernels,
        "1: where a line scan's lines give the GPU fewer than two blocks a multiprocessor, each line is cut into chunks over more blocks, a first kernel finding each chunk's total; 0: a block per line however few"),
    knob("FUSEBENCH_SCAN_EPILOGUE", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1 (written without a GPU, not yet run): outputs computed elementwise from a scan alone (the scan itself, its cast) are written by the scan's kernel, and the scan is stored only where something else reads it; 0: the scan is stored and a kernel of its own writes them"),
    knob("FUSEBENCH_SCAN_TILES", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1 (written without a GPU, not yet run): a scan along the innermost dim whose operand lies across its lines (a column-major input) reads tiles of neighbouring lines through shared memory, coalesced, and writes its prefixes along the lines; 0: as the other scan settings say"),
    knob("FUSEBENCH_RESHAPED_OUTPUTS", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1 (not yet timed on a GPU): an output that reshapes a value computed over a normalization's rows (a group norm's groups back to channels) is planned before its reshape, the same buffer, so the row kernel writes it; 0: a pointwise kernel of its own reads the input again"),
    knob("FUSEBENCH_STAT_EPILOGUE", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1 (not yet run on a GPU): outputs with one element per result computed from a stored mean and variance alone (rsqrt(var + eps), a running mean's update) are written by the kernel that finishes the statistics, as for plain sums; 0: a pointwise kernel of their own"),
    knob("FUSEBENCH_ROWS_STORE", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1 (not yet run on a GPU): a row reduction that a row kernel keeps on chip and that later elementwise kernels also read (an instance norm backward's sums per plane, summed again over the batch) is stored by that row kernel; 0: a kernel of its own computes and stores it first, reading the input again"),
    knob("FUSEBENCH_GRID_MOMENTS", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1 (written without a GPU, not yet run): a mean and variance split over blocks (few results over many elements each, a batch norm's per channel) is found in one read of the input, a sum and Welford's update on shifted values merged in order; 0: two rounds, the mean and then the squared deviations"),
    knob("FUSEBENCH_SIBLINGS", "0 or 1", "the planner's (0)", Affects::Kernels,
        "1 (written without a GPU, not yet run): plain reductions of different values over the same elements, all on the grid or all on the outer schedule (a batch norm backward's two sums per channel), are computed by one kernel that reads the elements once, and combined by one; 0: a kernel and a combine each"),
    knob("FUSEBENCH_TRANSPOSE_TILE", "0, 32 or 64", "the planner's (0: 64 where every multiprocessor still gets two blocks, else 32)", Affects::Kernels,
        "width of the square shared-memory tiles of the transpose schedule (tuning experiments)"),
    knob("FUSEBENCH_TRANSPOSE_BYTES", "0, 4, 8 or 16", "the planner's (16)", Affects::Kernels,
        "bytes a transpose thread reads and writes per access: 0 pairs 2-byte tiled reads and stores one element at a time; 4, 8 or 16 widen both where the extents allow (tuning experiments)"),
    knob("FUSEBENCH_TRANSPOSE_THREADS", "128, 256 or 512", "the planner's (256)", Affects::Kernels,
        "threads per block of the transpose schedule (tuning experiments)"),
    knob("FUSEBENCH_LOADS", "nc, cs or plain", "the planner's (nc)", Affects::Kernels,
        "how kernels read global memory: the read-only path (__ldg), streaming loads evicted first (__ldcs), or plain loads (tuning experiments)"),
    knob("FUSEBENCH_CACHE_DIR", "a directory", "$XDG_CACHE_HOME/fusebench/kernels, else ~/.cache/fusebench/kernels", Affects::Nothing,
        "where compiled kernels are cached"),
    knob("FUSEBENCH_NO_KERNEL_CACHE", "0 or 1", "0", Affects::Nothing,
        "1: compile every kernel afresh (for timing compilation)"),
    knob("FUSEBENCH_COMPILE_APART", "auto, 0 or 1", "auto", Affects::Nothing,
        "1: a fusion's kernels compile as translation units of their own, a thread each; 0: in one module; auto: apart where the machine runs 4 threads or more (the same instructions, at most scheduled differently)"),
    knob("FUSEBENCH_DB", "a file", "$XDG_DATA_HOME/fusebench/results.sqlite, else ~/.local/share/fusebench/results.sqlite", Affects::Nothing,
        "the results database"),
    knob("FUSEBENCH_REF_PROFILE", "0 or 1", "0", Affects::Nothing,
        "1: the CPU reference prints the time of every node"),
    knob("FUSEBENCH_SHARED", "a directory", "../shared beside the repository", Affects::Nothing,
        "where tests find the corpus and golden fusions"),
    knob("FUSEBENCH_GPU_TESTS", "0 or 1", "whether an NVIDIA driver (libcuda.so.1) is found when the tests are built", Affects::Nothing,
        "read when the tests are built (crates/testdata): 1 builds the GPU tests to run, 0 marks them ignored"),
];

/// How a cold sample evicts L2 (`FUSEBENCH_FLUSH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// A memset of the flush buffer: leaves dirty lines the next kernel writes back.
    Write,
    /// A kernel that reads the flush buffer: leaves clean lines. The default:
    /// on the H200 `fusebench bench` and `kernel_time` read the same kernels
    /// 1.001-1.011 apart after it (geomean over 12 and 11 fusions), 1.024-1.080
    /// after a write flush (up to 1.26 on 2-3 us kernels).
    Read,
}

impl Flush {
    pub fn name(self) -> &'static str {
        match self {
            Flush::Write => "write",
            Flush::Read => "read",
        }
    }
}

/// The knobs' values, parsed and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Knobs {
    pub flush: Flush,
    /// Flush buffer size asked for, in MiB (the flush uses the larger of this and its own).
    pub flush_mib: Option<usize>,
    pub evict_code: bool,
    pub tlb_gib: usize,
    pub cold_sets: usize,
    pub cold_wait: bool,
    pub events: bool,
    pub row_blocks_per_sm: Option<u32>,
    pub norm_blocks_per_sm: Option<u32>,
    pub row_unroll: Option<u32>,
    pub pointwise_block: Option<u32>,
    pub pointwise_unroll: Option<u32>,
    pub pointwise_blocks_per_sm: Option<u32>,
    pub grid_blocks_per_sm: Option<u32>,
    pub outer_blocks_per_sm: Option<u32>,
    pub outer_narrow: Option<bool>,
    pub outer_alone: Option<bool>,
    pub reload_threads: Option<u32>,
    pub row_prefetch: Option<u32>,
    /// "rowwise", "outer" or "joined".
    pub column_sums: Option<&'static str>,
    pub loads_in_flight: Option<u32>,
    pub last_block_combine: Option<bool>,
    pub contiguous_per_lane: Option<u32>,
    pub contiguous_fill: Option<u32>,
    pub contiguous_join: Option<bool>,
    pub row_cache: Option<bool>,
    pub next_row: Option<u32>,
    pub row_accumulators: Option<u32>,
    pub block_held: Option<u32>,
    pub row_vectors: Option<u32>,
    pub row_slack: Option<bool>,
    pub row_reread: Option<u32>,
    pub block_pairs: Option<bool>,
    pub reread_one_buffer: Option<bool>,
    pub index_margin: Option<u32>,
    pub compile_apart: Option<bool>,
    pub row_once: Option<bool>,
    pub row_fit_grid: Option<bool>,
    pub fit_waves: Option<&'static str>,
    pub row_min_blocks: Option<u32>,
    pub row_packed: Option<bool>,
    pub row_packed_norms: Option<u32>,
    pub walk_fill: Option<u32>,
    pub product_epilogue: Option<bool>,
    pub attention_warps: Option<u32>,
    pub grouped_stages: Option<u32>,
    pub grouped_wgmma: Option<bool>,
    pub grouped_mn: Option<u32>,
    pub grouped_ws: Option<u32>,
    pub grouped_ws_cuts: Option<[bool; 3]>,
    pub grouped_ws_mn: Option<bool>,
    pub attention_keys: Option<u32>,
    pub attention_tiles: Option<u32>,
    pub attention_library: Option<bool>,
    pub row_fill: Option<u32>,
    pub row_sum_vectors: Option<u32>,
    pub pointwise_walk: Option<u32>,
    pub walk_loads_first: Option<bool>,
    pub column_sum_rows: Option<u32>,
    pub column_sum_blocks_per_sm: Option<u32>,
    pub scan_blocks: Option<bool>,
    pub scan_lines: Option<bool>,
    pub scan_items: Option<u32>,
    pub scan_split: Option<bool>,
    pub scan_epilogue: Option<bool>,
    pub scan_tiles: Option<bool>,
    pub reshaped_outputs: Option<bool>,
    pub stat_epilogue: Option<bool>,
    pub rows_store: Option<bool>,
    pub grid_moments: Option<bool>,
    pub siblings: Option<bool>,
    pub transpose_tile: Option<u32>,
    pub transpose_bytes: Option<u32>,
    pub transpose_threads: Option<u32>,
    /// "nc", "cs" or "plain".
    pub loads: Option<&'static str>,
    pub cache_dir: Option<PathBuf>,
    pub no_kernel_cache: bool,
    pub db: Option<PathBuf>,
    pub ref_profile: bool,
    pub shared: Option<PathBuf>,
    /// The knobs that were set, as given.
    pub set: BTreeMap<&'static str, String>,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            flush: Flush::Read,
            flush_mib: None,
            evict_code: true,
            tlb_gib: 0,
            cold_sets: 4,
            cold_wait: false,
            events: true,
            row_blocks_per_sm: None,
            norm_blocks_per_sm: None,
            row_unroll: None,
            pointwise_block: None,
            pointwise_unroll: None,
            pointwise_blocks_per_sm: None,
            grid_blocks_per_sm: None,
            outer_blocks_per_sm: None,
            outer_narrow: None,
            outer_alone: None,
            reload_threads: None,
            row_prefetch: None,
            column_sums: None,
            loads_in_flight: None,
            last_block_combine: None,
            contiguous_per_lane: None,
            contiguous_fill: None,
            contiguous_join: None,
            row_cache: None,
            next_row: None,
            row_accumulators: None,
            block_held: None,
            row_vectors: None,
            row_slack: None,
            row_reread: None,
            block_pairs: None,
            reread_one_buffer: None,
            index_margin: None,
            compile_apart: None,
            row_once: None,
            row_fit_grid: None,
            fit_waves: None,
            row_min_blocks: None,
            row_packed: None,
            row_packed_norms: None,
            walk_fill: None,
            product_epilogue: None,
            attention_warps: None,
            grouped_stages: None,
            grouped_wgmma: None,
            grouped_mn: None,
            grouped_ws: None,
            grouped_ws_cuts: None,
            grouped_ws_mn: None,
            attention_keys: None,
            attention_tiles: None,
            attention_library: None,
            row_fill: None,
            row_sum_vectors: None,
            pointwise_walk: None,
            walk_loads_first: None,
            column_sum_rows: None,
            column_sum_blocks_per_sm: None,
            scan_blocks: None,
            scan_lines: None,
            scan_items: None,
            scan_split: None,
            scan_epilogue: None,
            scan_tiles: None,
            reshaped_outputs: None,
            stat_epilogue: None,
            rows_store: None,
            grid_moments: None,
            siblings: None,
            transpose_tile: None,
            transpose_bytes: None,
            transpose_threads: None,
            loads: None,
            cache_dir: None,
            no_kernel_cache: false,
            db: None,
            ref_profile: false,
            shared: None,
            set: BTreeMap::new(),
        }
    }
}

/// Every problem with the environment's knobs, one per line.
#[derive(Error, Debug, Clone, PartialEq)]
#[error("{}", .0.join("\n"))]
pub struct KnobError(pub Vec<String>);

fn whole(v: &str, lo: u64, hi: u64) -> Option<u64> {
    v.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
}

/// `whole` for a knob held as a u32.
fn count(v: &str, lo: u32, hi: u32) -> Option<u32> {
    whole(v, lo as u64, hi as u64).map(|n| n as u32)
}

/// A comma-separated set of m, n and k (the ways a grouped product's groups cut it).
fn cuts(v: &str) -> Option<[bool; 3]> {
    let mut c = [false; 3];
    for w in v.split(',').map(str::trim) {
        c[["m", "n", "k"].iter().position(|&x| x == w)?] = true;
    }
    Some(c)
}

fn flag(v: &str) -> Option<bool> {
    match v.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

impl Knobs {
    /// Parses `vars` (name, value pairs; names not starting with `FUSEBENCH_`
    /// are ignored). Every problem is reported, not only the first.
    pub fn from_vars<I, K, V>(vars: I) -> Result<Knobs, KnobError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut k = Knobs::default();
        let mut errors = Vec::new();
        for (name, value) in vars {
            let (name, value) = (name.as_ref(), value.as_ref());
            if !name.starts_with("FUSEBENCH_") || value.is_empty() {
                continue;
            }
            let Some(d) = DECLARED.iter().find(|d| d.name == name) else {
                let known: Vec<&str> = DECLARED.iter().map(|d| d.name).collect();
                errors.push(format!(
                    "{name} is not a fusebench setting; the settings are {}",
                    known.join(", ")
                ));
                continue;
            };
            let ok = match name {
                "FUSEBENCH_FLUSH" => match value {
                    "write" => Some(Flush::Write),
                    "read" => Some(Flush::Read),
                    _ => None,
                }
                .map(|f| k.flush = f),
                "FUSEBENCH_FLUSH_MIB" => {
                    whole(value, 1, 1 << 20).map(|n| k.flush_mib = Some(n as usize))
                }
                "FUSEBENCH_EVICT_CODE" => flag(value).map(|b| k.evict_code = b),
                "FUSEBENCH_TLB_GIB" => whole(value, 0, 4096).map(|n| k.tlb_gib = n as usize),
                "FUSEBENCH_COLD_SETS" => whole(value, 1, 64).map(|n| k.cold_sets = n as usize),
                "FUSEBENCH_COLD_WAIT" => flag(value).map(|b| k.cold_wait = b),
                "FUSEBENCH_EVENTS" => flag(value).map(|b| k.events = b),
                "FUSEBENCH_ROW_BLOCKS_PER_SM" => count(value, 1, 64).map(|n| k.row_blocks_per_sm = Some(n)),
                "FUSEBENCH_NORM_BLOCKS_PER_SM" => count(value, 0, 64).map(|n| k.norm_blocks_per_sm = Some(n)),
                "FUSEBENCH_ROW_UNROLL" => count(value, 1, 16).map(|n| k.row_unroll = Some(n)),
                "FUSEBENCH_POINTWISE_BLOCK" => match value {
                    "128" | "256" | "512" | "1024" => value.parse().ok().map(|n| k.pointwise_block = Some(n)),
                    _ => None,
                },
                "FUSEBENCH_POINTWISE_UNROLL" => count(value, 1, 8).map(|n| k.pointwise_unroll = Some(n)),
                "FUSEBENCH_POINTWISE_BLOCKS_PER_SM" => count(value, 1, 32).map(|n| k.pointwise_blocks_per_sm = Some(n)),
                "FUSEBENCH_GRID_BLOCKS_PER_SM" => count(value, 1, 32).map(|n| k.grid_blocks_per_sm = Some(n)),
                "FUSEBENCH_OUTER_BLOCKS_PER_SM" => count(value, 1, 32).map(|n| k.outer_blocks_per_sm = Some(n)),
                "FUSEBENCH_OUTER_NARROW" => flag(value).map(|b| k.outer_narrow = Some(b)),
                "FUSEBENCH_OUTER_ALONE" => flag(value).map(|b| k.outer_alone = Some(b)),
                "FUSEBENCH_RELOAD_THREADS" => match value {
                    "256" | "512" | "1024" => value.parse().ok().map(|n| k.reload_threads = Some(n)),
                    _ => None,
                },
                "FUSEBENCH_ROW_PREFETCH" => count(value, 0, 2).map(|n| k.row_prefetch = Some(n)),
                "FUSEBENCH_COLUMN_SUMS" => ["rowwise", "outer", "joined"]
                    .into_iter()
                    .find(|&h| h == value)
                    .map(|h| k.column_sums = Some(h)),
                "FUSEBENCH_LOADS_IN_FLIGHT" => count(value, 1, 16).map(|n| k.loads_in_flight = Some(n)),
                "FUSEBENCH_COMBINE" => match value {
                    "kernel" => Some(false),
                    "last-block" => Some(true),
                    _ => None,
                }
                .map(|b| k.last_block_combine = Some(b)),
                "FUSEBENCH_CONTIGUOUS_PER_LANE" => count(value, 1, 64).map(|n| k.contiguous_per_lane = Some(n)),
                "FUSEBENCH_CONTIGUOUS_FILL" => count(value, 256, 65536).map(|n| k.contiguous_fill = Some(n)),
                "FUSEBENCH_CONTIGUOUS_JOIN" => flag(value).map(|b| k.contiguous_join = Some(b)),
                "FUSEBENCH_ROW_CACHE" => flag(value).map(|b| k.row_cache = Some(b)),
                "FUSEBENCH_NEXT_ROW" => count(value, 0, 2).map(|n| k.next_row = Some(n)),
                "FUSEBENCH_ROW_ACCUMULATORS" => count(value, 1, 8).map(|n| k.row_accumulators = Some(n)),
                "FUSEBENCH_BLOCK_HELD" => count(value, 1024, 65536).map(|n| k.block_held = Some(n)),
                "FUSEBENCH_ROW_VECTORS" => count(value, 1, 32).map(|n| k.row_vectors = Some(n)),
                "FUSEBENCH_ROW_SLACK" => flag(value).map(|b| k.row_slack = Some(b)),
                "FUSEBENCH_BLOCK_PAIRS" => flag(value).map(|b| k.block_pairs = Some(b)),
                "FUSEBENCH_REREAD_ONE_BUFFER" => flag(value).map(|b| k.reread_one_buffer = Some(b)),
                "FUSEBENCH_INDEX_MARGIN" => count(value, 1, 8).map(|n| k.index_margin = Some(n)),
                "FUSEBENCH_COMPILE_APART" => match value {
                    "auto" => Some(()),
                    v => flag(v).map(|b| k.compile_apart = Some(b)),
                },
                "FUSEBENCH_ROW_REREAD" => count(value, 0, 2).map(|n| k.row_reread = Some(n)),
                "FUSEBENCH_ROW_ONCE" => flag(value).map(|b| k.row_once = Some(b)),
                "FUSEBENCH_ROW_FIT_GRID" => flag(value).map(|b| k.row_fit_grid = Some(b)),
                "FUSEBENCH_FIT_WAVES" => match value {
                    "0" | "off" => Some("off"),
                    "outer" => Some("outer"),
                    "1" | "all" => Some("all"),
                    _ => None,
                }
                .map(|h| k.fit_waves = Some(h)),
                "FUSEBENCH_ROW_MIN_BLOCKS" => count(value, 0, 8).map(|n| k.row_min_blocks = Some(n)),
                "FUSEBENCH_ROW_PACKED" => flag(value).map(|b| k.row_packed = Some(b)),
                "FUSEBENCH_ROW_PACKED_NORMS" => count(value, 0, 1 << 20).map(|n| k.row_packed_norms = Some(n)),
                "FUSEBENCH_WALK_FILL" => count(value, 0, 1024).map(|n| k.walk_fill = Some(n)),
                "FUSEBENCH_PRODUCT_EPILOGUE" => flag(value).map(|b| k.product_epilogue = Some(b)),
                "FUSEBENCH_GROUPED_STAGES" => count(value, 2, 4).map(|n| k.grouped_stages = Some(n)),
                "FUSEBENCH_GROUPED_WGMMA" => flag(value).map(|b| k.grouped_wgmma = Some(b)),
                "FUSEBENCH_GROUPED_MN" => count(value, 0, 2).map(|n| k.grouped_mn = Some(n)),
                "FUSEBENCH_GROUPED_WS_CUTS" => cuts(value).map(|c| k.grouped_ws_cuts = Some(c)),
                "FUSEBENCH_GROUPED_WS_MN" => flag(value).map(|b| k.grouped_ws_mn = Some(b)),
                "FUSEBENCH_GROUPED_WS" => match value {
                    "0" | "128" | "256" => value.parse().ok().map(|n| k.grouped_ws = Some(n)),
                    _ => None,
                },
                "FUSEBENCH_ATTENTION_WARPS" => count(value, 2, 8).filter(|n| n.is_power_of_two()).map(|n| k.attention_warps = Some(n)),
                "FUSEBENCH_ATTENTION_TILES" => count(value, 1, 2).map(|n| k.attention_tiles = Some(n)),
                "FUSEBENCH_ATTENTION" => match value {
                    "auto" => Some(()),
                    "cudnn" | "own" => {
                        k.attention_library = Some(value == "cudnn");
                        Some(())
                    }
                    _ => None,
                },
                "FUSEBENCH_ATTENTION_KEYS" => count(value, 32, 128).filter(|n| n.is_power_of_two()).map(|n| k.attention_keys = Some(n)),
                "FUSEBENCH_ROW_FILL" => count(value, 0, 2048).map(|n| k.row_fill = Some(n)),
                "FUSEBENCH_ROW_SUM_VECTORS" => count(value, 0, 32).map(|n| k.row_sum_vectors = Some(n)),
                "FUSEBENCH_POINTWISE_WALK" => count(value, 0, 4).map(|n| k.pointwise_walk = Some(n)),
                "FUSEBENCH_WALK_LOADS_FIRST" => flag(value).map(|b| k.walk_loads_first = Some(b)),
                "FUSEBENCH_COLUMN_SUM_ROWS" => count(value, 1, 1024).map(|n| k.column_sum_rows = Some(n)),
                "FUSEBENCH_COLUMN_SUM_BLOCKS_PER_SM" => count(value, 1, 32).map(|n| k.column_sum_blocks_per_sm = Some(n)),
                "FUSEBENCH_SCAN_BLOCKS" => flag(value).map(|b| k.scan_blocks = Some(b)),
                "FUSEBENCH_SCAN_LINES" => flag(value).map(|b| k.scan_lines = Some(b)),
                "FUSEBENCH_SCAN_ITEMS" => count(value, 1, 16).map(|n| k.scan_items = Some(n)),
                "FUSEBENCH_SCAN_SPLIT" => flag(value).map(|b| k.scan_split = Some(b)),
                "FUSEBENCH_SCAN_EPILOGUE" => flag(value).map(|b| k.scan_epilogue = Some(b)),
                "FUSEBENCH_SCAN_TILES" => flag(value).map(|b| k.scan_tiles = Some(b)),
                "FUSEBENCH_RESHAPED_OUTPUTS" => flag(value).map(|b| k.reshaped_outputs = Some(b)),
                "FUSEBENCH_STAT_EPILOGUE" => flag(value).map(|b| k.stat_epilogue = Some(b)),
                "FUSEBENCH_ROWS_STORE" => flag(value).map(|b| k.rows_store = Some(b)),
                "FUSEBENCH_GRID_MOMENTS" => flag(value).map(|b| k.grid_moments = Some(b)),
                "FUSEBENCH_SIBLINGS" => flag(value).map(|b| k.siblings = Some(b)),
                "FUSEBENCH_TRANSPOSE_TILE" => match value {
                    "0" | "32" | "64" => value.parse().ok().map(|n| k.transpose_tile = Some(n)),
                    _ => None,
                },
                "FUSEBENCH_TRANSPOSE_BYTES" => match value {
                    "0" | "4" | "8" | "16" => value.parse().ok().map(|n| k.transpose_bytes = Some(n)),
                    _ => None,
                },
                "FUSEBENCH_TRANSPOSE_THREADS" => match value {
                    "128" | "256" | "512" => value.parse().ok().map(|n| k.transpose_threads = Some(n)),
                    _ => None,
                },
                "FUSEBENCH_LOADS" => ["nc", "cs", "plain"]
                    .into_iter()
                    .find(|&h| h == value)
                    .map(|h| k.loads = Some(h)),
                "FUSEBENCH_CACHE_DIR" => Some(value).map(|v| k.cache_dir = Some(v.into())),
                "FUSEBENCH_NO_KERNEL_CACHE" => flag(value).map(|b| k.no_kernel_cache = b),
                "FUSEBENCH_DB" => Some(value).map(|v| k.db = Some(v.into())),
                "FUSEBENCH_REF_PROFILE" => flag(value).map(|b| k.ref_profile = b),
                "FUSEBENCH_SHARED" => Some(value).map(|v| k.shared = Some(v.into())),
                // Read by crates/testdata's build script; nothing at run time.
                "FUSEBENCH_GPU_TESTS" => flag(value).map(|_| ()),
                _ => unreachable!("every declared knob has a parser: {name}"),
            };
            match ok {
                Some(()) => {
                    k.set.insert(d.name, value.to_string());
                }
                None => errors.push(format!(
                    "{name}={value:?} is not accepted: {name} takes {} (default {})",
                    d.accepts, d.default
                )),
            }
        }
        if errors.is_empty() {
            Ok(k)
        } else {
            Err(KnobError(errors))
        }
    }

    /// The knobs that were set and change what `affects` covers, as `NAME=value`
    /// pairs: written into every record they affect.
    pub fn affecting(&self, affects: &[Affects]) -> BTreeMap<String, String> {
        self.set
            .iter()
            .filter(|(name, _)| {
                DECLARED
                    .iter()
                    .any(|d| d.name == **name && affects.contains(&d.affects))
            })
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    }
}

/// The process's knobs, parsed from its environment on first use. A variable
/// whose value is not UTF-8 is an error like any other bad value.
pub fn get() -> Result<&'static Knobs, KnobError> {
    static KNOBS: OnceLock<Result<Knobs, KnobError>> = OnceLock::new();
    KNOBS
        .get_or_init(|| {
            let mut bad = Vec::new();
            let vars: Vec<(String, String)> = std::env::vars_os()
                .filter_map(|(k, v)| {
                    let k = k.into_string().ok()?;
                    if !k.starts_with("FUSEBENCH_") {
                        return None;
                    }
                    match v.into_string() {
                        Ok(v) => Some((k, v)),
                        Err(_) => {
                            bad.push(format!("{k} is not valid UTF-8"));
                            None
                        }
                    }
                })
                .collect();
            match (Knobs::from_vars(vars), bad.is_empty()) {
                (Ok(k), true) => Ok(k),
                (Ok(_), false) => Err(KnobError(bad)),
                (Err(mut e), _) => {
                    e.0.extend(bad);
                    Err(e)
                }
            }
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The knobs as a table for `--help` texts and docs: name, accepted values, default, what it does.
pub fn table() -> String {
    DECLARED
        .iter()
        .map(|d| {
            format!(
                "{}: {} (default {}): {}\n",
                d.name, d.accepts, d.default, d.doc
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_gives_the_defaults() {
        let k = Knobs::from_vars([("PATH", "/bin"), ("FUSEBENCH_DB", "")]).unwrap();
        assert_eq!(k, Knobs::default());
    }

    #[test]
    fn values_are_parsed_and_remembered() {
        let k = Knobs::from_vars([
            ("FUSEBENCH_FLUSH", "write"),
            ("FUSEBENCH_COLD_SETS", "2"),
            ("FUSEBENCH_ROW_UNROLL", "1"),
            ("FUSEBENCH_DB", "/tmp/x.sqlite"),
        ])
        .unwrap();
        assert_eq!(k.flush, Flush::Write);
        assert_eq!(k.cold_sets, 2);
        assert_eq!(k.row_unroll, Some(1));
        assert_eq!(
            k.affecting(&[Affects::ColdSetup]),
            BTreeMap::from([
                ("FUSEBENCH_COLD_SETS".to_string(), "2".to_string()),
                ("FUSEBENCH_FLUSH".to_string(), "write".to_string())
            ])
        );
        assert_eq!(
            k.affecting(&[Affects::Kernels]).keys().collect::<Vec<_>>(),
            ["FUSEBENCH_ROW_UNROLL"]
        );
    }

    #[test]
    fn a_bad_value_names_what_is_accepted() {
        let e = Knobs::from_vars([("FUSEBENCH_FLUSH", "Read")]).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("FUSEBENCH_FLUSH=\"Read\""), "{text}");
        assert!(text.contains("read or write"), "{text}");
        for (name, value) in [
            ("FUSEBENCH_COLD_SETS", "0"),
            ("FUSEBENCH_COLD_SETS", "four"),
            ("FUSEBENCH_EVICT_CODE", "no"),
            ("FUSEBENCH_TLB_GIB", "-1"),
            ("FUSEBENCH_ROW_UNROLL", "99"),
            ("FUSEBENCH_ROW_PREFETCH", "3"),
            ("FUSEBENCH_COLUMN_SUMS", "rows"),
            ("FUSEBENCH_ROW_CACHE", "yes"),
            ("FUSEBENCH_NEXT_ROW", "3"),
            ("FUSEBENCH_LOADS", "ldg"),
        ] {
            assert!(
                Knobs::from_vars([(name, value)]).is_err(),
                "{name}={value} was accepted"
            );
        }
    }

    #[test]
    fn the_row_kernel_knobs_parse() {
        let k = Knobs::from_vars([("FUSEBENCH_ROW_PREFETCH", "0"), ("FUSEBENCH_COLUMN_SUMS", "rowwise")]).unwrap();
        assert_eq!((k.row_prefetch, k.column_sums), (Some(0), Some("rowwise")));
        let k = Knobs::from_vars([("FUSEBENCH_COLUMN_SUMS", "outer")]).unwrap();
        assert_eq!((k.row_prefetch, k.column_sums), (None, Some("outer")));
        let k = Knobs::from_vars([("FUSEBENCH_COLUMN_SUMS", "joined")]).unwrap();
        assert_eq!(k.column_sums, Some("joined"));
    }

    #[test]
    fn the_grouped_kernel_knobs_parse() {
        let k = Knobs::from_vars([("FUSEBENCH_GROUPED_WS", "128"), ("FUSEBENCH_GROUPED_WS_CUTS", "k, m")]).unwrap();
        assert_eq!((k.grouped_ws, k.grouped_ws_cuts), (Some(128), Some([true, false, true])));
        let e = Knobs::from_vars([("FUSEBENCH_GROUPED_WS", "64"), ("FUSEBENCH_GROUPED_WS_CUTS", "m,x")]).unwrap_err();
        assert_eq!(e.0.len(), 2, "{e}");
    }

    #[test]
    fn an_unknown_name_is_an_error_listing_the_known_ones() {
        let e =
            Knobs::from_vars([("FUSEBENCH_FLUHS", "read"), ("FUSEBENCH_FLUSH", "x")]).unwrap_err();
        assert_eq!(e.0.len(), 2, "every problem is reported: {e}");
        assert!(e.0[0].contains("FUSEBENCH_FLUHS is not a fusebench setting"));
        assert!(e.0[0].contains("FUSEBENCH_FLUSH,"));
    }

    #[test]
    fn every_declared_knob_parses_its_default_spelling() {
        // Each declared name reaches a parser (no `unreachable!`), whatever the value.
        for d in DECLARED {
            let _ = Knobs::from_vars([(d.name, "1")]);
        }
    }
}
