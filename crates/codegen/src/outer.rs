//! The outer-reduction schedule (the backward passes' sums over batch x
//! sequence): a thread per result element, consecutive threads on consecutive
//! columns so loads coalesce; the reduced extent is split over blocks, whose
//! partial results a second kernel combines. Stores the result in a temporary
//! buffer that later kernels read.

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{signature, vector_width, Context};
use crate::lower::{Lanes, Lowerer};
use crate::plan::{Kernel, Schedule};
use crate::reduction::{self, Combine, Kind, Reduction};
use crate::{ctype, view};
use fusebench_ir::{DType, ValueId};
use std::ops::Add;

const BLOCK: u32 = 128;
/// Fewest reduced elements a block of partial sums folds.
const MIN_CHUNK: usize = 64;
/// Most partials per result: the combine reads them one after another.
const MAX_SPLITS: usize = 64;
/// Threads down the reduced elements in a block of partial sums.
const BLOCK_Y: usize = 8;

/// How a reduction is laid over the partial kernel's blocks: `bx` threads
/// across results (`width` adjacent results each) by `by` down the reduced
/// elements, `blocks_x` blocks across the `o` results, `splits` blocks down
/// the `k` reduced elements, `chunk` each.
pub struct Geometry {
    pub xs: Vec<usize>,
    pub kept: Vec<usize>,
    pub red: Vec<usize>,
    pub o: usize,
    pub k: usize,
    pub width: usize,
    pub bx: usize,
    pub by: usize,
    pub blocks_x: usize,
    pub splits: usize,
    pub chunk: usize,
}

impl Geometry {
    /// The layout of `r`, at most `max_lanes` results per thread and
    /// `max_by` threads down the reduced elements.
    pub fn of(cx: &Context, r: &Reduction, max_lanes: usize, max_by: usize) -> Geometry {
        let f = cx.f;
        let xs = f.value(r.x).shape.clone().unwrap();
        let kept = r.kept_extents(f);
        let red: Vec<usize> = r.dims.iter().map(|&d| xs[d]).collect();
        let o: usize = kept.iter().product();
        let k: usize = red.iter().product();
        let acc = r.acc(f);
        // Where a kept dim is fastest in memory (a column sum of a row-major
        // matrix, a row sum of a column-major one), a thread takes `width`
        // adjacent results, read as one 16-byte vector (bf16: 8): one result per
        // thread and 2-byte loads read at 1.7-2.4 TB/s on the H200.
        let last_kept = kept.last().copied().unwrap_or(1);
        let width = if crate::memory::reduces_fastest(f, &cx.layouts, r) == Some(false) {
            vector_width(
                last_kept,
                f.inputs.iter().map(|&i| f.value(i).dtype).filter(|d| d.size_bytes() > 1),
            )
            .min(max_lanes)
        } else {
            1
        };
        // A block is `bx` threads across results by `by` down the reduced
        // elements, folded in shared memory into one partial per result: more
        // threads reading without more partials for the combine to read.
        // Complex accumulators are not kept in shared memory: one row of threads.
        let elem = elem_bytes(f);
        let (bx, by) = if acc.is_complex() { (BLOCK as usize, 1) } else { block_shape(cx, o, k, (width, elem), max_by) };
        let blocks_x = o.div_ceil(width).div_ceil(bx).max(1);
        // Enough blocks to fill every multiprocessor, each folding at least
        // `min_chunk` of the reduced elements and at most MAX_SPLITS partials per
        // result, so that the partials stay a small share of what is read (the
        // reductions of a column-major 2048x16384 bf16 softmax, at 4 blocks of
        // 128 threads per SM, read at 1.7 TB/s).
        // With `fit_waves`, no more blocks than the slots: a few past them
        // would be a wave of their own.
        let slots = cx.dev.sm_count as usize * cx.dev.outer_blocks_per_sm as usize;
        let want = if cx.dev.fit_waves != crate::FitWaves::Off { (slots / blocks_x).max(1) } else { slots.div_ceil(blocks_x) };
        let splits = want.clamp(1, max_splits(cx, k, by));
        let chunk = k.div_ceil(splits).max(1);
        let splits = k.div_ceil(chunk).max(1);
        Geometry { xs, kept, red, o, k, width, bx, by, blocks_x, splits, chunk }
    }

    /// The partial kernel `name` of this layout with its arguments and summary.
    pub fn partial_kernel(&self, name: String, args: Vec<crate::plan::KernelArg>, summary: String) -> Kernel {
        Kernel {
            fill: Some(crate::plan::Fill::Outer),
            ..Kernel::new(
                name,
                Schedule::OuterPartial,
                [crate::launch::grid_dim(self.blocks_x), crate::launch::grid_dim(self.splits), 1],
                [self.bx as u32, self.by as u32, 1],
                args,
                summary,
            )
        }
    }

