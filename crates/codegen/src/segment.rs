//! Segmentation: which outputs share a kernel, which reductions are kept on
//! chip and which are stored for later kernels, and in what order kernels run.
//! Decided from the fusion's structure, shapes and the device alone.

use crate::alias;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::{Choice, Kernel, OutputPlan, OutputSource, Plan};
use crate::reduction::Reduction;
use crate::schedule::{self, Candidate, Rows, Schedule, Work};
use fusebench_ir::{Fusion, ValueDef, ValueId};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use crate::device::Device;

/// Written outputs of one shape: the shape, and each output's value and position.
type Group = (Vec<usize>, Vec<(ValueId, usize)>);

/// Plans a fusion for inputs with the given layouts (strides and offset per
/// tensor input, by input position; `None` means dense row-major).
pub fn plan(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    dev: Device,
) -> Result<Plan, CodegenError> {
    if crate::gemm::present(f) {
        return crate::gemm::plan(f, layouts, dev);
    }
    plan_owning(f, layouts, dev, &[])
}

/// [`plan`] for a fusion with no matrix product, the outputs marked in
/// `written` written to buffers of their own, never returned as views (a
/// product's operand whose view the library cannot read, crate::gemm).
pub(crate) fn plan_owning(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    dev: Device,
    written: &[bool],
) -> Result<Plan, CodegenError> {
    // Outputs with a stride order (declared, or inferred from the inputs'
    // as nvFuser does, on the fusion as written) are planned as the permute
    // that lists their dims outermost first, written row-major: that buffer
    // is the output in its own layout (crate::layout).
    crate::refuse::chain(f)?;
    let orders = crate::layout::orders(f);
    // Complex sums and integer statistics become ops the kernels run.
    let rewritten = crate::rewrite::apply(f)?;
    // Outputs and sums along expanded broadcasts computed once.
    let (expanded, hidden) = crate::expanded::apply(&rewritten, layouts)?;
    let f: &Fusion = &expanded;
    let mut orders = orders;
    orders.resize(f.outputs.len(), None);
    crate::refuse::check(f)?;
    let forced = |k: usize| written.get(k).copied().unwrap_or(false);
    let mut p = if orders.iter().any(Option::is_some) {
        let g = crate::layout::permuted(f, &orders);
        let own: Vec<bool> = (0..orders.len()).map(|k| orders[k].is_some() || forced(k)).collect();
        let mut p = plan_dense(&g, layouts, dev, &own)?;
        crate::layout::restore(f, &orders, &mut p);
        p
    } else {
        let own: Vec<bool> = (0..f.outputs.len()).map(forced).collect();
        plan_dense(f, layouts, dev, &own)?
    };
    crate::alias_write::add(f, layouts, &mut p)?;
    crate::launch::check_grids(&p.kernels, &dev)?;
    p.hidden_outputs = hidden;
    Ok(p)
}

/// Plans `f` with every written output dense row-major; outputs marked in
/// `own` are written to buffers of their own, never views.
fn plan_dense(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    dev: Device,
    own: &[bool],
) -> Result<Plan, CodegenError> {
    let outputs = resolve_outputs(f, layouts, own);
    let mut all_reds: Vec<Reduction> = (0..f.nodes.len())
        .filter_map(|n| Reduction::of(f, n))
        .filter(|r| !r.inline(f))
        .collect();
    // A small reduction is computed where it is read, except a total of a
    // few rows' values of row reductions kept on chip: it is one of the
    // totals their row kernel accumulates (`try_plan`), as it is for many
    // rows, so it takes no kernel of its own and the row reductions are not
    // stored for it.
    let small_totals: Vec<Reduction> = (0..f.nodes.len())
        .filter_map(|n| Reduction::of(f, n))
        .filter(|r| r.inline(f) && crate::totals::of(f, layouts, dev, &all_reds, r, &BTreeSet::new()).is_some())
        .collect();
    all_reds.extend(small_totals);
    all_reds.sort_by_key(|r| r.node);
    // Written outputs grouped by shape, in order of first appearance.
    let mut groups: Vec<Group> = Vec::new();
    for (pos, o) in outputs.iter().enumerate() {
        if matches!(o.source, OutputSource::Written) {
            let v = f.outputs[pos];
            match groups.iter_mut().find(|g| g.0 == o.shape) {
                Some(g) => g.1.push((v, pos)),
                None => groups.push((o.shape.clone(), vec![(v, pos)])),
            }
        }
    }
    let mut stored_forced: BTreeSet<usize> = BTreeSet::new();
    // Falling back from an on-chip schedule stores that group's reductions; a
    // few rounds at most, one per group.
    for _ in 0..=groups.len() {
        match try_plan(
            f,
            layouts,
            dev,
            &outputs,
            &groups,
            &all_reds,
            &stored_forced,
        ) {
            Ok(p) => return Ok(p),
            Err((CodegenError::NoFit(_), Some(more))) if !more.is_subset(&stored_forced) => {
                stored_forced.extend(more)
            }
            Err((e, _)) => return Err(e),
        }
    }
    Err(CodegenError::Unsupported(
        "no schedule fits this fusion".into(),
    ))
}

