//! A mean and variance (`var_mean`, `welford`) split over blocks
//! (`grid.rs`'s layout: few results, blocks walking each result's elements
//! in turn) in one read of the input (`Device::grid_moments`). The grid
//! schedule otherwise takes two rounds, the mean and then the squared
//! deviations from it, each reading the whole input with a combine kernel
//! of its own: a batch norm over [N, C, H, W] read its input three times
//! with the normalizing pass, in six kernels.
//!
//! The numerics are those `moments.rs` measured and chose: per result, a
//! plain sum of the values for the mean (S0 / n), and Welford's update over
//! the values shifted by the result's first element (0 where that is not
//! finite) for M2. Each thread runs the update over its elements, the
//! block's threads are merged with Chan's formula down each warp and then
//! warp by warp, and the combine merges the blocks in order: a fixed order
//! throughout, so two runs give the same bits. Every thread counts its own
//! elements (the last tiles are partial), and each block stores its count.

use crate::error::CodegenError;
use crate::grid::Walked;
use crate::kernel::{signature, Context};
use crate::plan::{Kernel, Schedule};
use crate::reduction::{Kind, Reduction};
use crate::ctype;
use fusebench_ir::{Literal, ValueId};

const BLOCK: u32 = 256;

/// Whether `r` is computed in one pass here: a mean and variance of real values.
pub fn fits(cx: &Context, r: &Reduction) -> bool {
    cx.dev.grid_moments && !matches!(r.kind, Kind::Plain(_)) && !r.acc(cx.f).is_complex()
}

/// Chan's merge of (nb, ab, mb, qb) into (fb_n, fb_a, fb_m, fb_q): counts,
/// sums, means of the shifted values and their M2; nothing where nb is 0.
/// (Every name is prefixed: the lowered loads use short ones.)
fn merge(reg: &str, nb: &str, ab: &str, mb: &str, qb: &str) -> String {
    format!(
        "if ({nb} > 0) {{ const {reg} fb_t = fb_n + {nb}, fb_d = {mb} - fb_m, fb_r = {nb} / fb_t; fb_m += fb_d * fb_r; fb_q += {qb} + fb_d * fb_d * fb_n * fb_r; fb_a += {ab}; fb_n = fb_t; }}"
    )
}

/// Appends the partial kernel and the combine of `r`, the input walked as
/// `walked` by `splits` blocks per result in tiles of `tile` elements, and
/// records where its mean and variance (or M2) are stored; the combine also
/// writes `epilogue`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build(
    cx: &mut Context,
    name: &str,
    r: &Reduction,
    walked: &Walked,
    (o, k, splits, tile): (usize, usize, usize, usize),
    rt: &str,
    epilogue: &[(ValueId, usize)],
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let acc = r.acc(f);
    let reg = ctype::reg(acc);
    let zero = ctype::literal(acc, Literal::Int(0));
    let one = ctype::literal(acc, Literal::Int(1));
    let label = f.value(r.outputs[0]).name.clone();
    let temps = ["counts", "sums", "shifted means", "squared deviations"]
        .map(|w| cx.add_temp(acc, splits * o, format!("grid partial {w} of {label}")));
    let width = walked.width;

    let (mut lw, params) = cx.lowerer();
    cx.read_once(&mut lw, r, &[]);
    let it = lw.idx_type;
    lw.line(&format!("const {it} o = blockIdx.y;"));
    lw.line(&format!("{reg} fb_n = {zero}, fb_a = {zero}, fb_m = {zero}, fb_q = {zero};"));
    // The shift: the result's first element, read at walk index 0 in a
    // scope of its own (the lowerer's loads are remembered by scope).
    // An empty extent has no first element: nothing is read, the shift is 0.
    lw.line(&format!("{reg} fb_k = {zero};"));
    if k > 0 {
        lw.open("{");
        lw.line(&format!("const {rt} r = 0;"));
        let mut first = None;
        walked.fold(&mut lw, |_, xv, j, _| {
            if j == 0 {
                first = Some(xv.to_string());
            }
            Ok(())
        })?;
        lw.line(&format!("fb_k = {};", first.unwrap_or_else(|| zero.clone())));
        lw.close("}");
        lw.line("if (!isfinite(fb_k)) fb_k = 0;");
    }
    let start = format!("({rt})blockIdx.x * {tile} + threadIdx.x * {width}");
    let step = (splits * tile).to_string();
    let batch = cx.dev.loads_in_flight.max(1) as usize;
    crate::strided::emit_guarded(&mut lw, rt, "r", &start, &k.to_string(), &step, batch, |lw, ok| {
        walked.fold(lw, |lw, xv, _, _| {
            let update = format!(
                "{{ const {reg} fb_x = {xv}; fb_a += fb_x; fb_n += {one}; const {reg} fb_y = fb_x - fb_k, fb_d = fb_y - fb_m; fb_m += fb_d * fb_rcp_count(fb_n); fb_q += fb_d * (fb_y - fb_m); }}"
            );
            lw.line(&crate::strided::guarded(ok, &update));
            Ok(())
        })
    })?;
    // Down each warp, then warp by warp in order.
    lw.open("for (int fb_s = 16; fb_s > 0; fb_s >>= 1) {");
    for v in ["n", "a", "m", "q"] {
        lw.line(&format!("const {reg} fb_{v}2 = __shfl_down_sync(0xffffffffu, fb_{v}, fb_s);"));
    }
    lw.line(&merge(reg, "fb_n2", "fb_a2", "fb_m2", "fb_q2"));
    lw.close("}");
    let warps = BLOCK as usize / 32;
    lw.line(&format!("__shared__ {reg} fb_w[4][{warps}];"));
    lw.line("const int fb_warp = threadIdx.x >> 5;");
    lw.line("if ((threadIdx.x & 31) == 0) { fb_w[0][fb_warp] = fb_n; fb_w[1][fb_warp] = fb_a; fb_w[2][fb_warp] = fb_m; fb_w[3][fb_warp] = fb_q; }");
    lw.line("__syncthreads();");
    lw.open("if (threadIdx.x == 0) {");
    lw.open(&format!("for (int fb_i = 1; fb_i < {warps}; ++fb_i) {{"));
    lw.line(&merge(reg, "fb_w[0][fb_i]", "fb_w[1][fb_i]", "fb_w[2][fb_i]", "fb_w[3][fb_i]"));
    lw.close("}");
    for (t, v) in temps.iter().zip(["fb_n", "fb_a", "fb_m", "fb_q"]) {
        lw.line(&format!("tmp{t}[({it})blockIdx.x * {o} + o] = {v};"));
    }
    lw.close("}");
    let pname = format!("{name}_g0");
    let src = format!("{} {{\n{}}}\n", signature(&pname, BLOCK, &params), lw.code);
    let summary = format!(
        "grid mean and variance of {} over {k} elements in one pass by {splits} blocks in turn (its sum, and Welford's update on values shifted by each result's first element), tiles of {tile}, {width} per load: {o} results",
        f.value(r.x).name
    );
    out.push((
        src,
        Kernel::new(
            pname,
            Schedule::GridPartial,
            [crate::launch::grid_dim(splits), crate::launch::grid_dim(o), 1],
            [BLOCK, 1, 1],
            params.args,
            summary,
        ),
    ));
    combine(cx, name, r, (o, splits), temps, epilogue, out)
}