    /// Declares the thread's first result `o` (and whether it has one,
    /// `live`), its index above the last kept dim `oq` and in it `oj`; returns
    /// the index of the kept dims above the last.
    pub fn thread_results(&self, lw: &mut Lowerer) -> Vec<Ix> {
        let (it, bx, width, o) = (lw.idx_type, self.bx, self.width, self.o);
        let last_kept = self.kept.last().copied().unwrap_or(1);
        lw.line(&format!(
            "const {it} o = (({it})blockIdx.x * {bx} + threadIdx.x) * {width};"
        ));
        // No early return: every thread reaches the fold's barrier.
        lw.line(&format!("const bool live = o < {o};"));
        lw.line(&format!("const {it} oq = o / {last_kept};"));
        lw.line(&format!("const {it} oj = o % {last_kept};"));
        view::delinearize(Ix::var("oq"), &self.kept[..self.kept.len().saturating_sub(1)])
    }

    /// The thread's block of reduced elements, `r0` to `r1`.
    pub fn chunk_bounds(&self, lw: &mut Lowerer) {
        let (it, chunk, k) = (lw.idx_type, self.chunk, self.k);
        lw.line(&format!("const {it} r0 = ({it})blockIdx.y * {chunk};"));
        lw.line(&format!(
            "const {it} r1 = r0 + {chunk} < {k} ? r0 + {chunk} : {k};"
        ));
    }

    /// The input's index of lane `j` at reduced index `r` (the strided
    /// loop's variable), with lanes set for a wide load; `kept_idx` as
    /// `thread_results` returned it.
    pub fn x_index(&self, lw: &mut Lowerer, r: &Reduction, kept_idx: &[Ix], j: usize) -> Vec<Ix> {
        let mut kept_idx = kept_idx.to_vec();
        if !self.kept.is_empty() {
            kept_idx.truncate(self.kept.len() - 1);
            kept_idx.push(Ix::var("oj").add(Ix::c(j as i64)));
        }
        lw.lanes = (self.width > 1).then(|| Lanes {
            var: "oj".into(),
            width: self.width,
            lane: j,
        });
        let red_idx = view::delinearize(Ix::var("r"), &self.red);
        let (mut ki, mut ri) = (kept_idx.iter(), red_idx.iter());
        (0..self.xs.len())
            .map(|d| if r.dims.contains(&d) { ri.next() } else { ki.next() }.unwrap().clone())
            .collect()
    }
}

/// Bytes of the narrowest input element (bytes and bools aside), which sets
/// how many results a row of threads needs to read MIN_SEGMENT bytes.
fn elem_bytes(f: &fusebench_ir::Fusion) -> usize {
    f.inputs.iter().map(|&i| f.value(i).dtype.size_bytes()).filter(|&b| b > 1).min().unwrap_or(4)
}

/// Threads of a block of partial sums.
const THREADS: usize = 32 * BLOCK_Y;
/// Fewest bytes a row of a block's threads reads across the results: two
/// 32-byte sectors.
const MIN_SEGMENT: usize = 64;

/// Most splits of `k` reduced elements for blocks `by` threads deep: each
/// split at least MIN_CHUNK elements, and at least a batch of loads
/// (`loads_in_flight`) for every row of threads, so none of them waits on
/// one load after another.
fn max_splits(cx: &Context, k: usize, by: usize) -> usize {
    let chunk = MIN_CHUNK.max(by * cx.dev.loads_in_flight.max(1) as usize);
    (k / chunk).clamp(1, MAX_SPLITS)
}

/// Most rows of threads in a block of partial sums: row 0 folds the others
/// one after another; 32 is the deepest measured (H200, nineteenth session).
const MAX_DEPTH: usize = 32;
/// Blocks per multiprocessor below which a block of partial sums is narrowed.
const NARROW_BELOW: usize = 2;

