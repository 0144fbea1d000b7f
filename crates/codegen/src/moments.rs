//! A mean and variance (`var_mean`, `welford`) over dims that are not
//! fastest in memory, in one read of the input. The outer schedule
//! (outer.rs) otherwise takes two passes, the mean and then the squared
//! deviations from it, each reading the whole input: a column-major
//! LayerNorm of 2048x16384 bf16 read its input three times (78 us on the
//! H200, Triton 61).
//!
//! Per result, a plain sum of the values, S0, for the mean S0 / n as the
//! two passes compute it (the same order, the same bits); and Welford's
//! update over the values shifted by one of them, its first (`K`, or 0
//! where that is not finite), for M2: each thread runs it over its
//! elements, the block's rows of threads and then the blocks are merged
//! with Chan's formula in a fixed order (two runs give the same bits). A
//! block's element count is known from the geometry, so the combine's
//! merge weights are constants.
//!
//! Why this design, each step measured (H200, 24 column-major LayerNorms
//! against the two passes) or simulated in f32 (`bench/moments_numerics.py`):
//! - Welford's update unshifted: 1.099, slower (a division per element and
//!   a combine of dependent merges with divisions, 18.9 us against 1.7),
//!   and its running mean of values 1000 +- 0.5 rounds at each update: the
//!   variance came out 2.4e-5 off, outside f32's tolerance (simulated 2e-5).
//! - Sums shifted by K, mean = K + S1 / n: 0.821, but the mean erred by
//!   u |K| (4e-7 on means near 1e-3).
//! - S0, and shifted sums for M2 = S2 - S1^2 / n: 0.868, but a shift far
//!   from the mean amplifies the rounding by 1 + ((K - mean) / std)^2: one
//!   random fusion of 300 outside the fuzzer's bound, and 7x the bound
//!   simulated with the first element at 6 sigma.
//! - Welford's update on the shifted values: within 0.07 of the bound in
//!   every simulated case, and every check and 900 random fusions pass on
//!   the GPU. With an IEEE division per step 1.040 (its slow-path call kept
//!   each load until the previous step's updates were done); with the
//!   count's reciprocal branch-free 0.928; at most 4 results per thread
//!   0.911 (f32 0.855, bf16 0.971), torch.compile/fusebench 0.997.
//!
//! What it still lacks (bf16 2048x16384: partial 40.6 us against Triton's
//! 25.8): bytes in flight. ptxas issues each step's load after the previous
//! step's updates, and neither writing a batch's loads first nor loading one
//! batch ahead in registers changed that measurably; copying ahead into
//! shared memory (as next_row.rs does for rows) is the next step.

use crate::error::CodegenError;
use crate::kernel::{signature, Context};
use crate::outer::Geometry;
use crate::plan::{Kernel, Schedule};
use crate::reduction::{Kind, Reduction};
use crate::ix::Ix;
use crate::{ctype, view};
use fusebench_ir::{Literal, ValueId};

/// Results per thread at most: each keeps a sum, a mean, M2 and its shift.
/// At 8 bf16 lanes the partial takes 64 registers (4 blocks of 256 threads
/// per SM), at 4 lanes 40 (6 blocks): the 12 bf16 column-major LayerNorms
/// 1.008 and 0.971 of the two passes (H200), though 8 lanes were faster on
/// the longest columns (2048x16384: 72.2 us against 79.2).
pub const MAX_LANES: usize = 4;
/// Most rows of threads in a partial block (`outer::Geometry`): thread row 0
/// merges the others' statistics one after another, each merge with two
/// divisions, so a block 32 deep was up to 39% slower than 8 deep
/// (LayerNorm 512x7168 bf16 column-major, H200); 16 deep was faster.
pub const MAX_DEPTH: usize = 16;

/// Threads per result in a grouped combine.
const COMBINE_GROUPS: usize = 8;

/// Partials per result from which the combine is grouped. Measured (H200,
/// 42 column-major LayerNorms): at 64 partials per result the grouped
/// combine took 2.3 us where the merges in order took 4.4-4.8 (7.0 in f32
/// 2048x16384), at 32 2.1 against 2.5; at 12-17 partials it was slower
/// (2.2-3.8 against 1.4-2.7: its barriers, and the means read twice).
const GROUPED_FROM: usize = 32;

