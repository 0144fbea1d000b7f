//! The GPU side of `check`: run on the device, compare with the CPU reference.

use fusebench_engine::Engine;
use fusebench_ir::Fusion;
use fusebench_reference::{compare::compare_with_slack, compare::Comparison, Arg, Tensor};
use serde::Serialize;

#[derive(Serialize, Default)]
pub struct GpuCheck {
    pub kernels: usize,
    pub compile_ms: f64,
    /// The libraries' planning of products and attention (cuBLASLt, cuDNN).
    pub library_ms: f64,
    /// Reading the cached image (on a hit) and loading the module: with a
    /// cache hit, the whole cost of a compile the second time.
    pub load_ms: f64,
    pub from_cache: bool,
    pub outputs: Vec<Comparison>,
    pub ok: bool,
    /// Per alias output (its position): the input it updated in place, read
    /// back from the device, against the CPU reference's value of the output.
    pub updated_inputs: Vec<(usize, Comparison)>,
    /// The outputs of the last run (for `check --data`).
    #[serde(skip)]
    pub last: Vec<Tensor>,
}

/// Runs `f` on the GPU once per poison (outputs filled with 0xFF bytes, then
/// with zero bytes, so that no unwritten element can pass) and compares every
/// output with `cpu`; an output is reported from the first fill it fails under.
pub fn check(
    engine: &Engine,
    f: &Fusion,
    inputs: &[Arg],
    cpu: &[Tensor],
) -> anyhow::Result<GpuCheck> {
    let p = engine.prepare(f, inputs)?;
    // Float sums may differ from the exact sum by their accumulation's rounding.
    let slack = fusebench_reference::sum_bound::sum_bounds(f, inputs);
    let mut outputs: Vec<Comparison> = Vec::new();
    let mut last = Vec::new();
    let mut updated: Vec<(usize, Comparison)> = Vec::new();
    let orders = fusebench_codegen::layout::orders(f);
    for byte in fusebench_engine::POISONS {
        // An in-place update changed the inputs: each run starts from the given ones.
        p.reset_inputs(inputs)?;
        p.run_poisoned(byte)?;
        for (o, t) in p.updated_inputs(inputs)? {
            let c = compare_with_slack(&t, &cpu[o], slack[o].as_ref());
            match updated.iter_mut().find(|(k, _)| *k == o) {
                Some((_, prev)) if prev.ok && !c.ok => *prev = c,
                Some(_) => {}
                None => updated.push((o, c)),
            }
        }
        let outs = p.outputs(f, inputs)?;
        let these: Vec<Comparison> = outs
            .iter()
            .zip(cpu)
            .zip(&slack)
            .enumerate()
            .map(|(k, ((g, c), s))| {
                same_layout(&orders[k], g, c, compare_with_slack(g, c, s.as_ref()))
            })
            .collect();
        if outputs.is_empty() {
            outputs = these;
        } else {
            for (o, t) in outputs.iter_mut().zip(these) {
                if o.ok && !t.ok {
                    *o = t;
                }
            }
        }
        last = outs;
    }
    Ok(GpuCheck {
        kernels: p.kernels.len(),
        compile_ms: p.compile_ms,
        library_ms: p.library_ms,
        load_ms: p.modules.iter().map(|m| m.info.load_ms).sum(),
        from_cache: !p.modules.is_empty() && p.modules.iter().all(|m| m.from_cache()),
        ok: outputs.iter().all(|c| c.ok) && updated.iter().all(|(_, c)| c.ok),
        outputs,
        updated_inputs: updated,
        last,
    })
}

/// An output with a stride order must come back in that layout, as the CPU
/// reference lays it (and nvFuser allocates it): the same strides on every
/// dim of extent > 1.
fn same_layout(
    order: &Option<Vec<usize>>,
    gpu: &Tensor,
    cpu: &Tensor,
    mut c: Comparison,
) -> Comparison {
    if order.is_none() || c.problem.is_some() {
        return c;
    }
    let differs = gpu
        .shape()
        .iter()
        .zip(gpu.strides().iter().zip(cpu.strides()))
        .any(|(&e, (a, b))| e > 1 && a != b);
    if differs {
        c.ok = false;
        c.problem = Some(format!(
            "stride order {:?}: the GPU output has strides {:?}, the reference {:?}",
            order.as_ref().unwrap(),
            gpu.strides(),
            cpu.strides()
        ));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use fusebench_ir::DType;

    #[test]
    fn a_stride_ordered_output_in_another_layout_is_a_mismatch() {
        let vals: Vec<f64> = (0..6).map(f64::from).collect();
        let row = Tensor::from_f64s(DType::Float, &[2, 3], &vals).unwrap();
        let col = row.relaid(&[1, 2]).unwrap();
        let ok = |g: &Tensor, c: &Tensor| compare_with_slack(g, c, None);
        // Same values: fine without an order, a mismatch with one.
        assert!(same_layout(&None, &row, &col, ok(&row, &col)).ok);
        let c = same_layout(&Some(vec![0, 1]), &row, &col, ok(&row, &col));
        assert!(
            !c.ok && c.problem.as_deref().unwrap().contains("[3, 1]"),
            "{:?}",
            c.problem
        );
        assert!(same_layout(&Some(vec![0, 1]), &col, &col, ok(&col, &col)).ok);
        // Dims of extent 1 may have any stride.
        let a = Tensor::from_f64s(DType::Float, &[1, 3], &vals[..3]).unwrap();
        let b = a.relaid(&[1, 1]).unwrap();
        assert!(same_layout(&Some(vec![0, 1]), &a, &b, ok(&a, &b)).ok);
    }
}
