//! The pointwise schedule: every output of one shape, a vector of innermost
//! elements per thread (or `unroll` vectors a block apart), loads and stores
//! as wide as alignment allows.

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{lane_arrays, signature, store_lane_arrays, vector_width, Context};
use crate::plan::{Kernel, Schedule};
use crate::{ctype, view};
use fusebench_ir::ValueId;
use std::ops::{Add, Mul};

/// `outputs`: (value, position among the fusion's outputs), all of `shape`;
/// blocks of `block` threads, each thread `unroll` vectors a block apart,
/// or, with `walk` > 1 dividing the outermost dim (of two or more), the same
/// vector at `walk` consecutive positions of that dim: an input broadcast
/// over it (RoPE's cos and sin over the heads) is loaded once per `walk`
/// positions, not once per position.
pub fn build(
    cx: &Context,
    name: &str,
    shape: &[usize],
    outputs: &[(ValueId, usize)],
    (block, unroll, walk): (u32, u32, usize),
) -> Result<(String, Kernel), CodegenError> {
    let walks = walk > 1 && shape.len() >= 2 && shape[0].is_multiple_of(walk);
    let (copies, chunks) = if walks { (walk, shape[0] / walk) } else { (1, 1) };
    let unroll = if copies > 1 { 1 } else { unroll };
    let f = cx.f;
    let (mut lw, mut params) = cx.lowerer();
    for &(v, pos) in outputs {
        params.push_output(f, v, pos);
    }
    let n = shape.len();
    let last = if n == 0 { 1 } else { shape[n - 1] };
    // Elements of one position of the walked dim (all of them without a walk).
    let numel: usize = shape.iter().product::<usize>() / (copies * chunks);
    let input_dtypes = f
        .inputs
        .iter()
        .map(|&i| f.value(i).dtype)
        .filter(|d| d.size_bytes() > 1);
    let mut width = vector_width(
        last,
        outputs
            .iter()
            .map(|&(v, _)| f.value(v).dtype)
            .chain(input_dtypes),
    );
    // A small kernel takes narrower vectors until it has
    // `pointwise_blocks_per_sm` blocks per multiprocessor: its time is
    // latency, and a thread's lanes are computed one after another (bf16
    // SiLU-mul over 4096 elements: 4 blocks of 8 per thread took 1.8-2.1 us
    // on the H200, the peers' 32 blocks of 1 per thread 1.4 us; over 33x4096,
    // aiming at 4 blocks per SM rather than 1 took 1.9 us instead of 2.3).
    let cover = block as usize * cx.dev.sm_count as usize * cx.dev.pointwise_blocks_per_sm as usize;
    // A walk over rows (rank 2: rows that some input is broadcast along by its
    // layout, `schedule::pointwise::walk_layout_rows`) has a thread per vector
    // of each chunk, so its chunks count; a walk over RoPE's heads keeps the
    // per-position rule it was measured with.
    let row_walk = walks && n == 2;
    let threads_over = if row_walk { numel * chunks } else { numel };
    while width > 1 && threads_over / width < cover {
        width /= 2;
    }
    // Vectors of one position; threads: one per vector of each chunk.
    let per_position = numel / width;
    let vectors = per_position * chunks;
    // What reads only the inputs broadcast along the walked rows is computed
    // once per chunk.
    lw.hoist_invariant = row_walk;
    let it = lw.idx_type;
    if unroll > 1 {
        lw.line(&format!(
            "const {it} t0 = ({it})blockIdx.x * {} + threadIdx.x;",
            block * unroll
        ));
        lw.line("#pragma unroll");
        lw.open(&format!("for (int u = 0; u < {unroll}; ++u) {{"));
        lw.line(&format!("const {it} t = t0 + u * {block};"));
        lw.line(&format!("if (t >= {vectors}) break;"));
    } else {
        lw.line(&format!(
            "const {it} t = ({it})blockIdx.x * {block} + threadIdx.x;"
        ));
        lw.line(&format!("if (t >= {vectors}) return;"));
    }
    // With chunks of the walked dim, thread t takes chunk q at vector tt of
    // a position.
    let (t_var, q) = if chunks > 1 {
        lw.line(&format!("const {it} q = t / {per_position};"));
        lw.line(&format!("const {it} tt = t % {per_position};"));
        ("tt", Some(Ix::var("q")))
    } else {
        ("t", None)
    };
    let per_row = (last / width) as i64;
    let mut idx: Vec<Ix> = Vec::new();
    if n > 0 {
        let t = Ix::var(t_var);
        lw.line(&format!(
            "const {it} ii = {};",
            t.clone().rem(per_row, None).mul(width as i64)
        ));
        lw.line(&format!("const {it} r = {};", t.div(per_row, None)));
        idx = match copies {
            1 => view::delinearize(Ix::var("r"), &shape[..n - 1]),
            _ => view::delinearize(Ix::var("r"), &shape[1..n - 1]),
        };
    }
    let positions: Vec<(Vec<Ix>, Ix)> = (0..copies)
        .map(|copy| {
            let mut idx = idx.clone();
            let mut at = Ix::var(t_var).mul(width as i64);
            if let Some(q) = &q {
                idx.insert(0, q.clone().mul(copies as i64).add(Ix::c(copy as i64)));
                at = at.add(q.clone().mul((copies * numel) as i64));
            } else if copies > 1 {
                idx.insert(0, Ix::c(copy as i64));
            }
            if copy > 0 {
                at = at.add(Ix::c((copy * numel) as i64));
            }
            (idx, at)
        })
        .collect();
    // `Device::walk_loads_first`: every walked row's loads in flight
    // together rather than one row's at a time.
    let loads_first = row_walk && cx.dev.walk_loads_first && n > 0;
    if loads_first {
        lw.allow_vector_loads_here();
        for (idx, _) in &positions {
            load_inputs(cx, &mut lw, outputs, idx, width)?;
        }
    }
    for (idx, at) in &positions {
        if !loads_first {
            lw.allow_vector_loads_here();
        }
        elements(cx, &mut lw, outputs, (idx, n > 0), at, width)?;
    }
    if unroll > 1 {
        lw.close("}");
    }
    let src = format!("{} {{\n{}}}\n", signature(name, block, &params), lw.code);
    let grid = crate::launch::grid_dim((vectors as u64).div_ceil((block * unroll) as u64).max(1));
    let walked = match (copies, chunks) {
        (1, _) => String::new(),
        (c, 1) => format!(", each thread at all {c} positions of dim 0"),
        (c, k) => format!(", each thread at {c} consecutive positions of dim 0 ({k} chunks)"),
    };
    let names: Vec<String> = outputs
        .iter()
        .map(|&(v, _)| f.value(v).name.clone())
        .collect();
    let kernel = Kernel::new(
        name,
        Schedule::Pointwise,
        [grid, 1, 1],
        [block, 1, 1],
        params.args,
        format!(
            "pointwise over {shape:?}, {}{width} elements per thread{walked}: {}",
            if unroll > 1 { format!("{unroll} vectors of ") } else { String::new() },
            names.join(", ")
        ),
    );
    Ok((src, kernel))
}