/// The combine: a thread per result merges the blocks' partials in order and
/// stores the mean (S0 / k) and the variance (or M2), then writes `epilogue`.
fn combine(
    cx: &mut Context,
    name: &str,
    r: &Reduction,
    (o, splits): (usize, usize),
    [counts, sums, means, squares]: [usize; 4],
    epilogue: &[(ValueId, usize)],
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let acc = r.acc(f);
    let reg = ctype::reg(acc);
    let zero = ctype::literal(acc, Literal::Int(0));
    let label = f.value(r.outputs[0]).name.clone();
    let (mean_out, second, what) = crate::moments::targets(r);
    let mean_t = cx.add_temp(f.value(mean_out).dtype, o, format!("mean of {label}"));
    let second_t = cx.add_temp(f.value(second).dtype, o, format!("{what} of {label}"));
    let (mut lw, mut params) = cx.lowerer();
    for &(v, pos) in epilogue {
        params.push_output(f, v, pos);
    }
    let it = lw.idx_type;
    let block = 128usize;
    lw.line(&format!("const {it} o = ({it})blockIdx.x * {block} + threadIdx.x;"));
    lw.line(&format!("if (o >= {o}) return;"));
    lw.line(&format!("{reg} fb_n = {zero}, fb_a = {zero}, fb_m = {zero}, fb_q = {zero};"));
    lw.open(&format!("for (int s = 0; s < {splits}; ++s) {{"));
    let at = |t: usize| format!("tmp{t}[({it})s * {o} + o]");
    lw.line(&format!(
        "const {reg} fb_nb = {}, fb_ab = {}, fb_mb = {}, fb_qb = {};",
        at(counts),
        at(sums),
        at(means),
        at(squares)
    ));
    lw.line(&merge(reg, "fb_nb", "fb_ab", "fb_mb", "fb_qb"));
    lw.close("}");
    crate::moments::write_moments(&mut lw, f, r, ("fb_a", "fb_q"), (mean_t, second_t), epilogue)?;
    let cname = format!("{name}_c0");
    let src = format!("{} {{\n{}}}\n", signature(&cname, block as u32, &params), lw.code);
    let epi: Vec<String> = epilogue.iter().map(|&(v, _)| f.value(v).name.clone()).collect();
    out.push((
        src,
        Kernel::new(
            cname,
            Schedule::OuterCombine,
            [crate::launch::grid_dim(o.div_ceil(block)), 1, 1],
            [block as u32, 1, 1],
            params.args,
            format!(
                "merges {splits} partials in order into the mean and {what} of {label}{}",
                if epi.is_empty() { String::new() } else { format!("; writes [{}]", epi.join(", ")) }
            ),
        ),
    ));
    cx.store_in(mean_out, mean_t);
    cx.store_in(second, second_t);
    Ok(())
}
