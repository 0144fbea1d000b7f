//! Lowering a row kernel: each thread's vector slots in its rows, the rows a
//! block visits (with the next row copied to shared memory where planned),
//! the passes of each row's reductions, the outputs and the partial sums over
//! rows. What is held and how the row is laid out is planned in `mod.rs`.

use super::*;

/// One vector slot of a thread in a row: the C names of its offset in the
/// row (`ii`), the index above the innermost dim (`q`) and the innermost
/// index (`jj`), and the condition under which it holds row elements (None:
/// always; otherwise its index is clamped into the row and its
/// contributions are skipped).
struct Col {
    ii: String,
    q: String,
    jj: String,
    ok: Option<String>,
}

/// A row of a block iteration: its C variable, and the condition under
/// which it is a real row (None: always; otherwise it is clamped to the last
/// row and writes nothing).
struct RowVar {
    name: String,
    ok: Option<String>,
}

fn both(a: &Option<String>, b: &Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a} && {b}")),
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (None, None) => None,
    }
}

/// Where in a shape of `rows x cols` elements the element (row, lane) lies.
fn index_of(
    shape: &[usize],
    cols: usize,
    last: usize,
    row: &str,
    col: &Col,
    lane: usize,
) -> Result<Vec<Ix>, CodegenError> {
    let mut k0 = shape.len();
    let mut p = 1usize;
    while k0 > 0 && p < cols {
        k0 -= 1;
        p *= shape[k0];
    }
    if p != cols || shape.last().copied().unwrap_or(1) != last && cols > 1 {
        return Err(CodegenError::NoFit(format!(
            "shape {shape:?} does not split into rows x {cols} with innermost {last}"
        )));
    }
    let mut idx = view::delinearize(Ix::var(row), &shape[..k0]);
    let inner = &shape[k0..];
    if !inner.is_empty() {
        idx.extend(view::delinearize(Ix::var(col.q.clone()), &inner[..inner.len() - 1]));
        idx.push(Ix::var(col.jj.clone()).add(Ix::c(lane as i64)));
    }
    Ok(idx)
}

/// Rows each thread group handles at once: independent rows keep more
/// loads in flight per thread, which is what hides DRAM latency when few
/// blocks walk many rows. One row at a time when a row already fills the
/// registers.
fn unroll(spec: &Spec, sh: &Shape, holding: &Holding, per_block: usize) -> usize {
    let halves = holding.halves;
    // Rows that do not fill the threads `Device::row_fill` asks for are not
    // doubled up in a thread.
    if sh.reload || (holding.fill.1 > 0 && (spec.rows / 2) * sh.threads < holding.fill.1) {
        return 1;
    }
    // A plain row sum spread over more threads (`Holding::summing`) takes
    // one row at a time, as measured.
    if holding.summing(spec.cols / spec.width.max(1)) != usize::MAX {
        return 1;
    }
    if sh.vectors == 1 && per_block == 1 {
        return [spec.unroll.max(1), 2, 1]
            .into_iter()
            .find(|&u| spec.rows.is_multiple_of(u) && spec.rows / u >= spec.row_blocks)
            .unwrap_or(1);
    }
    [spec.unroll.max(1), 2, 1]
        .into_iter()
        .find(|&u| {
            u == 1
                || (sh.vectors * spec.width * halves * u <= 2 * HELD_MAX
                    && sh.threads * per_block * sh.vectors * spec.width * halves * u <= 2 * BLOCK_HELD_MAX
                    && spec.rows / (u * per_block) >= spec.row_blocks.max(1))
        })
        .unwrap_or(1)
}

/// Kernel source lines above which unrolling rows costs more compile time
/// (NVRTC grows faster than linearly with straight-line code) than it gains.
const UNROLLED_LINES_MAX: usize = 1500;

pub fn build(cx: &Context, name: &str, spec: &Spec) -> Result<(String, Kernel), CodegenError> {
    let whole_row = spec.whole_row();
    let written = writes(spec.full.len(), spec.outer.len(), spec.inner.len());
    let holding = Holding::of(&cx.dev, cx.f, spec.rows, spec.cols, written);
    let spread = spread(spec.rows, spec.inner.len() + spec.totals.len(), &cx.dev);
    let sh = shape(spec.cols, spec.width, whole_row, holding, spec.reload, spread).ok_or_else(|| {
        CodegenError::NoFit(format!(
            "a row of {} does not fit a block of {}-wide vectors",
            spec.cols, spec.width
        ))
    })?;
    let per_block = rows_per_block(spec.rows, !spec.outer.is_empty(), &sh, cx.dev.sm_count as usize);
    // A walking row re-read in each pass (`walk::plan`), only where its
    // next row is copied to shared memory: re-read from global memory
    // instead, a backward RMSNorm of 7040 f32 ran 1.43x slower than held.
    if spec.walk.is_some_and(|w| w.reread) && !sh.reload {
        let reread = Shape { reload: true, packed: false, ..sh };
        let built = build_next_row(cx, name, spec, &reread, per_block, 1, cx.dev.reread_one_buffer)?;
        if built.2 {
            return Ok((built.0, built.1));
        }
        let held = spec.walk.map(|w| crate::walk::Walk {
            reread: false,
            why: format!("{}; held: the next row does not fit shared memory", w.why),
            ..w.clone()
        });
        return build(cx, name, &Spec { walk: held.as_ref(), ..*spec });
    }
    // Spread rows: a block each, one at a time (what two rows per thread
    // would hide is latency the other blocks do not have to hide).
    let u = if spread { 1 } else { unroll(spec, &sh, &holding, per_block) };
    let first = build_next_row(cx, name, spec, &sh, per_block, u, false)?;
    if first.0.lines().count() > UNROLLED_LINES_MAX && u > 1 {
        return build_next_row(cx, name, spec, &sh, per_block, 1, false).map(|(s, k, _)| (s, k));
    }
    Ok((first.0, first.1))
}