/// Threads across the results and down the reduced elements of a block of
/// partial sums, `o` results over `k` elements, `width` results of `elem`
/// bytes per thread, at most `max_by` deep: 32 by BLOCK_Y, or, where that
/// gives fewer than NARROW_BELOW blocks per multiprocessor (a column-major norm
/// of 512 rows: 144 blocks of 256 threads for 132 SMs, each thread waiting on
/// its loads with nothing else resident), halved across and doubled down
/// while that gives more blocks and a row of threads still reads MIN_SEGMENT
/// bytes (`Device::outer_narrow`). On the H200, over 58 such reductions,
/// narrowing those below 2 blocks per SM took 8-18% off their partial kernels;
/// narrowing those at 3 to 4 per SM made some 4-28% slower (a second wave).
fn block_shape(cx: &Context, o: usize, k: usize, (width, elem): (usize, usize), max_by: usize) -> (usize, usize) {
    let few = cx.dev.sm_count as usize * NARROW_BELOW;
    let blocks = |bx: usize| o.div_ceil(width).div_ceil(bx).max(1) * max_splits(cx, k, THREADS / bx);
    let mut bx = 32;
    while cx.dev.outer_narrow
        && bx > 1
        && blocks(bx) < few
        && THREADS / (bx / 2) <= max_by
        && (bx / 2) * width * elem >= MIN_SEGMENT
        && blocks(bx / 2) > blocks(bx)
    {
        bx /= 2;
    }
    (bx, THREADS / bx)
}

/// Most reduced elements a block folds alone (`alone`): on the H200 sums of
/// 128-512 rows took 0.59-1.01 of the split layout, of 1024 bf16 rows up to
/// 1.36 (twentieth session).
const ALONE_MAX_K: usize = 512;

