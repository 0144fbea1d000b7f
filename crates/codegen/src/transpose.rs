//! The transpose schedule: a pointwise group (outputs of one shape, no
//! reductions) where some input is read across the output's innermost dim,
//! e.g. a column-major input of a row-major output, an output with a stride
//! order (planned as a permute written row-major, crate::layout) or a
//! written permute.
//!
//! The pointwise schedule walks the output row-major, so consecutive threads
//! read such an input elements a whole column apart: every 2- or 4-byte read
//! costs a 32-byte sector. Here each block owns a `T x T` tile of two dims:
//! A, the output's innermost dim (consecutive in every output), and B, the
//! dim along which the transposed input is consecutive. Other dims are fixed
//! per block.
//!
//! Phase 1: threads walk the tile with threadIdx.x along B and copy each
//! transposed read into a shared-memory tile, coalesced. Phase 2, after
//! `__syncthreads()`: threads walk with threadIdx.x along A, compute every
//! output element, reading the tiled inputs from shared memory and the others
//! from global memory (consecutive along A, hence coalesced), and store
//! coalesced.
//!
//! Which reads are transposed is found by probing: the outputs are lowered
//! once at the symbolic index `d0, d1, ...` with the lowerer recording every
//! load (`Lowerer::loads`), and each load's element offset, a linear form in
//! the `d`s, says how far it moves per step of each dim. The kernel names the
//! same `d` variables, so the real lowering asks for the same indices, and the
//! tiled ones are served from shared memory through `Lowerer::hold`.

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{signature, Context};
use crate::lower::{Held, Lowerer};
use crate::plan::{Kernel, Schedule};
use crate::{ctype, view};
use fusebench_ir::{DType, ValueId};
use std::ops::Add;

/// Both tiled dims need at least one full warp's width; below that the
/// pointwise schedule's partial coalescing costs little.
pub const MIN_EXTENT: usize = 32;
/// Static shared memory a kernel may declare without opting in.
const SHARED_BYTES: usize = 48 * 1024;

/// One index pattern of one input, staged through a shared tile.
#[derive(Clone, Debug)]
struct TileRead {
    v: ValueId,
    /// The input's index in terms of the output's `d` variables.
    idx: Vec<Ix>,
    /// Phase 1 walks this read with threadIdx.x along B (its consecutive
    /// dim); otherwise along A (a read of the same input that is consecutive
    /// along A, or not analyzable).
    along_b: bool,
    dtype: DType,
}

#[derive(Debug)]
struct Tiling {
    a: usize,
    b: usize,
    tile: usize,
    reads: Vec<TileRead>,
    /// Threads per block (`Device::transpose_threads`).
    threads: usize,
    /// Elements per access of phase 1's reads along B and phase 2's stores
    /// along A (`widths`).
    read_width: usize,
    store_width: usize,
}

fn dvar(k: usize) -> String {
    format!("d{k}")
}

/// The output's index: a `d` variable per dim, 0 for extent-1 dims.
fn out_index(shape: &[usize]) -> Vec<Ix> {
    (0..shape.len())
        .map(|k| if shape[k] == 1 { Ix::c(0) } else { Ix::var(dvar(k)) })
        .collect()
}

/// Whether `i` names no variable but the `d`s.
fn only_d_vars(i: &Ix) -> bool {
    match i {
        Ix::Const(_) => true,
        Ix::Var(n) => n.strip_prefix('d').is_some_and(|r| r.parse::<usize>().is_ok()),
        Ix::Add(ts) => ts.iter().all(only_d_vars),
        Ix::Mul(x, _) | Ix::Div(x, _) | Ix::Mod(x, _) => only_d_vars(x),
    }
}

/// Bytes of a tile element (the value's register type; the complex structs
/// have trivial default constructors, so they may live in shared memory).
fn reg_bytes(d: DType) -> usize {
    match ctype::reg(d) {
        "bool" => 1,
        "int" | "float" => 4,
        "fb_cd" => 16,
        _ => 8,
    }
}

/// Whether the transpose schedule takes this group: Ok(why) or Err(why not).
pub fn fits(
    cx: &Context,
    shape: &[usize],
    outputs: &[(ValueId, usize)],
) -> Result<String, String> {
    let t = analyze(cx, shape, outputs)?;
    let names: Vec<&str> = t.reads.iter().map(|r| cx.f.value(r.v).name.as_str()).collect();
    Ok(format!(
        "{} read across innermost dim {} (extent {}), consecutive along dim {} (extent {}): {}x{} shared-memory tiles",
        names.join(", "),
        t.a,
        shape[t.a],
        t.b,
        shape[t.b],
        t.tile,
        t.tile
    ))
}