/// Registers a thread of a row kernel laid out as `sh` (its `shape`),
/// walking `rows x cols` in vectors of `width` with `sums` sums over rows and
/// `reductions` of each row, is estimated to take (`walk::registers`),
/// holding its row and re-reading it (None for Float rows with 64-bit
/// indices); None where the row is re-read anyway (past the registers).
pub fn walk_registers(
    cx: &Context,
    (rows, cols, width): (usize, usize, usize),
    sh: &Shape,
    (row_blocks, reload): (usize, Option<usize>),
    sums: usize,
    reductions: usize,
) -> Option<(usize, Option<usize>)> {
    if sh.reload {
        return None;
    }
    let holding = Holding::of(&cx.dev, cx.f, rows, cols, Writes::Rows);
    let probe = Spec {
        rows,
        cols,
        last: width,
        width,
        inner: &[],
        outer: &[],
        totals: &[],
        finish: None,
        full: &[],
        per_row: &[],
        row_blocks,
        unroll: crate::launch::row_unroll(&cx.dev),
        reload,
        walk: None,
    };
    let u = unroll(&probe, sh, &holding, 1);
    let elements = sh.vectors * width;
    let held = held(cx.f, rows, cols) * elements * u;
    let sums = sums * elements;
    // Float rows with 64-bit indices: not re-read (`walk::plan`).
    let float_rows = row_inputs(cx.f, rows, cols).any(|i| cx.f.value(i).dtype.size_bytes() >= 4);
    let reread = (cx.idx_type == "int" || !float_rows).then(|| crate::walk::registers(0, sums, reductions, true));
    Some((crate::walk::registers(held, sums, reductions, false), reread))
}

/// `build_unrolled`, with the next row copied to shared memory while the
/// current one reduces (next_row.rs) where each block walks two row
/// iterations or more of a fixed grid and the two buffers fit beside what
/// else the block keeps there, or with `one` a single buffer does; the flag
/// says whether it is.
fn build_next_row(
    cx: &Context,
    name: &str,
    spec: &Spec,
    sh: &Shape,
    per_block: usize,
    u_rows: usize,
    one: bool,
) -> Result<(String, Kernel, bool), CodegenError> {
    let per_iter = u_rows * per_block;
    let block = sh.threads * per_block;
    let walks = spec.row_blocks > 0 && spec.rows.div_ceil(per_iter) >= 2 * spec.row_blocks;
    if cx.dev.next_row == 0 || !walks {
        return build_unrolled(cx, name, spec, sh, per_block, u_rows, None).map(|(s, k, _)| (s, k, false));
    }
    let rows: Vec<String> = (0..u_rows).map(|u| format!("row{u}")).collect();
    let (src, kernel, seen) =
        build_unrolled(cx, name, spec, sh, per_block, u_rows, Some(NextRow::survey(&rows, block, cx.dev.next_row >= 2)))?;
    // The blocks a multiprocessor runs at once share its memory, less the
    // 1 KiB the driver keeps per block, the reductions' scratch and the
    // broadcast inputs' copies. At once: the grid's share of each, unless
    // the column sums each thread holds, with the registers it needs
    // besides, leave room for fewer (a backward LayerNorm of 16384 bf16:
    // 64 sums per thread of 512, one block at a time).
    let sums = spec.outer.len() * sh.vectors * spec.width;
    let by_registers = cx.dev.registers_per_sm as usize / (block * (sums + crate::launch::RELOAD_SPARE_REGISTERS));
    let on_sm = (spec.row_blocks * sh.tiles)
        .div_ceil(cx.dev.sm_count as usize)
        .min(by_registers)
        .max(1);
    let copies: usize = copied_inputs(cx, spec, sh, block).iter().map(|&(v, _, _)| cx.f.value(v).numel() * cx.f.value(v).dtype.size_bytes()).sum();
    let budget = (cx.dev.shared_memory_per_sm as usize / on_sm).saturating_sub(2048 + copies);
    match seen.and_then(|n| n.plan(budget, one)) {
        Some(next) => build_unrolled(cx, name, spec, sh, per_block, u_rows, Some(next)).map(|(s, k, _)| (s, k, true)),
        None => Ok((src, kernel, false)),
    }
}

