//! Totals over rows: a reduction to one element of a value with one element
//! per row of row reductions that one row kernel keeps on chip, computed
//! from them (and inputs, gathers included). The row kernel adds each row's
//! value to a partial of its block and a one-column combine folds the
//! partials in a fixed order (`outer::combine_many`), so the row reductions
//! are neither stored nor re-read and no kernel reduces the per-row values
//! alone (a cross-entropy's mean over rows of logsumexp minus the picked
//! logit: 2 kernels, not 4). `segment/decide.rs` decides which reductions are
//! totals; the row schedules build them.

use crate::device::Device;
use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::Context;
use crate::lower::Lowerer;
use crate::persistent::depends_on;
use crate::reduction::{Kind, Reduction};
use crate::segment::closure;
use crate::view;
use fusebench_ir::{Fusion, ValueDef, ValueId};
use std::collections::{BTreeSet, HashSet};

/// Whether the reductions `deps` (into `all`) can be kept on chip by one row
/// kernel: each over the innermost dims of the same input shape, the fastest
/// dim in memory among them, not a grid reduction, none forced to be stored.
/// Some((input shape, reduced dims)) when they can.
pub fn on_chip(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    dev: Device,
    all: &[Reduction],
    deps: &[usize],
    forced: &BTreeSet<usize>,
) -> Option<(Vec<usize>, usize)> {
    let first = &all[*deps.first()?];
    let shape = f.value(first.x).shape.clone()?;
    deps.iter()
        .all(|&r| {
            let red = &all[r];
            red.is_inner(f)
                && crate::memory::reduces_fastest(f, layouts, red) != Some(false)
                && !crate::grid::wanted(f, red, dev.sm_count)
                && f.value(red.x).shape.as_ref() == Some(&shape)
                && red.dims.len() == first.dims.len()
                && !forced.contains(&r)
        })
        .then_some((shape, first.dims.len()))
}

/// Whether `red` reduces to one element a value with one element per row of
/// row reductions that one row kernel keeps on chip, computed from them (and
/// inputs): Some((those reductions, their input shape, reduced dims)).
pub fn of(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    dev: Device,
    all: &[Reduction],
    red: &Reduction,
    forced: &BTreeSet<usize>,
) -> Option<(Vec<usize>, Vec<usize>, usize)> {
    if !matches!(red.kind, Kind::Plain(_))
        || f.value(red.outputs[0]).numel() != 1
    {
        return None;
    }
    let deps = closure(f, std::iter::once(red.x), all);
    let (shape, k) = on_chip(f, layouts, dev, all, &deps, forced)?;
    let squeeze = |s: &[usize]| s.iter().copied().filter(|&e| e != 1).collect::<Vec<_>>();
    let xs = f.value(red.x).shape.clone().unwrap_or_default();
    (squeeze(&xs) == squeeze(&shape[..shape.len() - k])).then_some((deps, shape, k))
}

/// Computes, at the start of row `row` (a C variable), the parts of the
/// totals' per-row values that do not read the row's reductions: values with
/// one element per row (a target id and the logit it picks), lowered at the
/// index the per-row value reads them at. Their loads then overlap the row's
/// instead of waiting for its reductions; the per-row value finds them bound.
pub fn parts_first(
    lw: &mut Lowerer,
    f: &Fusion,
    totals: &[Reduction],
    reds: &[Reduction],
    rows: usize,
    row: &str,
) -> Result<(), CodegenError> {
    let saved = lw.lanes.take();
    let mut seen = HashSet::new();
    let mut stack: Vec<ValueId> = totals.iter().map(|r| r.x).collect();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        let val = f.value(v);
        if !val.is_tensor() || val.numel() != rows {
            continue;
        }
        if depends_on(f, v, reds).is_empty() {
            let shape = val.shape.clone().unwrap_or_default();
            lw.value_at(v, &view::delinearize(Ix::var(row), &shape))?;
            continue;
        }
        if let ValueDef::Node { node, .. } = val.def {
            if reds.iter().all(|r| r.node != node) {
                stack.extend(f.nodes[node].op.operands());
            }
        }
    }
    lw.lanes = saved;
    Ok(())
}

/// The temps a row kernel's totals go to: with one partial (`slots` 1: one
/// block of one row group), each total's result, one element of its output's
/// dtype, and `true` (the kernel finishes them, `finish`); otherwise `slots`
/// partials of each in its accumulator's type, named `what`, and `false`
/// (a combine folds them).
pub fn temps(
    cx: &mut Context,
    totals: &[usize],
    reds: &[Reduction],
    slots: usize,
    what: &str,
) -> (Vec<(Reduction, usize)>, bool) {
    let here = slots == 1 && !totals.is_empty();
    let temps = totals
        .iter()
        .map(|&i| {
            let red = reds[i].clone();
            let out = cx.f.value(red.outputs[0]);
            let t = if here {
                cx.add_temp(out.dtype, 1, format!("result of {}", out.name))
            } else {
                cx.add_temp(red.acc(cx.f), slots, format!("{what} of {}", out.name))
            };
            (red, t)
        })
        .collect();
    (temps, here)
}

/// Records the totals' results as stored once the kernel that finishes
/// them (`finish`) is built.
pub fn store_results(cx: &mut Context, totals: &[(Reduction, usize)]) {
    for (red, t) in totals {
        cx.store_in(red.outputs[0], *t);
    }
}

/// Where a row kernel would write one partial per total (one block, one
/// row group: a cross-entropy over one row), it finishes the totals itself:
/// each accumulator in `accs` (the first thread's, every row folded in) is
/// converted to its output's dtype and stored to its result temp, then the
/// one-element outputs that read only the totals (`epilogue`) are written.
/// A combine of one partial cost a launch: 1.3 of a 1x4096 cross-entropy's
/// 3.6 us (H200). Emitted inside the first thread's branch.
pub fn finish(
    lw: &mut Lowerer,
    f: &Fusion,
    totals: &[(Reduction, usize)],
    accs: &[String],
    epilogue: &[(ValueId, usize)],
) -> Result<(), CodegenError> {
    let saved = lw.lanes.take();
    let reds: Vec<&Reduction> = totals.iter().map(|(r, _)| r).collect();
    let results: Vec<usize> = totals.iter().map(|&(_, t)| t).collect();
    crate::outer::write_results(lw, f, (&reds, &results), accs, &Ix::c(0), epilogue)?;
    lw.lanes = saved;
    Ok(())
}
