//! What kernels a fusion takes, before any is built: which groups of
//! outputs keep their reductions on chip in a row kernel, which reductions
//! are stored by kernels of their own (and what those kernels also write),
//! and which groups are left to elementwise kernels. Each step below is one
//! decision, taken in the order `units` calls them; `build.rs` then builds
//! the units in the order they run.

use super::{closure, direct, Failure, Group};
use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::{Choice, Kernel};
use crate::reduction::Reduction;
use crate::schedule::{self, Candidate, Rows, Schedule, Work};
use fusebench_ir::{Fusion, ValueId};
use std::collections::{BTreeMap, BTreeSet};

/// What a plan is decided from: the fusion, its inputs' layouts, the device,
/// the written outputs grouped by shape, every reduction not computed inline
/// and those that must be stored (a fallback from an on-chip plan).
pub(super) struct Inputs<'a> {
    pub f: &'a Fusion,
    pub layouts: &'a [Option<(Vec<i64>, i64)>],
    pub dev: Device,
    pub groups: &'a [Group],
    pub all_reds: &'a [Reduction],
    pub forced: &'a BTreeSet<usize>,
}

impl<'a> Inputs<'a> {
    pub fn cand(&self, name: String, work: Work) -> Candidate<'a> {
        Candidate { f: self.f, reds: self.all_reds, name, work }
    }
}

/// Whether the values read a scan, sort, topk, scatter or accumulate of a
/// value computed from a reduction: such an op has a kernel of its own, built
/// just before its first reader once the reductions it reads are stored, so
/// the kernel that computes one of them cannot also write what reads the op.
fn reads_late_kernel(f: &Fusion, values: impl Iterator<Item = ValueId>, all_reds: &[Reduction]) -> bool {
    let mut found = false;
    f.walk_up(values, |v| {
        if let Some(n) = f.producer(v) {
            if matches!(n.op, fusebench_ir::Op::Scan { .. }) || crate::index::is_special(&n.op) {
                found |= !closure(f, n.op.operands().into_iter(), all_reds).is_empty();
            }
        }
        !found
    });
    found
}

/// The units a plan builds, by kind, each with its schedule chosen.
pub(super) struct Units<'a> {
    /// Row kernels whose schedule carries sums over rows.
    pub carrying: Vec<Unit<'a>>,
    /// The other row kernels.
    pub looped: Vec<Unit<'a>>,
    /// Stored reductions with kernels of their own, by reduction.
    pub standalone: BTreeMap<usize, Unit<'a>>,
    /// Stored reductions that also write a pointwise group laid out over
    /// their reduced elements (`Device::contiguous_join`).
    pub joined: Vec<(usize, Unit<'a>)>,
    /// Groups left to elementwise kernels of their own, whose schedules are
    /// chosen when built, with the stored results they read in place.
    pub pointwise: Vec<usize>,
    /// By scan node: the outputs its kernel writes, and whether anything
    /// else reads it (it is then stored). Scans not here are stored.
    pub scans: BTreeMap<usize, (Vec<(ValueId, usize)>, bool)>,
}

/// Every decision, in order.
pub(super) fn units<'a>(s: &Inputs<'a>, cx: &Context) -> Result<Units<'a>, Failure> {
    let (mut norms, mut pointwise, mut store) = on_chip(s);
    if s.dev.rows_store {
        stored_by_rows(s, &mut norms, &mut store);
    }
    let (mut carrying, mut looped) = row_units(s, cx, norms, &store)?;
    let mut standalone = stored_units(s, cx, &store, &mut carrying, &mut pointwise)?;
    store_what_they_read(s, cx, &mut standalone, &carrying, &looped)?;
    totals_combined_first(s, &standalone, &carrying, &looped)?;
    if s.dev.siblings {
        siblings(s, &mut standalone);
    }
    let mut joined = contiguous_joins(s, &mut standalone, &mut pointwise);
    combine_epilogues(s, &mut carrying, &mut looped, &mut pointwise);
    stored_epilogues(s, &mut standalone, &mut joined, &mut pointwise);
    let scans = scan_epilogues(s, &mut pointwise);
    Ok(Units { carrying, looped, standalone, joined, pointwise, scans })
}