fn build_unrolled(
    cx: &Context,
    name: &str,
    spec: &Spec,
    sh: &Shape,
    per_block: usize,
    u_rows: usize,
    next: Option<NextRow>,
) -> Result<(String, Kernel, Option<NextRow>), CodegenError> {
    let f = cx.f;
    let w = spec.width;
    let tiles = sh.tiles;
    let block = sh.threads * per_block;
    let (mut lw, mut params) = cx.lowerer();
    push_row_outputs(&mut params, f, spec.full, spec.per_row, spec.finish);
    let it = lw.idx_type;
    let reds = spec.inner;
    let mut passes = Passes::plan(f, reds)?;
    if per_block > 1 {
        passes.group_warps = sh.threads / 32;
    }
    let per_iter = u_rows * per_block;
    let row_blocks = if spec.row_blocks == 0 {
        spec.rows.div_ceil(per_iter)
    } else {
        spec.row_blocks
    };
    if !reds.is_empty() {
        lw.line("__shared__ float fb_sf[32];");
        lw.line("__shared__ double fb_sd[32];");
        lw.line("__shared__ long long fb_si[32];");
    }
    // The thread's vector slots in its row.
    let simple = sh.vectors == 1 && sh.active == sh.threads && per_block == 1;
    let mut cols: Vec<Col> = Vec::new();
    if simple {
        // The last column tile's tail holds nothing: its index is clamped
        // into the row and its contributions skipped.
        let at = format!("(({it})blockIdx.y * {block} + threadIdx.x) * {w}");
        let ok = if tiles * block * w > spec.cols {
            lw.line(&format!("const {it} iu = {at};"));
            lw.line(&format!("const bool ok = iu < {};", spec.cols));
            lw.line(&format!("const {it} ii = ok ? iu : {};", spec.cols - w));
            Some("ok".to_string())
        } else {
            lw.line(&format!("const {it} ii = {at};"));
            None
        };
        lw.line(&format!("const {it} q = ii / {};", spec.last));
        lw.line(&format!("const {it} jj = ii % {};", spec.last));
        cols.push(Col {
            ii: "ii".into(),
            q: "q".into(),
            jj: "jj".into(),
            ok,
        });
    } else {
        let tr = if per_block > 1 {
            lw.line(&format!("const {it} gr = threadIdx.x / {};", sh.threads));
            lw.line(&format!("const {it} tr = threadIdx.x % {};", sh.threads));
            "tr"
        } else {
            "threadIdx.x"
        };
        let n = spec.cols / w;
        for k in 0..sh.vectors {
            let name = |p: &str| {
                if sh.vectors == 1 {
                    p.to_string()
                } else {
                    format!("{p}{k}")
                }
            };
            let pos = if k == 0 {
                format!("({it}){tr}")
            } else {
                format!("({it}){tr} + {}", k * sh.active)
            };
            let (ii, q, jj) = (name("ii"), name("q"), name("jj"));
            // Idle threads and the empty tail of the last vectors hold nothing.
            let mut conds = Vec::new();
            if sh.active < sh.threads {
                conds.push(format!("({it}){tr} < {}", sh.active));
            }
            if (k + 1) * sh.active > n {
                conds.push(format!("{pos} < {n}"));
            }
            let ok = if !conds.is_empty() {
                let ok = name("ok");
                lw.line(&format!("const bool {ok} = {};", conds.join(" && ")));
                lw.line(&format!(
                    "const {it} {ii} = ({ok} ? {pos} : {}) * {w};",
                    n - 1
                ));
                Some(ok)
            } else {
                lw.line(&format!("const {it} {ii} = ({pos}) * {w};"));
                None
            };
            lw.line(&format!("const {it} {q} = {ii} / {};", spec.last));
            lw.line(&format!("const {it} {jj} = {ii} % {};", spec.last));
            cols.push(Col { ii, q, jj, ok });
        }
    }
    let mut next = next;
    if let Some(n) = &mut next {
        n.known = cols.iter().flat_map(|c| [c.ii.clone(), c.q.clone(), c.jj.clone()]).collect();
    }
    // Sums over rows: one accumulator per vector slot and lane.
    let mut oaccs: Vec<Vec<Vec<String>>> = Vec::new();
    for (r, _) in spec.outer {
        let acc = r.acc(f);
        let c = match &r.kind {
            Kind::Plain(c) => c.clone(),
            _ => {
                return Err(CodegenError::NoFit(
                    "only plain sums, maxima and minima accumulate over rows".into(),
                ))
            }
        };
        let mut per_col = Vec::new();
        for _ in &cols {
            let names: Vec<String> = (0..w).map(|_| lw.fresh("cs")).collect();
            for n in &names {
                lw.line(&format!(
                    "{} {n} = {};",
                    ctype::reg(acc),
                    reduction::init(&c, acc)
                ));
            }
            per_col.push(names);
        }
        oaccs.push(per_col);
    }
    // Totals: one accumulator per thread; the first thread of each row's
    // threads adds the row's value (it computes the per-row outputs).
    let mut taccs: Vec<String> = Vec::new();
    for (r, _) in spec.totals {
        let acc = r.acc(f);
        let Kind::Plain(c) = &r.kind else {
            return Err(CodegenError::NoFit(
                "only plain sums, maxima and minima accumulate over rows".into(),
            ));
        };
        let t = lw.fresh("t");
        lw.line(&format!("{} {t} = {};", ctype::reg(acc), reduction::init(c, acc)));
        taccs.push(t);
    }
    // Small inputs the outputs broadcast over the rows (a norm's weight and
    // bias) are copied to shared memory as the block starts: the copy waits
    // alongside the row's loads, costs no registers, and the outputs read it
    // after the reductions at shared-memory latency instead of L2's.
    // Which ones: `copied_inputs`.
    let copied = copied_inputs(cx, spec, sh, block);
    for (n, &(v, pos, offset)) in copied.iter().enumerate() {
        let val = f.value(v);
        let numel = val.numel();
        let st = ctype::storage(val.dtype);
        let name = format!("fb_pre{n}");
        lw.line(&format!("__shared__ __align__(16) {st} {name}[{numel}];"));
        let chunks = numel * val.dtype.size_bytes() / 16;
        lw.line(&format!(
            "for (int i = threadIdx.x; i < {chunks}; i += {block}) fb_copy16(reinterpret_cast<char*>({name}) + i * 16, reinterpret_cast<const char*>(in{pos} + {offset}) + i * 16);"
        ));
        lw.buffers.insert(
            v,
            crate::lower::Buffer {
                param: name,
                dtype: val.dtype,
                strides: fusebench_ir::recipe::row_major_strides(val.shape.as_ref().unwrap()),
                offset: 0,
                shared: true,
            },
        );
    }
    let exact_rows = spec.rows.is_multiple_of(per_iter);
    // The next row's copies (next_row.rs), `row` its first row: the first
    // before the loop, then each iteration's next as it starts (two
    // buffers) or as it ends (one: `next_iteration`).
    let next_rows = |lw: &mut Lowerer, n: &NextRow, row: &str, buffer: &str| {
        lw.open(&format!("if ({row} < {}) {{", spec.rows));
        let names: Vec<String> = (0..u_rows).map(|u| format!("nrow{u}")).collect();
        for (u, nr) in names.iter().enumerate() {
            let at = format!("{row} + {}{}", u * per_block, if per_block > 1 { " + gr" } else { "" });
            let at = if exact_rows { at } else { format!("min({at}, {})", spec.rows - 1) };
            lw.line(&format!("const {it} {nr} = {at};"));
        }
        for c in n.copies(&names, buffer) {
            lw.line(&c);
        }
        lw.close("}");
    };
    // The next iteration's row, copied into `buffer`.
    let next_iteration = |lw: &mut Lowerer, n: &NextRow, buffer: &str| {
        lw.open("{");
        lw.line(&format!("const {it} nrow = row + ({it})gridDim.x * {per_iter};"));
        next_rows(lw, n, "nrow", buffer);
        lw.close("}");
    };
    // A survey lowers the kernel as it is; a plan copies.
    let copying = next.as_ref().is_some_and(NextRow::planned);
    if let Some(n) = next.as_ref().filter(|_| copying) {
        for d in n.declarations() {
            lw.line(&d);
        }
        lw.open("{");
        lw.line(&format!("const {it} nrow = ({it})blockIdx.x * {per_iter};"));
        next_rows(&mut lw, n, "nrow", "0");
        lw.close("}");
        lw.line("int fb_nb = 0;");
        // The broadcast inputs' copies are waited for here, with the first
        // row's: a wait in the loop would wait for the next row's too.
        if !copied.is_empty() {
            lw.line("fb_copy_wait();");
            lw.line("__syncthreads();");
        }
    }
    // One iteration per block: no loop (`Device::row_once`). Only where the
    // grid is exactly one block per row group, so that no block starts past
    // the last row (the loop's condition would skip such a block).
    let once = cx.dev.row_once && !copying && row_blocks == spec.rows.div_ceil(per_iter);
    lw.open(&if once {
        format!("{{ const {it} row = ({it})blockIdx.x * {per_iter};")
    } else {
        format!(
            "for ({it} row = ({it})blockIdx.x * {per_iter}; row < {}; row += ({it})gridDim.x * {per_iter}) {{",
            spec.rows
        )
    });
    if let Some(n) = next.as_ref().filter(|_| copying) {
        lw.line("fb_copy_wait();");
        if !n.single() {
            next_iteration(&mut lw, n, "(fb_nb ^ 1)");
        }
    }
    lw.next_row = next;
    let mut row_vars: Vec<RowVar> = Vec::new();
    for u in 0..u_rows {
        let rv = format!("row{u}");
        let at = format!(
            "row + {}{}",
            u * per_block,
            if per_block > 1 { " + gr" } else { "" }
        );
        if exact_rows {
            lw.line(&format!("const {it} {rv} = {at};"));
            row_vars.push(RowVar { name: rv, ok: None });
        } else {
            let ok = format!("rok{u}");
            lw.line(&format!("const bool {ok} = {at} < {};", spec.rows));
            lw.line(&format!(
                "const {it} {rv} = {ok} ? {at} : {};",
                spec.rows - 1
            ));
            row_vars.push(RowVar { name: rv, ok: Some(ok) });
        }
    }
    lw.allow_vector_loads_here();
    let totals: Vec<Reduction> = spec.totals.iter().map(|(r, _)| r.clone()).collect();
    for rv in &row_vars {
        crate::totals::parts_first(&mut lw, f, &totals, reds, spec.rows, &rv.name)?;
    }
    let lanes = |lw: &mut Lowerer, col: &Col, k: usize| {
        lw.lanes = Some(Lanes {
            var: col.jj.clone(),
            width: w,
            lane: k,
        })
    };
    // Small inputs the outputs broadcast over the rows (a norm's weight)
    // are read before the row's reductions: their loads then wait alongside
    // the row's instead of after the last block reduction.
    if cx.dev.row_prefetch == 1 && !sh.reload && !reds.is_empty() {
        let early = broadcast_inputs(f, spec);
        for rv in &row_vars {
            for col in &cols {
                for k in 0..w {
                    lanes(&mut lw, col, k);
                    for &v in &early {
                        let shape = f.value(v).shape.as_ref().unwrap();
                        if let Ok(idx) = index_of(shape, spec.cols, spec.last, &rv.name, col, k) {
                            lw.value_at(v, &idx)?;
                        }
                    }
                }
            }
        }
        lw.lanes = None;
    }
    let mut means: Vec<Vec<Option<String>>> = vec![vec![None; u_rows]; reds.len()];
    // 16-bit rows held as loaded: each pass after the first converts them
    // again (`Device::row_packed`): a kernel that writes statistics of its
    // rows alone (`Writes::Statistics`), and with `Device::row_packed_norms`
    // a norm whose outputs are cheap to compute again (`Writes::Normalized`),
    // which converts them once more for its outputs.
    let packed = match sh.packed {
        true => packed_inputs(f, spec.rows, spec.cols),
        false => Vec::new(),
    };
    for pass in 0..passes.count {
        if pass > 0 {
            lw.repack(&packed);
        }
        let active = passes.active(reds, pass);
        // accs[j][u]: accumulators of active reduction j for row u, each
        // taking every `row_accumulators`-th of the thread's elements.
        let split = (cx.dev.row_accumulators as usize).min(cols.len() * w);
        let accs: Vec<Vec<Accs>> = active
            .iter()
            .map(|&i| {
                (0..u_rows)
                    .map(|_| Passes::declare(&mut lw, f, &reds[i], split))
                    .collect()
            })
            .collect();
        // A re-read row: the pass's loads live in a scope of their own, so
        // the next pass loads again instead of keeping them in registers.
        if sh.reload {
            lw.open("{");
            lw.allow_vector_loads_here();
        }
        for (u, rv) in row_vars.iter().enumerate() {
            for (c, col) in cols.iter().enumerate() {
                for k in 0..w {
                    lanes(&mut lw, col, k);
                    for (j, &i) in active.iter().enumerate() {
                        let idx = index_of(
                            f.value(reds[i].x).shape.as_ref().unwrap(),
                            spec.cols,
                            spec.last,
                            &rv.name,
                            col,
                            k,
                        )?;
                        let xv = lw.value_at(reds[i].x, &idx)?;
                        let stmt = passes.step(
                            f,
                            reds,
                            i,
                            pass,
                            accs[j][u].at(c * w + k),
                            &xv,
                            means[i][u].as_deref(),
                        );
                        lw.line(&guarded(col.ok.as_deref(), &stmt));
                    }
                }
            }
        }
        lw.lanes = None;
        if sh.reload {
            lw.close("}");
            lw.allow_vector_loads_here();
        }
        let mut folded = Vec::new();
        for (j, &i) in active.iter().enumerate() {
            for (u, rv) in row_vars.iter().enumerate() {
                folded.push((i, Passes::fold(&mut lw, f, &reds[i], &accs[j][u]), rv.name.clone()));
            }
        }
        let finished = passes.finish_all(&mut lw, f, reds, pass, &folded, cx.dev.block_pairs);
        for (k, m) in finished.into_iter().enumerate() {
            if let Some(m) = m {
                means[folded[k].0][k % u_rows] = Some(m);
            }
        }
    }
    if !copied.is_empty() && !copying {
        lw.line("fb_copy_wait();");
        lw.line("__syncthreads();");
    }
    // Rows held as loaded (`Writes::Normalized`): the outputs convert them
    // again too, so no pass's floats stay live until here.
    if !spec.full.is_empty() && passes.count > 0 {
        lw.repack(&packed);
    }
    // The rows' outputs and their contributions to the column sums.
    for rv in &row_vars {
        for (c, col) in cols.iter().enumerate() {
            let arrays = lane_arrays(&mut lw, f, spec.full, w);
            let mut stores = crate::kernel::LaneStores::new(arrays.len(), w);
            let ok = both(&col.ok, &rv.ok);
            #[allow(clippy::needless_range_loop)] // k is the lane: it picks the lane's index and slot too, not only its accumulator
            for k in 0..w {
                lanes(&mut lw, col, k);
                for (j, &(v, _)) in spec.full.iter().enumerate() {
                    let idx = index_of(
                        f.value(v).shape.as_ref().unwrap(),
                        spec.cols,
                        spec.last,
                        &rv.name,
                        col,
                        k,
                    )?;
                    let e = lw.value_at(v, &idx)?;
                    stores.put(&mut lw, f.value(v).dtype, (&arrays[j], j), k, &e);
                }
                for (j, (r, _)) in spec.outer.iter().enumerate() {
                    let acc = r.acc(f);
                    let idx = index_of(
                        f.value(r.x).shape.as_ref().unwrap(),
                        spec.cols,
                        spec.last,
                        &rv.name,
                        col,
                        k,
                    )?;
                    let xv = lw.value_at(r.x, &idx)?;
                    let xv = r.to_acc(f, &xv);
                    let Kind::Plain(cb) = &r.kind else {
                        unreachable!()
                    };
                    let stmt = reduction::step(cb, acc, &oaccs[j][c][k], &xv);
                    lw.line(&guarded(ok.as_deref(), &stmt));
                }
            }
            lw.lanes = None;
            let at = Ix::var(rv.name.clone())
                .mul(spec.cols as i64)
                .add(Ix::var(col.ii.clone()));
            if !spec.full.is_empty() {
                if let Some(c) = &ok {
                    lw.open(&format!("if ({c}) {{"));
                }
                store_lane_arrays(&mut lw, f, spec.full, &arrays, &at, w);
                if ok.is_some() {
                    lw.close("}");
                }
            }
        }
    }
    let first_thread = if per_block > 1 {
        "tr == 0"
    } else {
        "threadIdx.x == 0"
    };
    if !spec.per_row.is_empty() || !spec.totals.is_empty() {
        lw.open(&format!("if ({first_thread}) {{"));
        for rv in &row_vars {
            if let Some(c) = &rv.ok {
                lw.open(&format!("if ({c}) {{"));
            }
            for &(v, t) in spec.per_row {
                let shape = f.value(v).shape.clone().unwrap_or_default();
                let idx = view::delinearize(Ix::var(rv.name.clone()), &shape);
                let e = lw.value_at(v, &idx)?;
                let (dst, d) = match t {
                    RowTarget::Output(pos) => (format!("out{pos}"), f.value(v).dtype),
                    RowTarget::Temp(t) => (format!("tmp{t}"), cx.temps[t].dtype),
                };
                lw.line(&format!(
                    "{dst}[{}] = {};",
                    rv.name,
                    ctype::to_storage(d, &e)
                ));
            }
            for ((r, _), t) in spec.totals.iter().zip(&taccs) {
                let shape = f.value(r.x).shape.clone().unwrap_or_default();
                let idx = view::delinearize(Ix::var(rv.name.clone()), &shape);
                let xv = lw.value_at(r.x, &idx)?;
                let acc = r.acc(f);
                let xv = r.to_acc(f, &xv);
                let Kind::Plain(cb) = &r.kind else {
                    unreachable!()
                };
                lw.line(&reduction::step(cb, acc, t, &xv));
            }
            if rv.ok.is_some() {
                lw.close("}");
            }
        }
        lw.close("}");
    }
    let next = lw.next_row.take();
    match next.as_ref().filter(|_| copying) {
        // One buffer: refilled once every pass of this row has read it
        // (each thread reads only its own slots, so no barrier).
        Some(n) if n.single() => next_iteration(&mut lw, n, "0"),
        Some(_) => lw.line("fb_nb ^= 1;"),
        None => {}
    }
    lw.close("}");
    match spec.finish {
        Some(_) if per_block > 1 || row_blocks > 1 => {
            return Err(CodegenError::NoFit(format!(
                "{name}: totals finished in a kernel of {row_blocks} blocks of {per_block} row groups"
            )));
        }
        Some(epilogue) => {
            lw.open(&format!("if ({first_thread}) {{"));
            crate::totals::finish(&mut lw, f, spec.totals, &taccs, epilogue)?;
            lw.close("}");
        }
        None => {
            for ((_, temp), t) in spec.totals.iter().zip(&taccs) {
                let group = if per_block > 1 { " + gr" } else { "" };
                lw.line(&format!(
                    "if ({first_thread}) tmp{temp}[({it})blockIdx.x * {per_block}{group}] = {t};"
                ));
            }
        }
    }
    for (j, (_, temp)) in spec.outer.iter().enumerate() {
        for (c, col) in cols.iter().enumerate() {
            let at = format!("({it})blockIdx.x * {} + {}", spec.cols, col.ii);
            let dtype = cx.temps[*temp].dtype;
            for stmt in store_partials(&format!("tmp{temp}"), &at, &oaccs[j][c], dtype, spec.cols) {
                lw.line(&guarded(col.ok.as_deref(), &stmt));
            }
        }
    }
    // Held rows may ask for more blocks per multiprocessor than their
    // registers allow (`Device::row_min_blocks`); a fixed grid planned with
    // k blocks per multiprocessor asks for k (`Device::row_fit_grid`).
    let mut min_blocks = if spec.whole_row() && !sh.reload { cx.dev.row_min_blocks } else { 0 };
    // A walk re-read so that its planned blocks are resident asks for them
    // (`walk::plan`).
    let rereads = spec.walk.is_some_and(|w| w.reread) && sh.reload;
    if (cx.dev.row_fit_grid || rereads) && spec.row_blocks > 0 {
        let k = (row_blocks * tiles).div_ceil(cx.dev.sm_count.max(1) as usize);
        if k >= 2 && k * block <= cx.dev.max_threads_per_sm as usize {
            min_blocks = min_blocks.max(k as u32);
        }
    }
    let src = format!(
        "{} {{\n{}}}\n",
        signature_fitting(name, block as u32, min_blocks, &params),
        lw.code
    );
    let mut what: Vec<String> = reds
        .iter()
        .map(|r| f.value(r.outputs[0]).name.clone())
        .collect();
    what.extend(
        spec.outer
            .iter()
            .map(|(r, _)| format!("{} (over rows)", f.value(r.outputs[0]).name)),
    );
    what.extend(
        spec.totals
            .iter()
            .map(|(r, _)| match spec.finish {
                Some(_) => format!("{} (over rows, finished here)", f.value(r.outputs[0]).name),
                None => format!("{} (partials over rows)", f.value(r.outputs[0]).name),
            }),
    );
    let layout = if simple {
        String::new()
    } else {
        format!(
            ", {per_block} rows per block, {} of {} threads x {} vectors per row{}",
            sh.active,
            sh.threads,
            sh.vectors,
            if sh.reload { ", re-read each pass" } else { "" }
        )
    };
    let copies = if copied.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = copied.iter().map(|&(v, _, _)| f.value(v).name.as_str()).collect();
        format!(", {} copied to shared memory as each block starts", names.join(", "))
    };
    let walk = spec.walk.map(|w| format!("; {}", w.why)).unwrap_or_default();
    let nexts = match next.as_ref().filter(|_| copying) {
        Some(n) => format!(
            ", the next row's {} vectors{} per thread copied to shared memory {}",
            n.count(16),
            match n.count(4) {
                0 => String::new(),
                s => format!(" and {s} per-row values"),
            },
            if n.single() { "as the row ends, one buffer" } else { "as the row reduces" }
        ),
        None => String::new(),
    };
    let kernel = Kernel {
        shared_bytes: next.as_ref().filter(|_| copying).map_or(0, |n| n.bytes() as u32),
        // Sums over rows alone, on a grid of `column_sum_blocks_per_sm`.
        // A backward norm's rows walked on a grid of `row_blocks_per_sm`.
        fill: match (spec.row_blocks > 0 && !spec.outer.is_empty(), reds.is_empty()) {
            (true, true) => Some(crate::plan::Fill::ColumnSums),
            (true, false) => Some(crate::plan::Fill::Walk),
            _ => None,
        },
        ..Kernel::new(
            name,
            if reds.is_empty() { Schedule::Pointwise } else { Schedule::InnerPersistent },
            [crate::launch::grid_dim(row_blocks), crate::launch::grid_dim(tiles), 1],
            [block as u32, 1, 1],
            params.args,
            format!(
                "row-wise: {} rows of {} in {} row blocks x {tiles} column tiles, {u_rows} rows at a time, {w} elements per thread{layout}, reductions [{}]{copies}{nexts}{walk}",
                spec.rows,
                spec.cols,
                row_blocks,
                what.join(", ")
            ),
        )
    };
    Ok((src, kernel, next))
}

