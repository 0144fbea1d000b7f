//! Kernels of their own for the indexing ops no output element of which is
//! one read of its operands: topk and argsort (one block per row, a bitonic
//! sort in shared memory; longer rows sorted in chunks then merged,
//! `sort_long.rs`), scatter (copy, then the last duplicate in row-major order
//! of the index wins, found with atomicMax, so the GPU agrees with the CPU),
//! index_put_accumulate (copy, then atomicAdd into an
//! accumulator of Float/Double/Int, rounded once to the dtype at the end).
//! Each writes its results into temporaries that later kernels read as stored
//! values. Their operands are lowered in place (elementwise chains and stored
//! reductions fuse in).

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{signature, Context, Stored};
use crate::lower::Lowerer;
use crate::plan::{Kernel, Schedule};
use crate::{ctype, view};
use fusebench_ir::infer::norm_dim;
use fusebench_ir::{DType, Fusion, IndexOp, Op, ValueDef, ValueId};

/// Longest row topk/argsort sort in one block (longer rows: `sort_long.rs`).
pub const SORT_MAX: usize = 4096;
const BLOCK: u32 = 128;

type Kernels = Vec<(String, Kernel)>;

#[path = "sort_long.rs"]
mod long;

/// Builds, in node order, every special op (see `index::is_special`) and
/// every scan that the values `roots` read and that is not stored yet (the
/// scans of values computed from reductions: `segment::build` builds the
/// others first).
pub fn build_for(
    cx: &mut Context,
    kernels: &mut Kernels,
    roots: impl IntoIterator<Item = ValueId>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let mut nodes: Vec<usize> = Vec::new();
    let mut stack: Vec<ValueId> = roots.into_iter().collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) || cx.stored.contains_key(&v) {
            continue;
        }
        if let ValueDef::Node { node, .. } = f.value(v).def {
            let op = &f.nodes[node].op;
            if (crate::index::is_special(op) || matches!(op, Op::Scan { .. })) && !nodes.contains(&node) {
                nodes.push(node);
            }
            stack.extend(f.nodes[node].op.operands());
        }
    }
    nodes.sort_unstable();
    for n in nodes {
        if cx.stored.contains_key(&f.nodes[n].outputs[0]) {
            continue;
        }
        match &f.nodes[n].op {
            Op::Index(op) => build(cx, kernels, n, op)?,
            _ => crate::scan::build(cx, n, &[], true, kernels)?,
        }
    }
    Ok(())
}

/// The key a value sorts by, into `kk` (declared by the caller): ordered as
/// PyTorch orders values (NaN above +inf, -0 equal to +0), flipped for a
/// descending sort or topk's largest.
fn sort_key(lw: &mut Lowerer, xd: DType, xv: &str, largest: bool) {
    if xd.is_float() {
        let dv = ctype::convert(xd, DType::Double, xv);
        lw.line(&format!("double xv = {dv};"));
        lw.line("if (xv == 0.0) xv = 0.0;");
        lw.line("unsigned long long b = isnan(xv) ? 0x7ff8000000000000ULL : (unsigned long long)__double_as_longlong(xv);");
        lw.line("kk = (b >> 63) ? ~b : (b | 0x8000000000000000ULL);");
    } else {
        let iv = ctype::convert(xd, DType::Int, xv);
        lw.line(&format!(
            "kk = (unsigned long long)({iv}) ^ 0x8000000000000000ULL;"
        ));
    }
    if largest {
        lw.line("kk = ~kk;");
    }
}

/// A bitonic sort of `p` (key, position) pairs in shared memory `key` and
/// `pos`, `th` threads: each step compares disjoint pairs (e, e ^ j), equal
/// keys ordered by position.
fn bitonic(lw: &mut Lowerer, p: usize, th: usize) {
    lw.open(&format!("for (int k = 2; k <= {p}; k <<= 1) {{"));
    lw.open("for (int j = k >> 1; j > 0; j >>= 1) {");
    lw.open(&format!("for (int e = t; e < {p}; e += {th}) {{"));
    lw.line("const int u = e ^ j;");
    lw.open("if (u > e) {");
    lw.line("const unsigned long long ka = key[e], kb = key[u];");
    lw.line("const int pa = pos[e], pb = pos[u];");
    lw.line("const bool a_after_b = ka > kb || (ka == kb && pa > pb);");
    lw.line("if (((e & k) == 0) == a_after_b) { key[e] = kb; key[u] = ka; pos[e] = pb; pos[u] = pa; }");
    lw.close("}");
    lw.close("}");
    lw.line("__syncthreads();");
    lw.close("}");
    lw.close("}");
}