/// One vector of every output at `idx` (the output index less its innermost
/// dim, whose position is `ii`), stored at element `at` of each output.
fn elements(
    cx: &Context,
    lw: &mut crate::lower::Lowerer,
    outputs: &[(ValueId, usize)],
    (idx, dims): (&[Ix], bool),
    at: &Ix,
    width: usize,
) -> Result<(), CodegenError> {
    let f = cx.f;
    // Each lane rounded, then converted to store (not `LaneStores`): with
    // the rounding undone or lanes converted in pairs, GELU bf16 ran 4-10%
    // slower on the H200 at 3072 columns and more (fp16 and short rows 3-7%
    // faster); not explained, so pointwise kernels keep the measured form.
    let arrays = lane_arrays(lw, f, outputs, width);
    // Every input read elementwise at the output's index is loaded before any
    // arithmetic: a load emitted after a division or an exp in program order
    // was issued after it, one input's latency after another's.
    if dims {
        load_inputs(cx, lw, outputs, idx, width)?;
    }
    for k in 0..width {
        if dims {
            lw.lanes = Some(crate::lower::Lanes {
                var: "ii".into(),
                width,
                lane: k,
            });
        }
        let mut lane_idx = idx.to_vec();
        if dims {
            lane_idx.push(Ix::var("ii").add(Ix::c(k as i64)));
        }
        for (j, &(v, _)) in outputs.iter().enumerate() {
            let e = lw.value_at(v, &lane_idx)?;
            let st = ctype::to_storage(f.value(v).dtype, &e);
            lw.line(&format!("{}[{k}] = {st};", arrays[j]));
        }
    }
    lw.lanes = None;
    store_lane_arrays(lw, f, outputs, &arrays, at, width);
    Ok(())
}

