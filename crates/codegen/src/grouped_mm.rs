//! `grouped_mm` on the GPU: the device prelude's grouped product
//! (`prelude/grouped_mm.cu`), placed by the product stages of `gemm.rs` like
//! flash attention. Its groups are cut by an Int32 tensor of cumulative ends
//! read on the device, so one plan serves every split of the rows, columns or
//! k among the groups; a block takes a 128 x 128 tile of one group's result,
//! its group found by counting the tiles of the groups before it.

use crate::attention::{wrapper, Placed};
use crate::gemm::Place;
use crate::plan::{code_hash, Choice, Kernel, KernelArg, Schedule, TensorMap};
use crate::{CodegenError, Device, GroupedMn};
use fusebench_ir::op_gemm::GemmOp;
use fusebench_ir::{DType, Fusion, Node, Op, ValueId};

fn unsupported(m: String) -> CodegenError {
    CodegenError::Unsupported(m)
}

/// The kernel of `n` (a `grouped_mm`, node `index`) writing `out` (dense
/// row-major), or the operand to copy densely first.
pub(crate) fn kernel(
    f: &Fusion,
    n: &Node,
    index: usize,
    place: &dyn Fn(ValueId) -> Result<Place, CodegenError>,
    out: KernelArg,
    dev: Device,
) -> Result<Result<Placed, ValueId>, CodegenError> {
    let Op::Gemm(GemmOp::GroupedMm { mat1, mat2, offsets }) = n.op else {
        unreachable!("grouped_mm::kernel takes grouped_mm only")
    };
    let name = |v: ValueId| f.value(v).name.clone();
    let shape = |v: ValueId| f.value(v).shape.clone().unwrap_or_default();
    let (sa, sb, so) = (shape(mat1), shape(mat2), shape(offsets));
    let dtype = f.value(mat1).dtype;
    if !matches!(dtype, DType::BFloat16 | DType::Half) {
        return Err(unsupported(format!(
            "grouped_mm {} of {dtype}: the GPU kernel takes BFloat16 and Half operands (tensor cores, f32 accumulation), \
             as torch._grouped_mm takes BFloat16; the CPU reference runs {dtype}",
            name(n.outputs[0])
        )));
    }
    let groups = so[0];
    // Which extent the groups cut (the kernel's CUT), and the extents.
    let (cut, m, nn, k) = fusebench_ir::op_gemm::grouped_mm_dims(&sa, &sb);
    if m == 0 || nn == 0 || groups == 0 {
        return Err(unsupported(format!(
            "grouped_mm {} with an extent of 0 (m {m}, n {nn}, {groups} groups): the kernel is not planned for empty tensors",
            name(n.outputs[0])
        )));
    }
    // Strides: (group, row, column) of each operand, group 0 where 2-D.
    let strides = |p: &Place, rank: usize| -> [i64; 3] {
        let st = &p.1;
        if rank == 3 {
            [st[0], st[1], st[2]]
        } else {
            [0, st[0], st[1]]
        }
    };
    let (pa, pb, po) = (place(mat1)?, place(mat2)?, place(offsets)?);
    let (a, b) = (strides(&pa, sa.len()), strides(&pb, sb.len()));
    for (v, s) in [(mat1, a), (mat2, b)] {
        if s.iter().any(|&x| x < 0) {
            return Ok(Err(v));
        }
    }
    // The offsets one after the other.
    if groups > 1 && po.1[0] != 1 {
        return Ok(Err(offsets));
    }
    let kname = format!("fb_gmm{index}");
    let el = if dtype == DType::BFloat16 { "fb_bf16" } else { "fb_f16" };
    let params = vec![
        format!("const {el}* __restrict__ a"),
        format!("const {el}* __restrict__ b"),
        "const int* __restrict__ offs".to_string(),
        format!("{el}* __restrict__ d"),
    ];
    let args = vec![pa.0, pb.0, po.0, out];
    // How each operand's tiles are copied (prelude/grouped_mm.cu): with k
    // contiguous and every row 16 bytes aligned, 16 bytes a thread (cp.async);
    // with the rows contiguous and every k's 16 bytes aligned, the same along
    // the rows where the groups do not cut them (their tiles then start at
    // multiples of 128), unless `grouped_mn` is off; else element by element.
    // With it off both operands are copied alike, as before it.
    let (a_rows, a_k, b_rows, b_k) = (a[1], a[2], b[2], b[1]);
    let layout = |rows: i64, k: i64, group: i64, offset: i64, cut_rows: bool| {
        let aligned = [group, offset].iter().all(|x| x % 8 == 0);
        if k == 1 && rows % 8 == 0 && aligned {
            TileCopy::K
        } else if rows == 1 && k % 8 == 0 && aligned && !cut_rows {
            TileCopy::Rows
        } else {
            TileCopy::Element
        }
    };
    let (mut la, mut lb) = (layout(a_rows, a_k, a[0], pa.2, cut == 0), layout(b_rows, b_k, b[0], pb.2, cut == 1));
    // What grouped_mn would have copied along the rows, for emit to say.
    let mn_off = dev.grouped_mn == GroupedMn::Off;
    let held_back = mn_off && (la == TileCopy::Rows || lb == TileCopy::Rows);
    if mn_off && (la != TileCopy::K || lb != TileCopy::K) {
        (la, lb) = (TileCopy::Element, TileCopy::Element);
    }
    // wgmma reads either layout (an MN-major one transposed, under
    // `GroupedMn::Wgmma`); the kernel and its source for two K-major operands
    // are as before the MN-major ones.
    let k_major = la == TileCopy::K && lb == TileCopy::K;
    let wgmma = dev.grouped_wgmma
        && la != TileCopy::Element
        && lb != TileCopy::Element
        && (k_major || dev.grouped_mn == GroupedMn::Wgmma);
    let bf16 = dtype == DType::BFloat16;
    // The warp-specialized kernel: stages of 128 + bn rows of 64 of k, the
    // most that fit in two tiles' 192 KiB, with its barriers past them.
    // An operand whose rows are contiguous only under `grouped_ws_mn`.
    let ws_layouts = k_major || dev.grouped_ws_mn;
    let ws = (wgmma && ws_layouts && matches!(dev.grouped_ws, 128 | 256) && dev.grouped_ws_cuts[cut]).then(|| {
        let bn = dev.grouped_ws as usize;
        let stages = 192 * 1024 / ((128 + bn) * 64 * 2);
        (bn, stages, (stages * (128 + bn) * 64 * 2 + 1024 + 16 * stages) as u32)
    });
    let ws = ws.filter(|&(_, _, bytes)| bytes + 1024 <= dev.shared_memory_per_sm);
    let (ta, tb) = (la.macro_name(), lb.macro_name());
    let call = match ws {
        Some((bn, stages, _)) if k_major => format!("fb_grouped_mm_ws<{bf16}, {cut}, {stages}, {bn}>"),
        Some((bn, stages, _)) => format!("fb_grouped_mm_ws<{bf16}, {cut}, {stages}, {bn}, {ta}, {tb}>"),
        None if wgmma && k_major => format!("fb_grouped_mm_wg<{bf16}, {cut}, {}>", dev.grouped_stages),
        None if wgmma => format!("fb_grouped_mm_wg<{bf16}, {cut}, {}, {ta}, {tb}>", dev.grouped_stages),
        None => format!("fb_grouped_mm<{bf16}, {cut}, {ta}, {tb}, {}>", dev.grouped_stages),
    };
    // The warp-specialized kernel reads both operands through tensor maps
    // (after the kernel's other parameters): A [rows][k] (by group where the
    // groups cut n) and B as [columns][k] (by group where they cut m), boxes of
    // 64 of k by a tile's rows or columns; an operand whose rows are
    // contiguous as [k][rows], boxes of 64 rows by 64 of k.
    let mut params = params;
    let mut maps = Vec::new();
    if let Some((bn, _, _)) = ws {
        params.push("const __grid_constant__ fb_tmap ma".to_string());
        params.push("const __grid_constant__ fb_tmap mb".to_string());
        let map = |p: &Place, copy: TileCopy, rows: usize, (row_stride, k_stride): (i64, i64), group: Option<i64>, boxed: u32| {
            let (mut dims, mut strides, mut boxes) = if copy == TileCopy::Rows {
                (vec![rows as u64, k as u64], vec![k_stride as u64], vec![64, 64])
            } else {
                (vec![k as u64, rows as u64], vec![row_stride as u64], vec![64, boxed])
            };
            if let Some(gs) = group {
                dims.push(groups as u64);
                strides.push(gs as u64);
                boxes.push(1);
            }
            TensorMap { of: p.0, offset: p.2, bf16, dims, strides, boxes }
        };
        maps.push(map(&pa, la, m, (a_rows, a_k), (cut == 1).then_some(a[0]), 128));
        maps.push(map(&pb, lb, nn, (b_rows, b_k), (cut == 0).then_some(b[0]), bn as u32));
    }
    let body = if ws.is_some() {
        format!("    {call}(ma, mb, offs + {}, d, {groups}, {m}, {nn}, {k});\n", po.2)
    } else {
        format!(
        "    {call}(a + {ao}, b + {bo}, offs + {oo}, d, {groups}, {m}, {nn}, {k}, {}, {}, {}, {}, {}, {});\n",
        a[0],
        a[1],
        a[2],
        b[0],
        b[1],
        b[2],
        ao = pa.2,
        bo = pb.2,
        oo = po.2,
        )
    };
    // Two blocks a multiprocessor at most 128 registers a thread: the
    // pipelined loop compiles to 129 unbounded (NVRTC 12.9), one block. The
    // warp-specialized kernel: one block of three warpgroups.
    let threads = if ws.is_some() { 384 } else { 256 };
    let src = wrapper(&kname, threads, if ws.is_some() { 1 } else { 2 }, &params, &body);
    let bn = ws.map_or(128, |w| w.0);
    let (tm, tn) = (m.div_ceil(128), nn.div_ceil(bn));
    // Tiles at most: a group's partial tile each past the whole ones.
    let tiles = match cut {
        0 => (tm + groups) * tn,
        1 => tm * (tn + groups),
        _ => groups * tm * tn,
    };
    // The warp-specialized blocks walk the tiles: one a multiprocessor.
    let blocks = if ws.is_some() { tiles.min(dev.sm_count as usize) } else { tiles };
    let cuts = ["m (rows of mat1)", "n (columns of mat2)", "k (each group's result apart)"][cut];
    let kernel = Kernel {
        code_hash: code_hash(&format!(
            "{src}{}{}{}",
            crate::prelude::ATTENTION,
            crate::prelude::ATTENTION_BWD,
            crate::prelude::GROUPED_MM
        )),
        choice: Some(Choice::only(
            "grouped",
            format!(
                "grouped_mm: 128 x {bn} tiles of one group's result{}, the group read from the offsets on the device, \
                 {} with f32 accumulation, 64 of k a step in {} stages, {}",
                if ws.is_some() { ", blocks walking them" } else { " a block" },
                if ws.is_some() {
                    format!(
                        "wgmma warp-specialized (one thread copying with the tensor memory accelerator, two warpgroups \
                         multiplying 64 x {bn} each, meeting at mbarriers; 128-byte swizzled tiles)"
                    )
                } else if !wgmma {
                    "mma.sync".to_string()
                } else if lb == TileCopy::Rows {
                    "wgmma (two warpgroups of 64 x 128, 128-byte swizzled tiles, mat2 read N-major 64 columns at a time)".to_string()
                } else {
                    "wgmma (two warpgroups of 64 x 128, 128-byte swizzled tiles)".to_string()
                },
                ws.map_or(dev.grouped_stages as usize, |w| w.1),
                if held_back {
                    "both operands' tiles copied element by element: an operand has its rows contiguous, which \
                     FUSEBENCH_GROUPED_MN=1 (mma.sync) or 2 (wgmma) copies 16 bytes a thread and reads transposed \
                     (not yet run on a GPU, so off)"
                        .to_string()
                } else if ws.is_some() {
                    format!(
                        "both operands' tiles copied by the tensor memory accelerator ({})",
                        match (la, lb) {
                            (TileCopy::K, TileCopy::K) => "k contiguous",
                            (TileCopy::K, _) => "mat2's rows contiguous, held MN-major and read transposed",
                            (_, TileCopy::K) => "mat1's rows contiguous, held MN-major and read transposed",
                            _ => "both with their rows contiguous, held MN-major and read transposed",
                        }
                    )
                } else if la == lb {
                    format!("both operands' tiles {}", la.says())
                } else {
                    format!("mat1's tiles {}, mat2's {}", la.says(), lb.says())
                }
            ),
        )),
        // Stages of A's and B's 128 x 64 tiles, rows padded to 72
        // (prelude/grouped_mm.cu; a tile held [k][row], 64 rows of 136, fits
        // the same); wgmma's are 64 wide from a 1024-byte boundary, and its
        // kernel is mma.sync's where not compiled for sm_90a.
        shared_bytes: ws.map_or(dev.grouped_stages * 2 * 128 * 72 * 2 + if wgmma { 1024 } else { 0 }, |w| w.2),
        tensor_maps: maps,
        ..Kernel::new(
            kname,
            Schedule::Grouped,
            [blocks as u32, 1, 1],
            [threads as u32, 1, 1],
            args,
            format!(
                "grouped_mm {} = {} x {}: {groups} groups cut along {cuts} by {}, m {m} x n {nn} x k {k}, {dtype}",
                name(n.outputs[0]),
                name(mat1),
                name(mat2),
                name(offsets)
            ),
        )
    };
    Ok(Ok(Placed { kernels: vec![kernel], text: src, modules: vec![], temp: None }))
}

/// How an operand's tiles reach shared memory (`fb_gmm_tile`'s `L`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum TileCopy {
    Element,
    K,
    Rows,
}

impl TileCopy {
    fn macro_name(self) -> &'static str {
        match self {
            TileCopy::Element => "FB_GMM_ELEMENT",
            TileCopy::K => "FB_GMM_K",
            TileCopy::Rows => "FB_GMM_MN",
        }
    }

    fn says(self) -> &'static str {
        match self {
            TileCopy::K => "copied 16 bytes a thread along k (cp.async)",
            TileCopy::Rows => "copied 16 bytes a thread along their contiguous rows (cp.async) and read transposed",
            TileCopy::Element => "copied element by element (neither k nor the rows contiguous with 16-byte aligned steps)",
        }
    }
}
