//! The grid reduction schedule, for reductions with few results and many
//! elements each (a sum of everything to one value; [3, 1000003] over its
//! last dim): one block per result would leave most of the GPU idle. The
//! reduced elements of each result are cut into tiles of a vector per
//! thread; the blocks take the tiles in turn (threads stride through them,
//! then a block-wide tree), each block into one partial, and `outer::combine` folds each result's partials
//! in order. Every step has a fixed order, so two runs give the same bits.
//! Mean-based statistics (welford, var_mean) take two such rounds: the mean,
//! then the squared deviations from it; or, with `Device::grid_moments`, one
//! (`grid_moments.rs`).

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{signature, vector_width, Context};
use crate::lower::Lanes;
use crate::plan::{Kernel, Schedule};
use crate::reduction::{self, Combine, Kind, Reduction};
use crate::{ctype, last_block, outer, view};
use fusebench_ir::{Fusion, ValueId};
use std::ops::Add;

const BLOCK: u32 = 256;
/// Shortest reduced extent worth more than one block per result.
pub const MIN_COUNT: usize = 1 << 16;
/// Elements each thread folds at least, so partials stay few.
const PER_THREAD: usize = 16;

/// Whether `r` should be a grid reduction: fewer results than half the
/// multiprocessors, each over at least `MIN_COUNT` elements.
pub fn wanted(f: &Fusion, r: &Reduction, sm_count: u32) -> bool {
    let results = f.value(r.outputs[0]).numel();
    results < (sm_count as usize / 2).max(1) && r.count(f) >= MIN_COUNT
}

/// Whether `r` reduces, over dims other than the innermost, the dim fastest
/// in memory (a column sum of a column-major matrix): then blocks walking
/// each result's elements read them coalesced, while its results fit the
/// grid's y extent (one row of blocks each).
pub fn down_columns(f: &Fusion, layouts: &[Option<(Vec<i64>, i64)>], r: &Reduction) -> bool {
    !r.is_inner(f)
        && crate::memory::reduces_fastest(f, layouts, r) == Some(true)
        && f.value(r.outputs[0]).numel() <= 65535
}