type Failure = (CodegenError, Option<BTreeSet<usize>>);

fn try_plan(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    dev: Device,
    outputs: &[OutputPlan],
    groups: &[Group],
    all_reds: &[Reduction],
    forced: &BTreeSet<usize>,
) -> Result<Plan, Failure> {
    let idx_type = if max_extent(f, layouts).saturating_mul(dev.index_margin) < (1u64 << 31) {
        "int"
    } else {
        "long long"
    };
    let mut cx = Context {
        f,
        layouts: layouts.to_vec(),
        stored: HashMap::new(),
        temps: vec![],
        idx_type,
        dev,
    };

    // Which groups keep their reductions on chip.
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
    }
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
            }),
        }
    }

    // Each normalization's rows are laid out by the first schedule that
    // fits; sums over rows may join the kernels that carry them.
    let cand = |name: String, work: Work| Candidate {
        f,
        reds: all_reds,
        name,
        work,
    };
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
            full: nm.group.map(|g| groups[g].1.clone()).unwrap_or_default(),
            per_row: nm.per_row,
            totals: nm.totals,
            reload,
            ..Rows::default()
        };
        let u = Unit::chosen(cand(name, Work::Rows(rows)), &cx, &dev)?;
        if u.schedule.carries_row_sums() {
            carrying.push(u);
        } else {
            looped.push(u);
        }
    }
    let splits = |shape: &[usize], cols: usize, last: usize| -> Option<usize> {
        let numel: usize = shape.iter().product();
        let mut p = 1usize;
        for &e in shape.iter().rev() {
            if p == cols {
                break;
            }
            p *= e;
        }
        (p == cols && shape.last() == Some(&last) && numel.is_multiple_of(cols))
            .then(|| numel / cols)
    };
    // Stored reductions: a sum over rows joins a kernel that carries sums over
    // the same rows x columns; the others get a kernel of their own, which
    // for a schedule that carries sums over rows is a row kernel that a
    // pointwise group over the same rows x columns joins.
    let mut standalone: BTreeMap<usize, Unit> = BTreeMap::new();
    for &r in &store {
        let red = &all_reds[r];
        let sums = schedule::row_sums(f, layouts, red, &dev).ok();
        if let Some((rs, is)) = &sums {
            let key = (
                rs.iter().product(),
                is.iter().product(),
                *is.last().unwrap(),
            );
            if let Some(u) = carrying.iter_mut().find(|u| u.rows_key() == key) {
                u.rows_mut().outer.push(r);
                continue;
            }
        }
        // The pointwise group over the same rows x columns, which a row
        // kernel computing this sum would write too.
        let beside = sums.as_ref().and_then(|(rs, is)| {
            let (rows, cols) = (rs.iter().product(), is.iter().product());
            let last = *is.last().unwrap();
            pointwise_groups
                .iter()
                .position(|&gi| splits(&groups[gi].0, cols, last) == Some(rows))
        });
        let work = Work::Stored {
            red: r,
            before_rows: false,
            epilogue: vec![],
            joined: beside.is_some(),
            full: vec![],
        };
        let u = Unit::chosen(cand(format!("fb_r{}", red.node), work), &cx, &dev)?;
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
                    c: cand(format!("fb_w{}", red.node), work),
                    ..u
                });
            }
            _ => {
                standalone.insert(r, u);
            }
        }
    }

    // Whatever a stored reduction reads must be stored first, except what the
    // kernel that computes it holds on chip.
    loop {
        let mut more = BTreeSet::new();
        for &r in standalone.keys() {
            more.extend(direct(f, std::iter::once(all_reds[r].x), all_reds));
        }
        for u in carrying.iter().chain(&looped) {
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
                && !carrying.iter().chain(&looped).any(|u| u.rows().totals.contains(r))
        });
        if more.is_empty() {
            break;
        }
        for r in more {
            let work = Work::Stored {
                red: r,
                before_rows: true,
                epilogue: vec![],
                joined: false,
                full: vec![],
            };
            let name = format!("fb_r{}", all_reds[r].node);
            standalone.insert(r, Unit::chosen(cand(name, work), &cx, &dev)?);
        }
    }
    // Stored reductions run before the row kernels: one that reads a total
    // (a row sum scaled by the loss) would find it not yet combined, so that
    // total's row reductions are stored instead and the plan is made again.
    for u in carrying.iter().chain(&looped) {
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
        for (&r, u) in &standalone {
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
            let fits = shape.iter().product::<usize>() == cols
                && !reads.is_empty()
                && reads.iter().all(|r| outer.contains(r));
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
                && reads.iter().all(|r| totals.contains(r));
            if fits {
                epilogue.extend(outs.iter().copied());
            }
            !fits
        });
        u.rows_mut().totals_epilogue = epilogue;
    }

    let mut kernels: Vec<(String, Kernel)> = Vec::new();
    // Ops of the index family with kernels of their own are built just before
    // the first kernel that reads them (`build_specials`).
    // One that reads a reduction result a row kernel keeps on chip does not
    // fit: the reductions it reads are then stored and the plan redone.
    let build_specials =
        |cx: &mut Context, kernels: &mut Vec<(String, Kernel)>, roots: Vec<ValueId>| {
            crate::index_kernels::build_for(cx, kernels, roots.iter().copied()).map_err(|e| {
                let more = matches!(e, CodegenError::NoFit(_))
                    .then(|| closure(f, roots.iter().copied(), all_reds).into_iter().collect());
                (e, more)
            })
        };
    // Scans first, in definition order, each stored for whatever reads it
    // (after the index-family ops it reads).
    for (node, n) in f.nodes.iter().enumerate() {
        if let fusebench_ir::Op::Scan { x, .. } = &n.op {
            if !closure(f, std::iter::once(*x), all_reds).is_empty() {
                return Err((
                    CodegenError::Unsupported(format!(
                        "{} of a value computed from a reduction",
                        n.op.name()
                    )),
                    None,
                ));
            }
            // A scan of a topk/argsort/scatter/index_put_accumulate result reads it stored.
            build_specials(&mut cx, &mut kernels, vec![*x])?;
            crate::scan::build(&mut cx, node, &mut kernels).map_err(|e| (e, None))?;
        }
    }
    // Then stored reductions, row kernels (those with partials of sums over
    // rows first) and elementwise kernels: the order temporaries are numbered in.
    let stored = standalone.iter_mut().map(|(&r, u)| (r, u)).chain(joined.iter_mut().map(|(r, u)| (*r, u)));
    for (r, u) in stored {
        let red = &all_reds[r];
        // Pointwise groups that read only this reduction, one element per
        // result in order, are written by its last kernel.
        let mut epilogue: Vec<(ValueId, usize)> = Vec::new();
        pointwise_groups.retain(|&gi| {
            let outs = &groups[gi].1;
            let fits = closure(f, outs.iter().map(|o| o.0), all_reds) == [r]
                && outs.iter().all(|o| crate::epilogue::fits(f, red, o.0));
            if fits {
                epilogue.extend(outs.iter().copied());
            }
            !fits
        });
        let full = match &u.c.work {
            Work::Stored { full, .. } => full.clone(),
            _ => vec![],
        };
        let roots = std::iter::once(red.x).chain(epilogue.iter().chain(&full).map(|o| o.0));
        build_specials(&mut cx, &mut kernels, roots.collect())?;
        if let Work::Stored { epilogue: e, .. } = &mut u.c.work {
            *e = epilogue;
        }
        u.build(&dev, &mut cx, &mut kernels)
            .map_err(|e| (e, None))?;
    }
    for u in carrying.iter().chain(&looped) {
        let rw = u.rows();
        let roots = (rw.inner.iter().chain(&rw.outer).map(|&r| all_reds[r].x))
            .chain(rw.full.iter().chain(&rw.per_row).map(|o| o.0))
            .collect();
        build_specials(&mut cx, &mut kernels, roots)?;
        match u.build(&dev, &mut cx, &mut kernels) {
            Ok(()) => {}
            // Rows that do not fit on chip after all: store their reductions.
            Err(e @ CodegenError::NoFit(_)) => {
                return Err((
                    e,
                    Some(rw.inner.iter().chain(&rw.outer).chain(&rw.totals).copied().collect()),
                ))
            }
            Err(e) => return Err((e, None)),
        }
    }
    // Elementwise groups last, each choosing its schedule with the stored
    // results it reads in place.
    for &gi in &pointwise_groups {
        let (shape, outs) = &groups[gi];
        build_specials(&mut cx, &mut kernels, outs.iter().map(|o| o.0).collect())?;
        let work = Work::Elementwise {
            shape: shape.clone(),
            outputs: outs.clone(),
        };
        let u = Unit::chosen(cand(format!("fb_p{gi}"), work), &cx, &dev)?;
        u.build(&dev, &mut cx, &mut kernels)
            .map_err(|e| (e, None))?;
    }
    let mut body = String::new();
    for (src, _) in &kernels {
        body.push('\n');
        body.push_str(src);
    }
    let source = crate::prelude::module(&body);
    let pieces = kernels.iter().map(|(src, k)| crate::plan::Module::alone(&k.name, src)).collect();
    Ok(Plan {
        source,
        pieces,
        kernels: kernels
            .into_iter()
            .map(|(src, mut k)| {
                k.code_hash = crate::plan::code_hash(&src);
                k.choice.get_or_insert_with(|| only_choice(k.schedule));
                k
            })
            .collect(),
        temps: cx.temps,
        outputs: outputs.to_vec(),
        alias_writes: vec![],
        hidden_outputs: 0,
        products: vec![],
        modules: vec![],
        attention: vec![],
    })
}

