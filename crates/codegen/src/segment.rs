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
}

impl Default for Device {
    /// An H200's count, for planning without a device at hand.
    fn default() -> Self {
        Device { sm_count: 132 }
    }
}

/// Plans a fusion for inputs with the given layouts (strides and offset per
/// tensor input, by input position; `None` means dense row-major).
pub fn plan(f: &Fusion, layouts: &[Option<(Vec<i64>, i64)>], dev: Device) -> Result<Plan, CodegenError> {
    let outputs = resolve_outputs(f, layouts);
    let all_reds: Vec<Reduction> = (0..f.nodes.len()).filter_map(|n| Reduction::of(f, n)).collect();
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
        match try_plan(f, layouts, dev, &outputs, &groups, &all_reds, &stored_forced) {
            Ok(p) => return Ok(p),
            Err((CodegenError::NoFit(_), Some(more))) if !more.is_subset(&stored_forced) => stored_forced.extend(more),
            Err((e, _)) => return Err(e),
        }
    }
    Err(CodegenError::Unsupported("no schedule fits this fusion".into()))
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
    let idx_type = if max_extent(f, layouts) < (1u64 << 31) { "int" } else { "long long" };
    let mut cx = Context { f, layouts: layouts.to_vec(), stored: HashMap::new(), temps: vec![], idx_type, sm_count: dev.sm_count };

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
                red.is_inner(f) && f.value(red.x).shape.as_ref() == Some(shape) && red.dims.len() == all_reds[deps[0]].dims.len()
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
            if squeeze(shape) == squeeze(&nm.rows) && !deps.is_empty() && deps.iter().all(|d| nm.reds.contains(d)) {
                nm.per_row.extend(outs.iter().copied());
                return false;
            }
        }
        true
    });
    for &gi in &pointwise_groups {
        store.extend(closure(f, groups[gi].1.iter().map(|o| o.0), all_reds));
    }
    // Whatever a stored reduction reads must be stored too.
    loop {
        let more: BTreeSet<usize> =
            store.iter().flat_map(|&r| closure(f, std::iter::once(all_reds[r].x), all_reds)).filter(|r| !store.contains(r)).collect();
        if more.is_empty() {
            break;
        }
        store.extend(more);
    }

    let mut kernels: Vec<(String, Kernel)> = Vec::new();
    for &r in &store {
        let red = &all_reds[r];
        let name = format!("fb_r{}", red.node);
        if red.is_inner(f) {
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
            let spec = persistent::Spec {
                rows_shape: &xs[..xs.len() - k],
                inner_shape: &xs[xs.len() - k..],
                reductions: std::slice::from_ref(red),
                full: &[],
                per_row: &per_row,
            };
            kernels.push(persistent::build(&cx, &name, &spec).map_err(|e| (e, None))?);
            for (o, t) in per_row {
                let RowTarget::Temp(t) = t else { unreachable!() };
                let val = f.value(o);
                cx.stored.insert(o, crate::kernel::Stored { temp: t, dtype: val.dtype, shape: val.shape.clone().unwrap() });
            }
        } else {
            outer::build(&mut cx, &name, red, &mut kernels).map_err(|e| (e, None))?;
        }
    }
    for nm in &norms {
        let (_, outs) = &groups[nm.group];
        let reds: Vec<Reduction> = nm.reds.iter().map(|&r| all_reds[r].clone()).collect();
        let per_row: Vec<(ValueId, RowTarget)> = nm.per_row.iter().map(|&(v, p)| (v, RowTarget::Output(p))).collect();
        let spec = persistent::Spec { rows_shape: &nm.rows, inner_shape: &nm.inner, reductions: &reds, full: outs, per_row: &per_row };
        let name = format!("fb_n{}", nm.group);
        match persistent::build(&cx, &name, &spec) {
            Ok(k) => kernels.push(k),
            Err(e @ CodegenError::NoFit(_)) => return Err((e, Some(nm.reds.iter().copied().collect()))),
            Err(e) => return Err((e, None)),
        }
    }
    for &gi in &pointwise_groups {
        let (shape, outs) = &groups[gi];
        kernels.push(pointwise::build(&cx, &format!("fb_p{gi}"), shape, outs).map_err(|e| (e, None))?);
    }
    let mut source = String::from(include_str!("prelude.cu"));
    for (src, _) in &kernels {
        source.push('\n');
        source.push_str(src);
    }
    Ok(Plan { source, kernels: kernels.into_iter().map(|k| k.1).collect(), temps: cx.temps, outputs: outputs.to_vec() })
}

