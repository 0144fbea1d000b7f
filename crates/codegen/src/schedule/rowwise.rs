//! `rowwise` in the registry: rows whose columns fit whole warps of one block
//! (or column tiles, for sums over rows), values held in registers across a
//! row's passes. Launch numbers come from `crate::launch`.

use super::{Candidate, Reason, Rows, Schedule, Work};
use crate::device::{ColumnSums, Device};
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::persistent::RowTarget;
use crate::plan::Kernel;
use crate::reduction::{Kind, Reduction};
use fusebench_ir::{Fusion, ValueId};

pub struct Rowwise;

/// Rows and row dims of a stored reduction that is a plain sum over its
/// leading dims (a weight gradient over batch x sequence), which a row-wise
/// kernel over the same rows x columns can carry; or why it is not one.
pub fn row_sums(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    red: &Reduction,
    dev: &Device,
) -> Result<(Vec<usize>, Vec<usize>), Reason> {
    let xs = f.value(red.x).shape.clone().unwrap_or_default();
    let k0 = red.dims.len();
    if red.is_inner(f) {
        return Err(format!(
            "reduces the innermost dims {:?} of {xs:?}, not over rows",
            red.dims
        ));
    }
    if crate::grid::wanted(f, red, dev.sm_count) {
        return Err("few results over many elements each (a grid reduction)".into());
    }
    if crate::grid::down_columns(f, layouts, red) {
        return Err(format!(
            "reduces dims {:?} of {xs:?}, which hold the dim fastest in memory: not rows",
            red.dims
        ));
    }
    if !matches!(red.kind, Kind::Plain(_)) {
        return Err("a mean-based statistic, not a plain sum over rows".into());
    }
    if !red.dims.iter().enumerate().all(|(i, &d)| i == d) {
        return Err(format!(
            "reduces dims {:?} of {xs:?}, not the leading ones",
            red.dims
        ));
    }
    if k0 == xs.len() {
        return Err(format!("reduces every dim of {xs:?}"));
    }
    Ok((xs[..k0].to_vec(), xs[k0..].to_vec()))
}

/// Threads that re-read each row of `r` in vectors of `w`, when sums over
/// its rows are waiting to join; `None` when the row is held.
fn reload_threads(r: &Rows, w: usize, dev: &Device) -> Option<usize> {
    (r.reload > 0).then(|| crate::launch::reload_threads(dev, r.cols(), w, r.reload))
}

/// Whether rows of `cols` in vectors of `w` fit `rowwise::shape`, in words.
fn shape_reason(
    c: &Candidate,
    (rows, reductions, written): (usize, usize, crate::rowwise::Writes),
    cols: usize,
    w: usize,
    whole: bool,
    reload: Option<usize>,
    dev: &Device,
) -> Result<Reason, Reason> {
    let spread = crate::rowwise::spread(rows, reductions, dev);
    let d = c
        .narrowest()
        .map(|d| format!(" {}", d.torch_name()))
        .unwrap_or_default();
    let vectors = cols / w.max(1);
    let held = crate::rowwise::held(c.f, rows, cols);
    match crate::rowwise::shape(cols, w, whole, crate::rowwise::Holding::of(dev, c.f, rows, cols, written), reload, spread) {
        Some(s) if s.threads > dev.max_threads_per_block as usize => Err(format!(
            "a row of {cols}{d} needs {} threads; the device allows {} per block",
            s.threads, dev.max_threads_per_block
        )),
        Some(s) if s.reload => Ok(format!(
            "row of {cols}{d} = {vectors} vectors of {w}, past the registers ({held} tensors read), with sums over rows to carry: \
             re-read in each pass by {} of {} threads x {} vectors, each thread's column sums held over the rows; {rows} rows",
            s.active, s.threads, s.vectors
        )),
        Some(s) if whole => Ok(format!(
            "row of {cols}{d} = {vectors} vectors of {w} held by {} of {} threads x {} vectors; {rows} rows{}",
            s.active,
            s.threads,
            s.vectors,
            if spread {
                format!(", fewer than the {} SMs and one reduction: each row spread over the most threads", dev.sm_count)
            } else {
                String::new()
            }
        )),
        Some(s) => Ok(format!(
            "{rows} rows of {cols}{d} = {vectors} vectors of {w}: {} column tiles of {} threads, each thread summing its columns over the rows",
            s.tiles, s.threads
        )),
        None if !cols.is_multiple_of(w) => Err(format!(
            "a row of {cols} is not a whole number of {w}-wide vectors"
        )),
        None if whole => Err(format!(
            "row of {cols}{d} = {vectors} vectors of {w}: more than the registers of one block hold ({} values per thread, {} per block, x {held} tensors read)",
            crate::rowwise::HELD_MAX,
            dev.block_held
        )),
        None => Err(format!(
            "row of {cols}{d} = {vectors} vectors of {w}: no block of whole warps tiles it"
        )),
    }
}

