//! Host tensors to device bytes and back.

use fusebench_host::{Buffer, Tensor};

/// Every element of a host buffer as little-endian bytes, the layout the
/// device kernels read (bool as one byte).
pub fn buffer_bytes(b: &Buffer) -> Vec<u8> {
    fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        let mut out = Vec::with_capacity(v.len() * N);
        for &x in v {
            out.extend_from_slice(&f(x));
        }
        out
    }
    match b {
        Buffer::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        Buffer::I32(v) => le(v, i32::to_le_bytes),
        Buffer::I64(v) => le(v, i64::to_le_bytes),
        Buffer::F16(v) => le(v, |x: half::f16| x.to_le_bytes()),
        Buffer::BF16(v) => le(v, |x: half::bf16| x.to_le_bytes()),
        Buffer::F32(v) => le(v, f32::to_le_bytes),
        Buffer::F64(v) => le(v, f64::to_le_bytes),
        Buffer::U64(v) => le(v, u64::to_le_bytes),
        Buffer::F8E4m3(v) => v.iter().map(|x| x.0).collect(),
        Buffer::F8E5m2(v) => v.iter().map(|x| x.0).collect(),
        Buffer::F8E8m0(v) => v.iter().map(|x| x.0).collect(),
        // Complex: real then imaginary part, as the kernels' two-part structs.
        Buffer::C64(v) => v.iter().flat_map(|c| c.0).flat_map(f32::to_le_bytes).collect(),
        Buffer::C128(v) => v.iter().flat_map(|c| c.0).flat_map(f64::to_le_bytes).collect(),
    }
}

/// Layout of a host tensor as the planner takes it.
pub fn layout(t: &Tensor) -> (Vec<i64>, i64) {
    (t.strides().to_vec(), t.offset() as i64)
}
