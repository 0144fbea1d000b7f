//! Segmentation: which outputs share a kernel, which reductions are kept on
//! chip and which are stored for later kernels, and in what order kernels run.
//! Decided from the fusion's structure, shapes and the device alone: here the
//! outputs are grouped and a plan tried (again with more reductions stored
//! where one does not fit), `decide.rs` takes the decisions, `build.rs` builds
//! the kernels in the order they run.

use crate::alias;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::{OutputPlan, OutputSource, Plan};
use crate::reduction::Reduction;
use fusebench_ir::{Fusion, ValueDef, ValueId};
use std::collections::{BTreeSet, HashMap};

pub use crate::device::Device;

mod build;
mod decide;

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
    // Outputs reshaped from a normalization's rows are planned before their
    // reshape (the same buffer), so the row kernel writes them (crate::reshaped).
    let flat = if dev.reshaped_outputs { crate::reshaped::sources(f, &orders) } else { vec![] };
    let unreshaped = flat.iter().any(Option::is_some).then(|| crate::reshaped::unreshaped(f, &flat));
    let original = f;
    let f: &Fusion = unreshaped.as_ref().unwrap_or(f);
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
    crate::reshaped::restore(original, &flat, &mut p);
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
    // totals their row kernel accumulates (`decide::on_chip`), as it is for many
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

/// A plan that failed, with the reductions to store before trying again.
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
    let s = decide::Inputs { f, layouts, dev, groups, all_reds, forced };
    let units = decide::units(&s, &cx)?;
    let kernels = build::kernels(&s, &mut cx, units)?;
    Ok(build::assemble(cx, kernels, outputs))
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