/// The layout that folds all `k` reduced elements of its results in one
/// block, so no combine kernel follows (`Device::outer_alone`): narrower
/// vectors and fewer threads across give more blocks, down to MIN_SEGMENT
/// bytes a row of threads and MAX_DEPTH rows; taken where that still gives
/// half a block per multiprocessor. A sum of 512 rows of 2304 bf16 split 8
/// ways took a 3.2 us partial kernel and a 1.0 us combine; nvFuser folds it
/// in one kernel of 72 blocks. Over 18 column sums of 128-512 rows (bf16 and
/// f32, 2304-8192 columns) the lone blocks took 0.83 of the split layout.
fn alone(cx: &Context, g: &Geometry) -> Option<Geometry> {
    if !cx.dev.outer_alone || g.splits == 1 || g.k > ALONE_MAX_K || g.by == 1 {
        return None;
    }
    let elem = elem_bytes(cx.f);
    let mut best: Option<(usize, usize, usize)> = None;
    let mut width = g.width;
    while width >= 1 {
        let mut bx = 32;
        while bx >= 1 && bx * width * elem >= MIN_SEGMENT {
            let by = THREADS / bx;
            if by <= MAX_DEPTH && by <= g.k {
                let blocks = g.o.div_ceil(width).div_ceil(bx);
                if best.is_none_or(|(b, _, _)| blocks > b) {
                    best = Some((blocks, width, bx));
                }
            }
            bx /= 2;
        }
        if width == 1 {
            break;
        }
        width /= 2;
    }
    let (blocks_x, width, bx) = best?;
    (2 * blocks_x >= cx.dev.sm_count as usize).then(|| Geometry {
        xs: g.xs.clone(),
        kept: g.kept.clone(),
        red: g.red.clone(),
        o: g.o,
        k: g.k,
        width,
        bx,
        by: THREADS / bx,
        blocks_x,
        splits: 1,
        chunk: g.k,
    })
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
    let one_pass = crate::moments::one_pass(cx, r);
    let g = if one_pass {
        Geometry::of(cx, r, crate::moments::MAX_LANES, crate::moments::MAX_DEPTH)
    } else {
        Geometry::of(cx, r, 8, MAX_DEPTH)
    };
    let acc = r.acc(f);
    if one_pass {
        return crate::moments::build(cx, name, r, &g, epilogue, out);
    }
    // Siblings keep the geometry planned for them all and one combine.
    let g = if siblings.is_empty() { alone(cx, &g).unwrap_or(g) } else { g };
    let Geometry { o, k, width, bx, by, blocks_x, splits, .. } = g;
    let out_shape = f.value(r.outputs[0]).shape.clone().unwrap();
    // One split (`alone`): the block's fold is the result, written here.
    let direct = splits == 1 && cx.dev.outer_alone && siblings.is_empty();

    for pass in 0..r.passes() {
        let partial = (!direct).then(|| cx.add_temp(acc, splits * o, format!("partials of {}", f.value(r.outputs[0]).name)));
        let combine_op = match &r.kind {
            Kind::Plain(c) => c.clone(),
            _ => Combine::Sum,
        };
        let last = pass + 1 == r.passes();
        let epi = if last { epilogue } else { &[] };
        // The last block of each column of blocks combines their partials
        // (last_block.rs): a thread per result of the block's columns.
        let (target, what) = crate::last_block::target(r, pass);
        let fused = (cx.dev.last_block_combine && crate::last_block::fits(f, r) && by > 1 && !direct && siblings.is_empty())
            .then(|| crate::last_block::add_temps(cx, r, pass, blocks_x));
        // Each sibling's combine and partials; its accumulators are s{i}_{j}.
        let sib = sibling_partials(cx, siblings, splits * o, "partials");
        let result = direct.then(|| {
            cx.add_temp(f.value(target).dtype, o, format!("{what} of {}", f.value(r.outputs[0]).name))
        });
        // Partial kernel: thread t holds results o .. o + width (one kept
        // row of the results: the width divides the last kept extent).
        let (mut lw, mut params) = cx.lowerer();
        if last {
            cx.read_once(&mut lw, r, epi);
        }
        let it = lw.idx_type;
        let kept_idx = g.thread_results(&mut lw);
        let reg = ctype::reg(acc);
        let mut means = Vec::new();
        for j in 0..width {
            lw.line(&format!("{reg} a{j} = {};", reduction::init(&combine_op, acc)));
        }
        for (i, (q, _, c)) in sib.iter().enumerate() {
            for j in 0..width {
                lw.line(&format!("{} s{i}_{j} = {};", ctype::reg(q.acc(f)), reduction::init(c, q.acc(f))));
            }
        }
        // Past the results, a thread reads nothing (not even a mean).
        lw.open("if (live) {");
        for j in 0..width {
            if pass == 1 {
                let mv = mean_value(r);
                let oi = view::delinearize(Ix::var("o").add(Ix::c(j as i64)), &out_shape);
                let m = lw.value_at(mv, &oi)?;
                let name = format!("m{j}");
                lw.line(&format!("const {reg} {name} = {};", ctype::convert(f.value(mv).dtype, acc, &m)));
                means.push(name);
            }
        }
        g.chunk_bounds(&mut lw);
        let batch = cx.dev.loads_in_flight.max(1) as usize;
        crate::strided::emit(&mut lw, it, "r", "r0 + threadIdx.y", "r1", &by.to_string(), batch, |lw| {
            lw.allow_vector_loads_here();
            for j in 0..width {
                let x_idx = g.x_index(lw, r, &kept_idx, j);
                let xv = lw.value_at(r.x, &x_idx)?;
                let xv = r.to_acc(f, &xv);
                let a = format!("a{j}");
                match means.get(j) {
                    None => lw.line(&reduction::step(&combine_op, acc, &a, &xv)),
                    Some(m) => lw.line(&format!("{{ const {reg} dv = {xv} - {m}; {a} += dv * dv; }}")),
                }
            }
            for (i, (q, _, c)) in sib.iter().enumerate() {
                for j in 0..width {
                    let x_idx = g.x_index(lw, q, &kept_idx, j);
                    let xv = lw.value_at(q.x, &x_idx)?;
                    let xv = q.to_acc(f, &xv);
                    lw.line(&reduction::step(c, q.acc(f), &format!("s{i}_{j}"), &xv));
                }
            }
            lw.lanes = None;
            Ok(())
        })?;
        lw.close("}");
        // The partial kernel writes the epilogue where it ends the pass.
        if result.is_some() || fused.is_some() {
            for &(v, pos) in epi {
                params.push_output(f, v, pos);
            }
        }
        let store = |lw: &mut crate::lower::Lowerer, j: usize, v: &str| -> Result<(), CodegenError> {
            match (result, partial) {
                (Some(t), _) => {
                    lw.line(&format!("const {it} o{j} = o + {j};"));
                    crate::last_block::finish(lw, f, r, pass, v, t, epi, &format!("o{j}"))
                }
                (None, Some(p)) => {
                    lw.line(&format!("tmp{p}[({it})blockIdx.y * {o} + o + {j}] = {v};"));
                    Ok(())
                }
                (None, None) => unreachable!("one split writes its result"),
            }
        };
        // Each sibling's fold of the block, stored as its partials.
        for (i, (q, t, c)) in sib.iter().enumerate() {
            let qa = q.acc(f);
            if by > 1 {
                lw.line(&format!("__shared__ {} fb_fold_s{i}[{by}][{}];", ctype::reg(qa), bx * width));
                for j in 0..width {
                    lw.line(&format!("fb_fold_s{i}[threadIdx.y][threadIdx.x * {width} + {j}] = s{i}_{j};"));
                }
                lw.line("__syncthreads();");
            }
            lw.open("if (live && threadIdx.y == 0) {");
            for j in 0..width {
                if by > 1 {
                    lw.line(&format!("s{i}_{j} = fb_fold_s{i}[0][threadIdx.x * {width} + {j}];"));
                    lw.line(&format!(
                        "for (int y = 1; y < {by}; ++y) {}",
                        reduction::step(c, qa, &format!("s{i}_{j}"), &format!("fb_fold_s{i}[y][threadIdx.x * {width} + {j}]"))
                    ));
                }
                lw.line(&format!("tmp{t}[({it})blockIdx.y * {o} + o + {j}] = s{i}_{j};"));
            }
            lw.close("}");
        }
        if by == 1 {
            lw.open("if (live) {");
            for j in 0..width {
                store(&mut lw, j, &format!("a{j}"))?;
            }
        } else {
            // Row y of the block's threads folded in order 0, 1, ...: two
            // runs give the same bits.
            lw.line(&format!("__shared__ {reg} fb_fold[{by}][{}];", bx * width));
            for j in 0..width {
                lw.line(&format!("fb_fold[threadIdx.y][threadIdx.x * {width} + {j}] = a{j};"));
            }
            lw.line("__syncthreads();");
            lw.open("if (live && threadIdx.y == 0) {");
            for j in 0..width {
                lw.line(&format!("{reg} b{j} = fb_fold[0][threadIdx.x * {width} + {j}];"));
                lw.line(&format!(
                    "for (int y = 1; y < {by}; ++y) {}",
                    reduction::step(&combine_op, acc, &format!("b{j}"), &format!("fb_fold[y][threadIdx.x * {width} + {j}]"))
                ));
                store(&mut lw, j, &format!("b{j}"))?;
            }
        }
        lw.close("}");
        if let Some((counters, result)) = fused {
            let cols = bx * width;
            crate::last_block::open(&mut lw, counters, "blockIdx.x", splits);
            lw.line(&format!("const int t = threadIdx.y * {bx} + threadIdx.x;"));
            lw.open(&format!("if (t < {cols} && ({it})blockIdx.x * {cols} + t < {o}) {{"));
            lw.line(&format!("const {it} o = ({it})blockIdx.x * {cols} + t;"));
            lw.line(&format!("{reg} c = {};", reduction::init(&combine_op, acc)));
            lw.line(&format!(
                "for (int s = 0; s < {splits}; ++s) {}",
                reduction::step(&combine_op, acc, "c", &format!("__ldcg(&tmp{}[({it})s * {o} + o])", partial.expect("split")))
            ));
            crate::last_block::finish(&mut lw, f, r, pass, "c", result, epi, "o")?;
            lw.close("}");
            crate::last_block::close(&mut lw, counters, "blockIdx.x");
        }
        let pname = format!("{name}_p{pass}");
        let src = format!("{} {{\n{}}}\n", signature(&pname, (bx * by) as u32, &params), lw.code);
        let summary = format!(
            "outer reduction of {}{} over {k} in {}: {o} results, {width} per thread{}",
            f.value(r.x).name,
            sib.iter().map(|(q, _, _)| format!(" and of {}", f.value(q.x).name)).collect::<String>(),
            if direct { "one block each, no combine".to_string() } else { format!("{splits} splits") },
            if fused.is_some() { format!(", the last block of each column combining its partials into the {what}") } else { String::new() }
        );
        out.push((src, g.partial_kernel(pname, params.args, summary)));
        if sib.is_empty() {
            end_pass(cx, name, r, pass, partial, splits, epi, fused.map(|(_, t)| t).or(result), out)?;
        } else {
            let p = partial.expect("siblings have partials");
            out.push(combine_siblings(cx, &format!("{name}_c{pass}"), (r, p), &sib, (splits, o), epi)?);
        }
    }
    Ok(())
}

