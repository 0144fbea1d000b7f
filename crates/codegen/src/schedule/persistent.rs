//! `persistent` in the registry: one block per row, the row walked in a loop
//! by each pass, so any row length; and reductions over the innermost dims
//! stored for later kernels.

use super::{count, Candidate, Reason, Schedule, Work};
use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::{Context, Stored};
use crate::persistent::{self, RowTarget};
use crate::plan::Kernel;
use crate::reduction::{Kind, Reduction};
use fusebench_ir::{Fusion, ValueId};

pub struct Persistent;

impl Schedule for Persistent {
    fn name(&self) -> &'static str {
        "persistent"
    }

    fn takes(&self, work: &Work) -> bool {
        matches!(work, Work::Rows(_) | Work::Stored { .. })
    }

    fn fits(&self, c: &Candidate, cx: &Context, dev: &Device) -> Result<Reason, Reason> {
        match &c.work {
            Work::Rows(r) if !r.outer.is_empty() => {
                Err("sums over all rows need per-block partials, which it does not keep".into())
            }
            Work::Rows(r) if r.inner.is_empty() => Err("no reduction over the row".into()),
            Work::Rows(r) => Ok(format!(
                "{} over each of {} rows of {}: one block per row walking it in a loop, any row length",
                count(r.inner.len(), "reduction"),
                r.rows(),
                r.cols()
            )),
            Work::Stored { red: i, .. } => {
                let red = &c.reds[*i];
                let xs = c.f.value(red.x).shape.clone().unwrap_or_default();
                if red.is_inner(c.f) && c.reduces_fastest(cx, *i) == Some(false) {
                    Err(format!(
                        "reduces the innermost dims {:?} of {xs:?}, but a kept dim is fastest in memory",
                        red.dims
                    ))
                } else if red.is_inner(c.f) {
                    let k = red.dims.len();
                    let cols: usize = xs[xs.len() - k..].iter().product();
                    let rows: usize = xs[..xs.len() - k].iter().product();
                    let last = xs.last().copied().unwrap_or(1);
                    Ok(match crate::rowwise::shape(cols, c.row_width(last), true, crate::rowwise::Holding::of(dev, c.f, rows, cols, crate::rowwise::Writes::OneStatistic), None, crate::rowwise::spread(rows, 1, dev)) {
                        Some(s) => format!(
                            "reduces the innermost {cols} of each of {rows} rows, results stored: the row fits the registers, so built row-wise ({} of {} threads x {} vectors per row)",
                            s.active, s.threads, s.vectors
                        ),
                        None => format!(
                            "reduces the innermost {cols} of each of {rows} rows: one block per row, results stored"
                        ),
                    })
                } else {
                    Err(format!(
                        "reduces dims {:?} of {xs:?}, not the innermost",
                        red.dims
                    ))
                }
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
            Work::Rows(r) => {
                let reds: Vec<Reduction> = r.inner.iter().map(|&i| c.reds[i].clone()).collect();
                let kept = stored_targets(cx, c.reds, &r.stored);
                let per_row: Vec<(ValueId, RowTarget)> = r
                    .per_row
                    .iter()
                    .map(|&(v, p)| (v, RowTarget::Output(p)))
                    .chain(kept.iter().copied())
                    .collect();
                // One block per row: a total's partials are the rows' values.
                let rows = r.rows().max(1);
                // One row: the kernel finishes the totals itself.
                let (totals, here) = crate::totals::temps(cx, &r.totals, c.reds, rows, "per-row values");
                let spec = persistent::Spec {
                    rows_shape: &r.rows_shape,
                    inner_shape: &r.inner_shape,
                    reductions: &reds,
                    full: &r.full,
                    per_row: &per_row,
                    totals: &totals,
                    finish: here.then_some(&r.totals_epilogue[..]),
                };
                out.push(persistent::build(cx, &c.name, &spec)?);
                record_stored(cx, &kept);
                if here {
                    crate::totals::store_results(cx, &totals);
                } else if !totals.is_empty() {
                    out.push(crate::outer::combine_many(
                        cx,
                        &format!("{}_t", c.name),
                        &totals,
                        rows,
                        1,
                        &r.totals_epilogue,
                    )?);
                }
                Ok(())
            }
            Work::Stored { red, epilogue, .. } => stored(c, &c.reds[*red], epilogue, dev, cx, out),
            Work::Elementwise { .. } => Err(CodegenError::NoFit(format!(
                "persistent: {} has no reduction",
                c.name
            ))),
        }
    }
}

/// One reduction over the innermost dims, its results stored in temporaries
/// that later kernels read (a welford's count is not stored: it is known).
fn stored(
    c: &Candidate,
    red: &Reduction,
    epilogue: &[(ValueId, usize)],
    dev: &Device,
    cx: &mut Context,
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = c.f;
    let xs = f.value(red.x).shape.clone().unwrap();
    let k = red.dims.len();
    let mut per_row = stored_targets(cx, std::slice::from_ref(red), &[0]);
    let stored_rows = per_row.len();
    per_row.extend(epilogue.iter().map(|&(v, p)| (v, RowTarget::Output(p))));
    let spec = persistent::Spec {
        rows_shape: &xs[..xs.len() - k],
        inner_shape: &xs[xs.len() - k..],
        reductions: std::slice::from_ref(red),
        full: &[],
        per_row: &per_row,
        totals: &[],
        finish: None,
    };
    // Rows that fit the registers are built row-wise (several rows per block
    // and in flight per thread); longer ones walk the row in a loop.
    let built = crate::rowwise::instead_of_loop(cx, &c.name, &spec, crate::launch::row_unroll(dev))
        .unwrap_or_else(|| persistent::build(cx, &c.name, &spec))?;
    out.push(built);
    record_stored(cx, &per_row[..stored_rows]);
    Ok(())
}

/// The per-row targets of a row kernel's reductions that later kernels
/// read (`Rows::stored`): a temporary for each result but welford's count.
pub(crate) fn stored_targets(cx: &mut Context, reds: &[Reduction], stored: &[usize]) -> Vec<(ValueId, RowTarget)> {
    let f = cx.f;
    let mut per_row = Vec::new();
    for &i in stored {
        let red = &reds[i];
        for &o in &red.outputs {
            if is_count(f, red, o) {
                continue;
            }
            let val = f.value(o);
            let t = cx.add_temp(val.dtype, val.numel(), format!("{} (stored)", val.name));
            per_row.push((o, RowTarget::Temp(t)));
        }
    }
    per_row
}

/// Records where the row kernel just built stored each of `targets`, for
/// the kernels after it.
pub(crate) fn record_stored(cx: &mut Context, targets: &[(ValueId, RowTarget)]) {
    for &(o, t) in targets {
        let RowTarget::Temp(t) = t else { continue };
        let val = cx.f.value(o);
        let s = Stored { temp: t, dtype: val.dtype, shape: val.shape.clone().unwrap_or_default() };
        cx.stored.insert(o, s);
    }
}

fn is_count(f: &Fusion, r: &Reduction, v: ValueId) -> bool {
    matches!(r.kind, Kind::Welford) && r.outputs.get(2) == Some(&v) && f.value(v).is_tensor()
}