impl Schedule for Rowwise {
    fn name(&self) -> &'static str {
        "rowwise"
    }

    fn takes(&self, work: &Work) -> bool {
        matches!(work, Work::Rows(_) | Work::Stored { .. })
    }

    fn fits(&self, c: &Candidate, cx: &Context, dev: &Device) -> Result<Reason, Reason> {
        match &c.work {
            Work::Rows(r) => {
                let whole = !r.inner.is_empty() || !r.per_row.is_empty();
                let w = c.row_width(r.last());
                let written = crate::rowwise::writes(r.full.len(), r.outer.len(), r.inner.len());
                shape_reason(c, (r.rows(), r.inner.len() + r.totals.len(), written), r.cols(), w, whole, reload_threads(r, w, dev), dev)
            }
            Work::Stored {
                red, before_rows, joined, ..
            } => {
                let (rows, inner) = row_sums(c.f, &cx.layouts, &c.reds[*red], dev)?;
                if *before_rows {
                    return Err("read by another stored reduction, so computed on its own before the row kernels".into());
                }
                match dev.column_sums {
                    ColumnSums::Outer => {
                        return Err("a stored sum over rows, which FUSEBENCH_COLUMN_SUMS=outer gives to the outer schedule".into())
                    }
                    ColumnSums::Joined if !joined => {
                        return Err("a stored sum over rows with no elementwise output over the same rows to write beside it: the outer schedule's (FUSEBENCH_COLUMN_SUMS=joined)".into())
                    }
                    _ => {}
                }
                let cols: usize = inner.iter().product();
                let w = c.row_width(*inner.last().unwrap_or(&1));
                shape_reason(c, (rows.iter().product(), 0, crate::rowwise::Writes::Rows), cols, w, false, None, dev)
            }
            Work::Elementwise { .. } => Err("elementwise work, no reduction".into()),
        }
    }

    fn build(
        &self,
        c: &Candidate,
        dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError> {
        match &c.work {
            Work::Rows(r) => build_rows(c, r, dev, cx, out),
            Work::Stored { red, .. } => {
                let (rows_shape, inner_shape) = row_sums(c.f, &cx.layouts, &c.reds[*red], dev)
                    .map_err(CodegenError::NoFit)?;
                let r = Rows {
                    rows_shape,
                    inner_shape,
                    outer: vec![*red],
                    ..Rows::default()
                };
                build_rows(c, &r, dev, cx, out)
            }
            Work::Elementwise { .. } => Err(CodegenError::NoFit(format!(
                "rowwise: {} has no rows",
                c.name
            ))),
        }
    }

    fn carries_row_sums(&self) -> bool {
        true
    }
}

