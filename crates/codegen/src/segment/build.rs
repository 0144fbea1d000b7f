//! Building the decided units into kernels, in the order they run: scans,
//! stored reductions, row kernels (those with partials of sums over rows
//! first) and elementwise kernels, which is the order temporaries are
//! numbered in; then the module that holds them.

use super::decide::{Inputs, Unit, Units};
use super::{closure, Failure};
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::{Choice, Kernel, OutputPlan, Plan};
use crate::schedule::Work;
use fusebench_ir::ValueId;

/// Every unit's kernels, in order, each with its source.
pub(super) fn kernels(s: &Inputs, cx: &mut Context, units: Units) -> Result<Vec<(String, Kernel)>, Failure> {
    let (f, dev, groups, all_reds) = (s.f, s.dev, s.groups, s.all_reds);
    let Units { carrying, looped, standalone, joined, pointwise: pointwise_groups, scans } = units;
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
    // (after the index-family ops it reads). A scan of a value computed from
    // a reduction is built like the index-family ops, just before the first
    // kernel that reads it, once the reductions it reads are stored (where
    // one is kept on chip, the plan is redone with it stored).
    for (node, n) in f.nodes.iter().enumerate() {
        if let fusebench_ir::Op::Scan { x, .. } = &n.op {
            if !closure(f, std::iter::once(*x), all_reds).is_empty() {
                continue;
            }
            // A scan of a topk/argsort/scatter/index_put_accumulate result reads it stored.
            build_specials(cx, &mut kernels, vec![*x])?;
            let (epilogue, store) = scans.get(&node).map_or((&[][..], true), |(e, st)| (&e[..], *st));
            crate::scan::build(cx, node, epilogue, store, &mut kernels).map_err(|e| (e, None))?;
        }
    }
    // Then stored reductions, row kernels (those with partials of sums over
    // rows first) and elementwise kernels: the order temporaries are numbered in.
    let stored = standalone.iter().map(|(&r, u)| (r, u)).chain(joined.iter().map(|(r, u)| (*r, u)));
    for (r, u) in stored {
        let red = &all_reds[r];
        // Its input and the outputs its kernel also writes.
        let roots = match &u.c.work {
            Work::Stored { epilogue, full, siblings, .. } => std::iter::once(red.x)
                .chain(siblings.iter().map(|&q| all_reds[q].x))
                .chain(epilogue.iter().chain(full).map(|o| o.0))
                .collect(),
            _ => vec![red.x],
        };
        build_specials(cx, &mut kernels, roots)?;
        u.build(&dev, cx, &mut kernels)
            .map_err(|e| (e, None))?;
    }
    for u in carrying.iter().chain(&looped) {
        let rw = u.rows();
        let roots = (rw.inner.iter().chain(&rw.outer).chain(&rw.totals).map(|&r| all_reds[r].x))
            .chain(rw.full.iter().chain(&rw.per_row).map(|o| o.0))
            // What its combine kernels write too (a topk beside the column sums).
            .chain(rw.epilogue.iter().chain(&rw.totals_epilogue).map(|o| o.0))
            .collect();
        build_specials(cx, &mut kernels, roots)?;
        match u.build(&dev, cx, &mut kernels) {
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
        build_specials(cx, &mut kernels, outs.iter().map(|o| o.0).collect())?;
        let work = Work::Elementwise {
            shape: shape.clone(),
            outputs: outs.clone(),
        };
        let u = Unit::chosen(s.cand(format!("fb_p{gi}"), work), cx, &dev)?;
        u.build(&dev, cx, &mut kernels)
            .map_err(|e| (e, None))?;
    }
    Ok(kernels)
}

/// The plan of the built kernels: their module and each one's code hash and choice.
pub(super) fn assemble(cx: Context, kernels: Vec<(String, Kernel)>, outputs: &[OutputPlan]) -> Plan {
    let mut body = String::new();
    for (src, _) in &kernels {
        body.push('\n');
        body.push_str(src);
    }
    let source = crate::prelude::module(&body);
    let pieces = kernels.iter().map(|(src, k)| crate::plan::Module::alone(&k.name, src)).collect();
    Plan {
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
    }
}

/// The choice of kernels with one schedule only, built outside the registry.
fn only_choice(s: crate::plan::Schedule) -> Choice {
    use crate::plan::Schedule as S;
    match s {
        S::Scan => Choice::only(
            "scan",
            "scans have kernels of their own: along the innermost dim a block per line (with FUSEBENCH_SCAN_LINES a group of threads; with FUSEBENCH_SCAN_TILES, lines read across in shared-memory tiles), else a thread per line",
        ),
        S::Index => Choice::only(
            "index",
            "sort, topk, scatter and accumulate have kernels of their own",
        ),
        other => Choice::only(&format!("{other:?}"), "built outside the schedule registry"),
    }
}
