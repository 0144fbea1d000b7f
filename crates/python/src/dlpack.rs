//! DLPack: tensors in from any framework that exports them (PyTorch, CuPy,
//! JAX) without a copy, and fusebench's outputs out the same way. The C
//! structs are DLPack's stable (unversioned) ABI.

use fusebench_ir::recipe::row_major_strides;
use fusebench_ir::DType;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_void, CStr};

const NAME: &CStr = c"dltensor";
pub const CUDA: i32 = 2;
pub const CUDA_MANAGED: i32 = 13;

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// Where and how a DLPack tensor lies.
#[derive(Clone, Debug)]
pub struct Layout {
    pub device_type: i32,
    pub device_id: i32,
    pub dtype: Option<DType>,
    /// (code, bits, lanes) as DLPack gives them, for messages.
    pub dl_dtype: (u8, u8, u16),
    pub shape: Vec<usize>,
    /// In elements.
    pub strides: Vec<i64>,
    /// Address of the first element.
    pub ptr: u64,
}

fn to_dtype(t: DLDataType) -> Option<DType> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code, t.bits) {
        (2, 16) => DType::Half,
        (2, 32) => DType::Float,
        (2, 64) => DType::Double,
        (4, 16) => DType::BFloat16,
        (0, 32) => DType::Int32,
        (0, 64) => DType::Int,
        (6, 8) | (1, 8) => DType::Bool,
        (1, 64) => DType::UInt64,
        (5, 64) => DType::ComplexFloat,
        (5, 128) => DType::ComplexDouble,
        // DLPack 1.1's float8 codes.
        (10, 8) => DType::Float8E4m3fn,
        (12, 8) => DType::Float8E5m2,
        (14, 8) => DType::Float8E8m0fnu,
        _ => return None,
    })
}

fn from_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::Half => (2, 16),
        DType::Float => (2, 32),
        DType::Double => (2, 64),
        DType::BFloat16 => (4, 16),
        DType::Int32 => (0, 32),
        DType::Int | DType::Index => (0, 64),
        DType::Bool => (6, 8),
        DType::UInt64 => (1, 64),
        DType::ComplexFloat => (5, 64),
        DType::ComplexDouble => (5, 128),
        DType::Float8E4m3fn => (10, 8),
        DType::Float8E5m2 => (12, 8),
        DType::Float8E8m0fnu => (14, 8),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

/// Reads `obj.__dlpack__()` without taking the tensor over: the capsule
/// keeps its name, so its own destructor releases it, and the caller keeps
/// `obj` alive while the address is used.
pub fn read(obj: &Bound<'_, PyAny>) -> PyResult<Layout> {
    let cap = obj.call_method0("__dlpack__")?;
    // SAFETY: the capsule is alive for this scope; a NULL result sets a Python error.
    let p =
        unsafe { ffi::PyCapsule_GetPointer(cap.as_ptr(), NAME.as_ptr()) } as *const DLManagedTensor;
    if p.is_null() {
        return Err(PyErr::take(obj.py()).unwrap_or_else(|| {
            PyValueError::new_err("__dlpack__ did not return a DLPack capsule")
        }));
    }
    // SAFETY: a live "dltensor" capsule points to a DLManagedTensor whose
    // shape (and strides, when not NULL) hold ndim elements.
    let t = unsafe { &(*p).dl_tensor };
    let ndim = t.ndim.max(0) as usize;
    let shape: Vec<usize> = (0..ndim)
        .map(|i| unsafe { *t.shape.add(i) }.max(0) as usize)
        .collect();
    let strides = if t.strides.is_null() {
        row_major_strides(&shape)
    } else {
        (0..ndim).map(|i| unsafe { *t.strides.add(i) }).collect()
    };
    Ok(Layout {
        device_type: t.device.device_type,
        device_id: t.device.device_id,
        dtype: to_dtype(t.dtype),
        dl_dtype: (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        shape,
        strides,
        ptr: t.data as u64 + t.byte_offset,
    })
}

/// What a DLManagedTensor we export owns: its shape and strides arrays, and
/// a reference to the Python object whose device memory it points into.
struct Holder {
    shape: Vec<i64>,
    strides: Vec<i64>,
    _owner: Py<PyAny>,
}

unsafe extern "C" fn delete(p: *mut DLManagedTensor) {
    // SAFETY: `p` and its context were made by `export` with Box::into_raw.
    let m = unsafe { Box::from_raw(p) };
    drop(unsafe { Box::from_raw(m.manager_ctx as *mut Holder) });
}

unsafe extern "C" fn capsule_destructor(cap: *mut ffi::PyObject) {
    // A consumer renames the capsule once it owns the tensor; only an unused one is ours to free.
    if unsafe { ffi::PyCapsule_IsValid(cap, NAME.as_ptr()) } == 1 {
        let p = unsafe { ffi::PyCapsule_GetPointer(cap, NAME.as_ptr()) } as *mut DLManagedTensor;
        if let Some(d) = unsafe { (*p).deleter } {
            unsafe { d(p) };
        }
    }
}

/// Where exported memory lies: (DLPack device type, device id).
pub type Device = (i32, i32);

/// A DLPack capsule for memory at `ptr` on `device` that `owner` keeps alive.
#[allow(clippy::too_many_arguments)]
pub fn export<'py>(
    py: Python<'py>,
    owner: Py<PyAny>,
    ptr: u64,
    dtype: DType,
    shape: &[usize],
    strides: &[i64],
    device: Device,
) -> PyResult<Bound<'py, PyAny>> {
    let mut holder = Box::new(Holder {
        shape: shape.iter().map(|&x| x as i64).collect(),
        strides: strides.to_vec(),
        _owner: owner,
    });
    let managed = Box::new(DLManagedTensor {
        dl_tensor: DLTensor {
            data: ptr as *mut c_void,
            device: DLDevice {
                device_type: device.0,
                device_id: device.1,
            },
            ndim: shape.len() as i32,
            dtype: from_dtype(dtype),
            shape: holder.shape.as_mut_ptr(),
            strides: holder.strides.as_mut_ptr(),
            byte_offset: 0,
        },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete),
    });
    let raw = Box::into_raw(managed);
    // SAFETY: `raw` is ours until the capsule's consumer or destructor calls `delete`.
    unsafe { (*raw).manager_ctx = Box::into_raw(holder) as *mut c_void };
    let cap =
        unsafe { ffi::PyCapsule_New(raw as *mut c_void, NAME.as_ptr(), Some(capsule_destructor)) };
    if cap.is_null() {
        unsafe { delete(raw) };
        return Err(PyErr::take(py)
            .unwrap_or_else(|| PyValueError::new_err("could not make a DLPack capsule")));
    }
    // SAFETY: a new reference returned by PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) })
}