/// Whether `r` is computed in one pass here: a mean and variance of real
/// values, unless the last block combines partials (`FUSEBENCH_COMBINE=
/// last-block`, which folds one value per result).
pub fn one_pass(cx: &Context, r: &Reduction) -> bool {
    !matches!(r.kind, Kind::Plain(_)) && !r.acc(cx.f).is_complex() && !cx.dev.last_block_combine
}

/// The shift of lane `j`'s result: its first element (reduced index 0),
/// or 0 where that is not finite.
fn shift(lw: &mut crate::lower::Lowerer, f: &fusebench_ir::Fusion, r: &Reduction, x_idx: &[Ix], name: &str) -> Result<(), CodegenError> {
    let xv = lw.value_at(r.x, x_idx)?;
    let xv = r.to_acc(f, &xv);
    let reg = ctype::reg(r.acc(f));
    lw.line(&format!("{reg} {name} = {xv};"));
    lw.line(&format!("if (!isfinite({name})) {name} = 0;"));
    Ok(())
}

/// Appends the partial kernel and the combine of `r` laid out by `g`, and
/// records where its mean and variance (or M2) are stored; the combine also
/// writes `epilogue`.
pub fn build(
    cx: &mut Context,
    name: &str,
    r: &Reduction,
    g: &Geometry,
    epilogue: &[(ValueId, usize)],
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let acc = r.acc(f);
    let reg = ctype::reg(acc);
    let zero = ctype::literal(acc, Literal::Int(0));
    let Geometry { o, k, width, bx, by, splits, .. } = *g;
    let one = ctype::literal(acc, Literal::Int(1));
    let label = f.value(r.outputs[0]).name.clone();
    let sums = cx.add_temp(acc, splits * o, format!("partial sums of {label}"));
    let means = cx.add_temp(acc, splits * o, format!("partial shifted means of {label}"));
    let squares = cx.add_temp(acc, splits * o, format!("partial squared deviations of {label}"));

    // Partial kernel: thread (x, y) sums the values of reduced elements y,
    // y + by, ... of its block's chunk, for `width` results, and runs
    // Welford's update over them shifted; then the block's rows are added
    // and merged (Chan) in order 0, 1, ...
    let (mut lw, params) = cx.lowerer();
    cx.read_once(&mut lw, r, &[]);
    let it = lw.idx_type;
    let kept_idx = g.thread_results(&mut lw);
    // One count for the thread's lanes (they see the same elements), so one
    // reciprocal per vector.
    lw.line(&format!("{reg} n = {zero};"));
    for j in 0..width {
        lw.line(&format!("{reg} a{j} = {zero}, m{j} = {zero}, q{j} = {zero};"));
    }
    g.chunk_bounds(&mut lw);
    lw.open("if (live) {");
    lw.open("{");
    lw.allow_vector_loads_here();
    for j in 0..width {
        // At reduced index 0 written as a constant: an index in `r` would
        // be taken for the loop's loads of the same text.
        let x_idx: Vec<Ix> = g.x_index(&mut lw, r, &kept_idx, j).iter().map(|i| i.subst("r", &Ix::c(0))).collect();
        shift(&mut lw, f, r, &x_idx, &format!("k{j}"))?;
    }
    lw.lanes = None;
    // Loads batched `batch` to a bound check as elsewhere; ptxas still
    // issues each after the previous step's updates (it keeps the registers
    // low). Writing each batch's loads first, or one batch ahead in
    // registers across the loop's back edge (100 registers at 8 bf16 lanes),
    // measured no faster on 24 column-major LayerNorms (H200, 2026-12-02).
    let batch = cx.dev.loads_in_flight.max(1) as usize;
    crate::strided::emit(&mut lw, it, "r", "r0 + threadIdx.y", "r1", &by.to_string(), batch, |lw| {
        lw.allow_vector_loads_here();
        lw.line(&format!("n += {one};"));
        lw.line(&format!("const {reg} rn = fb_rcp_count(n);"));
        for j in 0..width {
            let x_idx = g.x_index(lw, r, &kept_idx, j);
            let xv = lw.value_at(r.x, &x_idx)?;
            let xv = r.to_acc(f, &xv);
            lw.line(&format!(
                "{{ const {reg} x = {xv}; a{j} += x; const {reg} y = x - k{j}; const {reg} d = y - m{j}; m{j} += d * rn; q{j} += d * (y - m{j}); }}"
            ));
        }
        lw.lanes = None;
        Ok(())
    })?;
    lw.close("}");
    lw.close("}");
    let cols = bx * width;
    lw.line(&format!("__shared__ {reg} fb_fa[{by}][{cols}];"));
    lw.line(&format!("__shared__ {reg} fb_fm[{by}][{cols}];"));
    lw.line(&format!("__shared__ {reg} fb_fq[{by}][{cols}];"));
    for j in 0..width {
        lw.line(&format!("fb_fa[threadIdx.y][threadIdx.x * {width} + {j}] = a{j};"));
        lw.line(&format!("fb_fm[threadIdx.y][threadIdx.x * {width} + {j}] = m{j};"));
        lw.line(&format!("fb_fq[threadIdx.y][threadIdx.x * {width} + {j}] = q{j};"));
    }
    lw.line("__syncthreads();");
    lw.open("if (live && threadIdx.y == 0) {");
    // Row y covered the elements r0 + y, r0 + y + by, ... below r1.
    lw.line(&format!("const {it} len = r1 - r0;"));
    // The lanes share one count, so each row's merge weights are computed
    // once for all of them.
    for j in 0..width {
        lw.line(&format!("{reg} ba{j} = a{j}, bm{j} = m{j}, bq{j} = q{j};"));
    }
    lw.open(&format!("for (int y = 1; y < {by} && y < len; ++y) {{"));
    lw.line(&format!("const {reg} yn = ({reg})((len - y + {}) / {by});", by - 1));
    lw.line(&format!("const {reg} fb_n = n + yn, w1 = yn / fb_n, w2 = n * yn / fb_n;"));
    lw.line("n = fb_n;");
    for j in 0..width {
        let at = format!("[y][threadIdx.x * {width} + {j}]");
        lw.line(&format!(
            "{{ ba{j} += fb_fa{at}; const {reg} d = fb_fm{at} - bm{j}; bm{j} += d * w1; bq{j} += fb_fq{at} + d * d * w2; }}"
        ));
    }
    lw.close("}");
    for j in 0..width {
        lw.line(&format!("tmp{sums}[({it})blockIdx.y * {o} + o + {j}] = ba{j};"));
        lw.line(&format!("tmp{means}[({it})blockIdx.y * {o} + o + {j}] = bm{j};"));
        lw.line(&format!("tmp{squares}[({it})blockIdx.y * {o} + o + {j}] = bq{j};"));
    }
    lw.close("}");
    let pname = format!("{name}_p0");
    let src = format!("{} {{\n{}}}\n", signature(&pname, (bx * by) as u32, &params), lw.code);
    let summary = format!(
        "outer mean and variance of {} over {k} in one pass (its sum, and Welford's update on values shifted by each result's first element), {splits} splits: {o} results, {width} per thread",
        f.value(r.x).name
    );
    out.push((src, g.partial_kernel(pname, params.args, summary)));

    // Combine: a thread per result, or 8 threads per result where the
    // partials are many (`grouped`); the mean is a / n either way.
    let (mean_out, second, what) = targets(r);
    let mean_t = cx.add_temp(f.value(mean_out).dtype, o, format!("mean of {label}"));
    let second_t = cx.add_temp(f.value(second).dtype, o, format!("{what} of {label}"));
    let (mut lw, mut params) = cx.lowerer();
    for &(v, pos) in epilogue {
        params.push_output(f, v, pos);
    }
    let names = Partials { sums, means, squares };
    let (bx, by) = if splits >= GROUPED_FROM {
        grouped(&mut lw, acc, g, &names)
    } else {
        in_order(&mut lw, acc, g, &names)
    };
    write_moments(&mut lw, f, r, ("a", "q"), (mean_t, second_t), epilogue)?;
    let cname = format!("{name}_c0");
    let src = format!("{} {{\n{}}}\n", signature(&cname, (bx * by) as u32, &params), lw.code);
    let epi: Vec<String> = epilogue.iter().map(|&(v, _)| f.value(v).name.clone()).collect();
    out.push((
        src,
        Kernel::new(
            cname,
            Schedule::OuterCombine,
            [crate::launch::grid_dim(o.div_ceil(bx).max(1)), 1, 1],
            [bx as u32, by as u32, 1],
            params.args,
            format!(
                "adds and merges {splits} partials into the mean and {what} of {label}{}",
                if epi.is_empty() { String::new() } else { format!("; writes [{}]", epi.join(", ")) }
            ),
        ),
    ));
    cx.store_in(mean_out, mean_t);
    cx.store_in(second, second_t);
    Ok(())
}

