//! Storage and strided tensor views.
//!
//! A [`Tensor`] is shared storage ([`Buffer`] behind an `Arc`) plus a shape,
//! strides in elements (possibly 0, possibly negative) and an offset, so that
//! broadcast, expand, permute, squeeze, slice and (when the layout allows)
//! reshape are views that copy nothing.

use crate::ExecError;
use fusebench_ir::{scalar::round_to, DType, Literal};
use half::{bf16, f16};
use rayon::prelude::*;
use std::sync::Arc;

pub use crate::elems::{F8E4m3, F8E5m2, F8E8m0, C128, C64};

/// Storage of one dtype. `Int` and `Index` are stored as `I64`.
#[derive(Clone, PartialEq)]
pub enum Buffer {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    U64(Vec<u64>),
    F8E4m3(Vec<F8E4m3>),
    F8E5m2(Vec<F8E5m2>),
    F8E8m0(Vec<F8E8m0>),
    C64(Vec<C64>),
    C128(Vec<C128>),
}

/// Calls `$body` with `$v` bound to the typed vector of a buffer and `$T` to its element type.
#[doc(hidden)]
#[macro_export]
macro_rules! with_buffer {
    ($buf:expr, $v:ident, $T:ident => $body:expr) => {
        match $buf {
            $crate::tensor::Buffer::Bool($v) => {
                #[allow(dead_code)]
                type $T = bool;
                $body
            }
            $crate::tensor::Buffer::I32($v) => {
                #[allow(dead_code)]
                type $T = i32;
                $body
            }
            $crate::tensor::Buffer::I64($v) => {
                #[allow(dead_code)]
                type $T = i64;
                $body
            }
            $crate::tensor::Buffer::F16($v) => {
                #[allow(dead_code)]
                type $T = half::f16;
                $body
            }
            $crate::tensor::Buffer::BF16($v) => {
                #[allow(dead_code)]
                type $T = half::bf16;
                $body
            }
            $crate::tensor::Buffer::F32($v) => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            $crate::tensor::Buffer::F64($v) => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            $crate::tensor::Buffer::U64($v) => {
                #[allow(dead_code)]
                type $T = u64;
                $body
            }
            $crate::tensor::Buffer::F8E4m3($v) => {
                #[allow(dead_code)]
                type $T = $crate::elems::F8E4m3;
                $body
            }
            $crate::tensor::Buffer::F8E5m2($v) => {
                #[allow(dead_code)]
                type $T = $crate::elems::F8E5m2;
                $body
            }
            $crate::tensor::Buffer::F8E8m0($v) => {
                #[allow(dead_code)]
                type $T = $crate::elems::F8E8m0;
                $body
            }
            $crate::tensor::Buffer::C64($v) => {
                #[allow(dead_code)]
                type $T = $crate::elems::C64;
                $body
            }
            $crate::tensor::Buffer::C128($v) => {
                #[allow(dead_code)]
                type $T = $crate::elems::C128;
                $body
            }
        }
    };
}
pub use crate::with_buffer;

/// Calls `$body` with `$T` bound to the storage element type of a dtype.
#[doc(hidden)]
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            fusebench_ir::DType::Bool => {
                type $T = bool;
                $body
            }
            fusebench_ir::DType::Int32 => {
                type $T = i32;
                $body
            }
            fusebench_ir::DType::Int | fusebench_ir::DType::Index => {
                type $T = i64;
                $body
            }
            fusebench_ir::DType::Half => {
                type $T = half::f16;
                $body
            }
            fusebench_ir::DType::BFloat16 => {
                type $T = half::bf16;
                $body
            }
            fusebench_ir::DType::Float => {
                type $T = f32;
                $body
            }
            fusebench_ir::DType::Double => {
                type $T = f64;
                $body
            }
            fusebench_ir::DType::UInt64 => {
                type $T = u64;
                $body
            }
            fusebench_ir::DType::Float8E4m3fn => {
                type $T = $crate::elems::F8E4m3;
                $body
            }
            fusebench_ir::DType::Float8E5m2 => {
                type $T = $crate::elems::F8E5m2;
                $body
            }
            fusebench_ir::DType::Float8E8m0fnu => {
                type $T = $crate::elems::F8E8m0;
                $body
            }
            fusebench_ir::DType::ComplexFloat => {
                type $T = $crate::elems::C64;
                $body
            }
            fusebench_ir::DType::ComplexDouble => {
                type $T = $crate::elems::C128;
                $body
            }
        }
    };
}
pub use crate::with_dtype;

