//! The row-wise schedule: a fusion seen as rows x columns, each thread owning
//! one vector of columns for every row its block visits. Values a thread
//! loads stay in its registers across the passes of a row (an RMSNorm reads x
//! from DRAM once), and sums over rows (the backward passes' weight
//! gradients) accumulate per thread across rows, leaving one partial per
//! block for a combine kernel. Covers normalizations whose row fits one block
//! (inner persistent), their backward passes with column sums (inner-outer),
//! and pointwise work with column sums (columns tiled over blocks).

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{lane_arrays, signature, store_lane_arrays, Context};
use crate::lower::{Lanes, Lowerer};
use crate::passes::Passes;
use crate::persistent::{push_row_outputs, RowTarget};
use crate::plan::{Kernel, Schedule};
use crate::reduction::{self, Kind, Reduction};
use crate::{ctype, view};
use fusebench_ir::ValueId;

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
    /// Outputs over rows x columns: (value, output position).
    pub full: &'a [(ValueId, usize)],
    pub per_row: &'a [(ValueId, RowTarget)],
    /// Blocks along the rows; 0 for one block per group of unrolled rows.
    pub row_blocks: usize,
    /// Rows each block iteration handles together (fewer when rows do not divide).
    pub unroll: usize,
}

/// Threads per block and column tiles for a row of `cols` in vectors of
/// `width`, or None when no whole number of warps covers it.
pub fn shape(cols: usize, width: usize, whole_row: bool) -> Option<(usize, usize)> {
    if !cols.is_multiple_of(width) {
        return None;
    }
    let per_row = cols / width;
    if whole_row {
        return (per_row.is_multiple_of(32) && per_row <= 1024).then_some((per_row, 1));
    }
    (1..=8)
        .rev()
        .map(|w| w * 32)
        .find(|b| per_row.is_multiple_of(*b))
        .map(|b| (b, per_row / b))
}

/// Where in a shape of `rows x cols` elements the element (row, lane) lies.
fn index_of(
    shape: &[usize],
    cols: usize,
    last: usize,
    row: &str,
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
        idx.extend(view::delinearize(Ix::var("q"), &inner[..inner.len() - 1]));
        idx.push(Ix::var("jj").add(Ix::c(lane as i64)));
    }
    Ok(idx)
}

/// Rows each block iteration handles at once: independent rows keep more
/// loads in flight per thread, which is what hides DRAM latency when few
/// blocks walk many rows.
fn unroll(spec: &Spec) -> usize {
    [spec.unroll.max(1), 2, 1]
        .into_iter()
        .find(|&u| spec.rows.is_multiple_of(u) && spec.rows / u >= spec.row_blocks)
        .unwrap_or(1)
}

/// Kernel source lines above which unrolling rows costs more compile time
/// (NVRTC grows faster than linearly with straight-line code) than it gains.
const UNROLLED_LINES_MAX: usize = 1500;

pub fn build(cx: &Context, name: &str, spec: &Spec) -> Result<(String, Kernel), CodegenError> {
    let first = build_unrolled(cx, name, spec, unroll(spec))?;
    if first.0.lines().count() > UNROLLED_LINES_MAX && unroll(spec) > 1 {
        return build_unrolled(cx, name, spec, 1);
    }
    Ok(first)
}