/// Loads every input that `outputs` read elementwise at `idx` (less its
/// innermost dim, at `ii`), lane 0's wide load serving the vector.
fn load_inputs(
    cx: &Context,
    lw: &mut crate::lower::Lowerer,
    outputs: &[(ValueId, usize)],
    idx: &[Ix],
    width: usize,
) -> Result<(), CodegenError> {
    lw.lanes = Some(crate::lower::Lanes { var: "ii".into(), width, lane: 0 });
    let mut lane_idx = idx.to_vec();
    lane_idx.push(Ix::var("ii"));
    for (i, pos) in read_elementwise(cx, outputs, &lane_idx) {
        lw.value_at(i, &pos)?;
    }
    lw.lanes = None;
    Ok(())
}

/// Tensor inputs that the outputs read through elementwise ops and
/// permutes only (one element each, at an index computed from the output's
/// `idx`), not through a value an earlier kernel stored: each with the index
/// it is read at. A permute is followed so that an output written in its
/// inputs' stride order (a column-major SiLU-mul) loads them first too.
fn read_elementwise(cx: &Context, outputs: &[(ValueId, usize)], idx: &[Ix]) -> Vec<(ValueId, Vec<Ix>)> {
    use fusebench_ir::{Op, ValueDef};
    let f = cx.f;
    let mut seen = std::collections::HashSet::new();
    let mut todo: Vec<(ValueId, Vec<Ix>)> = outputs.iter().map(|&(v, _)| (v, idx.to_vec())).collect();
    let mut found = vec![];
    while let Some((v, at)) = todo.pop() {
        if !seen.insert(v) || cx.stored.contains_key(&v) {
            continue;
        }
        let val = f.value(v);
        let same = |u: &ValueId| f.value(*u).shape.as_deref().map(<[usize]>::len) == Some(at.len())
            && f.value(*u).shape == val.shape;
        match &val.def {
            ValueDef::TensorInput(_) => found.push((v, at)),
            ValueDef::Node { node, .. } => match &f.nodes[*node].op {
                Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } | Op::Where { .. } | Op::Cast { .. } => {
                    let ops = f.nodes[*node].op.operands();
                    todo.extend(ops.into_iter().filter(|u| same(u)).map(|u| (u, at.clone())))
                }
                Op::Permute { x, dims } if dims.len() == at.len() => {
                    let n = at.len();
                    let mut j = vec![Ix::c(0); n];
                    for (i, &d) in dims.iter().enumerate() {
                        let Ok(d) = fusebench_ir::infer::norm_dim("permute", d, n) else {
                            return found;
                        };
                        j[d] = at[i].clone();
                    }
                    todo.push((*x, j));
                }
                _ => {}
            },
            _ => {}
        }
    }
    found.sort_by_key(|(v, _)| *v);
    found
}