fn mean_value(r: &Reduction) -> ValueId {
    match r.kind {
        Kind::Welford => r.outputs[0],
        _ => r.outputs[1],
    }
}

/// Ends pass `pass` of `r` whose partials are in temp `partial`: where the
/// last block combined them, or one block folded them all, into temp
/// `combined`, records that the pass's value is stored there; otherwise
/// appends the combine kernel.
#[allow(clippy::too_many_arguments)]
pub fn end_pass(
    cx: &mut Context,
    name: &str,
    r: &Reduction,
    pass: usize,
    partial: Option<usize>,
    splits: usize,
    epilogue: &[(ValueId, usize)],
    combined: Option<usize>,
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let Some(temp) = combined else {
        let partial = partial.expect("a pass its own kernel does not end has partials");
        return combine(cx, name, r, pass, partial, splits, epilogue, out);
    };
    cx.store_in(crate::last_block::target(r, pass).0, temp);
    Ok(())
}

/// Results few enough that each gets a block of its own in `combine` (a
/// sum of everything has one: a single thread would fold every partial in
/// turn, each load waiting on L2).
const FEW: usize = 64;

/// A block's threads folding `splits` partials into `a` with `op` in `acc`,
/// thread t taking partials t, t + `block`, ...; `partial(s)` is partial `s`.
/// Their loads are issued together (`strided::emit_guarded`), not one after
/// another as a loop did; the combine of sum_all (528 partials, 128 threads)
/// still took 1.44 us on the H200 either way (BENCHMARKS.md, fifteenth
/// session), so its time is not its loads.
pub fn fold_partials(
    lw: &mut Lowerer,
    splits: usize,
    block: usize,
    (op, acc): (&Combine, DType),
    partial: impl Fn(&str) -> String,
) -> Result<(), CodegenError> {
    let batch = splits.div_ceil(block).clamp(1, 8);
    let bound = splits.to_string();
    crate::strided::emit_guarded(lw, "int", "s", "(int)threadIdx.x", &bound, &block.to_string(), batch, |lw, ok| {
        lw.line(&format!("const {} p = {};", ctype::reg(acc), partial("s")));
        lw.line(&crate::strided::guarded(ok, &reduction::step(op, acc, "a", "p")));
        Ok(())
    })
}