/// An element type of storage.
pub trait Elem: Copy + Send + Sync + Default + 'static {
    /// Whether the type holds floating-point values (read into f64 lanes).
    const FLOAT: bool;
    fn to_f64(self) -> f64;
    fn to_i64(self) -> i64;
    /// From a value already representable in the type (exact).
    fn from_f64(x: f64) -> Self;
    /// From a value already representable in the type (exact).
    fn from_i64(x: i64) -> Self;
    fn wrap(v: Vec<Self>) -> Buffer;
    fn slice(b: &Buffer) -> &[Self];
    /// A vector of `n` zero elements, allocated zeroed (no writing pass).
    fn zeros(n: usize) -> Vec<Self>;
}

/// `wrap` and `slice` of an element type whose storage is `Buffer::$var`.
macro_rules! buffer_of {
    ($var:ident, $name:expr) => {
        fn wrap(v: Vec<Self>) -> Buffer {
            Buffer::$var(v)
        }
        fn slice(b: &Buffer) -> &[Self] {
            match b {
                Buffer::$var(v) => v,
                _ => unreachable!("buffer is not {}", $name),
            }
        }
    };
}

macro_rules! elem_prim {
    ($T:ty, $var:ident, $float:expr) => {
        impl Elem for $T {
            const FLOAT: bool = $float;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $T
            }
            #[inline(always)]
            fn from_i64(x: i64) -> Self {
                x as $T
            }
            buffer_of!($var, stringify!($T));
            fn zeros(n: usize) -> Vec<Self> {
                vec![0 as $T; n]
            }
        }
    };
}
elem_prim!(i32, I32, false);
elem_prim!(i64, I64, false);
elem_prim!(f32, F32, true);
elem_prim!(f64, F64, true);

impl Elem for bool {
    const FLOAT: bool = false;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as i64 as f64
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x != 0.0
    }
    #[inline(always)]
    fn from_i64(x: i64) -> Self {
        x != 0
    }
    buffer_of!(Bool, "bool");
    fn zeros(n: usize) -> Vec<Self> {
        vec![false; n]
    }
}

/// A zeroed `Vec<u16>` reinterpreted as a vector of a 16-bit float type.
fn zeroed_u16_as<T>(n: usize) -> Vec<T> {
    assert!(std::mem::size_of::<T>() == 2 && std::mem::align_of::<T>() == 2);
    let v = std::mem::ManuallyDrop::new(vec![0u16; n]);
    // SAFETY: T is f16 or bf16: 2 bytes, align 2, every bit pattern valid
    // (repr(C) wrappers of u16), so the allocation and its contents carry over.
    unsafe { Vec::from_raw_parts(v.as_ptr() as *mut T, v.len(), v.capacity()) }
}

impl Elem for bf16 {
    const FLOAT: bool = true;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f32::from(self) as f64
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        f32::from(self) as i64
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        // Every caller passes a value bf16 holds: its f32 encoding ends in 16 zero bits.
        if x.is_nan() {
            bf16::NAN
        } else {
            bf16::from_bits(((x as f32).to_bits() >> 16) as u16)
        }
    }
    #[inline(always)]
    fn from_i64(x: i64) -> Self {
        bf16::from_f32(x as f32)
    }
    buffer_of!(BF16, "bf16");
    fn zeros(n: usize) -> Vec<Self> {
        zeroed_u16_as(n)
    }
}

impl Elem for f16 {
    const FLOAT: bool = true;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f32::from(self) as f64
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        f32::from(self) as i64
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        f16::from_f32(x as f32)
    }
    #[inline(always)]
    fn from_i64(x: i64) -> Self {
        f16::from_f32(x as f32)
    }
    buffer_of!(F16, "f16");
    fn zeros(n: usize) -> Vec<Self> {
        zeroed_u16_as(n)
    }
}