fn build_unrolled(
    cx: &Context,
    name: &str,
    spec: &Spec,
    u_rows: usize,
) -> Result<(String, Kernel), CodegenError> {
    let f = cx.f;
    let w = spec.width;
    let whole_row = !spec.inner.is_empty() || !spec.per_row.is_empty();
    let (block, tiles) = shape(spec.cols, w, whole_row).ok_or_else(|| {
        CodegenError::NoFit(format!(
            "a row of {} does not fit whole warps of {w}-wide vectors",
            spec.cols
        ))
    })?;
    let (mut lw, mut params) = cx.lowerer();
    push_row_outputs(&mut params, f, spec.full, spec.per_row);
    let it = lw.idx_type;
    let reds = spec.inner;
    let passes = Passes::plan(f, reds)?;
    let row_blocks = if spec.row_blocks == 0 {
        spec.rows / u_rows
    } else {
        spec.row_blocks
    };
    if !reds.is_empty() {
        lw.line("__shared__ float fb_sf[32];");
        lw.line("__shared__ double fb_sd[32];");
        lw.line("__shared__ long long fb_si[32];");
    }
    lw.line(&format!(
        "const {it} ii = (({it})blockIdx.y * {block} + threadIdx.x) * {w};"
    ));
    lw.line(&format!("const {it} q = ii / {};", spec.last));
    lw.line(&format!("const {it} jj = ii % {};", spec.last));
    // Sums over rows, one accumulator per lane.
    let mut oaccs: Vec<Vec<String>> = Vec::new();
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
        let names: Vec<String> = (0..w).map(|_| lw.fresh("s")).collect();
        for n in &names {
            lw.line(&format!(
                "{} {n} = {};",
                ctype::reg(acc),
                reduction::init(&c, acc)
            ));
        }
        oaccs.push(names);
    }
    lw.open(&format!(
        "for ({it} row = ({it})blockIdx.x * {u_rows}; row < {}; row += ({it})gridDim.x * {u_rows}) {{",
        spec.rows
    ));
    let row_vars: Vec<String> = (0..u_rows).map(|u| format!("row{u}")).collect();
    for (u, rv) in row_vars.iter().enumerate() {
        lw.line(&format!("const {it} {rv} = row + {u};"));
    }
    lw.allow_vector_loads_here();
    let lanes = |lw: &mut Lowerer, k: usize| {
        lw.lanes = Some(Lanes {
            var: "jj".into(),
            width: w,
            lane: k,
        })
    };
    let mut means: Vec<Vec<Option<String>>> = vec![vec![None; u_rows]; reds.len()];
    for pass in 0..passes.count {
        let active = passes.active(reds, pass);
        // accs[j][u]: accumulator of active reduction j for row u.
        let accs: Vec<Vec<String>> = active
            .iter()
            .map(|&i| {
                (0..u_rows)
                    .map(|_| Passes::declare(&mut lw, f, &reds[i]))
                    .collect()
            })
            .collect();
        for (u, rv) in row_vars.iter().enumerate() {
            for k in 0..w {
                lanes(&mut lw, k);
                for (j, &i) in active.iter().enumerate() {
                    let idx = index_of(
                        f.value(reds[i].x).shape.as_ref().unwrap(),
                        spec.cols,
                        spec.last,
                        rv,
                        k,
                    )?;
                    let xv = lw.value_at(reds[i].x, &idx)?;
                    let stmt =
                        passes.step(f, reds, i, pass, &accs[j][u], &xv, means[i][u].as_deref());
                    lw.line(&stmt);
                }
            }
        }
        lw.lanes = None;
        for (j, &i) in active.iter().enumerate() {
            for (u, rv) in row_vars.iter().enumerate() {
                if let Some(m) = passes.finish(&mut lw, f, reds, i, pass, &accs[j][u], rv) {
                    means[i][u] = Some(m);
                }
            }
        }
    }
    // The rows' outputs and their contributions to the column sums.
    for rv in &row_vars {
        let arrays = lane_arrays(&mut lw, f, spec.full, w);
        for k in 0..w {
            lanes(&mut lw, k);
            for (j, &(v, _)) in spec.full.iter().enumerate() {
                let idx = index_of(
                    f.value(v).shape.as_ref().unwrap(),
                    spec.cols,
                    spec.last,
                    rv,
                    k,
                )?;
                let e = lw.value_at(v, &idx)?;
                let st = ctype::to_storage(f.value(v).dtype, &e);
                lw.line(&format!("{}[{k}] = {st};", arrays[j]));
            }
            for (j, (r, _)) in spec.outer.iter().enumerate() {
                let acc = r.acc(f);
                let idx = index_of(
                    f.value(r.x).shape.as_ref().unwrap(),
                    spec.cols,
                    spec.last,
                    rv,
                    k,
                )?;
                let xv = lw.value_at(r.x, &idx)?;
                let xv = ctype::convert(f.value(r.x).dtype, r.value_dtype(f), &xv);
                let xv = ctype::convert(r.value_dtype(f), acc, &xv);
                let Kind::Plain(c) = &r.kind else {
                    unreachable!()
                };
                lw.line(&reduction::step(c, acc, &oaccs[j][k], &xv));
            }
        }
        lw.lanes = None;
        let at = Ix::var(rv.clone()).mul(spec.cols as i64).add(Ix::var("ii"));
        store_lane_arrays(&mut lw, f, spec.full, &arrays, &at, w);
    }
    if !spec.per_row.is_empty() {
        lw.open("if (threadIdx.x == 0) {");
        for rv in &row_vars {
            for &(v, t) in spec.per_row {
                let shape = f.value(v).shape.clone().unwrap_or_default();
                let idx = view::delinearize(Ix::var(rv.clone()), &shape);
                let e = lw.value_at(v, &idx)?;
                let (dst, d) = match t {
                    RowTarget::Output(pos) => (format!("out{pos}"), f.value(v).dtype),
                    RowTarget::Temp(t) => (format!("tmp{t}"), cx.temps[t].dtype),
                };
                lw.line(&format!("{dst}[{rv}] = {};", ctype::to_storage(d, &e)));
            }
        }
        lw.close("}");
    }
    lw.close("}");
    for (j, (_, temp)) in spec.outer.iter().enumerate() {
        for k in 0..w {
            lw.line(&format!(
                "tmp{temp}[({it})blockIdx.x * {} + ii + {k}] = {};",
                spec.cols, oaccs[j][k]
            ));
        }
    }
    let src = format!(
        "{} {{\n{}}}\n",
        signature(name, block as u32, &params),
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
    let kernel = Kernel {
        name: name.into(),
        schedule: if reds.is_empty() { Schedule::Pointwise } else { Schedule::InnerPersistent },
        grid: [row_blocks as u32, tiles as u32, 1],
        block: [block as u32, 1, 1],
        args: params.args,
        code_hash: String::new(),
        choice: None,
        summary: format!(
            "row-wise: {} rows of {} in {} row blocks x {tiles} column tiles, {u_rows} rows at a time, {w} elements per thread, reductions [{}]",
            spec.rows,
            spec.cols,
            row_blocks,
            what.join(", ")
        ),
    };
    Ok((src, kernel))
}
