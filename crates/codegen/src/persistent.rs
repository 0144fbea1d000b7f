//! The inner-persistent schedule (normalizations: RMSNorm, LayerNorm,
//! softmax): one block per row. Each pass walks the row once to accumulate the
//! reductions whose inputs are ready, reduces across the block, and holds the
//! results in registers; a last pass writes the row's outputs. What later
//! passes would read again from global memory, or compute again, is kept in
//! shared memory by the first (row_cache.rs), as much as leaves two blocks
//! per multiprocessor; the rest is re-read.

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{
    lane_arrays, round_up, signature, store_lane_arrays, vector_width, Context, Params,
};
use crate::lower::{Lanes, Lowerer};
use crate::passes::{Accs, Passes};
use crate::plan::{Kernel, Schedule};
use crate::reduction::{self, Kind, Reduction};
use crate::row_cache::{RowCache, ValueCache};
use crate::{ctype, view};
use fusebench_ir::{DType, Fusion, Op, ValueDef, ValueId};
use std::ops::{Add, Mul};

/// Where a row-sized result goes.
#[derive(Clone, Copy, Debug)]
pub enum RowTarget {
    Output(usize),
    Temp(usize),
}

/// The fusion outputs a row kernel writes, as its parameters: the whole
/// tensors, the per-row results that are outputs, then the outputs that read
/// only totals the kernel finishes itself (`finish`, `totals::finish`).
pub fn push_row_outputs(
    params: &mut Params,
    f: &Fusion,
    full: &[(ValueId, usize)],
    per_row: &[(ValueId, RowTarget)],
    finish: Option<&[(ValueId, usize)]>,
) {
    for &(v, pos) in full {
        params.push_output(f, v, pos);
    }
    for &(v, t) in per_row {
        if let RowTarget::Output(pos) = t {
            params.push_output(f, v, pos);
        }
    }
    for &(v, pos) in finish.unwrap_or_default() {
        params.push_output(f, v, pos);
    }
}

pub struct Spec<'a> {
    pub rows_shape: &'a [usize],
    pub inner_shape: &'a [usize],
    pub reductions: &'a [Reduction],
    /// Outputs of shape rows ++ inner: (value, output position).
    pub full: &'a [(ValueId, usize)],
    /// Values with one element per row.
    pub per_row: &'a [(ValueId, RowTarget)],
    /// Reductions to one element of a per-row value, each with the temp of
    /// its partials: a block is one row, so its partial is the row's value.
    pub totals: &'a [(Reduction, usize)],
    /// One row: the outputs that read only the totals, written here
    /// (`totals::finish`), and `totals`' temps are their results.
    pub finish: Option<&'a [(ValueId, usize)]>,
}

const MAX_BLOCK: usize = 512;

/// Reductions of `set` that `v` depends on.
pub fn depends_on(f: &Fusion, v: ValueId, set: &[Reduction]) -> Vec<usize> {
    let mut out = Vec::new();
    f.walk_up([v], |x| {
        if let ValueDef::Node { node, .. } = f.value(x).def {
            if let Some(i) = set.iter().position(|r| r.node == node) {
                if !out.contains(&i) {
                    out.push(i);
                }
                return false;
            }
        }
        true
    });
    out
}

pub fn build(cx: &Context, name: &str, spec: &Spec) -> Result<(String, Kernel), CodegenError> {
    if !cx.dev.row_cache {
        return lower(cx, name, spec, None, None).map(|(src, k, _)| (src, k));
    }
    // Lowered once to find the loads that later passes repeat, then again
    // with those kept in shared memory (row_cache.rs). Values that cost more
    // to compute again than to keep come first in the budget.
    let n: usize = spec.inner_shape.iter().product();
    let width = row_width(cx.f, spec);
    let budget = cache_budget(cx);
    let mut values = kept_values(cx.f, spec, n, width);
    if values.as_ref().is_some_and(|vc| vc.bytes() > budget) {
        values = None;
    }
    let plain = || lower(cx, name, spec, None, None).map(|(src, k, _)| (src, k));
    // A lowering the caches cannot serve falls back to re-reading.
    let Ok((_, k, survey, vc)) = lower_with(cx, name, spec, Some(RowCache::survey("ii")), values.clone()) else {
        return plain();
    };
    if vc.is_some_and(|vc| vc.reads == 0) {
        values = None;
    }
    let base = values.as_ref().map_or(0, |vc| vc.bytes());
    let step = k.block[0] as usize * width;
    let loads = survey.and_then(|rc| rc.plan(n, step, budget - base, base));
    lower(cx, name, spec, loads, values)
        .map(|(src, k, _)| (src, k))
        .or_else(|_| plain())
}