fn store(cx: &mut Context, v: ValueId, dtype: DType, what: &str) -> usize {
    let val = cx.f.value(v);
    let shape = val.shape.clone().unwrap_or_default();
    let t = cx.add_temp(dtype, val.numel(), format!("{} ({what})", val.name));
    let _ = shape;
    t
}

fn mark_stored(cx: &mut Context, v: ValueId, temp: usize) {
    let val = cx.f.value(v);
    cx.stored.insert(
        v,
        Stored {
            temp,
            dtype: val.dtype,
            shape: val.shape.clone().unwrap_or_default(),
        },
    );
}

fn shape(f: &Fusion, v: ValueId) -> Vec<usize> {
    f.value(v).shape.clone().unwrap_or_default()
}

/// A kernel with one thread per element of `n` (`t`), body from `body`.
fn flat(
    cx: &Context,
    name: &str,
    n: usize,
    summary: String,
    body: impl FnOnce(&mut Lowerer) -> Result<(), CodegenError>,
) -> Result<(String, Kernel), CodegenError> {
    let (mut lw, params) = cx.lowerer();
    let it = lw.idx_type;
    lw.line(&format!(
        "const {it} t = ({it})blockIdx.x * {BLOCK} + threadIdx.x;"
    ));
    lw.line(&format!("if (t >= {n}) return;"));
    body(&mut lw)?;
    let src = format!("{} {{\n{}}}\n", signature(name, BLOCK, &params), lw.code);
    let grid = crate::launch::grid_dim((n as u64).div_ceil(BLOCK as u64).max(1));
    Ok((
        src,
        Kernel::new(name, Schedule::Index, [grid, 1, 1], [BLOCK, 1, 1], params.args, summary),
    ))
}

fn clamp(lw: &mut Lowerer, iv: &str, bound: usize) -> String {
    let g = lw.fresh("g");
    let it = lw.idx_type;
    lw.line(&format!(
        "const {it} {g} = ({it})min(max((long long)({iv}), 0LL), {}LL);",
        bound.max(1) as i64 - 1
    ));
    g
}

