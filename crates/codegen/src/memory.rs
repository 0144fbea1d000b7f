//! Which way a reduction runs through memory. A sum over a matrix's last
//! dim is an inner reduction when the matrix is row-major, but an outer one
//! when it is column-major: its reduced elements lie a column apart and its
//! results side by side. The schedules coalesce loads along the dim that is
//! fastest in memory, so the choice between them follows memory, not the
//! logical dims.

use crate::reduction::Reduction;
use fusebench_ir::{alloc_order, Fusion, ValueDef, ValueId};

/// The input that decides how `v` lies in memory: among the tensor inputs
/// `v` is traced to (`alloc_order::input_dims`), the largest, if it holds at
/// least half as many elements as `v` (a bias or a per-row scale broadcast
/// over `v` moves few bytes and decides nothing). Per dim of `v`, that
/// input's stride for it (`None`: broadcast or not traced).
fn reference(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    v: ValueId,
) -> Option<Vec<Option<i64>>> {
    let numel = f.value(v).numel();
    let mut best: Option<(usize, Vec<Option<i64>>)> = None;
    for (pos, &input) in f.inputs.iter().enumerate() {
        if !matches!(f.value(input).def, ValueDef::TensorInput(_)) {
            continue;
        }
        let (Some(dims), Some(shape)) = (
            alloc_order::input_dims(f, pos, v),
            f.value(input).shape.clone(),
        ) else {
            continue;
        };
        let size: usize = shape.iter().product();
        if size * 2 < numel || best.as_ref().is_some_and(|(s, _)| *s >= size) {
            continue;
        }
        let strides = match &layouts[pos] {
            Some((s, _)) => s.clone(),
            None => fusebench_ir::recipe::row_major_strides(&shape),
        };
        let per_dim = dims
            .iter()
            .map(|d| d.filter(|&d| shape[d] > 1 && strides[d] != 0).map(|d| strides[d].abs()))
            .collect();
        best = Some((size, per_dim));
    }
    best.map(|(_, s)| s)
}

/// Whether the dim of `r`'s input that is fastest in memory is reduced:
/// `Some(true)` when it is, `Some(false)` when a kept dim is fastest, `None`
/// when the input is not traced to a tensor input that decides it (computed
/// values are laid out by the kernel that reads them).
pub fn reduces_fastest(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    r: &Reduction,
) -> Option<bool> {
    let strides = reference(f, layouts, r.x)?;
    let fastest = (0..strides.len())
        .filter(|&d| strides[d].is_some())
        .min_by_key(|&d| strides[d])?;
    Some(r.dims.contains(&fastest))
}

/// `dims` of `v` ordered slowest to fastest in memory; `dims` as given when
/// the input that decides it does not trace all of them.
pub fn by_memory(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    v: ValueId,
    dims: &[usize],
) -> Vec<usize> {
    let mut out = dims.to_vec();
    let Some(strides) = reference(f, layouts, v) else {
        return out;
    };
    let Some(key) = dims
        .iter()
        .map(|&d| strides.get(d).copied().flatten())
        .collect::<Option<Vec<i64>>>()
    else {
        return out;
    };
    // Stable: dims of equal stride keep their logical order.
    let mut idx: Vec<usize> = (0..dims.len()).collect();
    idx.sort_by_key(|&k| std::cmp::Reverse(key[k]));
    out = idx.iter().map(|&k| dims[k]).collect();
    out
}