impl Buffer {
    /// `n` zero elements of the storage type of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> Buffer {
        with_dtype!(dtype, T => T::wrap(T::zeros(n)))
    }

    pub fn len(&self) -> usize {
        with_buffer!(self, v, T => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this buffer is the storage type of `dtype`.
    pub fn holds(&self, dtype: DType) -> bool {
        matches!(
            (self, dtype),
            (Buffer::Bool(_), DType::Bool)
                | (Buffer::I32(_), DType::Int32)
                | (Buffer::I64(_), DType::Int | DType::Index)
                | (Buffer::F16(_), DType::Half)
                | (Buffer::BF16(_), DType::BFloat16)
                | (Buffer::F32(_), DType::Float)
                | (Buffer::F64(_), DType::Double)
                | (Buffer::U64(_), DType::UInt64)
                | (Buffer::F8E4m3(_), DType::Float8E4m3fn)
                | (Buffer::F8E5m2(_), DType::Float8E5m2)
                | (Buffer::F8E8m0(_), DType::Float8E8m0fnu)
                | (Buffer::C64(_), DType::ComplexFloat)
                | (Buffer::C128(_), DType::ComplexDouble)
        )
    }

    /// The dtype this storage holds (`Int` for `I64`).
    pub fn natural_dtype(&self) -> DType {
        match self {
            Buffer::Bool(_) => DType::Bool,
            Buffer::I32(_) => DType::Int32,
            Buffer::I64(_) => DType::Int,
            Buffer::F16(_) => DType::Half,
            Buffer::BF16(_) => DType::BFloat16,
            Buffer::F32(_) => DType::Float,
            Buffer::F64(_) => DType::Double,
            Buffer::U64(_) => DType::UInt64,
            Buffer::F8E4m3(_) => DType::Float8E4m3fn,
            Buffer::F8E5m2(_) => DType::Float8E5m2,
            Buffer::F8E8m0(_) => DType::Float8E8m0fnu,
            Buffer::C64(_) => DType::ComplexFloat,
            Buffer::C128(_) => DType::ComplexDouble,
        }
    }

    /// Element `i` as f64 (exact for every type but i64 beyond 2^53).
    pub fn get_f64(&self, i: usize) -> f64 {
        with_buffer!(self, v, T => v[i].to_f64())
    }

    /// Element `i` as i64 (floats truncate).
    pub fn get_i64(&self, i: usize) -> i64 {
        with_buffer!(self, v, T => v[i].to_i64())
    }
}

/// Prints the kind and length, and the first few elements only.
impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        with_buffer!(self, v, T => {
            let head: Vec<f64> = v.iter().take(8).map(|x| x.to_f64()).collect();
            write!(f, "{:?}[{}]{head:?}{}", self.natural_dtype(), v.len(), if v.len() > 8 { "..." } else { "" })
        })
    }
}

/// A strided view of shared storage.
#[derive(Clone)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<i64>,
    offset: usize,
    data: Arc<Buffer>,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({} {:?}, strides {:?}, offset {}, {:?})",
            self.dtype, self.shape, self.strides, self.offset, self.data
        )
    }
}

/// Row-major strides of a dense tensor.
pub fn contiguous_strides(shape: &[usize]) -> Vec<i64> {
    fusebench_ir::recipe::row_major_strides(shape)
}

impl Tensor {
    /// A view of `data`; checks that the buffer holds `dtype` and that every
    /// element of the view lies inside it.
    pub fn new(
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<i64>,
        offset: usize,
        data: Arc<Buffer>,
    ) -> Result<Tensor, ExecError> {
        let bad = |m: String| ExecError::Tensor(m);
        if !data.holds(dtype) {
            return Err(bad(format!(
                "a {:?} buffer cannot hold {dtype}",
                data.natural_dtype()
            )));
        }
        if strides.len() != shape.len() {
            return Err(bad(format!(
                "{} strides for shape {shape:?}",
                strides.len()
            )));
        }
        let numel: usize = shape.iter().product();
        if numel > 0 {
            let (mut lo, mut hi) = (offset as i128, offset as i128);
            for (&e, &s) in shape.iter().zip(&strides) {
                let span = (e as i128 - 1) * s as i128;
                if span < 0 {
                    lo += span;
                } else {
                    hi += span;
                }
            }
            if lo < 0 || hi >= data.len() as i128 {
                return Err(bad(format!(
                    "shape {shape:?} with strides {strides:?} and offset {offset} reaches elements [{lo}, {hi}] of a buffer of {}",
                    data.len()
                )));
            }
        }
        Ok(Tensor {
            dtype,
            shape,
            strides,
            offset,
            data,
        })
    }