fn build(
    cx: &mut Context,
    kernels: &mut Kernels,
    node: usize,
    op: &IndexOp,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let outs = f.nodes[node].outputs.clone();
    let name = op.name();
    let kname = |s: &str| format!("fb_x{node}_{s}");
    match op {
        IndexOp::Topk {
            x, dim, largest, ..
        }
        | IndexOp::Argsort {
            x,
            dim,
            descending: largest,
            ..
        } => {
            let is_topk = matches!(op, IndexOp::Topk { .. });
            let xs = shape(f, *x);
            let (xs, d) = if xs.is_empty() {
                (vec![1], 0)
            } else {
                (
                    xs.clone(),
                    norm_dim(name, *dim, xs.len()).expect("validated"),
                )
            };
            let n = xs[d];
            let k = if is_topk {
                shape(f, outs[0]).get(d).copied().unwrap_or(1)
            } else {
                n
            };
            if n > SORT_MAX {
                let s = long::Sort { x: *x, xs, d, n, k, largest: *largest, is_topk };
                return long::build(cx, kernels, node, &s);
            }
            let outer: usize = xs[..d].iter().product();
            let inner: usize = xs[d + 1..].iter().product();
            let idx_out = if is_topk { outs[1] } else { outs[0] };
            let vt = if is_topk {
                Some(store(cx, outs[0], f.value(outs[0]).dtype, "topk values"))
            } else {
                None
            };
            let itemp = store(cx, idx_out, DType::Int, "sorted positions");
            // p slots (a power of two) in shared memory, `th` threads each
            // handling slots t, t + th, ...
            let p = n.next_power_of_two().max(32);
            let th = p.min(1024);
            let (mut lw, params) = cx.lowerer();
            let xd = f.value(*x).dtype;
            lw.line(&format!("__shared__ unsigned long long key[{p}];"));
            lw.line(&format!("__shared__ int pos[{p}];"));
            lw.line("const int t = threadIdx.x;");
            lw.line(&format!(
                "const long long o = (long long)blockIdx.x / {inner};"
            ));
            lw.line(&format!(
                "const long long i = (long long)blockIdx.x % {inner};"
            ));
            let row_idx = |j: Ix| -> Vec<Ix> {
                let mut v = view::delinearize(Ix::var("o"), &xs[..d]);
                v.push(j);
                v.extend(view::delinearize(Ix::var("i"), &xs[d + 1..]));
                if shape(f, *x).is_empty() {
                    vec![]
                } else {
                    v
                }
            };
            // Keys ordered as PyTorch orders values: NaN above +inf, -0 equal to +0;
            // descending (or largest) flips the key; equal keys sort by position.
            // Padding slots sort last: the largest key and a position past the row.
            lw.open(&format!("for (int e = t; e < {p}; e += {th}) {{"));
            lw.line("unsigned long long kk = ~0ULL;");
            lw.open(&format!("if (e < {n}) {{"));
            let xv = lw.value_at(*x, &row_idx(Ix::var("e")))?;
            sort_key(&mut lw, xd, &xv, *largest);
            lw.close("}");
            lw.line("key[e] = kk; pos[e] = e;");
            lw.close("}");
            lw.line("__syncthreads();");
            bitonic(&mut lw, p, th);
            lw.open(&format!("for (int e = t; e < {k}; e += {th}) {{"));
            lw.line("const int src = pos[e];");
            lw.line(&format!(
                "const long long at = (o * {k} + e) * {inner} + i;"
            ));
            lw.line(&format!("tmp{itemp}[at] = (long long)src;"));
            if let Some(vt) = vt {
                let v = lw.value_at(*x, &row_idx(Ix::var("src")))?;
                let vd = f.value(outs[0]).dtype;
                lw.line(&format!(
                    "tmp{vt}[at] = {};",
                    ctype::to_storage(vd, &ctype::convert(xd, vd, &v))
                ));
            }
            lw.close("}");
            let nm = kname("sort");
            let src = format!("{} {{\n{}}}\n", signature(&nm, th as u32, &params), lw.code);
            // No rows (an empty dim outside `dim`): nothing to sort or write.
            if outer * inner > 0 {
                kernels.push((
                    src,
                    Kernel::new(
                        nm,
                        Schedule::Index,
                        [crate::launch::grid_dim(outer.saturating_mul(inner).max(1)), 1, 1],
                        [th as u32, 1, 1],
                        params.args,
                        format!("{name} of {} along dim {d} ({n} per row), a block per row", f.value(*x).name),
                    ),
                ));
            }
            if let Some(vt) = vt {
                mark_stored(cx, outs[0], vt);
            }
            cx.stored.insert(
                idx_out,
                Stored {
                    temp: itemp,
                    dtype: DType::Int,
                    shape: shape(f, idx_out),
                },
            );
        }
        IndexOp::Scatter { x, index, src, dim } => {
            let xs = shape(f, *x);
            let is = shape(f, *index);
            let d = norm_dim(name, *dim, xs.len()).expect("validated");
            let (xn, inn): (usize, usize) = (xs.iter().product(), is.iter().product());
            if inn >= (1usize << 31) {
                return Err(CodegenError::Unsupported(format!(
                    "fd.ops.scatter with {inn} indices (at most 2^31 - 1 on the GPU)"
                )));
            }
            let od = f.value(outs[0]).dtype;
            let out = store(cx, outs[0], od, "scatter result");
            let win = cx.add_temp(
                DType::Int32,
                xn,
                format!(
                    "{}: winning index position per element",
                    f.value(outs[0]).name
                ),
            );
            let xd = f.value(*x).dtype;
            kernels.push(flat(
                cx,
                &kname("copy"),
                xn,
                format!("scatter: copy of {}", f.value(*x).name),
                |lw| {
                    let idx = view::delinearize(Ix::var("t"), &xs);
                    let v = lw.value_at(*x, &idx)?;
                    lw.line(&format!(
                        "tmp{out}[t] = {};",
                        ctype::to_storage(od, &ctype::convert(xd, od, &v))
                    ));
                    lw.line(&format!("tmp{win}[t] = -1;"));
                    Ok(())
                },
            )?);
            // The target of index element t, clamped into x.
            let target = |lw: &mut Lowerer| -> Result<String, CodegenError> {
                let pidx = view::delinearize(Ix::var("t"), &is);
                let iv = lw.value_at(*index, &pidx)?;
                let g = clamp(lw, &iv, xs[d]);
                let mut tidx = pidx.clone();
                tidx[d] = Ix::var(g);
                let at = view::linearize(&tidx, &xs);
                let a = lw.fresh("at");
                lw.line(&format!("const long long {a} = {at};"));
                Ok(a)
            };
            kernels.push(flat(
                cx,
                &kname("win"),
                inn,
                "scatter: the last index position per target".into(),
                |lw| {
                    let a = target(lw)?;
                    lw.line(&format!("atomicMax(&tmp{win}[{a}], (int)t);"));
                    Ok(())
                },
            )?);
            let sd = f.value(*src).dtype;
            let src_is_tensor = f.value(*src).is_tensor();
            kernels.push(flat(
                cx,
                &kname("write"),
                inn,
                "scatter: writes of the winning positions".into(),
                |lw| {
                    let a = target(lw)?;
                    lw.open(&format!("if (tmp{win}[{a}] == (int)t) {{"));
                    let sidx = if src_is_tensor {
                        view::delinearize(Ix::var("t"), &is)
                    } else {
                        vec![]
                    };
                    let sv = lw.value_at(*src, &sidx)?;
                    lw.line(&format!(
                        "tmp{out}[{a}] = {};",
                        ctype::to_storage(od, &ctype::convert(sd, od, &sv))
                    ));
                    lw.close("}");
                    Ok(())
                },
            )?);
            mark_stored(cx, outs[0], out);
        }
        IndexOp::IndexPutAccumulate { acc, index, value } => {
            let xs = shape(f, *acc);
            let n = shape(f, *index)[0];
            let od = f.value(outs[0]).dtype;
            let ad = match od {
                DType::Double => DType::Double,
                DType::Int32 => DType::Int32,
                DType::Int | DType::Index => DType::Int,
                DType::Float | DType::Half | DType::BFloat16 => DType::Float,
                other => {
                    return Err(CodegenError::Unsupported(format!(
                        "fd.ops.index_put_accumulate on {other} tensors on the GPU"
                    )))
                }
            };
            let xn: usize = xs.iter().product();
            let row: usize = xs[1..].iter().product();
            let at = cx.add_temp(ad, xn, format!("{}: accumulator", f.value(outs[0]).name));
            let xd = f.value(*acc).dtype;
            kernels.push(flat(
                cx,
                &kname("init"),
                xn,
                format!("index_put_accumulate: copy of {}", f.value(*acc).name),
                |lw| {
                    let v = lw.value_at(*acc, &view::delinearize(Ix::var("t"), &xs))?;
                    lw.line(&format!("tmp{at}[t] = {};", ctype::convert(xd, ad, &v)));
                    Ok(())
                },
            )?);
            let vs = shape(f, *value);
            let vd = f.value(*value).dtype;
            kernels.push(flat(cx, &kname("add"), n * row, "index_put_accumulate: atomic adds".into(), |lw| {
                let mut want = vec![n];
                want.extend_from_slice(&xs[1..]);
                let vidx = view::delinearize(Ix::var("t"), &want);
                let vb: Vec<Ix> = vidx.iter().zip(&vs).map(|(i, &e)| if e == 1 { Ix::c(0) } else { i.clone() }).collect();
                let iv = lw.value_at(*index, &[vidx[0].clone()])?;
                // Negative indices count from the end, as at::index_put takes them.
                let w = lw.fresh("w");
                lw.line(&format!("long long {w} = (long long)({iv}); if ({w} < 0) {w} += {};", xs[0]));
                let g = clamp(lw, &w, xs[0]);
                let v = lw.value_at(*value, &vb)?;
                let v = ctype::convert(vd, ad, &v);
                let off = format!("{g} * {row} + (t % {})", row.max(1));
                let e = match ad {
                    DType::Int => format!("atomicAdd((unsigned long long*)&tmp{at}[{off}], (unsigned long long)({v}));"),
                    _ => format!("atomicAdd(&tmp{at}[{off}], {v});"),
                };
                lw.line(&e);
                Ok(())
            })?);
            if ad == od {
                cx.stored.insert(
                    outs[0],
                    Stored {
                        temp: at,
                        dtype: od,
                        shape: xs.clone(),
                    },
                );
            } else {
                let out = store(cx, outs[0], od, "index_put_accumulate result");
                kernels.push(flat(
                    cx,
                    &kname("round"),
                    xn,
                    "index_put_accumulate: rounding".into(),
                    |lw| {
                        lw.line(&format!(
                            "tmp{out}[t] = {};",
                            ctype::to_storage(od, &ctype::convert(ad, od, &format!("tmp{at}[t]")))
                        ));
                        Ok(())
                    },
                )?);
                mark_stored(cx, outs[0], out);
            }
        }
        _ => unreachable!("not a special op"),
    }
    Ok(())
}
