//! topk and argsort along rows longer than one block sorts (`SORT_MAX`):
//! each block sorts one chunk of `SORT_MAX` of a row in shared memory (the
//! short rows' bitonic network), then passes merge the sorted runs pairwise,
//! the run width doubling each pass, a thread an element: its place in the
//! merged run is its place in its own run plus the number of the other run's
//! elements before it, found by a binary search. A key with its position in
//! the row is unique, so no two elements claim one place, and equal keys keep
//! the order of their positions (PyTorch's stable order, as the short rows).
//! Then the first k of each row are written as the short rows' kernel writes
//! them. Every pass reads and writes the whole row: log2(n / SORT_MAX) passes.

use super::{bitonic, flat, mark_stored, sort_key, store, Kernels, SORT_MAX};
use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{signature, Context, Stored};
use crate::plan::{Kernel, Schedule};
use crate::{ctype, view};
use fusebench_ir::{DType, ValueId};

/// One topk or argsort along a long dim.
pub(super) struct Sort {
    pub x: ValueId,
    /// `x`'s shape, `d` the sorted dim, `n` its extent, `k` the elements kept.
    pub xs: Vec<usize>,
    pub d: usize,
    pub n: usize,
    pub k: usize,
    pub largest: bool,
    pub is_topk: bool,
}

/// The element of row `o`, `i` at `j` along the sorted dim.
fn row_idx(s: &Sort, j: Ix) -> Vec<Ix> {
    let mut v = view::delinearize(Ix::var("o"), &s.xs[..s.d]);
    v.push(j);
    v.extend(view::delinearize(Ix::var("i"), &s.xs[s.d + 1..]));
    v
}

pub(super) fn build(cx: &mut Context, kernels: &mut Kernels, node: usize, s: &Sort) -> Result<(), CodegenError> {
    let f = cx.f;
    let outs = f.nodes[node].outputs.clone();
    let name = f.nodes[node].op.name();
    let xname = f.value(s.x).name.clone();
    let (n, k) = (s.n, s.k);
    let inner: usize = s.xs[s.d + 1..].iter().product();
    let rows: usize = s.xs.iter().product::<usize>() / n;
    let idx_out = if s.is_topk { outs[1] } else { outs[0] };
    let vt = s.is_topk.then(|| store(cx, outs[0], f.value(outs[0]).dtype, "topk values"));
    let itemp = store(cx, idx_out, DType::Int, "sorted positions");
    let kname = |p: &str| format!("fb_x{node}_{p}");
    if rows > 0 {
        let total = rows * n;
        let keys = [0, 1].map(|b| cx.add_temp(DType::UInt64, total, format!("{xname}: sort keys, buffer {b}")));
        let poss = [0, 1].map(|b| cx.add_temp(DType::Int32, total, format!("{xname}: positions, buffer {b}")));
        let chunks = n.div_ceil(SORT_MAX);
        kernels.push(chunk_sort(cx, s, &kname("chunks"), rows, chunks, keys[0], poss[0])?);
        let (mut from, mut w, mut pass) = (0, SORT_MAX, 0);
        while w < n {
            let (kin, pin, kout, pout) = (keys[from], poss[from], keys[1 - from], poss[1 - from]);
            let summary = format!("{name} of {xname}: runs of {w} merged in pairs ({n} per row)");
            kernels.push(flat(cx, &kname(&format!("merge{pass}")), total, summary, |lw| {
                lw.line(&format!("const long long row = (long long)t / {n}, e = (long long)t % {n};"));
                lw.line(&format!("const long long start = e / {w} * {w}, ps = ((e / {w}) ^ 1) * {w};"));
                lw.line(&format!("const unsigned long long kk = tmp{kin}[t];"));
                lw.line(&format!("const int pp = tmp{pin}[t];"));
                lw.line("long long dst = e;");
                lw.open(&format!("if (ps < {n}) {{"));
                lw.line(&format!("long long lo = ps, hi = min(ps + {w}, {n}LL);"));
                lw.open("while (lo < hi) {");
                lw.line("const long long mid = (lo + hi) >> 1;");
                lw.line(&format!("const unsigned long long km = tmp{kin}[row * {n} + mid];"));
                lw.line(&format!("const int pm = tmp{pin}[row * {n} + mid];"));
                lw.line("if (km < kk || (km == kk && pm < pp)) lo = mid + 1; else hi = mid;");
                lw.close("}");
                lw.line("dst = min(start, ps) + (e - start) + (lo - ps);");
                lw.close("}");
                lw.line(&format!("tmp{kout}[row * {n} + dst] = kk;"));
                lw.line(&format!("tmp{pout}[row * {n} + dst] = pp;"));
                Ok(())
            })?);
            from = 1 - from;
            w *= 2;
            pass += 1;
        }
        let pin = poss[from];
        let xd = f.value(s.x).dtype;
        let summary = format!("{name} of {xname}: the first {k} of each sorted row written");
        kernels.push(flat(cx, &kname("take"), rows * k, summary, |lw| {
            lw.line(&format!("const long long row = (long long)t / {k}, e = (long long)t % {k};"));
            lw.line(&format!("const long long o = row / {inner}, i = row % {inner};"));
            lw.line(&format!("const int src = tmp{pin}[row * {n} + e];"));
            lw.line(&format!("const long long at = (o * {k} + e) * {inner} + i;"));
            lw.line(&format!("tmp{itemp}[at] = (long long)src;"));
            if let Some(vt) = vt {
                let v = lw.value_at(s.x, &row_idx(s, Ix::var("src")))?;
                let vd = f.value(outs[0]).dtype;
                lw.line(&format!("tmp{vt}[at] = {};", ctype::to_storage(vd, &ctype::convert(xd, vd, &v))));
            }
            Ok(())
        })?);
    }
    if let Some(vt) = vt {
        mark_stored(cx, outs[0], vt);
    }
    cx.stored.insert(idx_out, Stored { temp: itemp, dtype: DType::Int, shape: f.value(idx_out).shape.clone().unwrap_or_default() });
    Ok(())
}