fn is_count(f: &Fusion, r: &Reduction, v: ValueId) -> bool {
    matches!(r.kind, crate::reduction::Kind::Welford) && r.outputs.get(2) == Some(&v) && f.value(v).is_tensor()
}

/// Indices (into `all`) of the reductions the values read, directly or through other reductions.
fn closure(f: &Fusion, values: impl Iterator<Item = ValueId>, all: &[Reduction]) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let mut stack: Vec<ValueId> = values.collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if let ValueDef::Node { node, .. } = f.value(v).def {
            if let Some(i) = all.iter().position(|r| r.node == node) {
                if !out.contains(&i) {
                    out.push(i);
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
            Some(off.unsigned_abs() + s.iter().zip(st).map(|(&e, &t)| (e.max(1) as u64 - 1) * t.unsigned_abs()).sum::<u64>() + 1)
        })
        .max()
        .unwrap_or(0);
    values.max(inputs) * 8
}

/// Decides, per output, whether a kernel writes it or it is a view.
fn resolve_outputs(f: &Fusion, layouts: &[Option<(Vec<i64>, i64)>]) -> Vec<OutputPlan> {
    let mut plans: Vec<OutputPlan> = Vec::new();
    for (pos, &v) in f.outputs.iter().enumerate() {
        let val = f.value(v);
        let shape = val.shape.clone().unwrap_or_default();
        let mut source = OutputSource::Written;
        if let Some(first) = f.outputs[..pos].iter().position(|&o| o == v) {
            source = view_of_output(&plans, first, &[], f).unwrap_or(OutputSource::Written);
        } else {
            let is_input = |x: ValueId| matches!(f.value(x).def, ValueDef::TensorInput(_));
            let other_output = |x: ValueId| f.outputs.iter().position(|&o| o == x);
            let (chain, end) = alias::view_chain(f, v, |x| is_input(x) || other_output(x).is_some());
            if end != v || is_input(v) {
                if is_input(end) {
                    let ipos = f.inputs.iter().position(|&i| i == end).unwrap();
                    let (st, off) = layouts[ipos].clone().unwrap_or_else(|| (alias::dense(f.value(end).shape.as_ref().unwrap()), 0));
                    if let Some((strides, offset)) = alias::through(f, &chain, st, off) {
                        source = OutputSource::InputView { input: ipos, strides, offset };
                    }
                } else if let Some(q) = other_output(end) {
                    // Only outputs already resolved can be the base of a view.
                    if q < pos {
                        if let Some(s) = view_of_output(&plans, q, &chain, f) {
                            source = s;
                        }
                    }
                }
            }
        }
        plans.push(OutputPlan { dtype: val.dtype, shape, source });
    }
    // A view of a later output: resolve in a second sweep, now that it is planned.
    for pos in 0..plans.len() {
        if !matches!(plans[pos].source, OutputSource::Written) {
            continue;
        }
        let v = f.outputs[pos];
        let other_output = |x: ValueId| f.outputs.iter().position(|&o| o == x);
        let (chain, end) = alias::view_chain(f, v, |x| other_output(x).is_some());
        if end == v {
            continue;
        }
        if let Some(q) = other_output(end) {
            if q != pos && !matches!(plans[q].source, OutputSource::OutputView { output, .. } if output == pos) {
                if let Some(s) = view_of_output(&plans, q, &chain, f) {
                    plans[pos].source = s;
                }
            }
        }
    }
    plans
}

fn view_of_output(plans: &[OutputPlan], q: usize, chain: &[usize], f: &Fusion) -> Option<OutputSource> {
    let (base, strides, offset) = match &plans[q].source {
        OutputSource::Written => (q, alias::dense(&plans[q].shape), 0),
        OutputSource::OutputView { output, strides, offset } => (*output, strides.clone(), *offset),
        OutputSource::InputView { input, strides, offset } => {
            let (s, o) = alias::through(f, chain, strides.clone(), *offset)?;
            return Some(OutputSource::InputView { input: *input, strides: s, offset: o });
        }
    };
    let (s, o) = alias::through(f, chain, strides, offset)?;
    Some(OutputSource::OutputView { output: base, strides: s, offset: o })
}
