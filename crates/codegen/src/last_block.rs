//! A reduction's partials combined by the last block to store its own, in
//! the same kernel, instead of by a kernel of their own (`FUSEBENCH_COMBINE=
//! last-block`; off by default: over 75 reductions on the H200 it was 2.2%
//! slower than the combine kernels it saves, 1.0-1.6 us each, though it was
//! predicted faster). Each block of partials stores them, fences, and takes a ticket from
//! a counter of its results; the block that takes the last ticket reads every
//! partial of those results from L2, in a fixed order (two runs give the same
//! bits), writes the results and resets the counter for the next launch. The
//! counters are a zeroed temporary (`plan::Temp::zeroed`).

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::lower::Lowerer;
use crate::reduction::{Kind, Reduction};
use crate::{ctype, view};
use fusebench_ir::{Fusion, Literal, ValueId};

/// The value pass `pass` of `r` stores, and what to call it.
pub fn target(r: &Reduction, pass: usize) -> (ValueId, &'static str) {
    match (&r.kind, pass) {
        (Kind::Plain(_), _) => (r.outputs[0], "result"),
        (Kind::Welford, 0) => (r.outputs[0], "mean"),
        (Kind::Welford, _) => (r.outputs[1], "M2"),
        (Kind::VarMean { .. }, 0) => (r.outputs[1], "mean"),
        (Kind::VarMean { .. }, _) => (r.outputs[0], "variance"),
    }
}

/// Writes result `var` of pass `pass` from its fold `a` into temp `result`,
/// holds it for the epilogue, and writes `epilogue` (outputs with one element
/// per result that read only its results and inputs) at the same index.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    lw: &mut Lowerer,
    f: &Fusion,
    r: &Reduction,
    pass: usize,
    a: &str,
    result: usize,
    epilogue: &[(ValueId, usize)],
    var: &str,
) -> Result<(), CodegenError> {
    let acc = r.acc(f);
    let k = r.count(f);
    let (target, _) = target(r, pass);
    let d = f.value(target).dtype;
    let value = match (&r.kind, pass) {
        (Kind::Plain(_), _) | (Kind::Welford, 1) => a.to_string(),
        (_, 0) => format!("{a} / {}", ctype::literal(acc, Literal::Int(k as i64))),
        (Kind::VarMean { correction }, _) => format!(
            "{a} / {}",
            ctype::literal(acc, Literal::Int((k as i64 - correction).max(0)))
        ),
        (Kind::Welford, _) => unreachable!(),
    };
    let h = lw.fresh("h");
    lw.line(&format!("const {} {h} = {};", ctype::reg(d), ctype::convert(acc, d, &value)));
    lw.line(&format!("tmp{result}[{var}] = {};", ctype::to_storage(d, &h)));
    let out_shape = f.value(r.outputs[0]).shape.clone().unwrap_or_default();
    lw.hold(
        target,
        crate::lower::Held {
            expr: h,
            index: view::delinearize(Ix::var(var), &out_shape),
        },
    );
    // Each epilogue element reads the result of its own index (checked by
    // the caller), held above or written just before by this thread.
    for &(v, pos) in epilogue {
        let idx = view::delinearize(Ix::var(var), f.value(v).shape.as_deref().unwrap_or(&[]));
        let e = lw.value_at(v, &idx)?;
        lw.line(&format!("out{pos}[{var}] = {};", ctype::to_storage(f.value(v).dtype, &e)));
    }
    Ok(())
}

/// The temporaries pass `pass` of `r` needs when its last blocks combine:
/// `counters` zeroed counters (one per group of blocks that share results)
/// and the pass's result. Returns (counters, result).
pub fn add_temps(cx: &mut crate::kernel::Context, r: &Reduction, pass: usize, counters: usize) -> (usize, usize) {
    let f = cx.f;
    let (target, what) = target(r, pass);
    let name = &f.value(r.outputs[0]).name;
    let c = cx.add_zeroed_temp(fusebench_ir::DType::Int32, counters, format!("counters of {name}"));
    let result = cx.add_temp(f.value(target).dtype, f.value(r.outputs[0]).numel(), format!("{what} of {name}"));
    (c, result)
}

/// Whether the partials of `r` may be combined by the last block: its
/// accumulator is one the L2 load (`__ldcg`) and the counters serve.
pub fn fits(f: &Fusion, r: &Reduction) -> bool {
    !r.acc(f).is_complex()
}

/// After every thread stored its partials: takes the ticket of counter
/// `key` (in zeroed temp `counters`) and opens the code only the last of
/// `splits` blocks runs. Every thread of the block must reach this.
pub fn open(lw: &mut Lowerer, counters: usize, key: &str, splits: usize) {
    lw.line("__shared__ int fb_last;");
    lw.line("__threadfence();");
    lw.line("__syncthreads();");
    lw.line(&format!(
        "if (threadIdx.x == 0 && threadIdx.y == 0) fb_last = atomicAdd(&tmp{counters}[{key}], 1) == {};",
        splits as i64 - 1
    ));
    lw.line("__syncthreads();");
    lw.open("if (fb_last) {");
    lw.line("__threadfence();");
}

/// Resets the counter for the next launch and closes what `open` opened.
pub fn close(lw: &mut Lowerer, counters: usize, key: &str) {
    lw.line(&format!("if (threadIdx.x == 0 && threadIdx.y == 0) tmp{counters}[{key}] = 0;"));
    lw.close("}");
}
