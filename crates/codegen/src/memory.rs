//! Which way a reduction runs through memory. A sum over a matrix's last
//! dim is an inner reduction when the matrix is row-major, but an outer one
//! when it is column-major: its reduced elements lie a column apart and its
//! results side by side. The schedules coalesce loads along the dim that is
//! fastest in memory, so the choice between them follows memory, not the
//! logical dims.

use crate::reduction::Reduction;
use fusebench_ir::{alloc_order, Fusion, ValueDef};

/// Whether the dim of `r`'s input that is fastest in memory is reduced:
/// `Some(true)` when it is, `Some(false)` when a kept dim is fastest, `None`
/// when the input is not traced to a tensor input (computed values are laid
/// out by the kernel that reads them).
pub fn reduces_fastest(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    r: &Reduction,
) -> Option<bool> {
    // The traced input with the most dims of extent > 1, as the layout
    // inference picks its reference.
    let mut best: Option<(usize, bool)> = None;
    for (pos, &input) in f.inputs.iter().enumerate() {
        if !matches!(f.value(input).def, ValueDef::TensorInput(_)) {
            continue;
        }
        let Some(dims) = alloc_order::input_dims(f, pos, r.x) else {
            continue;
        };
        let shape = f.value(input).shape.clone()?;
        let strides = match &layouts[pos] {
            Some((s, _)) => s.clone(),
            None => fusebench_ir::recipe::row_major_strides(&shape),
        };
        let wide = shape.iter().filter(|&&e| e > 1).count();
        // The input's fastest dim of extent > 1, and the reduction input's dim it is.
        let fast = (0..shape.len())
            .filter(|&d| shape[d] > 1 && strides[d] != 0)
            .min_by_key(|&d| strides[d].unsigned_abs())?;
        let Some(j) = dims.iter().position(|&m| m == Some(fast)) else {
            continue;
        };
        if best.is_none_or(|(w, _)| wide > w) {
            best = Some((wide, r.dims.contains(&j)));
        }
    }
    best.map(|(_, b)| b)
}

/// `dims` of `v` ordered slowest to fastest in memory, by the strides of the
/// widest tensor input `v` is traced to; `dims` as given when none is.
pub fn by_memory(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    v: fusebench_ir::ValueId,
    dims: &[usize],
) -> Vec<usize> {
    let mut best: Option<(usize, Vec<i64>)> = None;
    for (pos, &input) in f.inputs.iter().enumerate() {
        if !matches!(f.value(input).def, ValueDef::TensorInput(_)) {
            continue;
        }
        let (Some(map), Some(shape)) = (
            alloc_order::input_dims(f, pos, v),
            f.value(input).shape.clone(),
        ) else {
            continue;
        };
        let strides = match &layouts[pos] {
            Some((s, _)) => s.clone(),
            None => fusebench_ir::recipe::row_major_strides(&shape),
        };
        // Each of `dims` must be traced, else the order is not known.
        let Some(key) = dims
            .iter()
            .map(|&d| map.get(d).copied().flatten().map(|i| strides[i].unsigned_abs() as i64))
            .collect::<Option<Vec<i64>>>()
        else {
            continue;
        };
        let wide = shape.iter().filter(|&&e| e > 1).count();
        if best.as_ref().is_none_or(|(w, _)| wide > *w) {
            best = Some((wide, key));
        }
    }
    let mut out = dims.to_vec();
    if let Some((_, key)) = best {
        // Stable: dims of equal stride keep their logical order.
        let mut idx: Vec<usize> = (0..dims.len()).collect();
        idx.sort_by_key(|&k| std::cmp::Reverse(key[k]));
        out = idx.iter().map(|&k| dims[k]).collect();
    }
    out
}