/// A candidate with the schedule chosen for it.
struct Unit<'a> {
    c: Candidate<'a>,
    schedule: &'static dyn Schedule,
    choice: Choice,
}

impl<'a> Unit<'a> {
    fn chosen(c: Candidate<'a>, cx: &Context, dev: &Device) -> Result<Unit<'a>, Failure> {
        let (schedule, choice) = schedule::choose(&c, cx, dev).map_err(|e| (e, None))?;
        Ok(Unit {
            c,
            schedule,
            choice,
        })
    }

    fn build(
        &self,
        dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError> {
        schedule::build(self.schedule, &self.choice, &self.c, dev, cx, out)
    }

    /// The rows of a row unit (every unit in `carrying` and `looped` is one).
    fn rows(&self) -> &Rows {
        match &self.c.work {
            Work::Rows(r) => r,
            _ => unreachable!("row units hold rows"),
        }
    }

    fn rows_mut(&mut self) -> &mut Rows {
        match &mut self.c.work {
            Work::Rows(r) => r,
            _ => unreachable!("row units hold rows"),
        }
    }

    /// Rows, columns and innermost extent, which sums over rows must match to join.
    fn rows_key(&self) -> (usize, usize, usize) {
        let r = self.rows();
        (r.rows(), r.cols(), r.last())
    }
}

/// The choice of kernels with one schedule only, built outside the registry.
fn only_choice(s: crate::plan::Schedule) -> Choice {
    use crate::plan::Schedule as S;
    match s {
        S::Scan => Choice::only(
            "scan",
            "scans have one schedule: a thread per line along the scanned dim",
        ),
        S::Index => Choice::only(
            "index",
            "sort, topk, scatter and accumulate have kernels of their own",
        ),
        other => Choice::only(&format!("{other:?}"), "built outside the schedule registry"),
    }
}

/// Indices (into `all`) of the reductions the values read, directly or through other reductions.
pub(crate) fn closure(
    f: &Fusion,
    values: impl Iterator<Item = ValueId>,
    all: &[Reduction],
) -> Vec<usize> {
    reach(f, values, all, true)
}

/// Reductions the values read without going through another reduction.
fn direct(f: &Fusion, values: impl Iterator<Item = ValueId>, all: &[Reduction]) -> Vec<usize> {
    reach(f, values, all, false)
}

/// Reductions small enough to be computed inline where they are read
/// (`lower` loops over them) are looked through, not counted.
fn reach(
    f: &Fusion,
    values: impl Iterator<Item = ValueId>,
    all: &[Reduction],
    through: bool,
) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    f.walk_up(values, |v| {
        if let ValueDef::Node { node, .. } = f.value(v).def {
            // `all` holds no inline reduction but the small totals.
            if let Some(i) = all.iter().position(|r| r.node == node) {
                if !out.contains(&i) {
                    out.push(i);
                }
                return through;
            }
        }
        true
    });
    out.sort_unstable();
    out
}

fn max_extent(f: &Fusion, layouts: &[Option<(Vec<i64>, i64)>]) -> u64 {
    let values = f.values.iter().map(|v| v.numel() as u64).max().unwrap_or(0);
    let inputs = f
        .inputs
        .iter()
        .zip(layouts)
        .filter_map(|(&v, l)| {
            let (st, off) = l.as_ref()?;
            let s = f.value(v).shape.as_ref()?;
            Some(
                off.unsigned_abs()
                    + s.iter()
                        .zip(st)
                        .map(|(&e, &t)| (e.max(1) as u64 - 1) * t.unsigned_abs())
                        .sum::<u64>()
                    + 1,
            )
        })
        .max()
        .unwrap_or(0);
    values.max(inputs)
}

/// Decides, per output, whether a kernel writes it or it is a view. Outputs
/// that are views of one value (through reshape, permute, broadcast, ...)
/// share one written buffer: the output closest to that value is written and
/// the others are views of it; views of an input write nothing.
fn resolve_outputs(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    own: &[bool],
) -> Vec<OutputPlan> {
    let chains: Vec<(Vec<usize>, ValueId)> = f
        .outputs
        .iter()
        .map(|&v| alias::view_chain(f, v, |_| false))
        .collect();
    // The values along an output's chain, from the output down to its root.
    let values_on = |p: usize| -> Vec<ValueId> {
        let mut vals = vec![f.outputs[p]];
        for &n in &chains[p].0 {
            vals.push(f.nodes[n].op.operands()[0]);
        }
        vals
    };
    let mut plans = Vec::new();
    for (pos, &v) in f.outputs.iter().enumerate() {
        let val = f.value(v);
        let shape = val.shape.clone().unwrap_or_default();
        let (chain, root) = &chains[pos];
        let mut source = OutputSource::Written;
        if own[pos] {
            // Written in its own layout: neither a view nor a base for views.
        } else if matches!(f.value(*root).def, ValueDef::TensorInput(_)) {
            let ipos = f.inputs.iter().position(|i| i == root).unwrap();
            let (st, off) = layouts[ipos]
                .clone()
                .unwrap_or_else(|| (alias::dense(f.value(*root).shape.as_ref().unwrap()), 0));
            if let Some((strides, offset)) = alias::through(f, chain, st, off) {
                source = OutputSource::InputView {
                    input: ipos,
                    strides,
                    offset,
                };
            }
        } else {
            // The base: the output with this root whose chain is shortest (first on ties).
            let base = (0..f.outputs.len())
                .filter(|&q| chains[q].1 == *root && !own[q])
                .min_by_key(|&q| (chains[q].0.len(), q))
                .unwrap();
            if base != pos {
                let mine = values_on(pos);
                if let Some(k) = mine.iter().position(|&x| x == f.outputs[base]) {
                    let dense = alias::dense(f.value(f.outputs[base]).shape.as_ref().unwrap());
                    if let Some((strides, offset)) = alias::through(f, &chain[..k], dense, 0) {
                        source = OutputSource::OutputView {
                            output: base,
                            strides,
                            offset,
                        };
                    }
                }
            }
        }
        plans.push(OutputPlan {
            dtype: val.dtype,
            shape,
            source,
            strides: None,
        });
    }
    plans
}