fn analyze(
    cx: &Context,
    shape: &[usize],
    outputs: &[(ValueId, usize)],
) -> Result<Tiling, String> {
    let n = shape.len();
    let a = (0..n)
        .rev()
        .find(|&k| shape[k] > 1)
        .ok_or("no dim of extent above 1")?;
    if shape[a] < MIN_EXTENT {
        return Err(format!("innermost dim {} is below {MIN_EXTENT}", shape[a]));
    }
    // Probe: lower every output once, recording the loads.
    let (mut lw, _) = cx.lowerer();
    lw.loads = Some(Vec::new());
    let idx = out_index(shape);
    for &(v, _) in outputs {
        lw.value_at(v, &idx).map_err(|e| e.to_string())?;
    }
    let loads = lw.loads.take().unwrap_or_default();
    // Per buffer read: its distinct index patterns, and whether all of them
    // can be served from a tile: read in straight-line code (a fresh
    // lowerer's top scope is depth 1; not in a pad/cat branch or a loop) at
    // an index of the `d`s alone (no gathered index).
    let mut per: Vec<(ValueId, Vec<Vec<Ix>>, bool)> = Vec::new();
    for (v, i, depth) in loads {
        let ok = depth == 1 && i.iter().all(only_d_vars);
        match per.iter_mut().find(|p| p.0 == v) {
            Some(p) => {
                p.2 &= ok;
                if !p.1.contains(&i) {
                    p.1.push(i);
                }
            }
            None => per.push((v, vec![i], ok)),
        }
    }
    // Per pattern, how far its element moves per step of each dim.
    let coefs = |v: ValueId, i: &[Ix]| -> Option<Vec<i64>> {
        let off = Lowerer::offset(&lw.buffers[&v], i);
        (0..n)
            .map(|k| {
                if shape[k] == 1 {
                    Some(0)
                } else {
                    off.linear_in(&dvar(k)).map(|(c, _)| c.abs())
                }
            })
            .collect()
    };
    // A read is transposed when it is not consecutive along A and some other
    // dim moves it less: that dim is where it is consecutive.
    let fast = |c: &[i64]| -> Option<usize> {
        if c[a] <= 1 {
            return None;
        }
        (0..n)
            .filter(|&k| k != a && c[k] != 0 && c[k] < c[a])
            .min_by_key(|&k| (c[k], std::cmp::Reverse(k)))
    };
    // B: the dim most transposed reads are consecutive along (first on ties).
    let mut votes: Vec<(usize, usize)> = Vec::new();
    for (v, pats, ok) in &per {
        if !ok {
            continue;
        }
        for p in pats {
            if let Some(k) = coefs(*v, p).as_deref().and_then(fast) {
                match votes.iter_mut().find(|x| x.0 == k) {
                    Some(x) => x.1 += 1,
                    None => votes.push((k, 1)),
                }
            }
        }
    }
    let b = votes
        .iter()
        .max_by_key(|x| (x.1, std::cmp::Reverse(x.0)))
        .map(|x| x.0)
        .ok_or("no input is read across the innermost dim")?;
    if shape[b] < MIN_EXTENT {
        return Err(format!("dim {b} of the transposed read is below {MIN_EXTENT}"));
    }
    // Every pattern of an input with a read consecutive along B is tiled:
    // the lowering serves all of an input's reads from tiles or none.
    let mut reads = Vec::new();
    for (v, pats, ok) in &per {
        let c: Vec<Option<Vec<i64>>> = pats.iter().map(|p| coefs(*v, p)).collect();
        if !ok || !c.iter().any(|c| c.as_deref().and_then(fast) == Some(b)) {
            continue;
        }
        let dtype = lw.buffers[v].dtype;
        for (p, c) in pats.iter().zip(c) {
            let along_b = c.is_some_and(|c| c[b] != 0 && (c[a] == 0 || c[b] < c[a]));
            reads.push(TileRead {
                v: *v,
                idx: p.clone(),
                along_b,
                dtype,
            });
        }
    }
    // 64-wide tiles give each thread 16 elements in flight (2-byte types
    // need that many to cover memory latency); 32 when a dim is too short
    // or the tiles would not fit.
    let bytes = |t: usize| -> usize {
        reads
            .iter()
            .map(|r| t * (t + 1) * reg_bytes(r.dtype))
            .sum()
    };
    // 64-wide only where that still gives every multiprocessor two blocks:
    // small matrices want more, smaller blocks.
    let rest: usize = (0..n).filter(|&k| k != a && k != b).map(|k| shape[k]).product();
    let blocks64 = shape[a].div_ceil(64) * shape[b].div_ceil(64) * rest;
    let wide = shape[a] >= 64 && shape[b] >= 64 && bytes(64) <= SHARED_BYTES;
    let tile = match cx.dev.transpose_tile {
        64 if wide => 64,
        0 if wide && blocks64 >= 2 * cx.dev.sm_count as usize => 64,
        _ if bytes(32) <= SHARED_BYTES => 32,
        _ => return Err(format!("{} tiles do not fit in shared memory", reads.len())),
    };
    let threads = cx.dev.transpose_threads as usize;
    let outs = outputs.iter().map(|&(v, _)| cx.f.value(v).dtype);
    let (read_width, store_width) = widths(cx.dev.transpose_bytes as usize, &reads, outs, (shape[a], shape[b]), tile, threads);
    Ok(Tiling { a, b, tile, reads, threads, read_width, store_width })
}