/// A block per chunk of `SORT_MAX` of a row: its (key, position) pairs
/// sorted into `keys` and `poss` where the chunk lies in the row.
fn chunk_sort(cx: &Context, s: &Sort, name: &str, rows: usize, chunks: usize, keys: usize, poss: usize) -> Result<(String, Kernel), CodegenError> {
    let f = cx.f;
    let (n, p, th) = (s.n, SORT_MAX, SORT_MAX.min(1024));
    let inner: usize = s.xs[s.d + 1..].iter().product();
    let (mut lw, params) = cx.lowerer();
    lw.line(&format!("__shared__ unsigned long long key[{p}];"));
    lw.line(&format!("__shared__ int pos[{p}];"));
    lw.line("const int t = threadIdx.x;");
    lw.line(&format!("const long long row = (long long)blockIdx.x / {chunks};"));
    lw.line(&format!("const long long c0 = (long long)blockIdx.x % {chunks} * {p};"));
    lw.line(&format!("const long long o = row / {inner}, i = row % {inner};"));
    lw.line(&format!("const int len = (int)min({p}LL, {n}LL - c0);"));
    // Padding slots sort last: the largest key and a position past the row.
    lw.open(&format!("for (int e = t; e < {p}; e += {th}) {{"));
    lw.line("unsigned long long kk = ~0ULL;");
    lw.open("if (e < len) {");
    let xv = lw.value_at(s.x, &row_idx(s, Ix::var("c0") + Ix::var("e")))?;
    sort_key(&mut lw, f.value(s.x).dtype, &xv, s.largest);
    lw.close("}");
    lw.line("key[e] = kk; pos[e] = (int)c0 + e;");
    lw.close("}");
    lw.line("__syncthreads();");
    bitonic(&mut lw, p, th);
    lw.open(&format!("for (int e = t; e < len; e += {th}) {{"));
    lw.line(&format!("tmp{keys}[row * {n} + c0 + e] = key[e];"));
    lw.line(&format!("tmp{poss}[row * {n} + c0 + e] = pos[e];"));
    lw.close("}");
    let src = format!("{} {{\n{}}}\n", signature(name, th as u32, &params), lw.code);
    Ok((
        src,
        Kernel::new(
            name,
            Schedule::Index,
            [crate::launch::grid_dim((rows * chunks) as u64), 1, 1],
            [th as u32, 1, 1],
            params.args,
            format!("{} along dim {} ({n} per row): chunks of {p} sorted, a block each", f.value(s.x).name, s.d),
        ),
    ))
}