/// The row kernel, and with sums over rows the kernel that combines their
/// per-block partials (and writes the outputs that read only those sums).
fn build_rows(
    c: &Candidate,
    r: &Rows,
    dev: &Device,
    cx: &mut Context,
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = c.f;
    let (rows, cols, last) = (r.rows(), r.cols(), r.last());
    let w = c.row_width(last);
    let whole = !r.inner.is_empty() || !r.per_row.is_empty();
    let reload = reload_threads(r, w, dev);
    let reductions = r.inner.len() + r.totals.len();
    let spread = crate::rowwise::spread(rows, reductions, dev);
    let written = crate::rowwise::writes(r.full.len(), r.outer.len(), r.inner.len());
    let shape = crate::rowwise::shape(cols, w, whole, crate::rowwise::Holding::of(dev, c.f, rows, cols, written), reload, spread).ok_or_else(|| {
        CodegenError::NoFit(format!("{}: a row of {cols} does not fit rowwise", c.name))
    })?;
    let tiles = shape.tiles;
    let mut row_blocks = crate::launch::row_blocks(
        dev,
        rows,
        (tiles, shape.threads),
        !r.inner.is_empty(),
        !r.outer.is_empty(),
    );
    // A fixed grid walking the rows with sums over them: its blocks and
    // whether it re-reads its rows, from its estimated registers.
    let walk = match (row_blocks > 0 && !r.inner.is_empty() && !r.outer.is_empty() && !spread, tiles) {
        (true, 1) => crate::rowwise::walk_registers(cx, (rows, cols, w), &shape, (row_blocks, reload), r.outer.len(), r.inner.len())
            .map(|(held, reread)| crate::walk::plan(dev, rows, shape.threads, row_blocks, held, reread)),
        _ => None,
    };
    if let Some(walked) = &walk {
        row_blocks = walked.row_blocks;
    }
    let outer: Vec<(Reduction, usize)> = r
        .outer
        .iter()
        .map(|&i| {
            let red = c.reds[i].clone();
            let t = cx.add_temp(
                red.acc(f),
                row_blocks.max(1) * cols,
                format!("row-block partials of {}", f.value(red.outputs[0]).name),
            );
            (red, t)
        })
        .collect();
    let inner: Vec<Reduction> = r.inner.iter().map(|&i| c.reds[i].clone()).collect();
    let kept = super::persistent::stored_targets(cx, c.reds, &r.stored);
    let per_row: Vec<(ValueId, RowTarget)> = r
        .per_row
        .iter()
        .map(|&(v, p)| (v, RowTarget::Output(p)))
        .chain(kept.iter().copied())
        .collect();
    // Totals: one partial per row group of a block; the kernel's grid (known
    // once built: unrolling decides it) says how many were written.
    let groups = crate::rowwise::groups_per_block(cx, rows, cols, w, &outer, (whole, reductions, written), reload)?;
    let slots = rows.div_ceil(groups).max(row_blocks) * groups;
    // One partial: the row kernel finishes the totals itself.
    let (totals, here) = crate::totals::temps(cx, &r.totals, c.reds, slots, "row-group partials");
    let spec = crate::rowwise::Spec {
        rows,
        cols,
        last,
        width: w,
        inner: &inner,
        outer: &outer,
        totals: &totals,
        finish: here.then_some(&r.totals_epilogue[..]),
        full: &r.full,
        per_row: &per_row,
        row_blocks,
        unroll: crate::launch::row_unroll(dev),
        reload,
        walk: walk.as_ref(),
    };
    let built = crate::rowwise::build(cx, &c.name, &spec)?;
    let written = built.1.grid[0] as usize * groups;
    out.push(built);
    super::persistent::record_stored(cx, &kept);
    if here {
        crate::totals::store_results(cx, &totals);
    } else if !totals.is_empty() {
        out.push(crate::outer::combine_many(
            cx,
            &format!("{}_t", c.name),
            &totals,
            written,
            1,
            &r.totals_epilogue,
        )?);
    }
    if !outer.is_empty() {
        out.push(crate::outer::combine_many(
            cx,
            &format!("{}_c", c.name),
            &outer,
            row_blocks,
            cols,
            &r.epilogue,
        )?);
    }
    Ok(())
}