/// Elements per access: phase 1's reads along B, phase 2's stores along A.
/// `bytes` 0: 2-byte tiled reads in pairs where B's extent is even, stores
/// one element. Otherwise as many elements as make `bytes` of the widest type
/// read (stored), where the extent and the tile are multiples of them and
/// the block's threads still walk within one tile.
fn widths(
    bytes: usize,
    reads: &[TileRead],
    outputs: impl Iterator<Item = DType>,
    (ea, eb): (usize, usize),
    tile: usize,
    threads: usize,
) -> (usize, usize) {
    let along_b = || reads.iter().filter(|r| r.along_b).map(|r| r.dtype.size_bytes());
    if bytes == 0 {
        let pair = along_b().any(|b| b == 2) && eb.is_multiple_of(2);
        return (if pair { 2 } else { 1 }, 1);
    }
    let fit = |widest: usize, extent: usize| {
        let mut w = (bytes / widest.max(1)).max(1);
        while w > 1 && (!extent.is_multiple_of(w) || !tile.is_multiple_of(w) || threads * w > tile * tile) {
            w /= 2;
        }
        w
    };
    let read = fit(along_b().max().unwrap_or(4), eb);
    let store = fit(outputs.map(|d| d.size_bytes()).max().unwrap_or(4), ea);
    (read, store)
}