/// A group of rows x columns whose reductions a row kernel keeps on chip.
struct Norm {
    /// The kernel's name.
    name: String,
    /// The group of written outputs over rows x columns it was made for;
    /// None for one made for outputs with one element per row only, or
    /// for reductions over all its rows (`totals`).
    group: Option<usize>,
    reds: Vec<usize>,
    rows: Vec<usize>,
    inner: Vec<usize>,
    per_row: Vec<(ValueId, usize)>,
    totals: Vec<usize>,
    /// Of `reds`, those later kernels read too, stored by this row kernel.
    stored: Vec<usize>,
}

/// Which groups keep their reductions on chip (`Norm`s), which are left
/// pointwise, and which reductions are stored.
fn on_chip(s: &Inputs) -> (Vec<Norm>, Vec<usize>, BTreeSet<usize>) {
    let (f, layouts, dev, groups, all_reds, forced) = (s.f, s.layouts, s.dev, s.groups, s.all_reds, s.forced);
    // Which groups keep their reductions on chip.
    let mut norms: Vec<Norm> = Vec::new();
    let mut pointwise_groups: Vec<usize> = Vec::new();
    let mut store: BTreeSet<usize> = forced.clone();
    for (gi, (shape, outs)) in groups.iter().enumerate() {
        let deps = closure(f, outs.iter().map(|o| o.0), all_reds);
        let fits = crate::totals::on_chip(f, layouts, dev, all_reds, &deps, forced)
            .is_some_and(|(s, _)| &s == shape);
        if fits {
            let k = all_reds[deps[0]].dims.len();
            norms.push(Norm {
                name: format!("fb_n{gi}"),
                group: Some(gi),
                reds: deps,
                rows: shape[..shape.len() - k].to_vec(),
                inner: shape[shape.len() - k..].to_vec(),
                per_row: vec![],
                totals: vec![],
                stored: vec![],
            });
        } else {
            pointwise_groups.push(gi);
        }
    }
    // A group with one element per row of a normalization, reading only its
    // reductions, is written by that kernel. Without one, a group reading
    // two or more reductions of the same rows that fit on chip gets a row
    // kernel of its own (a logsumexp: the maximum, then the sum of
    // exponentials, the row read once), rather than a kernel per stored
    // reduction.
    pointwise_groups.retain(|&gi| {
        let (shape, outs) = &groups[gi];
        let deps = closure(f, outs.iter().map(|o| o.0), all_reds);
        let squeeze = |s: &[usize]| s.iter().copied().filter(|&e| e != 1).collect::<Vec<_>>();
        for nm in norms.iter_mut() {
            if squeeze(shape) == squeeze(&nm.rows)
                && !deps.is_empty()
                && deps.iter().all(|d| nm.reds.contains(d))
            {
                nm.per_row.extend(outs.iter().copied());
                return false;
            }
        }
        let on_chip = (deps.len() >= 2)
            .then(|| crate::totals::on_chip(f, layouts, dev, all_reds, &deps, forced))
            .flatten()
            .filter(|(s, k)| squeeze(shape) == squeeze(&s[..s.len() - k]));
        let Some((s, k)) = on_chip else {
            return true;
        };
        norms.push(Norm {
            name: format!("fb_n{gi}"),
            group: None,
            reds: deps,
            rows: s[..s.len() - k].to_vec(),
            inner: s[s.len() - k..].to_vec(),
            per_row: outs.clone(),
            totals: vec![],
            stored: vec![],
        });
        false
    });
    for &gi in &pointwise_groups {
        store.extend(direct(f, groups[gi].1.iter().map(|o| o.0), all_reds));
    }
    // A reduction to one element of a value with one element per row of
    // row reductions held on chip, computed from those reductions (and
    // inputs, gathers included), is accumulated by their row kernel, which
    // leaves one partial per block for a combine kernel: the row reductions
    // are then neither stored nor re-read (a cross-entropy's mean over rows
    // of logsumexp minus the picked logit).
    let totals: Vec<(usize, Vec<usize>, Vec<usize>, usize)> = store
        .iter()
        .filter(|r| !forced.contains(r))
        .filter_map(|&r| {
            let (deps, shape, k) = crate::totals::of(f, layouts, dev, all_reds, &all_reds[r], forced)?;
            Some((r, deps, shape, k))
        })
        .collect();
    for (r, deps, shape, k) in totals {
        store.remove(&r);
        let (rows, inner) = (shape[..shape.len() - k].to_vec(), shape[shape.len() - k..].to_vec());
        match norms.iter_mut().find(|nm| nm.rows == rows && nm.inner == inner) {
            Some(nm) => {
                nm.reds.extend(deps);
                nm.reds.sort_unstable();
                nm.reds.dedup();
                nm.totals.push(r);
            }
            None => norms.push(Norm {
                name: format!("fb_t{}", all_reds[r].node),
                group: None,
                reds: deps,
                rows,
                inner,
                per_row: vec![],
                totals: vec![r],
                stored: vec![],
            }),
        }
    }

    (norms, pointwise_groups, store)
}

