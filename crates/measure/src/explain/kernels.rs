//! The kernels: code and launch configuration. When the two were timed
//! differently (policy, set-up or method), B's sibling at A's conditions less
//! A measures the change, as a run changing only the kernels does, and B's
//! subject against A's under B's conditions says what the change adds
//! together with the policy and method (`Ctx::subject_check`). When they
//! were timed the same way, or no sibling holds the time, each record's own
//! kernel medians: kernels the same on both sides (code hash and launch
//! shape) change only by the other causes; for those that differ, the effect
//! alone is B's kernels with the estimated environmental effects (cache
//! policy, clocks) taken out, less A's: kB / r − kA, r being the ratio those
//! effects predict for A. Under B's conditions the change is r times that;
//! the extra (r − 1) × effect is what the causes add together. Events times
//! count without the launch overhead per kernel. When the GPU, the input
//! layout or the definition differs, the kernels differ because of it, and
//! their effect is counted under that cause; so too when only the compiler or
//! a library version differs and the kernels' source is the same.

use super::check::{Check, Ctx, Est, Joint};
use super::Cause;
use crate::record::{KernelRecord, Measurement};

pub(super) const TITLE: &str = "different kernels (code or launch configuration)";

fn same(x: &KernelRecord, y: &KernelRecord) -> bool {
    x.code_hash == y.code_hash
        && x.grid == y.grid
        && x.block == y.block
        && x.shared_bytes == y.shared_bytes
        && x.registers == y.registers
}

fn differences(a: &Measurement, b: &Measurement) -> Vec<String> {
    let mut d = Vec::new();
    if a.kernels.len() != b.kernels.len() {
        d.push(format!(
            "{} kernels vs {}",
            a.kernels.len(),
            b.kernels.len()
        ));
    }
    for (i, (x, y)) in a.kernels.iter().zip(&b.kernels).enumerate() {
        if x.code_hash != y.code_hash {
            d.push(format!(
                "kernel {i} ({}): code {} vs {}",
                x.name, x.code_hash, y.code_hash
            ));
        }
        if x.grid != y.grid || x.block != y.block {
            d.push(format!(
                "kernel {i} ({}): grid {:?} block {:?} vs grid {:?} block {:?}",
                x.name, x.grid, x.block, y.grid, y.block
            ));
        }
        if x.shared_bytes != y.shared_bytes || x.registers != y.registers {
            d.push(format!(
                "kernel {i} ({}): {} B shared, {} registers vs {} B, {}",
                x.name, x.shared_bytes, x.registers, y.shared_bytes, y.registers
            ));
        }
    }
    d
}

/// The FUSEBENCH_* settings that change kernels (each record's `knobs`) set
/// differently on the two sides, in words: what chose other kernels when the
/// fusion, inputs and GPU are the same.
fn settings(a: &Measurement, b: &Measurement) -> Option<String> {
    let value = |m: &Measurement, k: &str| m.knobs.get(k).map_or("unset", String::as_str).to_string();
    let keys: std::collections::BTreeSet<&String> = a.knobs.keys().chain(b.knobs.keys()).collect();
    let d: Vec<String> = keys
        .into_iter()
        .filter(|k| a.knobs.get(*k) != b.knobs.get(*k))
        .map(|k| format!("{k} {} in A, {} in B", value(a, k), value(b, k)))
        .collect();
    (!d.is_empty()).then(|| d.join(", "))
}

/// The same kernels by their source (code hashes, position by position):
/// what differs is how they were compiled or which library kernels ran.
fn same_source(a: &Measurement, b: &Measurement) -> bool {
    a.kernels.len() == b.kernels.len() && a.kernels.iter().zip(&b.kernels).all(|(x, y)| x.code_hash == y.code_hash)
}

/// The kernels of `m` (by position) that have no identical kernel at the
/// same position in `other`.
fn changed<'a>(m: &'a Measurement, other: &Measurement) -> Vec<&'a KernelRecord> {
    m.kernels
        .iter()
        .enumerate()
        .filter(|(i, k)| !other.kernels.get(*i).is_some_and(|o| same(k, o)))
        .map(|(_, k)| k)
        .collect()
}