/// `outputs`: (value, position among the fusion's outputs), all of `shape`.
pub fn build(
    cx: &Context,
    name: &str,
    shape: &[usize],
    outputs: &[(ValueId, usize)],
) -> Result<(String, Kernel), CodegenError> {
    let Tiling { a, b, tile, reads, threads, read_width, store_width } =
        analyze(cx, shape, outputs).map_err(CodegenError::NoFit)?;
    let f = cx.f;
    let (mut lw, mut params) = cx.lowerer();
    for &(v, pos) in outputs {
        params.push_output(f, v, pos);
    }
    let it = lw.idx_type;
    let rows = threads / tile;
    let (ea, eb) = (shape[a], shape[b]);
    let (na, nb) = (ea.div_ceil(tile), eb.div_ceil(tile));
    let rest: Vec<usize> = (0..shape.len()).filter(|&k| k != a && k != b).collect();
    let rest_shape: Vec<usize> = rest.iter().map(|&k| shape[k]).collect();
    let blocks = na * nb * rest_shape.iter().product::<usize>();
    if blocks > i32::MAX as usize {
        return Err(CodegenError::NoFit(format!("{blocks} tiles exceed the grid")));
    }
    // Each tile holds [A][B] with rows padded by one element: phase 1 writes
    // a row (consecutive banks), phase 2 reads a column, whose elements are
    // then T + 1 = 1 (mod 32) words apart, so on different banks.
    for (i, r) in reads.iter().enumerate() {
        lw.line(&format!(
            "__shared__ {} tile{i}[{tile}][{}];",
            ctype::reg(r.dtype),
            tile + 1
        ));
    }
    // Blocks: A tiles fastest, then B tiles, then the other dims.
    lw.line(&format!("const {it} tile_a = ({it})blockIdx.x % {na};"));
    lw.line(&format!("const {it} tile_q = ({it})blockIdx.x / {na};"));
    lw.line(&format!("const {it} tile_b = tile_q % {nb};"));
    lw.line(&format!("const {it} tile_r = tile_q / {nb};"));
    for (k, e) in rest.iter().zip(view::delinearize(Ix::var("tile_r"), &rest_shape)) {
        if shape[*k] > 1 {
            lw.line(&format!("const {it} {} = {e};", dvar(*k)));
        }
    }
    // The tile's element (la, lb) of this thread's step j, along B or A.
    let walk = |lw: &mut Lowerer, x_along_b: bool| {
        lw.line("#pragma unroll");
        lw.open(&format!("for (int j = 0; j < {tile}; j += {rows}) {{"));
        let (la, lb) = if x_along_b {
            ("threadIdx.y + j", "threadIdx.x")
        } else {
            ("threadIdx.x", "threadIdx.y + j")
        };
        lw.line(&format!("const {it} la = {la};"));
        lw.line(&format!("const {it} lb = {lb};"));
        lw.line(&format!("const {it} {} = tile_a * {tile} + la;", dvar(a)));
        lw.line(&format!("const {it} {} = tile_b * {tile} + lb;", dvar(b)));
        // Only dims whose extent is not a multiple of the tile have edge tiles.
        open_step(lw, tile, &[(dvar(a), ea), (dvar(b), eb)]);
    };
    // Phase 1: fill the tiles, each walked along its consecutive dim.
    // Reads along B go `read_width` elements to a thread (`widths`): one
    // 2-byte load each reached ~57% of the copy ceiling, pairs about f32's
    // ~93%, and 16 bytes to a thread, stored 16 bytes at a time too, ran
    // 0.934 of pairs over 52 fresh transposes on the H200 (12000-row
    // column-major ones 0.75-0.78). The lowerer makes the lanes one wide load
    // where the offsets allow (`Lanes`), scalar loads otherwise; they never
    // straddle B's edge since its extent is a multiple of the width.
    let wide_reads = read_width > 1;
    if wide_reads {
        lane_walk(&mut lw, it, (tile, threads), read_width, a, ea, eb);
        for (i, r) in reads.iter().enumerate() {
            if r.along_b {
                for k in 0..read_width {
                    lw.lanes = Some(crate::lower::Lanes {
                        var: "db".into(),
                        width: read_width,
                        lane: k,
                    });
                    let at = Ix::var("db").add(Ix::c(k as i64));
                    let idx: Vec<Ix> = r.idx.iter().map(|i| i.subst(&dvar(b), &at)).collect();
                    let e = lw.value_at(r.v, &idx)?;
                    lw.line(&format!("tile{i}[la][lb + {k}] = {e};"));
                }
                lw.lanes = None;
            }
        }
        lw.close("}");
        lw.close("}");
    }
    for along_b in [true, false] {
        if !reads.iter().any(|r| r.along_b == along_b) || (along_b && wide_reads) {
            continue;
        }
        walk(&mut lw, along_b);
        for (i, r) in reads.iter().enumerate() {
            if r.along_b == along_b {
                let e = lw.value_at(r.v, &r.idx)?;
                lw.line(&format!("tile{i}[la][lb] = {e};"));
            }
        }
        lw.close("}");
        lw.close("}");
    }
    lw.line("__syncthreads();");
    // Phase 2: the tiled reads come from shared memory.
    for (i, r) in reads.iter().enumerate() {
        lw.hold(
            r.v,
            Held {
                expr: format!("tile{i}[la][lb]"),
                index: r.idx.clone(),
            },
        );
    }
    let idx = out_index(shape);
    // Output `v` at the thread's element, as stored.
    let stored = |lw: &mut Lowerer, v: ValueId| -> Result<String, CodegenError> {
        let e = lw.value_at(v, &idx)?;
        let d = f.value(v).dtype;
        Ok(ctype::to_storage(d, &lw.unrounded(d, &e)))
    };
    if store_width == 1 {
        walk(&mut lw, false);
        let at = view::linearize(&idx, shape);
        for &(v, pos) in outputs {
            let st = stored(&mut lw, v)?;
            lw.line(&format!("out{pos}[{at}] = {st};"));
        }
    } else {
        // Each thread computes `store_width` outputs along A, one lane per
        // scope (its own `la` and A index, so the tiles serve it as above),
        // and stores them as one wide store: aligned, since A's extent is a
        // multiple of the width and every output is row-major.
        store_walk(&mut lw, it, (tile, threads), store_width, ea, (b, eb));
        let arrays = crate::kernel::lane_arrays(&mut lw, f, outputs, store_width);
        for k in 0..store_width {
            lw.open("{");
            lw.line(&format!("const {it} la = la0 + {k};"));
            lw.line(&format!("const {it} {} = da + {k};", dvar(a)));
            for (&(v, _), arr) in outputs.iter().zip(&arrays) {
                let st = stored(&mut lw, v)?;
                lw.line(&format!("{arr}[{k}] = {st};"));
            }
            lw.close("}");
        }
        let mut first = idx.clone();
        first[a] = Ix::var("da");
        let at = view::linearize(&first, shape);
        crate::kernel::store_lane_arrays(&mut lw, f, outputs, &arrays, &at, store_width);
    }
    lw.close("}");
    lw.close("}");
    let src = format!("{} {{\n{}}}\n", signature(name, threads as u32, &params), lw.code);
    let names: Vec<String> = outputs
        .iter()
        .map(|&(v, _)| f.value(v).name.clone())
        .collect();
    let tiled: Vec<String> = reads.iter().map(|r| f.value(r.v).name.clone()).collect();
    let kernel = Kernel::new(
        name,
        Schedule::Transpose,
        [crate::launch::grid_dim(blocks), 1, 1],
        [tile as u32, rows as u32, 1],
        params.args,
        format!(
            "transpose over {shape:?}, {tile}x{tile} tiles of dims {a} and {b}, {} staged in shared memory{}: {}",
            tiled.join(", "),
            if cx.dev.transpose_bytes == 0 {
                String::new()
            } else {
                format!(", {read_width} elements per read, {store_width} per store")
            },
            names.join(", ")
        ),
    );
    Ok((src, kernel))
}

