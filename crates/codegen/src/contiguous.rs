//! Reductions whose reduced elements lie contiguous in memory though they are
//! not the logically innermost dims (a sum over dim 0 of a column-major
//! matrix), with many results: a group of lanes per result (up to a block),
//! several results per block, folded with shuffles in one kernel.
//! The grid schedule gave each such result a block of 256 threads and a
//! combine kernel: a column-major 2048x16384 bf16 sum over dim 0 took 32.8 us
//! on the H200 where torch.compile takes 22.8.
//!
//! Each lane folds its elements in a fixed order, then the group folds its
//! lanes by a fixed butterfly: two runs give the same bits.

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{lane_arrays, signature, store_lane_arrays, vector_width, Context};
use crate::plan::{Kernel, Schedule};
use crate::reduction::{self, Kind, Reduction};
use crate::{ctype, view};
use fusebench_ir::{Fusion, ValueId};
use std::ops::{Add, Mul};

const BLOCK: usize = 256;

/// Whether `r` is taken here: a plain reduction (not mean-based, not complex)
/// over dims that hold the fastest in memory, with at least `min_results`
/// results.
pub fn fits(f: &Fusion, layouts: &[Option<(Vec<i64>, i64)>], r: &Reduction, min_results: usize) -> Result<(), String> {
    if !crate::grid::down_columns(f, layouts, r) {
        return Err("the reduced dims do not hold the dim fastest in memory".into());
    }
    if !matches!(r.kind, Kind::Plain(_)) || r.acc(f).is_complex() {
        return Err("a mean-based or complex reduction".into());
    }
    let o = f.value(r.outputs[0]).numel();
    if o < min_results {
        return Err(format!("{o} results: fewer than {min_results} leave the GPU idle with a group per result"));
    }
    Ok(())
}

/// Lanes per result and the vector width. A group is wide enough to fill
/// the GPU (`fill` threads per SM over the results, at least a warp) but no
/// wider than leaves each lane `per_lane` vectors (`Device::contiguous_per_lane`),
/// and at most the block.
fn shape(f: &Fusion, red: &[usize], k: usize, o: usize, sm_count: usize, per_lane: usize, fill: usize) -> (usize, usize) {
    let width = vector_width(
        red.last().copied().unwrap_or(1),
        f.inputs.iter().map(|&i| f.value(i).dtype).filter(|d| d.size_bytes() > 1),
    );
    let vectors = k.div_ceil(width).max(1);
    let work = vectors.div_ceil(per_lane.max(1)).next_power_of_two();
    let fill = (sm_count * fill).div_ceil(o.max(1)).next_power_of_two().max(32);
    (work.min(fill).min(BLOCK), width)
}