/// Appends the kernels that compute `r`, and the plain reductions `siblings`
/// of other values over the same elements in the same kernels (`r` plain
/// too), and records where their outputs are stored.
pub fn build(
    cx: &mut Context,
    name: &str,
    r: &Reduction,
    siblings: &[&Reduction],
    epilogue: &[(ValueId, usize)],
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let xs = f.value(r.x).shape.clone().unwrap();
    let kept = r.kept_extents(f);
    // The reduced elements are walked in memory order (a sum does not
    // depend on the order), so consecutive threads read consecutive
    // addresses also when the input is column-major.
    let walk = crate::memory::by_memory(f, &cx.layouts, r.x, &r.dims);
    let red: Vec<usize> = walk.iter().map(|&d| xs[d]).collect();
    let o: usize = kept.iter().product::<usize>().max(1);
    let k = r.count(f);
    let acc = r.acc(f);
    // `grid_blocks_per_sm` blocks per multiprocessor over all results, each folding
    // at least PER_THREAD elements per thread.
    let want = (cx.dev.sm_count as usize * cx.dev.grid_blocks_per_sm as usize).div_ceil(o).max(1);
    let splits = want.min(k.div_ceil(BLOCK as usize * PER_THREAD)).max(1);
    // Each thread reads a vector of the innermost walked dim at a time
    // (16-byte loads of bf16 where the extent allows; one element at a time
    // a sum of 2048x16384 bf16 ran at 60% of the copy ceiling on the H200);
    // tiles are whole vectors.
    let width = vector_width(
        red.last().copied().unwrap_or(1),
        f.inputs.iter().map(|&i| f.value(i).dtype).filter(|d| d.size_bytes() > 1),
    );
    // Blocks sweep the elements together, tile after tile (block b takes
    // tiles b, b + splits, ...), as a copy kernel does, rather than each a
    // chunk of its own: a sum of 2048x16384 bf16 in 528 chunks read at 77%
    // of the copy ceiling on the H200, with 4, 8 or 16 blocks per SM alike.
    // Each block's order is still fixed, so two runs give the same bits.
    let tile = BLOCK as usize * width;
    // At least 1: a reduction over an empty extent (k = 0) has one empty tile.
    let splits = splits.min(k.div_ceil(tile)).max(1);
    let out_shape = f.value(r.outputs[0]).shape.clone().unwrap();
    // The index runs up to the batch's strides past the end: 64 bits when that passes int's range.
    let batch = cx.dev.loads_in_flight.max(1) as usize;
    let rt = if k + batch * splits * tile > i32::MAX as usize { "long long" } else { cx.idx_type };
    let kept_idx = view::delinearize(Ix::var("o"), &kept);
    let walked = Walked { f, r, xs: &xs, walk: &walk, red: &red, kept_idx: &kept_idx, width };
    if crate::grid_moments::fits(cx, r) {
        return crate::grid_moments::build(cx, name, r, &walked, (o, k, splits, tile), rt, epilogue, out);
    }

    for pass in 0..r.passes() {
        let partial = cx.add_temp(
            acc,
            splits * o,
            format!("grid partials of {}", f.value(r.outputs[0]).name),
        );
        let op = match &r.kind {
            Kind::Plain(c) => c.clone(),
            _ => Combine::Sum,
        };
        let last = pass + 1 == r.passes();
        let epi = if last { epilogue } else { &[] };
        // The last block of each result combines its partials (last_block.rs).
        let (_, what) = last_block::target(r, pass);
        let fused = (cx.dev.last_block_combine && last_block::fits(f, r) && siblings.is_empty())
            .then(|| last_block::add_temps(cx, r, pass, o));
        // Each sibling's accumulator, partials and walk (its own input, read
        // at the same index).
        let sib = outer::sibling_partials(cx, siblings, splits * o, "grid partials");
        let (mut lw, mut params) = cx.lowerer();
        if last {
            cx.read_once(&mut lw, r, epi);
        }
        let it = lw.idx_type;
        lw.line("__shared__ float fb_sf[32];");
        lw.line("__shared__ double fb_sd[32];");
        lw.line("__shared__ long long fb_si[32];");
        lw.line(&format!("const {it} o = blockIdx.y;"));
        let mean = if pass == 1 {
            let mv = mean_value(r);
            let oi = view::delinearize(Ix::var("o"), &out_shape);
            let m = lw.value_at(mv, &oi)?;
            Some(ctype::convert(f.value(mv).dtype, acc, &m))
        } else {
            None
        };
        lw.line(&format!("{} a = {};", ctype::reg(acc), reduction::init(&op, acc)));
        for (j, (q, _, c)) in sib.iter().enumerate() {
            lw.line(&format!("{} fb_b{j} = {};", ctype::reg(q.acc(f)), reduction::init(c, q.acc(f))));
        }
        let start = format!("({rt})blockIdx.x * {tile} + threadIdx.x * {width}");
        let step = (splits * tile).to_string();
        crate::strided::emit_guarded(&mut lw, rt, "r", &start, &k.to_string(), &step, batch, |lw, ok| {
            walked.fold(lw, |lw, xv, _, _| {
                let fold = match &mean {
                    None => reduction::step(&op, acc, "a", xv),
                    Some(m) => format!("{{ const {t} dv = {xv} - {m}; a += dv * dv; }}", t = ctype::reg(acc)),
                };
                lw.line(&crate::strided::guarded(ok, &fold));
                Ok(())
            })?;
            for (j, (q, _, c)) in sib.iter().enumerate() {
                // A scope of its own: the walk names its index variables alike.
                lw.open("{");
                let w = Walked { r: q, ..walked };
                w.fold(lw, |lw, xv, _, _| {
                    lw.line(&crate::strided::guarded(ok, &reduction::step(c, q.acc(f), &format!("fb_b{j}"), xv)));
                    Ok(())
                })?;
                lw.close("}");
            }
            Ok(())
        })?;
        lw.line(&format!(
            "a = {}(a, {});",
            reduction::block_fn(&op, acc),
            reduction::smem_name(acc)
        ));
        lw.line(&format!(
            "if (threadIdx.x == 0) tmp{partial}[({it})blockIdx.x * {o} + o] = a;"
        ));
        for (j, (q, t, c)) in sib.iter().enumerate() {
            let qa = q.acc(f);
            lw.line(&format!("fb_b{j} = {}(fb_b{j}, {});", reduction::block_fn(c, qa), reduction::smem_name(qa)));
            lw.line(&format!("if (threadIdx.x == 0) tmp{t}[({it})blockIdx.x * {o} + o] = fb_b{j};"));
        }
        if let Some((counters, result)) = fused {
            for &(v, pos) in epi {
                params.push_output(f, v, pos);
            }
            // Threads stride over the partials, then a block-wide tree.
            last_block::open(&mut lw, counters, "o", splits);
            lw.line(&format!("a = {};", reduction::init(&op, acc)));
            outer::fold_partials(&mut lw, splits, BLOCK as usize, (&op, acc), |s| {
                format!("__ldcg(&tmp{partial}[({it}){s} * {o} + o])")
            })?;
            lw.line(&format!(
                "a = {}(a, {});",
                reduction::block_fn(&op, acc),
                reduction::smem_name(acc)
            ));
            lw.open("if (threadIdx.x == 0) {");
            last_block::finish(&mut lw, f, r, pass, "a", result, epi, "o")?;
            lw.close("}");
            last_block::close(&mut lw, counters, "o");
        }
        let pname = format!("{name}_g{pass}");
        let src = format!("{} {{\n{}}}\n", signature(&pname, BLOCK, &params), lw.code);
        out.push((
            src,
            Kernel::new(
                pname,
                Schedule::GridPartial,
                [crate::launch::grid_dim(splits), crate::launch::grid_dim(o), 1],
                [BLOCK, 1, 1],
                params.args,
                format!(
                    "grid reduction of {}{} over {k} elements by {splits} blocks in turn, tiles of {tile}, {width} per load: {o} results{}",
                    f.value(r.x).name,
                    sib.iter().map(|(q, _, _)| format!(" and of {}", f.value(q.x).name)).collect::<String>(),
                    if fused.is_some() { format!(", the last block of each combining its partials into the {what}") } else { String::new() }
                ),
            ),
        ));
        if sib.is_empty() {
            outer::end_pass(cx, name, r, pass, Some(partial), splits, epi, fused.map(|(_, t)| t), out)?;
        } else {
            out.push(outer::combine_siblings(cx, &format!("{name}_c{pass}"), (r, partial), &sib, (splits, o), epi)?);
        }
    }
    Ok(())
}

