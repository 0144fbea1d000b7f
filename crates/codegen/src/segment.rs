//! Segmentation: which outputs share a kernel, which reductions are kept on
//! chip and which are stored for later kernels, and in what order kernels run.
//! Decided from the fusion's structure, shapes and the device alone.

use crate::alias;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::persistent::{self, RowTarget};
use crate::plan::{Kernel, OutputPlan, OutputSource, Plan};
use crate::reduction::Reduction;
use crate::{outer, pointwise};
use fusebench_ir::{Fusion, ValueDef, ValueId};
use std::collections::{BTreeSet, HashMap};

/// What the schedules need to know about the device.
#[derive(Clone, Copy, Debug)]
pub struct Device {
    pub sm_count: u32,
    /// Row blocks per multiprocessor for kernels that also sum over rows:
    /// more blocks hide more latency but write more partial sums.
    pub row_blocks_per_sm: u32,
    /// Blocks per multiprocessor for normalizations without sums over rows;
    /// 0 gives every pair of rows its own block. Fewer, longer-lived blocks
    /// overlap one row's stores with the next row's loads.
    pub norm_blocks_per_sm: u32,
    /// Rows a row-wise block handles at once.
    pub row_unroll: u32,
}

impl Default for Device {
    /// An H200's count, for planning without a device at hand.
    fn default() -> Self {
        Device {
            sm_count: 132,
            row_blocks_per_sm: 2,
            norm_blocks_per_sm: 0,
            row_unroll: 2,
        }
    }
}

