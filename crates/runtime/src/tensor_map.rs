//! TMA tensor maps (Hopper's tensor memory accelerator): the 128-byte
//! descriptor a kernel's `cp.async.bulk.tensor` reads, encoded by the driver
//! over a buffer's address. The grouped product's warp-specialized kernel
//! takes one per operand (codegen's `plan::TensorMap`), passed by value as a
//! `__grid_constant__` parameter ([`crate::KernelArg::Map`]).

use std::panic::{catch_unwind, AssertUnwindSafe};

use cudarc::driver::sys::{self as dsys, CUresult};

use crate::error::RuntimeError;

/// A map of 16-bit elements (BFloat16 or Half) at `ptr`: `dims` extents,
/// innermost first (its elements contiguous), `strides_bytes` the byte
/// strides of the others, `boxes` the box one copy moves, rows of its
/// innermost extent swizzled 128 bytes at a time (the wgmma operand layout)
/// and zeros read past every extent.
pub fn encode_tensor_map(
    ptr: u64,
    bf16: bool,
    dims: &[u64],
    strides_bytes: &[u64],
    boxes: &[u32],
) -> Result<[u64; 16], RuntimeError> {
    let rank = dims.len();
    let bad = |m: String| Err(RuntimeError::Invalid(format!("tensor map over {ptr:#x}: {m}")));
    if !(1..=5).contains(&rank) || strides_bytes.len() + 1 != rank || boxes.len() != rank {
        return bad(format!("rank {rank} with {} strides and {} box extents", strides_bytes.len(), boxes.len()));
    }
    if !ptr.is_multiple_of(16) || strides_bytes.iter().any(|s| !s.is_multiple_of(16) || *s >= 1 << 40) {
        return bad(format!("the address and strides {strides_bytes:?} must be multiples of 16 bytes"));
    }
    if boxes.iter().any(|&b| b == 0 || b > 256) || boxes[0] * 2 > 128 {
        return bad(format!("box {boxes:?}: each extent 1-256, the innermost at most 128 bytes (the swizzle)"));
    }
    if dims.iter().any(|&d| d == 0 || d > 1 << 32) {
        return bad(format!("extents {dims:?} must be 1 to 2^32"));
    }
    let ones = vec![1u32; rank];
    let mut map = dsys::CUtensorMap { opaque: [0; 16] };
    let dtype = if bf16 {
        dsys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    } else {
        dsys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    };
    // SAFETY: every array holds `rank` (strides: rank - 1) entries, checked
    // above; the driver writes only `map`.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        dsys::cuTensorMapEncodeTiled(
            &mut map,
            dtype,
            rank as u32,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides_bytes.as_ptr(),
            boxes.as_ptr(),
            ones.as_ptr(),
            dsys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            dsys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            dsys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            dsys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }));
    match r {
        Ok(CUresult::CUDA_SUCCESS) => Ok(map.opaque),
        Ok(e) => bad(format!("cuTensorMapEncodeTiled: {e:?} (extents {dims:?}, strides {strides_bytes:?}, box {boxes:?})")),
        Err(_) => Err(RuntimeError::Panicked {
            context: "encoding a tensor map".into(),
            message: "the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or later)".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the hardware cannot read is refused before the driver is asked,
    /// with the reason (these run without a GPU).
    #[test]
    fn maps_the_accelerator_cannot_read_are_refused_with_the_reason() {
        let refused = |ptr: u64, dims: &[u64], strides: &[u64], boxes: &[u32]| {
            match encode_tensor_map(ptr, true, dims, strides, boxes) {
                Err(RuntimeError::Invalid(m)) => m,
                r => panic!("not refused: {r:?}"),
            }
        };
        assert!(refused(0x1008, &[64, 128], &[128], &[64, 128]).contains("multiples of 16"));
        assert!(refused(0x1000, &[64, 128], &[136], &[64, 128]).contains("multiples of 16"));
        assert!(refused(0x1000, &[64, 128], &[128], &[128, 128]).contains("128 bytes"));
        assert!(refused(0x1000, &[64, 128], &[128], &[64, 512]).contains("1-256"));
        assert!(refused(0x1000, &[64, 128], &[], &[64, 128]).contains("rank 2"));
        assert!(refused(0x1000, &[64, 0], &[128], &[64, 128]).contains("extents"));
    }
}