/// Appends the kernel that sums `splits` partial results of pass `pass` of
/// `r` (stored `[splits, results]` in temp `partial`) and stores the result;
/// the last pass also writes `epilogue`, outputs with one element per result
/// that read only this reduction's results and inputs (the cast of a sum to
/// bf16), so they need no kernel of their own.
#[allow(clippy::too_many_arguments)]
pub fn combine(
    cx: &mut Context,
    name: &str,
    r: &Reduction,
    pass: usize,
    partial: usize,
    splits: usize,
    epilogue: &[(ValueId, usize)],
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let o: usize = f.value(r.outputs[0]).numel();
    let acc = r.acc(f);
    let per_block = o < FEW && splits > 32;
    let blocks_x = if per_block {
        o.max(1)
    } else {
        o.div_ceil(BLOCK as usize).max(1)
    };
    let combine_op = match &r.kind {
        Kind::Plain(c) => c.clone(),
        _ => Combine::Sum,
    };
    let it = cx.idx_type;
    // Combine kernel: the result of this pass, in the output's dtype.
    let (target, what) = crate::last_block::target(r, pass);
    let d = f.value(target).dtype;
    let result = cx.add_temp(d, o, format!("{what} of {}", f.value(r.outputs[0]).name));
    let (mut lw, mut params) = cx.lowerer();
    for &(v, pos) in epilogue {
        params.push_output(f, v, pos);
    }
    let init = reduction::init(&combine_op, acc);
    let step = |i: &str| {
        reduction::step(
            &combine_op,
            acc,
            "a",
            &format!("tmp{partial}[({it}){i} * {o} + o]"),
        )
    };
    if per_block {
        // Threads stride over the partials, then a block-wide tree: a fixed
        // order, so two runs give the same bits.
        lw.line("__shared__ float fb_sf[32];");
        lw.line("__shared__ double fb_sd[32];");
        lw.line("__shared__ long long fb_si[32];");
        lw.line(&format!("const {it} o = blockIdx.x;"));
        lw.line(&format!("{} a = {init};", ctype::reg(acc)));
        fold_partials(&mut lw, splits, BLOCK as usize, (&combine_op, acc), |s| {
            format!("tmp{partial}[({it}){s} * {o} + o]")
        })?;
        lw.line(&format!(
            "a = {}(a, {});",
            reduction::block_fn(&combine_op, acc),
            reduction::smem_name(acc)
        ));
        lw.line("if (threadIdx.x != 0) return;");
    } else {
        lw.line(&format!(
            "const {it} o = ({it})blockIdx.x * {BLOCK} + threadIdx.x;"
        ));
        lw.line(&format!("if (o >= {o}) return;"));
        lw.line(&format!("{} a = {init};", ctype::reg(acc)));
        lw.line(&format!("for (int s = 0; s < {splits}; ++s) {}", step("s")));
    }
    crate::last_block::finish(&mut lw, f, r, pass, "a", result, epilogue, "o")?;
    let cname = format!("{name}_c{pass}");
    let src = format!("{} {{\n{}}}\n", signature(&cname, BLOCK, &params), lw.code);
    let epi: Vec<String> = epilogue
        .iter()
        .map(|&(v, _)| f.value(v).name.clone())
        .collect();
    out.push((
        src,
        Kernel::new(
            cname,
            Schedule::OuterCombine,
            [crate::launch::grid_dim(blocks_x), 1, 1],
            [BLOCK, 1, 1],
            params.args,
            format!(
                "combines {splits} partials into the {what} of {}{}{}",
                f.value(r.outputs[0]).name,
                if per_block { ", a block per result" } else { "" },
                if epi.is_empty() { String::new() } else { format!("; writes [{}]", epi.join(", ")) }
            ),
        ),
    ));
    cx.store_in(target, result);
    Ok(())
}