/// Stored reductions that a row kernel keeps on chip anyway (an instance
/// norm backward's two sums per image plane, which its gradient reads on
/// chip and the weight's gradient reads after a sum over the batch) are
/// stored by that row kernel rather than computed first by kernels of their
/// own that read its input again. Only those read by elementwise kernels
/// alone, which run after the row kernels: not by another stored reduction
/// or a row kernel's sums (built before or beside it), nor by a scan or an
/// op of the index family (built before their first reader).
fn stored_by_rows(s: &Inputs, norms: &mut [Norm], store: &mut BTreeSet<usize>) {
    let (f, all_reds) = (s.f, s.all_reds);
    let read_by_reduction: BTreeSet<usize> = (0..all_reds.len())
        .flat_map(|q| direct(f, std::iter::once(all_reds[q].x), all_reds).into_iter().filter(move |&r| r != q))
        .collect();
    let mut read_late = BTreeSet::new();
    for n in &f.nodes {
        if matches!(n.op, fusebench_ir::Op::Scan { .. }) || crate::index::is_special(&n.op) {
            read_late.extend(direct(f, n.op.operands().into_iter(), all_reds));
        }
    }
    store.retain(|&r| {
        if s.forced.contains(&r) || read_by_reduction.contains(&r) || read_late.contains(&r) {
            return true;
        }
        match norms.iter_mut().find(|nm| nm.reds.contains(&r)) {
            Some(nm) => {
                nm.stored.push(r);
                false
            }
            None => true,
        }
    });
}

/// Each normalization's row kernel with its schedule: (those that carry
/// sums over rows, the others).
fn row_units<'a>(
    s: &Inputs<'a>,
    cx: &Context,
    norms: Vec<Norm>,
    store: &BTreeSet<usize>,
) -> Result<(Vec<Unit<'a>>, Vec<Unit<'a>>), Failure> {
    let (f, layouts, dev, groups, all_reds) = (s.f, s.layouts, s.dev, s.groups, s.all_reds);
    // Each normalization's rows are laid out by the first schedule that
    // fits; sums over rows may join the kernels that carry them.
    let mut carrying: Vec<Unit> = Vec::new();
    let mut looped: Vec<Unit> = Vec::new();
    for nm in norms {
        let name = nm.name;
        let (n_rows, n_cols, last) = (
            nm.rows.iter().product::<usize>(),
            nm.inner.iter().product::<usize>(),
            nm.inner.last().copied().unwrap_or(1),
        );
        let reload = store.iter().filter(|&&r| {
            schedule::row_sums(f, layouts, &all_reds[r], &dev).is_ok_and(|(rs, is)| {
                rs.iter().product::<usize>() == n_rows
                    && is.iter().product::<usize>() == n_cols
                    && is.last() == Some(&last)
            })
        }).count();
        let rows = Rows {
            rows_shape: nm.rows,
            inner_shape: nm.inner,
            inner: nm.reds,
            stored: nm.stored,
            full: nm.group.map(|g| groups[g].1.clone()).unwrap_or_default(),
            per_row: nm.per_row,
            totals: nm.totals,
            reload,
            ..Rows::default()
        };
        let u = Unit::chosen(s.cand(name, Work::Rows(rows)), cx, &dev)?;
        if u.schedule.carries_row_sums() {
            carrying.push(u);
        } else {
            looped.push(u);
        }
    }
    Ok((carrying, looped))
}