/// The inputs a row kernel copies to shared memory as each block starts
/// (`shared_copies`): where it reduces rows held in registers and reads one
/// row-sized tensor. Measured on the H200: rows of two tensors read (a
/// dropout + residual + norm) ran 3-18% slower with the copy, rows of one
/// 3-25% faster; the cause is not known, so those keep reading where used.
fn copied_inputs(cx: &Context, spec: &Spec, sh: &Shape, block: usize) -> Vec<(ValueId, usize, i64)> {
    if cx.dev.row_prefetch == 2 && !sh.reload && !spec.inner.is_empty() && held(cx.f, spec.rows, spec.cols) < 2 {
        shared_copies(cx, spec, block)
    } else {
        Vec::new()
    }
}

/// Values of rows x columns that the kernel's outputs read and that are a
/// smaller tensor input broadcast over the rows, through casts, broadcasts
/// and reshapes only: loading them needs nothing the row computes.
fn broadcast_inputs(f: &fusebench_ir::Fusion, spec: &Spec) -> Vec<ValueId> {
    use fusebench_ir::{Op, ValueDef};
    let size = spec.rows * spec.cols;
    let numel = |v: ValueId| f.value(v).shape.as_ref().map(|s| s.iter().product::<usize>());
    // Only casts, broadcasts and reshapes between v and a smaller input.
    fn of_small_input(f: &fusebench_ir::Fusion, v: ValueId, size: usize) -> bool {
        let val = f.value(v);
        if let ValueDef::TensorInput(_) = val.def {
            return val.numel() < size;
        }
        match f.producer(v).map(|n| &n.op) {
            Some(
                Op::Cast { x, .. }
                | Op::Broadcast { x, .. }
                | Op::BroadcastInDim { x, .. }
                | Op::Expand { x, .. }
                | Op::Reshape { x, .. },
            ) => of_small_input(f, *x, size),
            _ => false,
        }
    }
    let roots = spec
        .full
        .iter()
        .map(|&(v, _)| v)
        .chain(spec.per_row.iter().map(|&(v, _)| v))
        .chain(spec.outer.iter().map(|(r, _)| r.x));
    let mut found = Vec::new();
    f.walk_up(roots, |v| {
        let broadcast = matches!(
            f.producer(v).map(|n| &n.op),
            Some(Op::Broadcast { .. } | Op::BroadcastInDim { .. } | Op::Expand { .. })
        );
        if broadcast && numel(v) == Some(size) && of_small_input(f, v, size) {
            found.push(v);
            return false;
        }
        true
    });
    found.sort();
    found
}