/// The values the first pass computes that are worth keeping for later
/// passes: a reduction's input that draws random numbers or reads two or
/// more row-sized tensors (the draws, or as many loads, cost more than one
/// shared-memory slot), of a 4- or 8-byte float type.
fn kept_values(f: &Fusion, spec: &Spec, n: usize, width: usize) -> Option<ValueCache> {
    let reds = spec.reductions;
    let passes = Passes::plan(f, reds).ok()?;
    let rows: usize = spec.rows_shape.iter().product();
    let stop: Vec<usize> = reds.iter().map(|r| r.node).collect();
    let mut values: Vec<(ValueId, &'static str, usize)> = Vec::new();
    for i in passes.active(reds, 0) {
        let x = reds[i].x;
        let dt = f.value(x).dtype;
        if values.iter().any(|v| v.0 == x) || !matches!(dt, DType::Float | DType::Double) {
            continue;
        }
        let (mut random, mut full) = (false, 0);
        f.walk_up([x], |v| {
            match &f.value(v).def {
                ValueDef::Node { node, .. } if stop.contains(node) => return false,
                ValueDef::Node { node, .. } => {
                    random |= matches!(f.nodes[*node].op, Op::Rng { .. } | Op::RngLike { .. })
                }
                ValueDef::TensorInput(_) => full += usize::from(f.value(v).numel() == rows * n),
                _ => {}
            }
            true
        });
        if random || full >= 2 {
            values.push((x, ctype::reg(dt), dt.size_bytes()));
        }
    }
    (!values.is_empty()).then(|| ValueCache::new(&values, n, width, "ii"))
}

/// Shared memory a block may keep of its row: what leaves room for two
/// blocks per multiprocessor, less the 1 KiB the driver reserves per block
/// and the kernel's own reduction scratch.
fn cache_budget(cx: &Context) -> usize {
    (cx.dev.shared_memory_per_sm as usize / 2).saturating_sub(2048)
}

fn row_width(f: &Fusion, spec: &Spec) -> usize {
    let last = *spec.inner_shape.last().unwrap_or(&1);
    let dtypes = spec
        .reductions
        .iter()
        .map(|r| f.value(r.x).dtype)
        .chain(spec.full.iter().map(|&(v, _)| f.value(v).dtype))
        .chain(
            f.inputs
                .iter()
                .map(|&i| f.value(i).dtype)
                .filter(|d| d.size_bytes() > 1),
        );
    vector_width(last, dtypes)
}

fn lower(
    cx: &Context,
    name: &str,
    spec: &Spec,
    cache: Option<RowCache>,
    values: Option<ValueCache>,
) -> Result<(String, Kernel, Option<RowCache>), CodegenError> {
    lower_with(cx, name, spec, cache, values).map(|(src, k, rc, _)| (src, k, rc))
}

type Lowered = (String, Kernel, Option<RowCache>, Option<ValueCache>);

fn lower_with(
    cx: &Context,
    name: &str,
    spec: &Spec,
    cache: Option<RowCache>,
    values: Option<ValueCache>,
) -> Result<Lowered, CodegenError> {
    let f = cx.f;
    let reds = spec.reductions;
    let (mut lw, mut params) = cx.lowerer();
    lw.row_cache = cache;
    lw.value_cache = values;
    push_row_outputs(&mut params, f, spec.full, spec.per_row, spec.finish);
    let passes = Passes::plan(f, reds)?;

    let rows: usize = spec.rows_shape.iter().product();
    let n: usize = spec.inner_shape.iter().product();
    let width = row_width(f, spec);
    let block = round_up(n.div_ceil(width), 32).clamp(32, MAX_BLOCK);
    let it = lw.idx_type;
    let cached = lw
        .row_cache
        .as_ref()
        .map_or(0, |rc| rc.bytes())
        .max(lw.value_cache.as_ref().map_or(0, |vc| vc.bytes()));
    if cached > 0 {
        lw.line("extern __shared__ __align__(16) unsigned char fb_rcache[];");
    }
    lw.line("__shared__ float fb_sf[32];");
    lw.line("__shared__ double fb_sd[32];");
    lw.line("__shared__ long long fb_si[32];");
    lw.line(&format!("const {it} row = blockIdx.x;"));
    let row_idx = view::delinearize(Ix::var("row"), spec.rows_shape);
    let mut means: Vec<Option<String>> = vec![None; reds.len()];
    let totals: Vec<Reduction> = spec.totals.iter().map(|(r, _)| r.clone()).collect();
    crate::totals::parts_first(&mut lw, f, &totals, reds, rows, "row")?;

    // Outputs that read none of the row's reductions (a dropout's mask, a
    // residual sum) are written in the first walk, from the values it loads
    // and draws anyway: the last walk would compute them again (the mask's
    // random draws, or the row read back).
    let (early, late): (Vec<_>, Vec<_>) = spec.full.iter().partition(|&&(v, _)| depends_on(f, v, reds).is_empty());
    for pass in 0..passes.count {
        if let Some(rc) = &mut lw.row_cache {
            rc.pass = pass;
        }
        let active = passes.active(reds, pass);
        let split = (cx.dev.row_accumulators as usize).min(width);
        let accs: Vec<Accs> = active
            .iter()
            .map(|&i| Passes::declare(&mut lw, f, &reds[i], split))
            .collect();
        row_loop(&mut lw, spec.inner_shape, width, block, cx.dev.loads_in_flight, |lw| {
            if let Some(vc) = &mut lw.value_cache {
                vc.new_body();
            }
            for k in 0..width {
                let idx = lane_index(lw, &row_idx, spec.inner_shape, width, k);
                keep_at(lw, &idx, k, pass > 0);
                for (j, &i) in active.iter().enumerate() {
                    let xv = lw.value_at(reds[i].x, &idx)?;
                    if let Some(st) = lw.value_cache.as_mut().and_then(|vc| vc.store(reds[i].x, &xv)) {
                        lw.line(&st);
                    }
                    let stmt = passes.step(f, reds, i, pass, accs[j].at(k), &xv, means[i].as_deref());
                    lw.line(&stmt);
                }
            }
            if pass == 0 {
                write_full(lw, f, &early, (&row_idx, spec.inner_shape), width, false)?;
            }
            lw.lanes = None;
            Ok(())
        })?;
        let folded: Vec<(usize, String, String)> =
            active.iter().enumerate().map(|(j, &i)| (i, Passes::fold(&mut lw, f, &reds[i], &accs[j]), "row".to_string())).collect();
        for ((i, _, _), m) in folded.iter().zip(passes.finish_all(&mut lw, f, reds, pass, &folded, cx.dev.block_pairs)) {
            if let Some(m) = m {
                means[*i] = Some(m);
            }
        }
    }

    if let Some(rc) = &mut lw.row_cache {
        rc.pass = passes.count;
    }
    if !late.is_empty() {
        row_loop(&mut lw, spec.inner_shape, width, block, cx.dev.loads_in_flight, |lw| {
            write_full(lw, f, &late, (&row_idx, spec.inner_shape), width, true)?;
            lw.lanes = None;
            Ok(())
        })?;
    }
    if !spec.per_row.is_empty() || !spec.totals.is_empty() {
        lw.open("if (threadIdx.x == 0) {");
        for &(v, t) in spec.per_row {
            let shape = f.value(v).shape.clone().unwrap_or_default();
            let idx = view::delinearize(Ix::var("row"), &shape);
            let e = lw.value_at(v, &idx)?;
            let dst = match t {
                RowTarget::Output(pos) => format!("out{pos}"),
                RowTarget::Temp(t) => format!("tmp{t}"),
            };
            let st = ctype::to_storage(
                if let RowTarget::Temp(t) = t {
                    cx.temps[t].dtype
                } else {
                    f.value(v).dtype
                },
                &e,
            );
            lw.line(&format!("{dst}[row] = {st};"));
        }
        let mut accs = Vec::new();
        for (r, t) in spec.totals {
            let shape = f.value(r.x).shape.clone().unwrap_or_default();
            let idx = view::delinearize(Ix::var("row"), &shape);
            let e = lw.value_at(r.x, &idx)?;
            let e = ctype::convert(f.value(r.x).dtype, r.value_dtype(f), &e);
            let e = ctype::convert(r.value_dtype(f), r.acc(f), &e);
            match spec.finish {
                None => lw.line(&format!("tmp{t}[row] = {e};")),
                Some(_) => {
                    // The one row's value folded as a combine would fold it.
                    let Kind::Plain(op) = &r.kind else {
                        return Err(CodegenError::NoFit("a total that is not a plain reduction".into()));
                    };
                    let a = lw.fresh("t");
                    lw.line(&format!("{} {a} = {};", ctype::reg(r.acc(f)), reduction::init(op, r.acc(f))));
                    lw.line(&reduction::step(op, r.acc(f), &a, &e));
                    accs.push(a);
                }
            }
        }
        if let Some(epilogue) = spec.finish {
            crate::totals::finish(&mut lw, f, spec.totals, &accs, epilogue)?;
        }
        lw.close("}");
    }
    let src = format!(
        "{} {{\n{}}}\n",
        signature(name, block as u32, &params),
        lw.code
    );
    let what: Vec<String> = reds
        .iter()
        .map(|r| f.value(r.outputs[0]).name.clone())
        .chain(
            spec.totals
                .iter()
                .map(|(r, _)| match spec.finish {
                    Some(_) => format!("{} (one row, finished here)", f.value(r.outputs[0]).name),
                    None => format!("{} (per-row values for its combine)", f.value(r.outputs[0]).name),
                }),
        )
        .collect();
    let kernel = Kernel {
        shared_bytes: cached as u32,
        ..Kernel::new(
            name,
            Schedule::InnerPersistent,
            [crate::launch::grid_dim(rows.max(1)), 1, 1],
            [block as u32, 1, 1],
            params.args,
            format!(
                "inner persistent: {rows} rows of {n}, {width} elements per thread, {} passes, reductions {}{}",
                passes.count,
                what.join(", "),
                match (&lw.row_cache, &lw.value_cache) {
                    (Some(rc), _) if cached > 0 => format!(
                        "; the first {} of each row's elements that later passes re-read kept in shared memory{} ({cached} bytes per block)",
                        rc.cap(),
                        if lw.value_cache.is_some() { ", and the values computed from them" } else { "" }
                    ),
                    (None, Some(_)) if cached > 0 => format!(
                        "; the values later passes re-read kept in shared memory as the first pass computes them ({cached} bytes per block)"
                    ),
                    _ => String::new(),
                }
            ),
        )
    };
    Ok((src, kernel, lw.row_cache, lw.value_cache))
}

/// Writes `outputs` (row-sized) at the walk's position `ii` of row `row`;
/// `reading`: later passes' values kept by the value cache are read back.
fn write_full(
    lw: &mut Lowerer,
    f: &Fusion,
    outputs: &[(ValueId, usize)],
    (row_idx, inner): (&[Ix], &[usize]),
    width: usize,
    reading: bool,
) -> Result<(), CodegenError> {
    if outputs.is_empty() {
        return Ok(());
    }
    let arrays = lane_arrays(lw, f, outputs, width);
    let mut stores = crate::kernel::LaneStores::new(arrays.len(), width);
    for k in 0..width {
        let idx = lane_index(lw, row_idx, inner, width, k);
        keep_at(lw, &idx, k, reading);
        for (j, &(v, _)) in outputs.iter().enumerate() {
            let e = lw.value_at(v, &idx)?;
            stores.put(lw, f.value(v).dtype, (&arrays[j], j), k, &e);
        }
    }
    lw.lanes = None;
    let n: usize = inner.iter().product();
    let at = Ix::var("row").mul(n as i64).add(Ix::var("ii"));
    store_lane_arrays(lw, f, outputs, &arrays, &at, width);
    Ok(())
}

/// Tells the value cache which element lane `k` computes, and whether this
/// pass reads the kept values or stores them.
fn keep_at(lw: &mut Lowerer, idx: &[Ix], k: usize, reading: bool) {
    if let Some(vc) = &mut lw.value_cache {
        vc.at = Some((idx.to_vec(), k));
        vc.reading = reading;
    }
}

/// A loop of the block's threads along the row, `batch` iterations' loads
/// issued together (`strided::emit`); `body` writes one iteration at `ii`.
fn row_loop(
    lw: &mut Lowerer,
    inner: &[usize],
    width: usize,
    block: usize,
    batch: u32,
    mut body: impl FnMut(&mut Lowerer) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    let it = lw.idx_type;
    let n: usize = inner.iter().product();
    let start = format!("threadIdx.x * {width}");
    let step = (block * width).to_string();
    crate::strided::emit(lw, it, "ii", &start, &n.to_string(), &step, batch.max(1) as usize, |lw| {
        if inner.len() > 1 {
            let last = inner[inner.len() - 1];
            lw.line(&format!("const {it} q = ii / {last};"));
            lw.line(&format!("const {it} jj = ii % {last};"));
        }
        lw.allow_vector_loads_here();
        body(lw)
    })
}

fn lane_index(
    lw: &mut Lowerer,
    row_idx: &[Ix],
    inner: &[usize],
    width: usize,
    k: usize,
) -> Vec<Ix> {
    let var = if inner.len() > 1 { "jj" } else { "ii" };
    lw.lanes = Some(Lanes {
        var: var.into(),
        width,
        lane: k,
    });
    let mut idx = row_idx.to_vec();
    if inner.len() > 1 {
        idx.extend(view::delinearize(Ix::var("q"), &inner[..inner.len() - 1]));
    }
    if !inner.is_empty() {
        idx.push(Ix::var(var).add(Ix::c(k as i64)));
    }
    idx
}