/// Stored reductions: joined to a row kernel carrying sums over the same
/// rows x columns, a row kernel of their own (with the pointwise group over
/// those rows x columns), or a kernel of their own, by reduction.
fn stored_units<'a>(
    s: &Inputs<'a>,
    cx: &Context,
    store: &BTreeSet<usize>,
    carrying: &mut Vec<Unit<'a>>,
    pointwise_groups: &mut Vec<usize>,
) -> Result<BTreeMap<usize, Unit<'a>>, Failure> {
    let (f, layouts, dev, groups, all_reds) = (s.f, s.layouts, s.dev, s.groups, s.all_reds);
    let splits = |shape: &[usize], cols: usize, last: usize| -> Option<usize> {
        let numel: usize = shape.iter().product();
        let mut p = 1usize;
        for &e in shape.iter().rev() {
            if p == cols {
                break;
            }
            p *= e;
        }
        // No columns (a sum of an empty extent): nothing to lay out beside.
        (cols > 0 && p == cols && shape.last() == Some(&last) && numel.is_multiple_of(cols))
            .then(|| numel / cols)
    };
    // Stored reductions: a sum over rows joins a kernel that carries sums over
    // the same rows x columns; the others get a kernel of their own, which
    // for a schedule that carries sums over rows is a row kernel that a
    // pointwise group over the same rows x columns joins.
    // A reduction another stored one reads is computed on its own, first:
    // stored reductions' kernels run before any row kernel.
    let read: BTreeSet<usize> = store.iter().flat_map(|&o| direct(f, std::iter::once(all_reds[o].x), all_reds)).collect();
    // Each reduction's rows x columns where a row kernel could carry it as
    // sums over rows (not one another stored reduction reads).
    let mut row_sums: BTreeMap<usize, (Vec<usize>, Vec<usize>)> = store
        .iter()
        .filter(|r| !read.contains(r))
        .filter_map(|&r| schedule::row_sums(f, layouts, &all_reds[r], &dev).ok().map(|s| (r, s)))
        .collect();
    // Keyed by (rows, columns, last extent): a group written beside a row
    // kernel's sums reads none of them (its rows are read before the sums are whole).
    let carried: BTreeMap<usize, (usize, usize, usize)> = row_sums
        .iter()
        .map(|(&r, (rs, is))| (r, (rs.iter().product(), is.iter().product(), *is.last().unwrap())))
        .collect();
    let mut standalone: BTreeMap<usize, Unit> = BTreeMap::new();
    for &r in store {
        let red = &all_reds[r];
        let before_rows = read.contains(&r);
        let sums = row_sums.remove(&r);
        let key = carried.get(&r).copied();
        if let Some(key) = key {
            let reads_r = |u: &Unit| closure(f, u.rows().full.iter().map(|o| o.0), all_reds).contains(&r);
            if let Some(u) = carrying.iter_mut().find(|u| u.rows_key() == key && !reads_r(u)) {
                u.rows_mut().outer.push(r);
                continue;
            }
        }
        // The pointwise group over the same rows x columns, which a row
        // kernel computing this sum would write too; not one that reads the
        // sum (x minus its column sums), which is whole only after every
        // row has been read.
        let beside = key.and_then(|key @ (rows, cols, last)| {
            pointwise_groups.iter().position(|&gi| {
                splits(&groups[gi].0, cols, last) == Some(rows)
                    && !closure(f, groups[gi].1.iter().map(|o| o.0), all_reds)
                        .iter()
                        .any(|d| carried.get(d) == Some(&key))
            })
        });
        let work = Work::Stored {
            red: r,
            before_rows,
            siblings: vec![],
            epilogue: vec![],
            joined: beside.is_some(),
            full: vec![],
        };
        let u = Unit::chosen(s.cand(format!("fb_r{}", red.node), work), cx, &dev)?;
        match sums {
            Some((rows_shape, inner_shape)) if u.schedule.carries_row_sums() => {
                let full = match beside {
                    Some(i) => groups[pointwise_groups.remove(i)].1.clone(),
                    None => vec![],
                };
                let work = Work::Rows(Rows {
                    rows_shape,
                    inner_shape,
                    outer: vec![r],
                    full,
                    ..Rows::default()
                });
                carrying.push(Unit {
                    c: s.cand(format!("fb_w{}", red.node), work),
                    ..u
                });
            }
            _ => {
                standalone.insert(r, u);
            }
        }
    }

    Ok(standalone)
}