/// The end of a reduction: each result (`accs[j]`, its accumulator,
/// converted to its output's dtype) stored to its temp `results[j]` at `at`
/// and held there, then the outputs that read only the results (`epilogue`)
/// written at `at`. Ends a combine, and a row kernel that finishes its
/// totals itself (`totals::finish`).
pub fn write_results(
    lw: &mut Lowerer,
    f: &fusebench_ir::Fusion,
    (reds, results): (&[&Reduction], &[usize]),
    accs: &[String],
    at: &Ix,
    epilogue: &[(ValueId, usize)],
) -> Result<(), CodegenError> {
    for ((r, &result), acc) in reds.iter().zip(results).zip(accs) {
        let out = r.outputs[0];
        let d = f.value(out).dtype;
        let h = lw.fresh("h");
        lw.line(&format!("const {} {h} = {};", ctype::reg(d), ctype::convert(r.acc(f), d, acc)));
        lw.line(&format!("tmp{result}[{at}] = {};", ctype::to_storage(d, &h)));
        let index = view::delinearize(at.clone(), f.value(out).shape.as_deref().unwrap_or(&[]));
        lw.hold(out, crate::lower::Held { expr: h, index });
    }
    for &(v, pos) in epilogue {
        let idx = view::delinearize(at.clone(), f.value(v).shape.as_deref().unwrap_or(&[]));
        let e = lw.value_at(v, &idx)?;
        lw.line(&format!("out{pos}[{at}] = {};", ctype::to_storage(f.value(v).dtype, &e)));
    }
    Ok(())
}

/// A plain reduction computed beside another in its kernels (`Work::Stored::
/// siblings`): the reduction, its partials' temp and its combine.
pub(crate) type Sibling<'r> = (&'r Reduction, usize, Combine);

/// Each sibling's temp of `n` partials (named "`what` of" its result).
pub(crate) fn sibling_partials<'r>(cx: &mut Context, siblings: &[&'r Reduction], n: usize, what: &str) -> Vec<Sibling<'r>> {
    let f = cx.f;
    siblings
        .iter()
        .map(|&q| {
            let Kind::Plain(c) = &q.kind else { unreachable!("siblings are plain reductions") };
            let t = cx.add_temp(q.acc(f), n, format!("{what} of {}", f.value(q.outputs[0]).name));
            (q, t, c.clone())
        })
        .collect()
}

/// The one combine of `r` (partials in temp `partial`) and its siblings,
/// `[splits, o]` partials each, writing `epilogue` (what reads their results).
pub(crate) fn combine_siblings(
    cx: &mut Context,
    name: &str,
    (r, partial): (&Reduction, usize),
    sib: &[Sibling],
    (splits, o): (usize, usize),
    epilogue: &[(ValueId, usize)],
) -> Result<(String, Kernel), CodegenError> {
    let all: Vec<(Reduction, usize)> =
        std::iter::once((r.clone(), partial)).chain(sib.iter().map(|&(q, t, _)| (q.clone(), t))).collect();
    combine_many(cx, name, &all, splits, o, epilogue)
}