/// Tensor inputs upstream of `roots`.
fn inputs_under(f: &fusebench_ir::Fusion, roots: impl IntoIterator<Item = ValueId>) -> std::collections::HashSet<ValueId> {
    let mut found = std::collections::HashSet::new();
    f.walk_up(roots, |v| {
        if let fusebench_ir::ValueDef::TensorInput(_) = f.value(v).def {
            found.insert(v);
        }
        true
    });
    found
}

/// The tensor inputs a row kernel copies to shared memory as each block
/// starts, with their input position and element offset: those the outputs
/// broadcast over the rows (`broadcast_inputs`) that no reduction or total
/// reads (they are read before the copy is waited for), laid out row-major
/// in whole 16-byte pieces, within a budget that leaves the multiprocessor's
/// shared memory to as many blocks as its threads allow.
fn shared_copies(cx: &Context, spec: &Spec, block: usize) -> Vec<(ValueId, usize, i64)> {
    let f = cx.f;
    let early = inputs_under(
        f,
        spec.inner
            .iter()
            .map(|r| r.x)
            .chain(spec.totals.iter().map(|(r, _)| r.x)),
    );
    let blocks = (2048 / block.max(1)).max(1);
    let budget = (cx.dev.shared_memory_per_sm as usize / blocks)
        .saturating_sub(1024)
        .min(24 * 1024);
    let mut used = 0;
    let mut out = Vec::new();
    let mut leaves: Vec<ValueId> = inputs_under(f, broadcast_inputs(f, spec)).into_iter().collect();
    leaves.sort();
    for v in leaves {
        let val = f.value(v);
        let Some(pos) = f.inputs.iter().position(|&i| i == v) else { continue };
        let shape = val.shape.clone().unwrap_or_default();
        let rm = fusebench_ir::recipe::row_major_strides(&shape);
        let (strides, offset) = cx.layouts[pos].clone().unwrap_or_else(|| (rm.clone(), 0));
        let size = val.dtype.size_bytes();
        let bytes = val.numel() * size;
        let row_major = shape.iter().zip(strides.iter().zip(&rm)).all(|(&n, (a, b))| n == 1 || a == b);
        if early.contains(&v)
            || !row_major
            || val.dtype.is_complex()
            || val.dtype == DType::Bool
            || bytes == 0
            || !bytes.is_multiple_of(16)
            || (offset * size as i64).rem_euclid(16) != 0
            || used + bytes > budget
        {
            continue;
        }
        used += bytes;
        out.push((v, pos, offset));
    }
    out
}