/// Stores first what the stored reductions read, but what the kernel that
/// computes them holds on chip (more kernels of their own).
fn store_what_they_read<'a>(
    s: &Inputs<'a>,
    cx: &Context,
    standalone: &mut BTreeMap<usize, Unit<'a>>,
    carrying: &[Unit],
    looped: &[Unit],
) -> Result<(), Failure> {
    let (f, dev, all_reds) = (s.f, s.dev, s.all_reds);
    // Whatever a stored reduction reads must be stored first, except what the
    // kernel that computes it holds on chip.
    loop {
        let mut more = BTreeSet::new();
        for &r in standalone.keys() {
            more.extend(direct(f, std::iter::once(all_reds[r].x), all_reds));
        }
        for u in carrying.iter().chain(looped) {
            let rw = u.rows();
            for &r in rw.outer.iter().chain(&rw.totals) {
                more.extend(
                    direct(f, std::iter::once(all_reds[r].x), all_reds)
                        .into_iter()
                        .filter(|d| !rw.inner.contains(d)),
                );
            }
        }
        more.retain(|r| {
            !standalone.contains_key(r)
                && !carrying.iter().any(|u| u.rows().outer.contains(r))
                && !carrying.iter().chain(looped).any(|u| u.rows().totals.contains(r))
        });
        if more.is_empty() {
            break;
        }
        for r in more {
            let work = Work::Stored {
                red: r,
                before_rows: true,
                siblings: vec![],
                epilogue: vec![],
                joined: false,
                full: vec![],
            };
            let name = format!("fb_r{}", all_reds[r].node);
            standalone.insert(r, Unit::chosen(s.cand(name, work), cx, &dev)?);
        }
    }
    Ok(())
}

/// Refuses a plan whose stored reduction reads a row kernel's totals, which
/// run after it (the caller stores those totals' reductions and plans again).
fn totals_combined_first(
    s: &Inputs,
    standalone: &BTreeMap<usize, Unit>,
    carrying: &[Unit],
    looped: &[Unit],
) -> Result<(), Failure> {
    let (f, all_reds) = (s.f, s.all_reds);
    // Stored reductions run before the row kernels: one that reads a total
    // (a row sum scaled by the loss) would find it not yet combined, so that
    // total's row reductions are stored instead and the plan is made again.
    for u in carrying.iter().chain(looped) {
        let rw = u.rows();
        let read = standalone
            .keys()
            .any(|&r| direct(f, std::iter::once(all_reds[r].x), all_reds).iter().any(|d| rw.totals.contains(d)));
        if read {
            return Err((
                CodegenError::NoFit(format!(
                    "{}: a stored reduction reads its totals before they are combined",
                    u.c.name
                )),
                Some(rw.inner.iter().chain(&rw.totals).copied().collect()),
            ));
        }
    }
    Ok(())
}