    /// The same logical values laid out with `strides` (in elements, none
    /// negative; permuted, padded or 0 for a broadcast dim) in a fresh buffer:
    /// how golden cases rebuild the layouts nvFuser was given.
    pub fn relaid(&self, strides: &[i64]) -> Result<Tensor, ExecError> {
        let shape = self.shape.clone();
        if strides.len() != shape.len() || strides.iter().any(|&s| s < 0) {
            return Err(ExecError::Tensor(format!(
                "strides {strides:?} for shape {shape:?}: one non-negative stride per dim"
            )));
        }
        if shape.contains(&0) {
            return Ok(self.clone());
        }
        let reach = shape
            .iter()
            .zip(strides)
            .map(|(&e, &s)| (e as i64 - 1) * s)
            .sum::<i64>() as usize
            + 1;
        let buf = with_buffer!(&*self.data, v, T => {
            let _ = v;
            let vals = self.contiguous_vec::<T>();
            let mut store = T::zeros(reach);
            let mut idx = vec![0usize; shape.len()];
            for x in vals {
                let off: i64 = idx.iter().zip(strides).map(|(&i, &s)| i as i64 * s).sum();
                store[off as usize] = x;
                for d in (0..shape.len()).rev() {
                    idx[d] += 1;
                    if idx[d] < shape[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
            T::wrap(store)
        });
        Tensor::new(self.dtype, shape, strides.to_vec(), 0, Arc::new(buf))
    }

    /// A dense row-major tensor owning `data`.
    pub fn from_buffer(dtype: DType, shape: Vec<usize>, data: Buffer) -> Result<Tensor, ExecError> {
        let numel: usize = shape.iter().product();
        if data.len() != numel {
            return Err(ExecError::Tensor(format!(
                "shape {shape:?} needs {numel} elements, the buffer has {}",
                data.len()
            )));
        }
        let strides = contiguous_strides(&shape);
        Tensor::new(dtype, shape, strides, 0, Arc::new(data))
    }

    /// Dense row-major tensor from values in logical order; each value is
    /// converted to `dtype` as a C cast does (rounding to nearest even).
    pub fn from_f64s(dtype: DType, shape: &[usize], values: &[f64]) -> Result<Tensor, ExecError> {
        let buf = with_dtype!(dtype, T => {
            let v: Vec<T> = values
                .iter()
                .map(|&x| if T::FLOAT { T::from_f64(round_to(x, dtype)) } else { T::from_i64(Literal::Float(x).cast(dtype).as_i64().unwrap_or(0)) })
                .collect();
            T::wrap(v)
        });
        Tensor::from_buffer(dtype, shape.to_vec(), buf)
    }

    /// Dense row-major integer (or bool) tensor from values in logical order.
    pub fn from_i64s(dtype: DType, shape: &[usize], values: &[i64]) -> Result<Tensor, ExecError> {
        let buf = with_dtype!(dtype, T => {
            let v: Vec<T> = values
                .iter()
                .map(|&x| {
                    let c = Literal::Int(x).cast(dtype);
                    if T::FLOAT { T::from_f64(c.as_f64()) } else { T::from_i64(c.as_i64().unwrap_or(0)) }
                })
                .collect();
            T::wrap(v)
        });
        Tensor::from_buffer(dtype, shape.to_vec(), buf)
    }

    /// A tensor of `shape` whose every element is `value` cast to `dtype`,
    /// stored once (all strides 0).
    pub fn full(dtype: DType, shape: &[usize], value: Literal) -> Tensor {
        let c = value.cast(dtype);
        let buf = with_dtype!(dtype, T => {
            let x = if T::FLOAT { T::from_f64(c.as_f64()) } else { T::from_i64(c.as_i64().unwrap_or(0)) };
            T::wrap(vec![x])
        });
        Tensor {
            dtype,
            shape: shape.to_vec(),
            strides: vec![0; shape.len()],
            offset: 0,
            data: Arc::new(buf),
        }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn strides(&self) -> &[i64] {
        &self.strides
    }
    pub fn offset(&self) -> usize {
        self.offset
    }
    pub fn buffer(&self) -> &Buffer {
        &self.data
    }
    pub fn buffer_arc(&self) -> &Arc<Buffer> {
        &self.data
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the view is dense row-major from its offset (extent-1 dims may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1i64;
        for d in (0..self.rank()).rev() {
            if self.shape[d] != 1 && self.strides[d] != expected {
                return false;
            }
            expected *= self.shape[d] as i64;
        }
        true
    }

    /// Storage index of the element at a multi-index.
    pub fn storage_index(&self, index: &[usize]) -> usize {
        assert_eq!(
            index.len(),
            self.rank(),
            "index {index:?} for shape {:?}",
            self.shape
        );
        let mut off = self.offset as i64;
        for d in 0..self.rank() {
            assert!(
                index[d] < self.shape[d],
                "index {index:?} out of bounds for shape {:?}",
                self.shape
            );
            off += index[d] as i64 * self.strides[d];
        }
        off as usize
    }

    /// Element at a multi-index, as f64.
    pub fn get_f64(&self, index: &[usize]) -> f64 {
        self.data.get_f64(self.storage_index(index))
    }

    /// Element at a multi-index, as i64 (floats truncate).
    pub fn get_i64(&self, index: &[usize]) -> i64 {
        self.data.get_i64(self.storage_index(index))
    }

    /// Every element in logical (row-major) order as f64.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_buffer!(&*self.data, v, T => {
            let _ = v;
            let c = self.contiguous_vec::<T>();
            c.into_iter().map(|x| x.to_f64()).collect()
        })
    }

    /// Every element in logical (row-major) order as i64 (floats truncate).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        with_buffer!(&*self.data, v, T => {
            let _ = v;
            let c = self.contiguous_vec::<T>();
            c.into_iter().map(|x| x.to_i64()).collect()
        })
    }

    /// The same values, dense row-major in fresh storage (or `self` when it
    /// already is dense from offset 0 over its whole buffer).
    pub fn to_contiguous(&self) -> Tensor {
        if self.is_contiguous() && self.offset == 0 && self.data.len() == self.numel() {
            return self.clone();
        }
        let buf = with_buffer!(&*self.data, v, T => {
            let _ = v;
            T::wrap(self.contiguous_vec::<T>())
        });
        Tensor {
            dtype: self.dtype,
            shape: self.shape.clone(),
            strides: contiguous_strides(&self.shape),
            offset: 0,
            data: Arc::new(buf),
        }
    }

    /// Values in logical order, little-endian, as safetensors stores them
    /// (bool as one byte 0/1).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let c = self.to_contiguous();
        let n = c.numel();
        let mut out = Vec::with_capacity(n * self.dtype.size_bytes());
        match &*c.data {
            Buffer::Bool(v) => out.extend(v[..n].iter().map(|&b| b as u8)),
            Buffer::I32(v) => v[..n]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Buffer::I64(v) => v[..n]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Buffer::F16(v) => v[..n]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Buffer::BF16(v) => v[..n]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Buffer::F32(v) => v[..n]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Buffer::F64(v) => v[..n]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Buffer::U64(v) => v[..n]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Buffer::F8E4m3(v) => out.extend(v[..n].iter().map(|x| x.0)),
            Buffer::F8E5m2(v) => out.extend(v[..n].iter().map(|x| x.0)),
            Buffer::F8E8m0(v) => out.extend(v[..n].iter().map(|x| x.0)),
            Buffer::C64(v) => v[..n].iter().flat_map(|x| x.0).for_each(|p| out.extend_from_slice(&p.to_le_bytes())),
            Buffer::C128(v) => v[..n].iter().flat_map(|x| x.0).for_each(|p| out.extend_from_slice(&p.to_le_bytes())),
        }
        out
    }

    /// A dense tensor from little-endian bytes in logical order (the
    /// safetensors layout).
    pub fn from_le_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, ExecError> {
        let numel: usize = shape.iter().product();
        let sz = dtype.size_bytes();
        if bytes.len() != numel * sz {
            return Err(ExecError::Tensor(format!(
                "{} bytes for {numel} elements of {dtype}",
                bytes.len()
            )));
        }
        let ch = bytes.chunks_exact(sz);
        let buf = match dtype {
            DType::Bool => Buffer::Bool(bytes.iter().map(|&b| b != 0).collect()),
            DType::Int32 => Buffer::I32(
                ch.map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::Int | DType::Index => Buffer::I64(
                ch.map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::Half => Buffer::F16(
                ch.map(|c| f16::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::BFloat16 => Buffer::BF16(
                ch.map(|c| bf16::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::Float => Buffer::F32(
                ch.map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::Double => Buffer::F64(
                ch.map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::UInt64 => Buffer::U64(
                ch.map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            DType::Float8E4m3fn => Buffer::F8E4m3(bytes.iter().map(|&b| F8E4m3(b)).collect()),
            DType::Float8E5m2 => Buffer::F8E5m2(bytes.iter().map(|&b| F8E5m2(b)).collect()),
            DType::Float8E8m0fnu => Buffer::F8E8m0(bytes.iter().map(|&b| F8E8m0(b)).collect()),
            DType::ComplexFloat => Buffer::C64(
                ch.map(|c| {
                    let p = |k: usize| f32::from_le_bytes(c[k..k + 4].try_into().unwrap());
                    C64([p(0), p(4)])
                })
                .collect(),
            ),
            DType::ComplexDouble => Buffer::C128(
                ch.map(|c| {
                    let p = |k: usize| f64::from_le_bytes(c[k..k + 8].try_into().unwrap());
                    C128([p(0), p(8)])
                })
                .collect(),
            ),
        };
        Tensor::from_buffer(dtype, shape.to_vec(), buf)
    }

    /// Copies the view into a dense row-major vector, in parallel over rows.
    pub fn contiguous_vec<T: Elem>(&self) -> Vec<T> {
        let src = T::slice(&self.data);
        let rank = self.rank();
        let (istride, base) = (
            if rank == 0 { 0 } else { self.strides[rank - 1] },
            self.offset as i64,
        );
        build_rows::<T>(&self.shape, |outer, row| {
            let mut off = base;
            for (d, &i) in outer.iter().enumerate() {
                off += i as i64 * self.strides[d];
            }
            read_row(src, off, istride, row);
        })
    }

    // ---- views ----

    pub fn with_layout(
        &self,
        shape: Vec<usize>,
        strides: Vec<i64>,
        offset: usize,
    ) -> Tensor {
        debug_assert_eq!(shape.len(), strides.len());
        Tensor {
            dtype: self.dtype,
            shape,
            strides,
            offset,
            data: self.data.clone(),
        }
    }

    /// Reorders dims: output dim `i` is input dim `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Tensor {
        self.with_layout(
            perm.iter().map(|&p| self.shape[p]).collect(),
            perm.iter().map(|&p| self.strides[p]).collect(),
            self.offset,
        )
    }

    /// Broadcasts to `shape`, aligning dims on the right (numpy rules):
    /// extent-1 dims and missing leading dims get stride 0.
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        let (r, n) = (self.rank(), shape.len());
        assert!(r <= n, "cannot broadcast {:?} to {shape:?}", self.shape);
        let mut strides = vec![0i64; n];
        for i in 0..r {
            let d = n - r + i;
            if self.shape[i] == shape[d] {
                strides[d] = self.strides[i];
            } else {
                assert_eq!(
                    self.shape[i], 1,
                    "cannot broadcast {:?} to {shape:?}",
                    self.shape
                );
            }
        }
        self.with_layout(shape.to_vec(), strides, self.offset)
    }

    /// Elements `start, start+step, ...` (`len` of them) of dim `dim`.
    pub fn slice_dim(&self, dim: usize, start: usize, len: usize, step: usize) -> Tensor {
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        let offset = if len == 0 {
            self.offset as i64
        } else {
            self.offset as i64 + start as i64 * self.strides[dim]
        };
        shape[dim] = len;
        strides[dim] *= step as i64;
        self.with_layout(shape, strides, offset as usize)
    }

    /// A view with a new shape when the layout allows one (PyTorch's
    /// `computeStride`); `None` when the data would have to move.
    pub fn reshape_view(&self, new_shape: &[usize]) -> Option<Tensor> {
        let strides = view_strides(&self.shape, &self.strides, new_shape)?;
        Some(self.with_layout(new_shape.to_vec(), strides, self.offset))
    }

    /// Reshape: a view when possible, else a dense copy.
    pub fn reshape(&self, new_shape: &[usize]) -> Tensor {
        match self.reshape_view(new_shape) {
            Some(t) => t,
            None => {
                let c = self.to_contiguous();
                c.with_layout(new_shape.to_vec(), contiguous_strides(new_shape), c.offset)
            }
        }
    }
}

/// Strides for viewing (`shape`, `strides`) as `new_shape` without moving
/// data, following PyTorch's `computeStride`.
pub fn view_strides(shape: &[usize], strides: &[i64], new_shape: &[usize]) -> Option<Vec<i64>> {
    let numel: usize = shape.iter().product();
    if new_shape.iter().product::<usize>() != numel {
        return None;
    }
    if numel == 0 || shape.is_empty() {
        return Some(contiguous_strides(new_shape));
    }
    let mut new_strides = vec![0i64; new_shape.len()];
    let mut view_d = new_shape.len() as i64 - 1;
    let mut chunk_base_stride = *strides.last().unwrap();
    let mut tensor_numel: i64 = 1;
    let mut view_numel: i64 = 1;
    for tensor_d in (0..shape.len()).rev() {
        tensor_numel *= shape[tensor_d] as i64;
        if tensor_d == 0
            || (shape[tensor_d - 1] != 1
                && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)
        {
            while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel * chunk_base_stride;
                view_numel *= new_shape[view_d as usize] as i64;
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if view_d != -1 {
        return None;
    }
    Some(new_strides)
}

/// Copies `dst.len()` elements from `src` at `base`, `base + stride`, ...
#[inline]
pub fn read_row<T: Elem>(src: &[T], base: i64, stride: i64, dst: &mut [T]) {
    let n = dst.len();
    if n == 0 {
        return;
    }
    let b = base as usize;
    match stride {
        1 => dst.copy_from_slice(&src[b..b + n]),
        0 => dst.fill(src[b]),
        _ => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = src[(base + i as i64 * stride) as usize];
            }
        }
    }
}

/// Elements per parallel task of simple copy-like loops.
pub const PAR_GRAIN: usize = 1 << 16;

/// Builds a dense row-major vector of `shape` row by row, in parallel. `f`
/// gets the multi-index of the row's outer dims (all but the last) and the
/// row to fill (the whole tensor as one row for rank 0).
pub fn build_rows<T: Elem>(
    shape: &[usize],
    f: impl Fn(&[usize], &mut [T]) + Sync,
) -> Vec<T> {
    let numel: usize = shape.iter().product();
    let mut out = T::zeros(numel);
    if numel == 0 {
        return out;
    }
    let rank = shape.len();
    let row_len = if rank == 0 { 1 } else { shape[rank - 1] };
    let outer = &shape[..rank.saturating_sub(1)];
    let rows_per_task = (PAR_GRAIN / row_len).max(1);
    let task = |(ti, chunk): (usize, &mut [T])| {
        let mut idx = unravel(ti * rows_per_task, outer);
        for row in chunk.chunks_mut(row_len) {
            f(&idx, row);
            increment(&mut idx, outer);
        }
    };
    if numel <= PAR_GRAIN {
        out.chunks_mut(rows_per_task * row_len)
            .enumerate()
            .for_each(task);
    } else {
        out.par_chunks_mut(rows_per_task * row_len)
            .enumerate()
            .for_each(task);
    }
    out
}

/// Multi-index of linear position `p` in row-major `shape`.
pub fn unravel(mut p: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = p % shape[d];
            p /= shape[d];
        }
    }
    idx
}

/// Advances a row-major multi-index by one.
#[inline]
pub fn increment(idx: &mut [usize], shape: &[usize]) {
    for d in (0..shape.len()).rev() {
        idx[d] += 1;
        if idx[d] < shape[d] {
            return;
        }
        idx[d] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_strides_like_pytorch() {
        // Contiguous: any reshape is a view.
        assert_eq!(
            view_strides(&[2, 3, 4], &[12, 4, 1], &[6, 4]),
            Some(vec![4, 1])
        );
        // Transposed: merging the swapped dims is not a view.
        assert_eq!(view_strides(&[3, 2], &[1, 3], &[6]), None);
        // Splitting a dim of a transposed tensor is.
        assert_eq!(
            view_strides(&[4, 2], &[1, 4], &[2, 2, 2]),
            Some(vec![2, 1, 4])
        );
        // Stride-0 dims stay expanded.
        assert_eq!(
            view_strides(&[2, 4], &[0, 1], &[2, 2, 2]),
            Some(vec![0, 2, 1])
        );
    }

    #[test]
    fn bounds_are_checked() {
        let buf = Arc::new(Buffer::F32(vec![0.0; 6]));
        assert!(Tensor::new(DType::Float, vec![2, 3], vec![3, 1], 0, buf.clone()).is_ok());
        assert!(Tensor::new(DType::Float, vec![2, 3], vec![3, 1], 1, buf.clone()).is_err());
        assert!(Tensor::new(DType::Double, vec![2, 3], vec![3, 1], 0, buf).is_err());
    }
}