/// The elements of one result of `r` walked in memory order (`walk`: the
/// reduced dims by memory, `red` their extents), a vector of `width` at
/// linear index `r` of the walk; the result's kept index is `kept_idx`.
pub(crate) struct Walked<'a> {
    pub f: &'a Fusion,
    pub r: &'a Reduction,
    pub xs: &'a [usize],
    pub walk: &'a [usize],
    pub red: &'a [usize],
    pub kept_idx: &'a [Ix],
    pub width: usize,
}

impl Walked<'_> {
    /// Writes one iteration at walk index `r`: each lane's element, read
    /// (a wide load where the lanes allow) and converted to the accumulator,
    /// handed to `step` with the lane and its index over the walked dims.
    pub fn fold(
        &self,
        lw: &mut crate::lower::Lowerer,
        mut step: impl FnMut(&mut crate::lower::Lowerer, &str, usize, &[Ix]) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let (f, r, red, width) = (self.f, self.r, self.red, self.width);
        let it = lw.idx_type;
        // r is a multiple of the width, which divides the innermost walked
        // extent: lane j's element is (q, jj + j).
        let last = red.last().copied().unwrap_or(1);
        lw.line(&format!("const {it} q = ({it})(r / {last});"));
        lw.line(&format!("const {it} jj = ({it})(r % {last});"));
        lw.allow_vector_loads_here();
        let mut red_idx = view::delinearize(Ix::var("q"), &red[..red.len().saturating_sub(1)]);
        for j in 0..width {
            if !red.is_empty() {
                red_idx.truncate(red.len() - 1);
                red_idx.push(Ix::var("jj").add(Ix::c(j as i64)));
            }
            lw.lanes = (width > 1).then(|| Lanes {
                var: "jj".into(),
                width,
                lane: j,
            });
            let mut ki = self.kept_idx.iter();
            let x_idx: Vec<Ix> = (0..self.xs.len())
                .map(|d| match self.walk.iter().position(|&w| w == d) {
                    Some(k) => red_idx[k].clone(),
                    None => ki.next().unwrap().clone(),
                })
                .collect();
            let xv = lw.value_at(r.x, &x_idx)?;
            let xv = ctype::convert(f.value(r.x).dtype, r.value_dtype(f), &xv);
            let xv = ctype::convert(r.value_dtype(f), r.acc(f), &xv);
            step(lw, &xv, j, &red_idx)?;
        }
        lw.lanes = None;
        Ok(())
    }
}

fn mean_value(r: &Reduction) -> ValueId {
    match r.kind {
        Kind::Welford => r.outputs[0],
        _ => r.outputs[1],
    }
}
