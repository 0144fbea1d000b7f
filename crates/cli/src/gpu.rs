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
    // The per-element bounds, worked out at the first output past its tolerance.
    let mut bounds: Option<Vec<Option<Tensor>>> = None;
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
                let cmp = within_bound(f, inputs, &mut bounds, k, g, c, s.as_ref());
                same_layout(&orders[k], g, c, cmp)
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

/// `gpu` against `cpu` within the dtype's tolerance plus `slack` (a sum's
/// accumulation); where that fails, within the larger of the slack and the
/// error bound the fuzzer carries through every op (`bounds::run_with_bounds`:
/// a 16-bit product rounded before a SiLU may be an ulp away and the SiLU
/// moves it further than the output's tolerance). Elements whose bound is not
/// finite (uncertain) get no more than the tolerance.
fn within_bound(
    f: &Fusion,
    inputs: &[Arg],
    bounds: &mut Option<Vec<Option<Tensor>>>,
    k: usize,
    gpu: &Tensor,
    cpu: &Tensor,
    slack: Option<&Tensor>,
) -> Comparison {
    let c = compare_with_slack(gpu, cpu, slack);
    if c.ok || c.problem.is_some() || !cpu.dtype().is_float() {
        return c;
    }
    let b = bounds.get_or_insert_with(|| {
        fusebench_reference::bounds::run_with_bounds(f, inputs)
            .map(|(_, b)| b)
            .unwrap_or_default()
    });
    let Some(Some(bound)) = b.get(k) else { return c };
    if bound.shape() != cpu.shape() {
        return c;
    }
    let slack = slack
        .filter(|s| s.shape() == cpu.shape())
        .map(|s| s.to_f64_vec());
    let wider: Vec<f64> = bound
        .to_f64_vec()
        .iter()
        .enumerate()
        .map(|(i, &e)| {
            let e = if e.is_finite() { e } else { 0.0 };
            e.max(slack.as_ref().map_or(0.0, |s| s[i]))
        })
        .collect();
    let Ok(wider) = Tensor::from_f64s(fusebench_ir::DType::Double, cpu.shape(), &wider) else {
        return c;
    };
    let mut w = compare_with_slack(gpu, cpu, Some(&wider));
    if !w.ok {
        return c;
    }
    w.by_bound = c.mismatches;
    w
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

    /// A Half product rounded, then SiLU in Float, rounded to Half: where the
    /// product lands an ulp away the output may move past Half's tolerance
    /// but not past the bound carried through the ops; an error past both,
    /// or where the bound is not finite, stays a mismatch.
    #[test]
    fn an_error_within_the_carried_bound_passes_and_one_past_it_does_not() {
        let text = "from nvfuser import FusionDefinition, DataType\n\
def nvfuser_fusion_id0(fd : FusionDefinition) -> None :\n    \
a = fd.define_tensor(shape=[4, 64], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)\n    \
b = fd.define_tensor(shape=[64, 8], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)\n    \
p = fd.ops.matmul(a, b)\n    \
x = fd.ops.cast(p, dtype=DataType.Float)\n    \
s = fd.ops.sigmoid(x)\n    \
y = fd.ops.mul(x, s)\n    \
z = fd.ops.cast(y, dtype=DataType.Half)\n    \
fd.add_output(z)\n\n\
with FusionDefinition() as fd:\n    nvfuser_fusion_id0(fd)\n";
        let f = fusebench_frontend::parse_script("t.py", text).unwrap();
        let inputs = fusebench_reference::generate_inputs(&f, 7).unwrap().inputs;
        let cpu = fusebench_reference::run(&f, &inputs).unwrap();
        let (_, bounds) = fusebench_reference::bounds::run_with_bounds(&f, &inputs).unwrap();
        let (want, bound) = (cpu[0].to_f64_vec(), bounds[0].as_ref().unwrap().to_f64_vec());
        let tol = fusebench_reference::compare::Tolerance::for_dtype(DType::Half);
        let abs_max = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        // The element whose bound exceeds its tolerance by the most.
        let room = |i: usize| bound[i] - (tol.rtol * want[i].abs() + tol.atol * abs_max);
        let i = (0..want.len()).max_by(|&x, &y| room(x).total_cmp(&room(y))).unwrap();
        assert!(room(i) > 0.0, "the bound never exceeds Half's tolerance: the test shows nothing");
        let moved = |by: f64| {
            let mut g = want.clone();
            g[i] += by;
            Tensor::from_f64s(DType::Half, cpu[0].shape(), &g).unwrap()
        };
        let run = |g: &Tensor| within_bound(&f, &inputs, &mut None, 0, g, &cpu[0], None);
        // Between the tolerance and the bound (rounded to Half on the way).
        let inside = moved(bound[i] - room(i) / 2.0);
        let d = (inside.to_f64_vec()[i] - want[i]).abs();
        assert!(d > tol.rtol * want[i].abs() + tol.atol * abs_max && d <= bound[i], "{d} not between the two");
        let c = run(&inside);
        assert!(c.ok && c.by_bound == 1, "{c:?}");
        // Past the bound.
        let c = run(&moved(2.0 * bound[i] + 1.0));
        assert!(!c.ok && c.by_bound == 0, "{c:?}");
        // A bound that is not finite widens nothing.
        let mut b = bounds.clone();
        let mut inf = bound.clone();
        inf[i] = f64::INFINITY;
        b[0] = Some(Tensor::from_f64s(DType::Double, cpu[0].shape(), &inf).unwrap());
        let c = within_bound(&f, &inputs, &mut Some(b), 0, &inside, &cpu[0], None);
        assert!(!c.ok, "{c:?}");
    }

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