/// Plans a fusion for inputs with the given layouts (strides and offset per
/// tensor input, by input position; `None` means dense row-major).
pub fn plan(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    dev: Device,
) -> Result<Plan, CodegenError> {
    // Complex sums and integer statistics become ops the kernels run.
    let rewritten = crate::rewrite::apply(f)?;
    let f: &Fusion = &rewritten;
    crate::refuse::check(f)?;
    // Outputs with a stride order are planned as the permute that lists
    // their dims outermost first, written row-major: that buffer is the
    // output in its own layout (crate::layout).
    let orders = crate::layout::orders(f);
    let mut p = if orders.iter().any(Option::is_some) {
        let g = crate::layout::permuted(f, &orders);
        let own: Vec<bool> = orders.iter().map(Option::is_some).collect();
        let mut p = plan_dense(&g, layouts, dev, &own)?;
        crate::layout::restore(f, &orders, &mut p);
        p
    } else {
        plan_dense(f, layouts, dev, &vec![false; f.outputs.len()])?
    };
    crate::alias_write::add(f, layouts, &mut p)?;
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
    let all_reds: Vec<Reduction> = (0..f.nodes.len())
        .filter_map(|n| Reduction::of(f, n))
        .filter(|r| !r.inline(f))
        .collect();
    // Written outputs grouped by shape, in order of first appearance.
    let mut groups: Vec<(Vec<usize>, Vec<(ValueId, usize)>)> = Vec::new();
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
    groups: &[(Vec<usize>, Vec<(ValueId, usize)>)],
    all_reds: &[Reduction],
    forced: &BTreeSet<usize>,
) -> Result<Plan, Failure> {
    let idx_type = if max_extent(f, layouts) < (1u64 << 31) {
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
        sm_count: dev.sm_count,
    };

    // Which groups keep their reductions on chip.
    struct Norm {
        group: usize,
        reds: Vec<usize>,
        rows: Vec<usize>,
        inner: Vec<usize>,
        per_row: Vec<(ValueId, usize)>,
    }
    let mut norms: Vec<Norm> = Vec::new();
    let mut pointwise_groups: Vec<usize> = Vec::new();
    let mut store: BTreeSet<usize> = forced.clone();
    for (gi, (shape, outs)) in groups.iter().enumerate() {
        let deps = closure(f, outs.iter().map(|o| o.0), all_reds);
        let fits = !deps.is_empty()
            && deps.iter().all(|&r| {
                let red = &all_reds[r];
                red.is_inner(f)
                    && !crate::grid::wanted(f, red, dev.sm_count)
                    && f.value(red.x).shape.as_ref() == Some(shape)
                    && red.dims.len() == all_reds[deps[0]].dims.len()
            })
            && !deps.iter().any(|r| forced.contains(r));
        if fits {
            let k = all_reds[deps[0]].dims.len();
            norms.push(Norm {
                group: gi,
                reds: deps,
                rows: shape[..shape.len() - k].to_vec(),
                inner: shape[shape.len() - k..].to_vec(),
                per_row: vec![],
            });
        } else {
            pointwise_groups.push(gi);
        }
    }
    // A group with one element per row of a normalization, reading only its
    // reductions, is written by that kernel.
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
        true
    });
    for &gi in &pointwise_groups {
        store.extend(direct(f, groups[gi].1.iter().map(|o| o.0), all_reds));
    }

    // Row-wise kernels: normalizations whose row fits one block, and sums
    // over rows attached to the kernel that already walks their domain.
    let dtypes: Vec<fusebench_ir::DType> = f
        .values
        .iter()
        .filter(|v| v.is_tensor())
        .map(|v| v.dtype)
        .collect();
    let width = |last: usize| crate::kernel::vector_width(last, dtypes.iter().copied());
    struct Rowwise {
        rows: usize,
        cols: usize,
        last: usize,
        inner: Vec<usize>,
        outer: Vec<usize>,
        full: Vec<(ValueId, usize)>,
        per_row: Vec<(ValueId, usize)>,
        name: String,
    }
    let mut rowwise: Vec<Rowwise> = Vec::new();
    let mut loop_norms = Vec::new();
    for nm in norms {
        let cols: usize = nm.inner.iter().product();
        let last = *nm.inner.last().unwrap_or(&1);
        let rows: usize = nm.rows.iter().product();
        let held = crate::rowwise::held(f, rows, cols);
        if crate::rowwise::shape(cols, width(last), true, held).is_some() {
            rowwise.push(Rowwise {
                rows,
                cols,
                last,
                inner: nm.reds.clone(),
                outer: vec![],
                full: groups[nm.group].1.clone(),
                per_row: nm.per_row.clone(),
                name: format!("fb_n{}", nm.group),
            });
        } else {
            loop_norms.push(nm);
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
    let mut standalone: Vec<usize> = Vec::new();
    for &r in &store {
        let red = &all_reds[r];
        let xs = f.value(red.x).shape.clone().unwrap();
        let k0 = red.dims.len();
        let leading = red.dims.iter().enumerate().all(|(i, &d)| i == d);
        if red.is_inner(f)
            || crate::grid::wanted(f, red, dev.sm_count)
            || !matches!(red.kind, crate::reduction::Kind::Plain(_))
            || !leading
            || k0 == xs.len()
        {
            standalone.push(r);
            continue;
        }
        let rows: usize = xs[..k0].iter().product();
        let cols: usize = xs[k0..].iter().product();
        let last = *xs.last().unwrap();
        if let Some(rw) = rowwise
            .iter_mut()
            .find(|rw| rw.rows == rows && rw.cols == cols && rw.last == last)
        {
            rw.outer.push(r);
            continue;
        }
        if let Some(rw) = rowwise
            .iter_mut()
            .find(|rw| rw.inner.is_empty() && rw.rows == rows && rw.cols == cols && rw.last == last)
        {
            rw.outer.push(r);
            continue;
        }
        if crate::rowwise::shape(cols, width(last), false, 1).is_none() {
            standalone.push(r);
            continue;
        }
        // A pointwise group over the same rows x columns joins it.
        let gi = pointwise_groups
            .iter()
            .position(|&gi| splits(&groups[gi].0, cols, last) == Some(rows));
        let full = match gi {
            Some(i) => groups[pointwise_groups.remove(i)].1.clone(),
            None => vec![],
        };
        rowwise.push(Rowwise {
            rows,
            cols,
            last,
            inner: vec![],
            outer: vec![r],
            full,
            per_row: vec![],
            name: format!("fb_w{}", red.node),
        });
    }

    // Whatever a stored reduction reads must be stored first, except what the
    // kernel that computes it holds on chip.
    let mut standalone: BTreeSet<usize> = standalone.into_iter().collect();
    loop {
        let mut more = BTreeSet::new();
        for &r in &standalone {
            more.extend(direct(f, std::iter::once(all_reds[r].x), all_reds));
        }
        for rw in &rowwise {
            for &r in &rw.outer {
                more.extend(
                    direct(f, std::iter::once(all_reds[r].x), all_reds)
                        .into_iter()
                        .filter(|d| !rw.inner.contains(d)),
                );
            }
        }
        more.retain(|r| !standalone.contains(r) && !rowwise.iter().any(|rw| rw.outer.contains(r)));
        if more.is_empty() {
            break;
        }
        standalone.extend(more);
    }
    let mut kernels: Vec<(String, Kernel)> = Vec::new();
    // Ops of the index family with kernels of their own are built just before
    // the first kernel that reads them (`build_specials`).
    let build_specials =
        |cx: &mut Context, kernels: &mut Vec<(String, Kernel)>, roots: Vec<ValueId>| {
            crate::index_kernels::build_for(cx, kernels, roots).map_err(|e| (e, None))
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
    for &r in &standalone {
        let red = &all_reds[r];
        build_specials(&mut cx, &mut kernels, vec![red.x])?;
        let name = format!("fb_r{}", red.node);
        if crate::grid::wanted(f, red, dev.sm_count) {
            crate::grid::build(&mut cx, &name, red, &mut kernels).map_err(|e| (e, None))?;
        } else if red.is_inner(f) {
            let xs = f.value(red.x).shape.clone().unwrap();
            let k = red.dims.len();
            let mut per_row = Vec::new();
            for &o in &red.outputs {
                if is_count(f, red, o) {
                    continue;
                }
                let val = f.value(o);
                let t = cx.add_temp(val.dtype, val.numel(), format!("{} (stored)", val.name));
                per_row.push((o, RowTarget::Temp(t)));
            }
            let mut targets = per_row.clone();
            targets.extend(crate::rowwise::own_outputs(f, red, groups, &mut pointwise_groups));
            let spec = persistent::Spec {
                rows_shape: &xs[..xs.len() - k],
                inner_shape: &xs[xs.len() - k..],
                reductions: std::slice::from_ref(red),
                full: &[],
                per_row: &targets,
            };
            let built = crate::rowwise::instead_of_loop(&cx, &name, &spec, dev.row_unroll as usize)
                .unwrap_or_else(|| persistent::build(&cx, &name, &spec));
            kernels.push(built.map_err(|e| (e, None))?);
            for (o, t) in per_row {
                let RowTarget::Temp(t) = t else {
                    unreachable!()
                };
                let val = f.value(o);
                cx.stored.insert(
                    o,
                    crate::kernel::Stored {
                        temp: t,
                        dtype: val.dtype,
                        shape: val.shape.clone().unwrap(),
                    },
                );
            }
        } else {
            outer::build(&mut cx, &name, red, &mut kernels).map_err(|e| (e, None))?;
        }
    }
    for rw in &rowwise {
        let roots = (rw.inner.iter().chain(&rw.outer).map(|&r| all_reds[r].x))
            .chain(rw.full.iter().chain(&rw.per_row).map(|o| o.0))
            .collect();
        build_specials(&mut cx, &mut kernels, roots)?;
        let w = width(rw.last);
        let whole = !rw.inner.is_empty() || !rw.per_row.is_empty();
        let held = crate::rowwise::held(f, rw.rows, rw.cols);
        let tiles = crate::rowwise::shape(rw.cols, w, whole, held)
            .expect("checked when grouped")
            .tiles;
        // Without sums over rows, each block takes a few rows and leaves; with
        // them, a fixed number of blocks walk all rows (fewer partials).
        let row_blocks = if rw.outer.is_empty() {
            if dev.norm_blocks_per_sm == 0 {
                0
            } else {
                (rw.rows / 2)
                    .max(1)
                    .min((dev.sm_count * dev.norm_blocks_per_sm) as usize)
            }
        } else if rw.inner.is_empty() {
            // Each block walks at least 8 rows, so the partials stay small.
            (rw.rows / 8)
                .max(1)
                .min(((dev.sm_count * 8) as usize / tiles).max(1))
        } else {
            rw.rows
                .min(((dev.sm_count * dev.row_blocks_per_sm) as usize / tiles).max(1))
        };
        let outer: Vec<(Reduction, usize)> = rw
            .outer
            .iter()
            .map(|&r| {
                let red = all_reds[r].clone();
                let t = cx.add_temp(
                    red.acc(f),
                    row_blocks.max(1) * rw.cols,
                    format!("row-block partials of {}", f.value(red.outputs[0]).name),
                );
                (red, t)
            })
            .collect();
        let inner: Vec<Reduction> = rw.inner.iter().map(|&r| all_reds[r].clone()).collect();
        let per_row: Vec<(ValueId, RowTarget)> = rw
            .per_row
            .iter()
            .map(|&(v, p)| (v, RowTarget::Output(p)))
            .collect();
        let spec = crate::rowwise::Spec {
            rows: rw.rows,
            cols: rw.cols,
            last: rw.last,
            width: w,
            inner: &inner,
            outer: &outer,
            full: &rw.full,
            per_row: &per_row,
            row_blocks,
            unroll: dev.row_unroll as usize,
        };
        match crate::rowwise::build(&cx, &rw.name, &spec) {
            Ok(k) => kernels.push(k),
            Err(e @ CodegenError::NoFit(_)) => {
                return Err((e, Some(rw.inner.iter().chain(&rw.outer).copied().collect())))
            }
            Err(e) => return Err((e, None)),
        }
        if !outer.is_empty() {
            // Pointwise groups with one element per column that read only
            // these sums (and inputs) are written by the combine kernel.
            let mut epilogue = Vec::new();
            pointwise_groups.retain(|&gi| {
                let (shape, outs) = &groups[gi];
                let reads = direct(f, outs.iter().map(|o| o.0), all_reds);
                let fits = shape.iter().product::<usize>() == rw.cols
                    && !reads.is_empty()
                    && reads.iter().all(|r| rw.outer.contains(r));
                if fits {
                    epilogue.extend(outs.iter().copied());
                }
                !fits
            });
            kernels.push(
                outer::combine_many(
                    &mut cx,
                    &format!("{}_c", rw.name),
                    &outer,
                    row_blocks,
                    rw.cols,
                    &epilogue,
                )
                .map_err(|e| (e, None))?,
            );
        }
    }
    for nm in &loop_norms {
        let (_, outs) = &groups[nm.group];
        let roots = (nm.reds.iter().map(|&r| all_reds[r].x))
            .chain(outs.iter().chain(&nm.per_row).map(|o| o.0))
            .collect();
        build_specials(&mut cx, &mut kernels, roots)?;
        let reds: Vec<Reduction> = nm.reds.iter().map(|&r| all_reds[r].clone()).collect();
        let per_row: Vec<(ValueId, RowTarget)> = nm
            .per_row
            .iter()
            .map(|&(v, p)| (v, RowTarget::Output(p)))
            .collect();
        let spec = persistent::Spec {
            rows_shape: &nm.rows,
            inner_shape: &nm.inner,
            reductions: &reds,
            full: outs,
            per_row: &per_row,
        };
        let name = format!("fb_n{}", nm.group);
        match persistent::build(&cx, &name, &spec) {
            Ok(k) => kernels.push(k),
            Err(e @ CodegenError::NoFit(_)) => {
                return Err((e, Some(nm.reds.iter().copied().collect())))
            }
            Err(e) => return Err((e, None)),
        }
    }
    for &gi in &pointwise_groups {
        let (shape, outs) = &groups[gi];
        build_specials(&mut cx, &mut kernels, outs.iter().map(|o| o.0).collect())?;
        kernels
            .push(pointwise::build(&cx, &format!("fb_p{gi}"), shape, outs).map_err(|e| (e, None))?);
    }
    let mut source = String::from(include_str!("prelude.cu"));
    for (src, _) in &kernels {
        source.push('\n');
        source.push_str(src);
    }
    Ok(Plan {
        source,
        kernels: kernels
            .into_iter()
            .map(|(src, mut k)| {
                k.code_hash = crate::plan::code_hash(&src);
                k
            })
            .collect(),
        temps: cx.temps,
        outputs: outputs.to_vec(),
        alias_writes: vec![],
    })
}

fn is_count(f: &Fusion, r: &Reduction, v: ValueId) -> bool {
    matches!(r.kind, crate::reduction::Kind::Welford)
        && r.outputs.get(2) == Some(&v)
        && f.value(v).is_tensor()
}

/// Indices (into `all`) of the reductions the values read, directly or through other reductions.
fn closure(f: &Fusion, values: impl Iterator<Item = ValueId>, all: &[Reduction]) -> Vec<usize> {
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
    let mut stack: Vec<ValueId> = values.collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if let ValueDef::Node { node, .. } = f.value(v).def {
            if let Some(i) = all.iter().position(|r| r.node == node && !r.inline(f)) {
                if !out.contains(&i) {
                    out.push(i);
                }
                if !through {
                    continue;
                }
            }
            stack.extend(f.nodes[node].op.operands());
        }
    }
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
    values.max(inputs) * 8
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