/// Appends the kernel that computes `r` and writes `epilogue` (outputs with
/// one element per result that read only its results and inputs) and
/// `full` (elementwise outputs shaped as the results by the reduced dims in
/// memory order, none reading `r`: each element written as the lanes read
/// the reduced elements at its index, `Device::contiguous_join`).
pub fn build(
    cx: &mut Context,
    name: &str,
    r: &Reduction,
    epilogue: &[(ValueId, usize)],
    full: &[(ValueId, usize)],
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let Kind::Plain(op) = &r.kind else {
        return Err(CodegenError::NoFit("contiguous: a mean-based reduction".into()));
    };
    let xs = f.value(r.x).shape.clone().unwrap();
    let kept = r.kept_extents(f);
    let walk = crate::memory::by_memory(f, &cx.layouts, r.x, &r.dims);
    let red: Vec<usize> = walk.iter().map(|&d| xs[d]).collect();
    let o = f.value(r.outputs[0]).numel();
    let k = r.count(f);
    let acc = r.acc(f);
    let dev = cx.dev;
    let (group, width) = shape(f, &red, k, o, dev.sm_count as usize, dev.contiguous_per_lane as usize, dev.contiguous_fill as usize);
    let per_block = BLOCK / group;
    let target = r.outputs[0];
    let d = f.value(target).dtype;
    let out_shape = f.value(target).shape.clone().unwrap();
    let result = cx.add_temp(d, o, format!("result of {}", f.value(target).name));
    let (mut lw, mut params) = cx.lowerer();
    for &(v, pos) in epilogue.iter().chain(full) {
        params.push_output(f, v, pos);
    }
    let it = lw.idx_type;
    lw.line(&format!(
        "const {it} o = ({it})blockIdx.x * {per_block} + threadIdx.x / {group};"
    ));
    lw.line(&format!("const int lane = threadIdx.x % {group};"));
    // No early return: every lane of the warp reaches the shuffles.
    lw.line(&format!("const bool live = o < {o};"));
    lw.line(&format!("{} a = {};", ctype::reg(acc), reduction::init(op, acc)));
    lw.open("if (live) {");
    let step = group * width;
    let trips = k.div_ceil(step).max(1);
    let batch = (cx.dev.loads_in_flight.max(1) as usize).min(trips);
    let rt = if k + batch * step > i32::MAX as usize { "long long" } else { it };
    let kept_idx = view::delinearize(Ix::var("o"), &kept);
    let start = format!("({rt})lane * {width}");
    let walked = crate::grid::Walked { f, r, xs: &xs, walk: &walk, red: &red, kept_idx: &kept_idx, width };
    crate::strided::emit(&mut lw, rt, "r", &start, &k.to_string(), &step.to_string(), batch, |lw| {
        // Each joined output's lanes, computed beside the fold at the same
        // elements (its loads shared with the reduction's where they are the
        // same tensors at the same index), then stored as one vector.
        let arrays = lane_arrays(lw, f, full, width);
        walked.fold(lw, |lw, xv, lane, red_idx| {
            lw.line(&reduction::step(op, acc, "a", xv));
            let idx: Vec<Ix> = kept_idx.iter().chain(red_idx).cloned().collect();
            for (j, &(v, _)) in full.iter().enumerate() {
                let e = lw.value_at(v, &idx)?;
                lw.line(&format!("{}[{lane}] = {};", arrays[j], ctype::to_storage(f.value(v).dtype, &e)));
            }
            Ok(())
        })?;
        if !full.is_empty() {
            let at = Ix::var("o").mul(k as i64).add(Ix::var("r"));
            store_lane_arrays(lw, f, full, &arrays, &at, width);
        }
        Ok(())
    })?;
    lw.close("}");
    if group > 1 {
        lw.line(&format!(
            "for (int m = {}; m > 0; m >>= 1) {}",
            group.min(32) / 2,
            reduction::step(op, acc, "a", "fb_shfl_xor(a, m)")
        ));
    }
    if group > 32 {
        // A group of several warps: each warp's fold through shared memory,
        // then the group's first lane folds its warps in order.
        let warps = group / 32;
        let reg = ctype::reg(acc);
        lw.line(&format!("__shared__ {reg} fb_gw[{}];", BLOCK / 32));
        lw.line("if (threadIdx.x % 32 == 0) fb_gw[threadIdx.x / 32] = a;");
        lw.line("__syncthreads();");
        lw.line(&format!(
            "if (lane == 0) for (int w = 1; w < {warps}; ++w) {}",
            reduction::step(op, acc, "a", "fb_gw[threadIdx.x / 32 + w]")
        ));
    }
    lw.open("if (live && lane == 0) {");
    let h = lw.fresh("h");
    lw.line(&format!("const {} {h} = {};", ctype::reg(d), ctype::convert(acc, d, "a")));
    lw.line(&format!("tmp{result}[o] = {};", ctype::to_storage(d, &h)));
    lw.hold(
        target,
        crate::lower::Held {
            expr: h,
            index: view::delinearize(Ix::var("o"), &out_shape),
        },
    );
    for &(v, pos) in epilogue {
        let idx = view::delinearize(Ix::var("o"), f.value(v).shape.as_deref().unwrap_or(&[]));
        let e = lw.value_at(v, &idx)?;
        lw.line(&format!("out{pos}[o] = {};", ctype::to_storage(f.value(v).dtype, &e)));
    }
    lw.close("}");
    let src = format!("{} {{\n{}}}\n", signature(name, BLOCK as u32, &params), lw.code);
    let epi: Vec<String> = epilogue.iter().chain(full).map(|&(v, _)| f.value(v).name.clone()).collect();
    out.push((
        src,
        Kernel::new(
            name,
            Schedule::Contiguous,
            [crate::launch::grid_dim(o.div_ceil(per_block)), 1, 1],
            [BLOCK as u32, 1, 1],
            params.args,
            format!(
                "contiguous reduction of {} over {k} elements: {o} results, {group} lanes each, {per_block} per block, {width} per load{}",
                f.value(r.x).name,
                if epi.is_empty() { String::new() } else { format!("; writes [{}]", epi.join(", ")) }
            ),
        ),
    ));
    cx.store_in(target, result);
    Ok(())
}