/// The temporaries the partial kernel wrote, per split and result.
struct Partials {
    sums: usize,
    means: usize,
    squares: usize,
}

/// A thread per result: the blocks' sums added and their moments merged in
/// order (Chan), each merge's weights constants (block s covered n_s =
/// min(chunk, k - s * chunk) elements). Leaves `a`, `q` and `o`, returns
/// the block's shape.
fn in_order(lw: &mut crate::lower::Lowerer, acc: fusebench_ir::DType, g: &Geometry, t: &Partials) -> (usize, usize) {
    let (it, reg) = (lw.idx_type, ctype::reg(acc));
    let (o, k, chunk, splits) = (g.o, g.k, g.chunk, g.splits);
    let Partials { sums, means, squares } = *t;
    let block = 128usize;
    lw.line(&format!("const {it} o = ({it})blockIdx.x * {block} + threadIdx.x;"));
    lw.line(&format!("if (o >= {o}) return;"));
    lw.line(&format!("{reg} a = {};", ctype::literal(acc, Literal::Int(0))));
    lw.line(&format!("for (int p = 0; p < {splits}; ++p) a += tmp{sums}[({it})p * {o} + o];"));
    lw.line(&format!("{reg} m = tmp{means}[o], q = tmp{squares}[o];"));
    let count = |s: usize| chunk.min(k - s * chunk) as f64;
    let mut na = count(0);
    for s in 1..splits {
        let nb = count(s);
        let c1 = ctype::literal(acc, Literal::Float(nb / (na + nb)));
        let c2 = ctype::literal(acc, Literal::Float(na * nb / (na + nb)));
        lw.line(&format!(
            "{{ const {reg} d = tmp{means}[({it}){s} * {o} + o] - m; m += d * {c1}; q += tmp{squares}[({it}){s} * {o} + o] + d * d * {c2}; }}"
        ));
        na += nb;
    }
    (block, 1)
}