/// The stored reductions over contiguous elements that also write the
/// pointwise group laid out over those elements (`Device::contiguous_join`).
fn contiguous_joins<'a>(
    s: &Inputs<'a>,
    standalone: &mut BTreeMap<usize, Unit<'a>>,
    pointwise_groups: &mut Vec<usize>,
) -> Vec<(usize, Unit<'a>)> {
    let (f, layouts, dev, groups, all_reds) = (s.f, s.layouts, s.dev, s.groups, s.all_reds);
    // `Device::contiguous_join`: a stored reduction over elements contiguous
    // in memory writes the elementwise outputs laid out as its results by
    // those elements (a column-major backward RMSNorm's gradient beside its
    // weight gradient), reading them once. It is built after the other
    // stored reductions, whose results those outputs may read, so only where
    // no other reduction reads it.
    let mut joined: Vec<(usize, Unit)> = Vec::new();
    if dev.contiguous_join {
        // Each candidate reduction with the pointwise group laid out over its
        // reduced elements; then those whose group reads another candidate
        // are dropped, so every group reads only results stored before it.
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        // Reductions that another reduction reads (a reduction never reads itself).
        let read: BTreeSet<usize> = all_reds
            .iter()
            .flat_map(|o| direct(f, std::iter::once(o.x), all_reds))
            .collect();
        for (&r, u) in standalone.iter() {
            let red = &all_reds[r];
            if u.schedule.name() != "contiguous" || read.contains(&r) {
                continue;
            }
            let xs = f.value(red.x).shape.clone().unwrap_or_default();
            let mut shape = red.kept_extents(f);
            shape.extend(crate::memory::by_memory(f, layouts, red.x, &red.dims).iter().map(|&d| xs[d]));
            let taken = |gi: &usize| pairs.iter().any(|&(_, g)| g == *gi);
            let found = pointwise_groups.iter().copied().find(|gi| {
                let (s, outs) = &groups[*gi];
                let reads = direct(f, outs.iter().map(|o| o.0), all_reds);
                *s == shape && !taken(gi) && reads.iter().all(|d| *d != r && standalone.contains_key(d))
            });
            if let Some(gi) = found {
                pairs.push((r, gi));
            }
        }
        let candidates: Vec<usize> = pairs.iter().map(|&(r, _)| r).collect();
        pairs.retain(|&(_, gi)| {
            !direct(f, groups[gi].1.iter().map(|o| o.0), all_reds).iter().any(|d| candidates.contains(d))
        });
        for (r, gi) in pairs {
            pointwise_groups.retain(|&g| g != gi);
            let mut u = standalone.remove(&r).expect("a key of standalone");
            if let Work::Stored { full, .. } = &mut u.c.work {
                *full = groups[gi].1.clone();
            }
            joined.push((r, u));
        }
    }
    joined
}

/// Outputs that read only a row kernel's sums over rows, or only its
/// totals, written by the kernel that combines them.
fn combine_epilogues<'a>(s: &Inputs, carrying: &mut [Unit<'a>], looped: &mut [Unit<'a>], pointwise_groups: &mut Vec<usize>) {
    let (f, groups, all_reds) = (s.f, s.groups, s.all_reds);
    // Pointwise groups with one element per column that read only a row
    // kernel's sums over rows (and inputs) are written by its combine kernel.
    for u in carrying.iter_mut() {
        let outer = u.rows().outer.clone();
        if outer.is_empty() {
            continue;
        }
        let cols = u.rows().cols();
        let mut epilogue = Vec::new();
        pointwise_groups.retain(|&gi| {
            let (shape, outs) = &groups[gi];
            let reads = direct(f, outs.iter().map(|o| o.0), all_reds);
            // Each reads the sums elementwise: the combine holds one column's.
            let fits = shape.iter().product::<usize>() == cols
                && !reads.is_empty()
                && reads.iter().all(|r| outer.contains(r))
                && !reads_late_kernel(f, outs.iter().map(|o| o.0), all_reds)
                && reads.iter().all(|&r| outs.iter().all(|o| crate::epilogue::fits(f, &all_reds[r], o.0)));
            if fits {
                epilogue.extend(outs.iter().copied());
            }
            !fits
        });
        u.rows_mut().epilogue = epilogue;
    }
    // Likewise outputs of one element that read only a row kernel's totals
    // (the mean of a sum over rows) are written by the totals' combine kernel.
    for u in carrying.iter_mut().chain(looped.iter_mut()) {
        let totals = u.rows().totals.clone();
        if totals.is_empty() {
            continue;
        }
        let mut epilogue = Vec::new();
        pointwise_groups.retain(|&gi| {
            let (shape, outs) = &groups[gi];
            let reads = direct(f, outs.iter().map(|o| o.0), all_reds);
            let fits = shape.iter().product::<usize>() == 1
                && !reads.is_empty()
                && reads.iter().all(|r| totals.contains(r))
                && !reads_late_kernel(f, outs.iter().map(|o| o.0), all_reds);
            if fits {
                epilogue.extend(outs.iter().copied());
            }
            !fits
        });
        u.rows_mut().totals_epilogue = epilogue;
    }
}