/// Phase 1's walk for reads of `width` elements: the block's threads, in
/// order, take consecutive groups of a tile row (B) and then the next rows
/// (A); `db`, the group's first B index, is a multiple of the width.
fn lane_walk(lw: &mut Lowerer, it: &str, (tile, threads): (usize, usize), width: usize, a: usize, ea: usize, eb: usize) {
    let per_row = tile / width;
    let rows = threads / per_row;
    lw.line("#pragma unroll");
    lw.open(&format!("for (int j = 0; j < {tile}; j += {rows}) {{"));
    lw.line(&format!("const {it} tid = threadIdx.y * {tile} + threadIdx.x;"));
    lw.line(&format!("const {it} la = tid / {per_row} + j;"));
    lw.line(&format!("const {it} lb = tid % {per_row} * {width};"));
    lw.line(&format!("const {it} {} = tile_a * {tile} + la;", dvar(a)));
    lw.line(&format!("const {it} db = tile_b * {tile} + lb;"));
    open_step(lw, tile, &[(dvar(a), ea), ("db".to_string(), eb)]);
    lw.allow_vector_loads_here();
}

/// Phase 2's walk for stores of `width` elements: the block's threads, in
/// order, take consecutive groups of a tile column (A) and then the next
/// columns (B); `la0` and `da`, the group's first A index in the tile and in
/// the output, are multiples of the width.
fn store_walk(
    lw: &mut Lowerer,
    it: &str,
    (tile, threads): (usize, usize),
    width: usize,
    ea: usize,
    (b, eb): (usize, usize),
) {
    let per_col = tile / width;
    let cols = threads / per_col;
    lw.line("#pragma unroll");
    lw.open(&format!("for (int j = 0; j < {tile}; j += {cols}) {{"));
    lw.line(&format!("const {it} tid = threadIdx.y * {tile} + threadIdx.x;"));
    lw.line(&format!("const {it} lb = tid / {per_col} + j;"));
    lw.line(&format!("const {it} la0 = tid % {per_col} * {width};"));
    lw.line(&format!("const {it} da = tile_a * {tile} + la0;"));
    lw.line(&format!("const {it} {} = tile_b * {tile} + lb;", dvar(b)));
    open_step(lw, tile, &[("da".to_string(), ea), (dvar(b), eb)]);
}

/// Opens one step's scope, predicated on the index of each dim whose extent
/// is not a multiple of the tile (only those have edge tiles).
fn open_step(lw: &mut Lowerer, tile: usize, bounds: &[(String, usize)]) {
    let conds: Vec<String> = bounds
        .iter()
        .filter(|(_, e)| e % tile != 0)
        .map(|(v, e)| format!("{v} < {e}"))
        .collect();
    if conds.is_empty() {
        lw.open("{");
    } else {
        lw.open(&format!("if ({}) {{", conds.join(" && ")));
    }
}