pub(super) fn check(ctx: &Ctx) -> Check {
    let (a, b) = (ctx.a(), ctx.b());
    if a.kernels.is_empty() || b.kernels.is_empty() {
        return Check::unknown(format!(
            "A records {}, B {}: a record without its kernels cannot be compared",
            crate::plural(a.kernels.len(), "kernel"),
            b.kernels.len()
        ));
    }
    let d = differences(a, b);
    if d.is_empty() {
        return Check::ruled_out(format!(
            "{}, same code hashes and launch configurations",
            crate::plural(a.kernels.len(), "kernel")
        ));
    }
    let mut detail = d.join("; ");
    if let Some(s) = settings(a, b) {
        detail += &format!("; the settings that change kernels differ: {s}");
    }
    if let Some(c) = ctx.subject_check(Cause::Kernels, &detail) {
        return c;
    }
    // The toolchain owns the change only where the source is the same: the
    // same code compiled or run by another version.
    let owner = [Cause::Gpu, Cause::InputLayout, Cause::Fusion]
        .into_iter()
        .find(|&c| ctx.differs(c))
        .or_else(|| (ctx.differs(Cause::Toolchain) && same_source(a, b)).then_some(Cause::Toolchain));
    let (ka, kb) = (changed(a, b), changed(b, a));
    let valid = |ks: &[&KernelRecord]| {
        ks.iter()
            .all(|k| k.median_us.is_finite() && k.median_us > 0.0)
    };
    if !valid(&ka) || !valid(&kb) {
        let why = "not measured: a record lacks the kernels' own times";
        return Check::differs(
            detail,
            match owner {
                Some(c) => Est::CountedUnder(c, None),
                None => Est::open(why),
            },
        );
    }
    let own = |m: &Measurement, ks: &[&KernelRecord]| {
        ks.iter()
            .map(|k| k.median_us - ctx.overhead_in(m))
            .sum::<f64>()
    };
    let (ta, tb) = (own(a, &ka), own(b, &kb));
    let a_us = ctx.kernel_us(a);
    let env = ctx.measured(Cause::WorkingSetVsL2)
        + ctx.measured(Cause::CachePolicy)
        + ctx.measured(Cause::Clocks);
    // Without a kernel time of A's own (all overhead), nothing can be taken out.
    let r = if a_us > 0.0 { 1.0 + env / a_us } else { 1.0 };
    let alone = tb / r - ta;
    let names = |ks: &[&KernelRecord]| {
        ks.iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut model = format!(
        "{detail}; the kernels that differ take A {ta:.2} us ({}), B {tb:.2} us ({})",
        names(&ka),
        names(&kb)
    );
    if ctx.overhead_in(a) > 0.0 || ctx.overhead_in(b) > 0.0 {
        model += ", their events times less the launch overhead per kernel";
    }
    if (r - 1.0).abs() > 1e-12 {
        model += &format!(
            "; B's with the estimated cache and clock effects taken out (÷ {r:.3}): {:.2} us",
            tb / r
        );
    }
    model += &format!("; effect {alone:+.2} us");
    // With nothing to take out, the kernels' own medians measure the change;
    // otherwise the models of the other causes shape it.
    let corrected = (r - 1.0).abs() > 1e-12 || ctx.overhead_in(a) > 0.0 || ctx.overhead_in(b) > 0.0;
    let mut c = Check::differs(
        match owner {
            Some(o) => format!("{model}, counted under {} (their source)", o.title()),
            None => model,
        },
        match owner {
            Some(o) => Est::CountedUnder(o, Some(alone)),
            None if corrected => Est::Model {
                us: alone,
                model: "model: the kernels' own medians, B's with the cache, clock and method \
                        estimates taken out; a kernel's change does not scale with its \
                        environment (docs/why-timings-differ.md)"
                    .into(),
            },
            None => Est::Measured {
                us: alone,
                from: "the kernels that differ, each record's own kernel medians".into(),
            },
        },
    );
    if (r - 1.0).abs() > 1e-12 {
        c.together = Some(Joint {
            us: (r - 1.0) * alone,
            range: None,
            detail: format!(
                "the kernels' change under B's conditions is {r:.3} × their change under A's \
                 (the ratio the cache and clock estimates predict)"
            ),
        });
    }
    c
}