/// 32 results per block, each over COMBINE_GROUPS threads (y), thread y
/// taking partials y, y + groups, ... The mean of the shifted values is
/// sum_s (n_s / k) m_s and M2 = sum_s q_s + n_s (m_s - mean)^2: terms
/// independent of one another, so the loads of every partial issue
/// together where merges in order chained them. The groups are added in
/// order y = 0, 1, ... through shared memory: the same bits every run.
/// Leaves `a`, `q` and `o` in the threads of y = 0 (the others return),
/// returns the block's shape.
fn grouped(lw: &mut crate::lower::Lowerer, acc: fusebench_ir::DType, g: &Geometry, t: &Partials) -> (usize, usize) {
    let (it, reg) = (lw.idx_type, ctype::reg(acc));
    let (o, k, chunk, splits) = (g.o, g.k, g.chunk, g.splits);
    let Partials { sums, means, squares } = *t;
    let (bx, groups) = (32usize, splits.min(COMBINE_GROUPS));
    let last = k - (splits - 1) * chunk;
    let weight = |n: usize| ctype::literal(acc, Literal::Float(n as f64 / k as f64));
    let count = |n: usize| ctype::literal(acc, Literal::Int(n as i64));
    let at = |t: usize| format!("tmp{t}[({it})s * {o} + o]");
    let zero = ctype::literal(acc, Literal::Int(0));
    lw.line(&format!("const {it} o = ({it})blockIdx.x * {bx} + threadIdx.x;"));
    lw.line(&format!("const bool live = o < {o};"));
    lw.line(&format!("__shared__ {reg} fb_ca[{groups}][{bx}], fb_cm[{groups}][{bx}];"));
    lw.line(&format!("{reg} a = {zero}, m = {zero}, q = {zero};"));
    lw.open(&format!("if (live) for (int s = threadIdx.y; s < {splits}; s += {groups}) {{"));
    lw.line(&format!("a += {};", at(sums)));
    lw.line(&format!("m += {} * (s == {} ? {} : {});", at(means), splits - 1, weight(last), weight(chunk)));
    lw.close("}");
    lw.line("fb_ca[threadIdx.y][threadIdx.x] = a; fb_cm[threadIdx.y][threadIdx.x] = m;");
    lw.line("__syncthreads();");
    lw.line("a = fb_ca[0][threadIdx.x]; m = fb_cm[0][threadIdx.x];");
    lw.line(&format!("for (int y = 1; y < {groups}; ++y) {{ a += fb_ca[y][threadIdx.x]; m += fb_cm[y][threadIdx.x]; }}"));
    lw.open(&format!("if (live) for (int s = threadIdx.y; s < {splits}; s += {groups}) {{"));
    lw.line(&format!(
        "const {reg} d = {} - m; q += {} + (s == {} ? {} : {}) * d * d;",
        at(means),
        at(squares),
        splits - 1,
        count(last),
        count(chunk)
    ));
    lw.close("}");
    lw.line("__syncthreads();");
    lw.line("fb_ca[threadIdx.y][threadIdx.x] = q;");
    lw.line("__syncthreads();");
    lw.line("if (!live || threadIdx.y != 0) return;");
    lw.line(&format!("for (int y = 1; y < {groups}; ++y) q += fb_ca[y][threadIdx.x];"));
    (bx, groups)
}