/// One kernel that combines the per-block partials `[splits, cols]` of
/// several plain reductions over the same columns (32 columns per block, 32
/// threads down the partials of each, then a sum across those), and writes
/// the outputs that only need those results per column (`epilogue`, e.g. the
/// cast of a weight gradient to bf16), so they need no kernel of their own.
pub fn combine_many(
    cx: &mut Context,
    name: &str,
    reds: &[(Reduction, usize)],
    splits: usize,
    cols: usize,
    epilogue: &[(ValueId, usize)],
) -> Result<(String, Kernel), CodegenError> {
    let f = cx.f;
    let mut results = Vec::new();
    for (r, _) in reds {
        let out = r.outputs[0];
        let d = f.value(out).dtype;
        let t = cx.add_temp(d, cols, format!("result of {}", f.value(out).name));
        results.push(t);
    }
    let (mut lw, mut params) = cx.lowerer();
    for &(v, pos) in epilogue {
        params.push_output(f, v, pos);
    }
    let it = lw.idx_type;
    // One column (totals over all rows): every thread of the block takes
    // partials, each warp folds its lanes, and the second stage folds the
    // warps; otherwise thread x of warp y takes column x, partials y, y + 32...
    let one = cols == 1;
    if one {
        lw.line(&format!("const {it} c = 0;"));
        lw.line("const bool live = true;");
    } else {
        lw.line(&format!(
            "const {it} c = ({it})blockIdx.x * 32 + threadIdx.x;"
        ));
        lw.line(&format!("const bool live = c < {cols};"));
    }
    // Every partial of every sum loaded in one loop, unrolled: the loads are
    // independent, so enough are in flight to hide L2 latency.
    let mut steps = Vec::new();
    for (j, (r, partial)) in reds.iter().enumerate() {
        let acc = r.acc(f);
        let Kind::Plain(op) = &r.kind else {
            return Err(CodegenError::NoFit(
                "combine_many takes plain reductions".into(),
            ));
        };
        lw.line(&format!(
            "{} a{j} = {};",
            ctype::reg(acc),
            reduction::init(op, acc)
        ));
        steps.push(reduction::step(
            op,
            acc,
            &format!("a{j}"),
            &format!("tmp{partial}[({it})p * {cols} + c]"),
        ));
    }
    let per_round = if one { 1024 } else { 32 };
    let rounds = splits.div_ceil(per_round);
    lw.line(if rounds <= 16 {
        "#pragma unroll"
    } else {
        "#pragma unroll 4"
    });
    lw.open(&format!("for (int i = 0; i < {rounds}; ++i) {{"));
    lw.line(if one {
        "const int p = threadIdx.y * 32 + threadIdx.x + 1024 * i;"
    } else {
        "const int p = threadIdx.y + 32 * i;"
    });
    lw.line(&format!(
        "if (live && p < {splits}) {{ {} }}",
        steps.join(" ")
    ));
    lw.close("}");
    for (j, (r, _)) in reds.iter().enumerate() {
        let acc = r.acc(f);
        let ty = ctype::reg(acc);
        if one {
            // The lanes' fold is the same in every lane: sm[y][0] is warp y's.
            let Kind::Plain(op) = &r.kind else {
                unreachable!()
            };
            lw.line(&format!(
                "for (int m = 16; m > 0; m >>= 1) {}",
                reduction::step(op, acc, &format!("a{j}"), &format!("fb_shfl_xor(a{j}, m)"))
            ));
        }
        lw.line(&format!("__shared__ {ty} sm{j}[32][33];"));
        lw.line(&format!("sm{j}[threadIdx.y][threadIdx.x] = a{j};"));
    }
    lw.line("__syncthreads();");
    // Second stage transposed: warp y sums column y's 32 rows with shuffles.
    lw.open("{");
    lw.line(&format!(
        "const {it} c = ({it})blockIdx.x * 32 + threadIdx.y;"
    ));
    lw.line(&format!("const bool live = c < {cols};"));
    for (j, (r, _)) in reds.iter().enumerate() {
        let acc = r.acc(f);
        let Kind::Plain(op) = &r.kind else {
            unreachable!()
        };
        lw.line(&format!(
            "{} b{j} = sm{j}[threadIdx.x][threadIdx.y];",
            ctype::reg(acc)
        ));
        lw.line(&format!(
            "for (int m = 16; m > 0; m >>= 1) {}",
            reduction::step(op, acc, &format!("b{j}"), &format!("fb_shfl_xor(b{j}, m)"))
        ));
    }
    lw.open("if (threadIdx.x == 0 && live) {");
    let accs: Vec<String> = (0..reds.len()).map(|j| format!("b{j}")).collect();
    let finished: Vec<&Reduction> = reds.iter().map(|(r, _)| r).collect();
    write_results(&mut lw, f, (&finished, &results), &accs, &Ix::var("c"), epilogue)?;
    lw.close("}");
    lw.close("}");
    let src = format!("{} {{\n{}}}\n", signature(name, 1024, &params), lw.code);
    for ((r, _), &t) in reds.iter().zip(&results) {
        cx.store_in(r.outputs[0], t);
    }
    let names: Vec<String> = reds
        .iter()
        .map(|(r, _)| f.value(r.outputs[0]).name.clone())
        .collect();
    let epi: Vec<String> = epilogue
        .iter()
        .map(|&(v, _)| f.value(v).name.clone())
        .collect();
    Ok((
        src,
        Kernel::new(
            name,
            Schedule::OuterCombine,
            [crate::launch::grid_dim(cols.div_ceil(32)), 1, 1],
            [32, 32, 1],
            params.args,
            format!(
                "combines {splits} partials of {} over {cols} columns; writes [{}]",
                names.join(", "),
                epi.join(", ")
            ),
        ),
    ))
}