/// Pointwise groups that read only a stored reduction, one element per
/// result in order, are written by its last kernel.
fn stored_epilogues<'a>(
    s: &Inputs,
    standalone: &mut BTreeMap<usize, Unit<'a>>,
    joined: &mut [(usize, Unit<'a>)],
    pointwise_groups: &mut Vec<usize>,
) {
    let (f, groups, all_reds) = (s.f, s.groups, s.all_reds);
    let stored = standalone.iter_mut().map(|(&r, u)| (r, u)).chain(joined.iter_mut().map(|(r, u)| (*r, u)));
    for (r, u) in stored {
        let red = &all_reds[r];
        // With its siblings, the kernel that finishes them holds all their results.
        let mut members = vec![r];
        if let Work::Stored { siblings, .. } = &u.c.work {
            members.extend(siblings.iter().copied());
        }
        let mut epilogue: Vec<(ValueId, usize)> = Vec::new();
        pointwise_groups.retain(|&gi| {
            let outs = &groups[gi].1;
            let reads = closure(f, outs.iter().map(|o| o.0), all_reds);
            let fits = !reads.is_empty()
                && reads.iter().all(|d| members.contains(d))
                && (matches!(red.kind, crate::reduction::Kind::Plain(_)) || s.dev.stat_epilogue)
                && members.iter().all(|&m| outs.iter().all(|o| crate::epilogue::fits(f, &all_reds[m], o.0)))
                && !reads_late_kernel(f, outs.iter().map(|o| o.0), all_reds);
            if fits {
                epilogue.extend(outs.iter().copied());
            }
            !fits
        });
        if let Work::Stored { epilogue: e, .. } = &mut u.c.work {
            *e = epilogue;
        }
    }
}

/// Plain reductions stored by kernels of their own over the same elements,
/// read in the same memory order, all on the grid or all on the outer
/// schedule (a batch norm
/// backward's two sums per channel, of the gradient and of the gradient
/// times the normalized input): one kernel computes them all, reading
/// the elements once (`Work::Stored::siblings`). Not one another reads.
fn siblings(s: &Inputs, standalone: &mut BTreeMap<usize, Unit>) {
    let (f, layouts, all_reds) = (s.f, s.layouts, s.all_reds);
    let key = |r: usize| {
        let red = &all_reds[r];
        let walk = crate::memory::by_memory(f, layouts, red.x, &red.dims);
        (f.value(red.x).shape.clone(), red.dims.clone(), walk)
    };
    let eligible = |u: &Unit, r: usize| {
        matches!(u.schedule.name(), "grid" | "outer")
            && matches!(all_reds[r].kind, crate::reduction::Kind::Plain(_))
            && !all_reds[r].acc(f).is_complex()
            && matches!(&u.c.work, Work::Stored { full, .. } if full.is_empty())
    };
    let rs: Vec<usize> = standalone.keys().copied().collect();
    let mut taken = BTreeSet::new();
    for (i, &r) in rs.iter().enumerate() {
        if taken.contains(&r) || !eligible(&standalone[&r], r) {
            continue;
        }
        let mut found = Vec::new();
        let own = key(r);
        for &q in &rs[i + 1..] {
            let reads = |a: usize, b: usize| direct(f, std::iter::once(all_reds[a].x), all_reds).contains(&b);
            // At most four in a kernel: the outer schedule folds each over
            // its block in shared memory of its own.
            if found.len() < 3
                && !taken.contains(&q)
                && eligible(&standalone[&q], q)
                && standalone[&q].schedule.name() == standalone[&r].schedule.name()
                && key(q) == own
                && !reads(q, r)
                && !reads(r, q)
                && found.iter().all(|&p| !reads(q, p) && !reads(p, q))
            {
                found.push(q);
            }
        }
        if found.is_empty() {
            continue;
        }
        taken.extend(found.iter().copied());
        if let Some(Unit { c: Candidate { work: Work::Stored { siblings, .. }, .. }, .. }) = standalone.get_mut(&r) {
            siblings.extend(found.iter().copied());
        }
    }
    for q in taken {
        standalone.remove(&q);
    }
}

/// Pointwise groups whose every output a scan's kernel can write
/// (`scan::epilogue_fits`: computed elementwise from that scan, with no
/// stored reduction), by the scan, with whether anything else reads the
/// scan. Only scans built first (of values no stored reduction reaches).
fn scan_epilogues(s: &Inputs, pointwise_groups: &mut Vec<usize>) -> BTreeMap<usize, (Vec<(ValueId, usize)>, bool)> {
    let (f, groups, all_reds) = (s.f, s.groups, s.all_reds);
    let mut scans = BTreeMap::new();
    if !s.dev.scan_epilogue {
        return scans;
    }
    for (node, n) in f.nodes.iter().enumerate() {
        let fusebench_ir::Op::Scan { x, .. } = &n.op else { continue };
        if !closure(f, std::iter::once(*x), all_reds).is_empty() {
            continue;
        }
        let mut epilogue: Vec<(ValueId, usize)> = Vec::new();
        pointwise_groups.retain(|&gi| {
            let outs = &groups[gi].1;
            let fits = closure(f, outs.iter().map(|o| o.0), all_reds).is_empty()
                && outs.iter().all(|o| crate::scan::epilogue_fits(f, node, o.0));
            if fits {
                epilogue.extend(outs.iter().copied());
            }
            !fits
        });
        if epilogue.is_empty() {
            continue;
        }
        let v = n.outputs[0];
        let mut read = false;
        let others = f.outputs.iter().copied().filter(|o| !epilogue.iter().any(|e| e.0 == *o));
        f.walk_up(others, |w| {
            read |= w == v;
            !read
        });
        scans.insert(node, (epilogue, read));
    }
    scans
}

/// A candidate with the schedule chosen for it.
pub(super) struct Unit<'a> {
    pub c: Candidate<'a>,
    pub schedule: &'static dyn Schedule,
    pub choice: Choice,
}

impl<'a> Unit<'a> {
    pub fn chosen(c: Candidate<'a>, cx: &Context, dev: &Device) -> Result<Unit<'a>, Failure> {
        let (schedule, choice) = schedule::choose(&c, cx, dev).map_err(|e| (e, None))?;
        Ok(Unit {
            c,
            schedule,
            choice,
        })
    }

    pub fn build(
        &self,
        dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError> {
        schedule::build(self.schedule, &self.choice, &self.c, dev, cx, out)
    }

    /// The rows of a row unit (every unit in `carrying` and `looped` is one).
    pub fn rows(&self) -> &Rows {
        match &self.c.work {
            Work::Rows(r) => r,
            _ => unreachable!("row units hold rows"),
        }
    }

    pub fn rows_mut(&mut self) -> &mut Rows {
        match &mut self.c.work {
            Work::Rows(r) => r,
            _ => unreachable!("row units hold rows"),
        }
    }

    /// Rows, columns and innermost extent, which sums over rows must match to join.
    pub fn rows_key(&self) -> (usize, usize, usize) {
        let r = self.rows();
        (r.rows(), r.cols(), r.last())
    }
}