/// The mean output of a mean and variance, its second (the variance, or
/// welford's M2), and what to call the second.
pub(crate) fn targets(r: &Reduction) -> (ValueId, ValueId, &'static str) {
    match r.kind {
        Kind::Welford => (r.outputs[0], r.outputs[1], "M2"),
        _ => (r.outputs[1], r.outputs[0], "variance"),
    }
}

/// The end of a combine, in the thread of result `o` holding the plain sum
/// `sum` and M2 `m2` of its values: the mean (sum / k) and the variance (or
/// M2) stored in temps `mean_t` and `second_t` and held, then `epilogue`
/// written.
pub(crate) fn write_moments(
    lw: &mut crate::lower::Lowerer,
    f: &fusebench_ir::Fusion,
    r: &Reduction,
    (sum, m2): (&str, &str),
    (mean_t, second_t): (usize, usize),
    epilogue: &[(ValueId, usize)],
) -> Result<(), CodegenError> {
    let (acc, k) = (r.acc(f), r.count(f));
    let (mean_out, second, _) = targets(r);
    let second_value = match r.kind {
        Kind::VarMean { correction } => {
            format!("{m2} / {}", ctype::literal(acc, Literal::Int((k as i64 - correction).max(0))))
        }
        _ => m2.to_string(),
    };
    let mean_value = format!("{sum} / {}", ctype::literal(acc, Literal::Int(k as i64)));
    let out_shape = f.value(r.outputs[0]).shape.clone().unwrap_or_default();
    for (v, t, value) in [(mean_out, mean_t, mean_value), (second, second_t, second_value)] {
        let d = f.value(v).dtype;
        let h = lw.fresh("h");
        lw.line(&format!("const {} {h} = {};", ctype::reg(d), ctype::convert(acc, d, &value)));
        lw.line(&format!("tmp{t}[o] = {};", ctype::to_storage(d, &h)));
        lw.hold(v, crate::lower::Held { expr: h, index: view::delinearize(Ix::var("o"), &out_shape) });
    }
    for &(v, pos) in epilogue {
        let idx = view::delinearize(Ix::var("o"), f.value(v).shape.as_deref().unwrap_or(&[]));
        let e = lw.value_at(v, &idx)?;
        lw.line(&format!("out{pos}[o] = {};", ctype::to_storage(f.value(v).dtype, &e)));
    }
    Ok(())
}