/// Stores a thread's partials `vals` (consecutive columns from `at`) in
/// stores of up to 16 bytes where the temp's type and alignment allow: the
/// threads of a warp are a vector apart, so one element per store would make
/// each 32-byte sector take one L2 write per element (8 for floats).
fn store_partials(dst: &str, at: &str, vals: &[String], dtype: DType, cols: usize) -> Vec<String> {
    let (ty, lanes): (&str, usize) = match dtype {
        DType::Float => ("float", 4),
        DType::Double => ("double", 2),
        _ => ("", 1),
    };
    // The widest vector dividing both the thread's run and the row length
    // (which keeps every block's partials aligned).
    let n = (1..=lanes)
        .rev()
        .find(|&n: &usize| n.is_power_of_two() && vals.len().is_multiple_of(n) && cols.is_multiple_of(n))
        .unwrap_or(1);
    if n == 1 {
        return (0..vals.len()).map(|k| format!("{dst}[{at} + {k}] = {};", vals[k])).collect();
    }
    vals.chunks(n)
        .enumerate()
        .map(|(i, c)| {
            format!(
                "*reinterpret_cast<{ty}{n}*>(&{dst}[{at} + {}]) = make_{ty}{n}({});",
                i * n,
                c.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without `slack` (its own test below): the registers' share alone.
    fn hold(tensors: usize) -> Holding {
        Holding { slack: false, ..Holding::halves(&crate::device::Device::default(), 2 * tensors) }
    }

    #[test]
    fn slack_takes_one_more_vector_where_fewer_slots_stay_idle() {
        let slack = |cols, width, tensors| {
            let h = Holding { slack: true, ..hold(tensors) };
            shape(cols, width, true, h, None, false).map(|s| (s.threads, s.active, s.vectors))
        };
        // 800 vectors: 160 x 5 (800 slots), not 200 of 224 x 4 (896).
        assert_eq!(whole(6400, 8), Some((224, 200, 4)));
        assert_eq!(slack(6400, 8, 1), Some((160, 160, 5)));
        // 400 vectors: 80 of 96 x 5 (480 slots) against 100 of 128 x 4 (512).
        assert_eq!(slack(3200, 8, 1), Some((96, 80, 5)));
        // An exact cover keeps its shape: 512 vectors as 128 x 4.
        assert_eq!(slack(4096, 8, 1), whole(4096, 8));
        // Two tensors held leave 2 vectors a thread; a third would be half
        // again past the share, not a quarter: no slack.
        assert_eq!(slack(6400, 8, 2), shape(6400, 8, true, hold(2), None, false).map(|s| (s.threads, s.active, s.vectors)));
    }

    fn whole(cols: usize, width: usize) -> Option<(usize, usize, usize)> {
        shape(cols, width, true, hold(1), None, false).map(|s| (s.threads, s.active, s.vectors))
    }

    #[test]
    fn few_rows_are_spread_over_up_to_512_threads() {
        let spread = |cols, width| shape(cols, width, true, hold(1), None, true).map(|s| (s.threads, s.active, s.vectors));
        assert_eq!(spread(4096, 8), Some((512, 512, 1)));
        assert_eq!(spread(1000, 8), Some((128, 125, 1)));
        // Already as spread as a block allows: unchanged.
        assert_eq!(spread(16384, 4), whole(16384, 4));
        // Column tiles (no whole row) keep their shape.
        assert_eq!(
            shape(4096, 8, false, hold(1), None, true).map(|s| s.threads),
            shape(4096, 8, false, hold(1), None, false).map(|s| s.threads)
        );
    }

    #[test]
    fn short_rows_take_one_warp_each() {
        // bf16 (8 per vector): 96 vectors -> 32 threads x 3.
        assert_eq!(whole(768, 8), Some((32, 32, 3)));
        // 125 vectors -> 32 x 4, the last vector of 3 lanes empty.
        assert_eq!(whole(1000, 8), Some((32, 32, 4)));
        // f32 (4 per vector): up to 8 vectors per thread.
        assert_eq!(whole(768, 4), Some((32, 32, 6)));
        assert_eq!(whole(1000, 4), Some((32, 32, 8)));
    }

    #[test]
    fn other_lengths_take_the_fewest_warps_with_idle_lanes() {
        // 400 vectors: 4 per thread, 100 of 128 threads.
        assert_eq!(whole(3200, 8), Some((128, 100, 4)));
        assert_eq!(whole(5120, 8), Some((160, 160, 4)));
        // 1376 vectors (43 x 32): 344 threads x 4 in 11 warps.
        assert_eq!(whole(11008, 8), Some((352, 344, 4)));
        // 800 vectors: 7 per thread, 115 of 128 threads, the last slot of some empty.
        assert_eq!(whole(3200, 4), Some((128, 115, 7)));
        assert_eq!(whole(11008, 4), Some((352, 344, 8)));
    }

    #[test]
    fn long_rows_hold_as_many_vectors_as_the_registers_allow() {
        assert_eq!(whole(14336, 8), Some((448, 448, 4)));
        assert_eq!(whole(16384, 8), Some((512, 512, 4)));
        assert_eq!(whole(14336, 4), Some((448, 448, 8)));
        assert_eq!(whole(16384, 4), Some((512, 512, 8)));
        // Odd lengths read one element at a time.
        assert_eq!(whole(1001, 1), Some((32, 32, 32)));
        assert_eq!(whole(3001, 1), Some((96, 94, 32)));
    }

    #[test]
    fn rows_past_the_registers_do_not_fit() {
        assert_eq!(whole(32768, 8), None);
        assert_eq!(whole(20000, 4), None);
        // Two tensors of rows x columns held: half the row length fits.
        assert_eq!(shape(16384, 8, true, hold(2), None, false), None);
        assert_eq!(shape(8192, 8, true, hold(2), None, false).map(|s| (s.threads, s.vectors)), Some((512, 2)));
        assert_eq!(shape(1000, 3, true, hold(1), None, false), None);
    }

    #[test]
    fn rows_past_the_registers_are_re_read_when_asked() {
        let re = |cols, width, held| {
            shape(cols, width, true, hold(held), Some(1024), false).map(|s| (s.threads, s.active, s.vectors, s.reload))
        };
        // Rows that fit are held whatever is asked.
        assert_eq!(re(8192, 8, 2), Some((512, 512, 2, false)));
        // 2048 vectors: 1024 threads x 2, each summing 16 columns over the rows.
        assert_eq!(re(16384, 8, 2), Some((1024, 1024, 2, true)));
        // 1376 vectors: 2 per thread, 688 of 704 threads.
        assert_eq!(re(11008, 8, 2), Some((704, 688, 2, true)));
        assert_eq!(re(16384, 4, 2), Some((1024, 1024, 4, true)));
        // Past 32 columns per thread: not laid out.
        assert_eq!(re(65536, 8, 2), None);
    }

    #[test]
    fn column_tiles_take_whole_warps_and_idle_tails() {
        let s = shape(4096, 8, false, hold(1), None, false).unwrap();
        assert_eq!((s.threads, s.tiles), (256, 2));
        let t = |cols, width| shape(cols, width, false, hold(1), None, false).map(|s| (s.threads, s.tiles));
        // 96 vectors: one tile of 3 warps.
        assert_eq!(t(768, 8), Some((96, 1)));
        // 1376 vectors = 43 x 32: not 43 blocks of one warp but 6 tiles of 256, the last one 96 full.
        assert_eq!(t(11008, 8), Some((256, 6)));
        // 125 and 400 vectors: no whole warps tile them; the tails idle.
        assert_eq!(t(1000, 8), Some((128, 1)));
        assert_eq!(t(3200, 8), Some((224, 2)));
        assert_eq!(t(1000, 3), None);
    }
}
