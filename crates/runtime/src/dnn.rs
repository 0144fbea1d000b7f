//! Flash attention through cuDNN's graph (backend) API, loaded at run time
//! like cuBLASLt: `sdpfa_fwd` and `sdpfa_bwd` described as cuDNN's attention
//! graphs (two products, the scale, the causal mask, the softmax and its
//! statistics), which its fused attention engines run (on Hopper, `wgmma`
//! kernels). The graphs are the ones cuDNN's own front end builds for
//! scaled dot-product attention (its "composite" form), op for op, so that the
//! same engines take them; the backward's two Float intermediates (the row
//! sums of dO * O and dQ's accumulator) are buffers the caller gives.
//!
//! The library is loaded here rather than by cudarc's loader (whose types
//! and constants this uses): by its versioned name first, see `Lib`. Every
//! entry point checks [`dnn_available`] first and runs the library calls
//! under the crate's panic guard.

use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use cudarc::cudnn::sys::{
    self as dnn, cudnnBackendAttributeName_t as Attr, cudnnBackendAttributeType_t as Ty,
    cudnnBackendDescriptorType_t as Kind, cudnnDataType_t as Data, cudnnPointwiseMode_t as Pw,
    cudnnReduceTensorOp_t as Red, cudnnStatus_t,
};
use cudarc::driver::CudaContext;

use crate::error::{guard, DriverContext, RuntimeError};
use crate::{BlasType, DeviceBuffer, Gpu};

fn check(status: cudnnStatus_t, context: impl FnOnce() -> String) -> Result<(), RuntimeError> {
    if status == cudnnStatus_t::CUDNN_STATUS_SUCCESS {
        return Ok(());
    }
    let mut buf = vec![0 as std::ffi::c_char; 1024];
    // SAFETY: writes at most buf.len() bytes, NUL-terminated.
    unsafe { (loaded().last_error)(buf.as_mut_ptr(), buf.len()) };
    // SAFETY: NUL-terminated by cuDNN (the buffer starts zeroed).
    let last = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
    Err(RuntimeError::Blas {
        context: context(),
        error: if last.is_empty() { format!("{status:?}") } else { format!("{status:?}: {last}") },
    })
}

/// cuDNN's functions this module calls, from the library loaded once per
/// process: `libcudnn.so.9` first, which in a process that holds cuDNN
/// already (PyTorch's) is that very library, so that the process never holds
/// two cuDNNs of different versions; then `libcudnn.so`.
struct Lib {
    create: unsafe extern "C" fn(*mut dnn::cudnnHandle_t) -> cudnnStatus_t,
    destroy: unsafe extern "C" fn(dnn::cudnnHandle_t) -> cudnnStatus_t,
    set_stream: unsafe extern "C" fn(dnn::cudnnHandle_t, dnn::cudaStream_t) -> cudnnStatus_t,
    version: unsafe extern "C" fn() -> usize,
    last_error: unsafe extern "C" fn(*mut std::ffi::c_char, usize),
    create_desc: unsafe extern "C" fn(Kind, *mut dnn::cudnnBackendDescriptor_t) -> cudnnStatus_t,
    destroy_desc: unsafe extern "C" fn(dnn::cudnnBackendDescriptor_t) -> cudnnStatus_t,
    set_attr: unsafe extern "C" fn(dnn::cudnnBackendDescriptor_t, Attr, Ty, i64, *const c_void) -> cudnnStatus_t,
    get_attr: unsafe extern "C" fn(dnn::cudnnBackendDescriptor_t, Attr, Ty, i64, *mut i64, *mut c_void) -> cudnnStatus_t,
    finalize: unsafe extern "C" fn(dnn::cudnnBackendDescriptor_t) -> cudnnStatus_t,
    execute: unsafe extern "C" fn(dnn::cudnnHandle_t, dnn::cudnnBackendDescriptor_t, dnn::cudnnBackendDescriptor_t) -> cudnnStatus_t,
    /// Kept loaded for the process: the pointers above point into it.
    _lib: libloading::Library,
}

const NAMES: [&str; 2] = ["libcudnn.so.9", "libcudnn.so"];

fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: loading cuDNN runs its initializers only; the symbols below
        // are cuDNN 9's C API with these signatures (cudnn_graph.h, cudnn_ops.h).
        unsafe {
            let lib = NAMES.iter().find_map(|&n| libloading::Library::new(n).ok()).ok_or_else(|| {
                let path = std::env::var("LD_LIBRARY_PATH").unwrap_or_else(|_| "(unset)".into());
                format!(
                    "libcudnn could not be loaded (tried {}; LD_LIBRARY_PATH={path}): put cuDNN 9's lib \
                     directory, or that of NVIDIA's cuDNN wheel for Python (nvidia/cudnn/lib), on LD_LIBRARY_PATH",
                    NAMES.join(", ")
                )
            })?;
            fn sym<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, String> {
                // SAFETY: T is the function's type, as the caller names it.
                unsafe { lib.get::<T>(name.as_bytes()) }.map(|s| *s).map_err(|e| format!("libcudnn lacks {name}: {e}"))
            }
            Ok(Lib {
                create: sym(&lib, "cudnnCreate")?,
                destroy: sym(&lib, "cudnnDestroy")?,
                set_stream: sym(&lib, "cudnnSetStream")?,
                version: sym(&lib, "cudnnGetVersion")?,
                last_error: sym(&lib, "cudnnGetLastErrorString")?,
                create_desc: sym(&lib, "cudnnBackendCreateDescriptor")?,
                destroy_desc: sym(&lib, "cudnnBackendDestroyDescriptor")?,
                set_attr: sym(&lib, "cudnnBackendSetAttribute")?,
                get_attr: sym(&lib, "cudnnBackendGetAttribute")?,
                finalize: sym(&lib, "cudnnBackendFinalize")?,
                execute: sym(&lib, "cudnnBackendExecute")?,
                _lib: lib,
            })
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The library, where loaded (every caller checked [`dnn_available`] first).
fn loaded() -> &'static Lib {
    lib().expect("cuDNN's availability is checked before any call")
}

/// Whether libcudnn can be loaded here (no panic): Ok, or why not, naming
/// the file names tried and LD_LIBRARY_PATH.
pub fn dnn_available() -> Result<(), String> {
    lib().map(|_| ())
}

/// cuDNN's version as it reports it (91400 for 9.14.0), where it loads.
pub fn dnn_version() -> Option<usize> {
    // SAFETY: takes no argument.
    lib().ok().map(|l| unsafe { (l.version)() })
}

/// A Gpu's cuDNN handle, destroyed with the Gpu.
pub(crate) struct DnnHandle {
    raw: dnn::cudnnHandle_t,
    ctx: Arc<CudaContext>,
}

// SAFETY: used on the Gpu's one stream, under the Gpu's calls; destroyed only on drop.
unsafe impl Send for DnnHandle {}
unsafe impl Sync for DnnHandle {}

impl Drop for DnnHandle {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        let raw = self.raw;
        // SAFETY: created by cudnnCreate and destroyed only here. Never panic in drop.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { (loaded().destroy)(raw) }));
    }
}

/// Owns a backend descriptor and destroys it on drop.
struct Desc(dnn::cudnnBackendDescriptor_t);

impl Drop for Desc {
    fn drop(&mut self) {
        let raw = self.0;
        // SAFETY: created by cudnnBackendCreateDescriptor, destroyed only here.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { (loaded().destroy_desc)(raw) }));
    }
}

impl Desc {
    fn new(kind: Kind) -> Result<Desc, RuntimeError> {
        let mut raw: dnn::cudnnBackendDescriptor_t = std::ptr::null_mut();
        // SAFETY: writes one descriptor.
        check(unsafe { (loaded().create_desc)(kind, &mut raw) }, || format!("creating {kind:?}"))?;
        Ok(Desc(raw))
    }

    fn set<T>(&self, attr: Attr, ty: Ty, values: &[T]) -> Result<(), RuntimeError> {
        // SAFETY: `values` holds `len` elements of the type `ty` names, read during the call.
        let s = unsafe { (loaded().set_attr)(self.0, attr, ty, values.len() as i64, values.as_ptr() as *const c_void) };
        check(s, || format!("setting {attr:?}"))
    }

    fn descs(&self, attr: Attr, descs: &[&Desc]) -> Result<(), RuntimeError> {
        let raw: Vec<dnn::cudnnBackendDescriptor_t> = descs.iter().map(|d| d.0).collect();
        self.set(attr, Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw)
    }

    fn finalize(&self, what: &str) -> Result<(), RuntimeError> {
        // SAFETY: a live descriptor.
        check(unsafe { (loaded().finalize)(self.0) }, || format!("finalizing {what}"))
    }
}

/// The tensors of an attention graph the caller gives, by role (their ids
/// in cuDNN's graph). `SoftmaxSum` and `DqAccum` are the backward's Float
/// intermediates: `[b, h, s_q]` and `[b, h, s_q, d]`, dense.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionTensor {
    Q = 1,
    K,
    V,
    O,
    Stats,
    Scale,
    DO,
    DQ,
    DK,
    DV,
    SoftmaxSum,
    DqAccum,
}

/// An attention call: `[b, h, s, d]` operands with the element strides of
/// each (`strides`: Q, K, V, O, the log-sum-exp as `[b, h, s_q, 1]`, and for
/// the backward dO, dQ, dK, dV), every last dim contiguous.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionSpec {
    pub backward: bool,
    pub dtype: BlasType,
    pub b: i64,
    pub h: i64,
    pub s_q: i64,
    pub s_kv: i64,
    pub d: i64,
    pub d_v: i64,
    pub causal: bool,
    pub strides: Vec<(AttentionTensor, [i64; 4])>,
}

impl AttentionSpec {
    fn stride(&self, t: AttentionTensor) -> Result<[i64; 4], RuntimeError> {
        self.strides
            .iter()
            .find(|(r, _)| *r == t)
            .map(|(_, s)| *s)
            .ok_or_else(|| RuntimeError::Invalid(format!("attention without the strides of {t:?}")))
    }

    /// The buffers a call reads and writes, by role (Scale is passed by value).
    pub fn tensors(&self) -> Vec<AttentionTensor> {
        use AttentionTensor::*;
        if self.backward {
            vec![Q, K, V, O, Stats, DO, DQ, DK, DV, SoftmaxSum, DqAccum]
        } else {
            vec![Q, K, V, O, Stats]
        }
    }
}

/// A planned attention: cuDNN's execution plan and its workspace.
pub struct Attention {
    plan: Desc,
    workspace: Option<DeviceBuffer>,
    workspace_bytes: usize,
    handle: dnn::cudnnHandle_t,
    gpu: Gpu,
    name: Arc<str>,
    /// The buffers a call must be given (`AttentionSpec::tensors`).
    roles: Vec<AttentionTensor>,
    /// The by-value scalars its graph reads (`Graph::scalars`).
    scalars: Vec<i64>,
}

// SAFETY: the plan is only read by cudnnBackendExecute, on the Gpu's stream.
unsafe impl Send for Attention {}
unsafe impl Sync for Attention {}

impl Attention {
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }
}

/// Builds one graph's descriptors, keeping them alive until the plan is made.
struct Graph {
    dtype: Data,
    keep: Vec<Desc>,
    ops: Vec<usize>,
    next_virtual: i64,
    /// The by-value scalars the graph reads: cuDNN refuses a variant pack
    /// naming any other.
    scalars: Vec<i64>,
}

const F32: Data = Data::CUDNN_DATA_FLOAT;

impl Graph {
    fn tensor(&mut self, uid: i64, dtype: Data, dims: [i64; 4], strides: [i64; 4], flags: (bool, bool)) -> Result<usize, RuntimeError> {
        let (is_virtual, by_value) = flags;
        let t = Desc::new(Kind::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
        t.set(Attr::CUDNN_ATTR_TENSOR_DATA_TYPE, Ty::CUDNN_TYPE_DATA_TYPE, &[dtype])?;
        t.set(Attr::CUDNN_ATTR_TENSOR_DIMENSIONS, Ty::CUDNN_TYPE_INT64, &dims)?;
        t.set(Attr::CUDNN_ATTR_TENSOR_STRIDES, Ty::CUDNN_TYPE_INT64, &strides)?;
        t.set(Attr::CUDNN_ATTR_TENSOR_UNIQUE_ID, Ty::CUDNN_TYPE_INT64, &[uid])?;
        t.set(Attr::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, Ty::CUDNN_TYPE_INT64, &[16i64])?;
        t.set(Attr::CUDNN_ATTR_TENSOR_IS_VIRTUAL, Ty::CUDNN_TYPE_BOOLEAN, &[is_virtual])?;
        if by_value {
            t.set(Attr::CUDNN_ATTR_TENSOR_IS_BY_VALUE, Ty::CUDNN_TYPE_BOOLEAN, &[true])?;
        }
        t.finalize("a tensor descriptor")?;
        self.keep.push(t);
        Ok(self.keep.len() - 1)
    }

    /// A virtual tensor (an intermediate cuDNN keeps on chip).
    fn inner(&mut self, dtype: Data, dims: [i64; 4], strides: [i64; 4]) -> Result<usize, RuntimeError> {
        self.next_virtual += 1;
        self.tensor(self.next_virtual, dtype, dims, strides, (true, false))
    }

    /// A Float scalar passed by value at execution.
    fn scalar(&mut self, uid: i64) -> Result<usize, RuntimeError> {
        self.scalars.push(uid);
        self.tensor(uid, F32, [1; 4], [1; 4], (false, true))
    }

    fn op(&mut self, d: Desc, what: &str) -> Result<(), RuntimeError> {
        d.finalize(what)?;
        self.keep.push(d);
        self.ops.push(self.keep.len() - 1);
        Ok(())
    }

    fn matmul(&mut self, a: usize, b: usize, c: usize) -> Result<(), RuntimeError> {
        let m = Desc::new(Kind::CUDNN_BACKEND_MATMUL_DESCRIPTOR)?;
        m.set(Attr::CUDNN_ATTR_MATMUL_COMP_TYPE, Ty::CUDNN_TYPE_DATA_TYPE, &[F32])?;
        m.finalize("a matmul descriptor")?;
        let op = Desc::new(Kind::CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR)?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_MATMUL_ADESC, &[&self.keep[a]])?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_MATMUL_BDESC, &[&self.keep[b]])?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_MATMUL_CDESC, &[&self.keep[c]])?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_MATMUL_DESC, &[&m])?;
        self.keep.push(m);
        self.op(op, "a matmul")
    }

    /// `y = mode(x[, b][, t])`; `axis` for GEN_INDEX.
    fn pointwise(&mut self, mode: Pw, x: usize, b: Option<usize>, t: Option<usize>, y: usize, axis: Option<i64>) -> Result<(), RuntimeError> {
        let p = Desc::new(Kind::CUDNN_BACKEND_POINTWISE_DESCRIPTOR)?;
        p.set(Attr::CUDNN_ATTR_POINTWISE_MODE, Ty::CUDNN_TYPE_POINTWISE_MODE, &[mode])?;
        let prec = if mode == Pw::CUDNN_POINTWISE_CMP_GE { Data::CUDNN_DATA_BOOLEAN } else { F32 };
        p.set(Attr::CUDNN_ATTR_POINTWISE_MATH_PREC, Ty::CUDNN_TYPE_DATA_TYPE, &[prec])?;
        if let Some(a) = axis {
            p.set(Attr::CUDNN_ATTR_POINTWISE_AXIS, Ty::CUDNN_TYPE_INT64, &[a])?;
        }
        p.finalize("a pointwise descriptor")?;
        let op = Desc::new(Kind::CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, &[&p])?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_XDESC, &[&self.keep[x]])?;
        if let Some(b) = b {
            op.descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_BDESC, &[&self.keep[b]])?;
        }
        if let Some(t) = t {
            op.descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_TDESC, &[&self.keep[t]])?;
        }
        op.descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_YDESC, &[&self.keep[y]])?;
        self.keep.push(p);
        self.op(op, &format!("a pointwise {mode:?}"))
    }

    fn reduce(&mut self, how: Red, x: usize, y: usize) -> Result<(), RuntimeError> {
        let r = Desc::new(Kind::CUDNN_BACKEND_REDUCTION_DESCRIPTOR)?;
        r.set(Attr::CUDNN_ATTR_REDUCTION_COMP_TYPE, Ty::CUDNN_TYPE_DATA_TYPE, &[F32])?;
        r.set(Attr::CUDNN_ATTR_REDUCTION_OPERATOR, Ty::CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &[how])?;
        r.finalize("a reduction descriptor")?;
        let op = Desc::new(Kind::CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_REDUCTION_DESC, &[&r])?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_REDUCTION_XDESC, &[&self.keep[x]])?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_REDUCTION_YDESC, &[&self.keep[y]])?;
        self.keep.push(r);
        self.op(op, &format!("a reduction {how:?}"))
    }

    fn reshape(&mut self, x: usize, y: usize) -> Result<(), RuntimeError> {
        let op = Desc::new(Kind::CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR)?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_RESHAPE_XDESC, &[&self.keep[x]])?;
        op.descs(Attr::CUDNN_ATTR_OPERATION_RESHAPE_YDESC, &[&self.keep[y]])?;
        self.op(op, "a reshape")
    }
}

/// `[a, b, c, d]` strides with the last two swapped: the same tensor read transposed.
fn swap(s: [i64; 4]) -> [i64; 4] {
    [s[0], s[1], s[3], s[2]]
}

fn dense(dims: [i64; 4]) -> [i64; 4] {
    [dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1]
}

/// The scores, masked where causal: `scale * Q x K^T`, minus the
/// log-sum-exp first for the backward (`less`), then -inf above the diagonal.
fn scores(g: &mut Graph, s: &AttentionSpec, q: usize, kt: usize, less: Option<usize>) -> Result<usize, RuntimeError> {
    use AttentionTensor as T;
    let sdims = [s.b, s.h, s.s_q, s.s_kv];
    let st = g.inner(F32, sdims, dense(sdims))?;
    g.matmul(q, kt, st)?;
    let scale = g.scalar(T::Scale as i64)?;
    let mut cur = g.inner(F32, sdims, dense(sdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_MUL, st, Some(scale), None, cur, None)?;
    if let Some(lse) = less {
        let y = g.inner(F32, sdims, dense(sdims))?;
        g.pointwise(Pw::CUDNN_POINTWISE_SUB, cur, Some(lse), None, y, None)?;
        cur = y;
    }
    if s.causal {
        let row = g.inner(Data::CUDNN_DATA_INT32, sdims, dense(sdims))?;
        g.pointwise(Pw::CUDNN_POINTWISE_GEN_INDEX, cur, None, None, row, Some(2))?;
        let col = g.inner(Data::CUDNN_DATA_INT32, sdims, dense(sdims))?;
        g.pointwise(Pw::CUDNN_POINTWISE_GEN_INDEX, cur, None, None, col, Some(3))?;
        let keep = g.inner(Data::CUDNN_DATA_BOOLEAN, sdims, dense(sdims))?;
        g.pointwise(Pw::CUDNN_POINTWISE_CMP_GE, row, Some(col), None, keep, None)?;
        let neg = g.scalar(NEG_INF_UID)?;
        let y = g.inner(F32, sdims, dense(sdims))?;
        g.pointwise(Pw::CUDNN_POINTWISE_BINARY_SELECT, cur, Some(neg), Some(keep), y, None)?;
        cur = y;
    }
    Ok(cur)
}

/// By-value scalars of the graphs beside the scale: -inf for the mask, 1.
const NEG_INF_UID: i64 = 50;
const ONE_UID: i64 = 51;

fn forward(g: &mut Graph, s: &AttentionSpec) -> Result<(), RuntimeError> {
    use AttentionTensor as T;
    let io = g.dtype;
    let q = g.tensor(T::Q as i64, io, [s.b, s.h, s.s_q, s.d], s.stride(T::Q)?, (false, false))?;
    let kt = g.tensor(T::K as i64, io, [s.b, s.h, s.d, s.s_kv], swap(s.stride(T::K)?), (false, false))?;
    let v = g.tensor(T::V as i64, io, [s.b, s.h, s.s_kv, s.d_v], s.stride(T::V)?, (false, false))?;
    let o = g.tensor(T::O as i64, io, [s.b, s.h, s.s_q, s.d_v], s.stride(T::O)?, (false, false))?;
    let stats = g.tensor(T::Stats as i64, F32, [s.b, s.h, s.s_q, 1], s.stride(T::Stats)?, (false, false))?;
    let masked = scores(g, s, q, kt, None)?;
    let (sdims, rdims) = ([s.b, s.h, s.s_q, s.s_kv], [s.b, s.h, s.s_q, 1]);
    let max = g.inner(F32, rdims, dense(rdims))?;
    g.reduce(Red::CUDNN_REDUCE_TENSOR_MAX, masked, max)?;
    let shifted = g.inner(F32, sdims, dense(sdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_SUB, masked, Some(max), None, shifted, None)?;
    let e = g.inner(F32, sdims, dense(sdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_EXP, shifted, None, None, e, None)?;
    let sum = g.inner(F32, rdims, dense(rdims))?;
    g.reduce(Red::CUDNN_REDUCE_TENSOR_ADD, e, sum)?;
    let log = g.inner(F32, rdims, dense(rdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_LOG, sum, None, None, log, None)?;
    g.pointwise(Pw::CUDNN_POINTWISE_ADD, max, Some(log), None, stats, None)?;
    let p = g.inner(io, sdims, dense(sdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_DIV, e, Some(sum), None, p, None)?;
    g.matmul(p, v, o)
}

fn backward(g: &mut Graph, s: &AttentionSpec) -> Result<(), RuntimeError> {
    use AttentionTensor as T;
    let io = g.dtype;
    let t = |g: &mut Graph, r: T, dtype: Data, dims: [i64; 4], st: [i64; 4]| g.tensor(r as i64, dtype, dims, st, (false, false));
    let (qd, kd) = ([s.b, s.h, s.s_q, s.d], [s.b, s.h, s.s_kv, s.d]);
    let (od, vd) = ([s.b, s.h, s.s_q, s.d_v], [s.b, s.h, s.s_kv, s.d_v]);
    let (sdims, rdims) = ([s.b, s.h, s.s_q, s.s_kv], [s.b, s.h, s.s_q, 1]);
    let q = t(g, T::Q, io, qd, s.stride(T::Q)?)?;
    let kt = t(g, T::K, io, [s.b, s.h, s.d, s.s_kv], swap(s.stride(T::K)?))?;
    let vt = t(g, T::V, io, [s.b, s.h, s.d_v, s.s_kv], swap(s.stride(T::V)?))?;
    let o = t(g, T::O, io, od, s.stride(T::O)?)?;
    let d_o = t(g, T::DO, io, od, s.stride(T::DO)?)?;
    let stats = t(g, T::Stats, F32, rdims, s.stride(T::Stats)?)?;
    let dq = t(g, T::DQ, io, qd, s.stride(T::DQ)?)?;
    let dk = t(g, T::DK, io, kd, s.stride(T::DK)?)?;
    let dv = t(g, T::DV, io, vd, s.stride(T::DV)?)?;
    let ssum = t(g, T::SoftmaxSum, F32, rdims, dense(rdims))?;
    let acc = t(g, T::DqAccum, F32, qd, dense(qd))?;
    // D = rowsum(dO * O), laid out as cuDNN's front end lays it.
    let prod = g.inner(F32, od, [s.h * s.s_q * s.d_v, s.s_q * s.d_v, s.h * s.d_v, 1])?;
    g.pointwise(Pw::CUDNN_POINTWISE_MUL, d_o, Some(o), None, prod, None)?;
    let rsum = g.inner(F32, rdims, dense(rdims))?;
    g.reduce(Red::CUDNN_REDUCE_TENSOR_ADD, prod, rsum)?;
    let one = g.scalar(ONE_UID)?;
    g.pointwise(Pw::CUDNN_POINTWISE_MUL, rsum, Some(one), None, ssum, None)?;
    // P = exp(scale * S - lse), masked.
    let masked = scores(g, s, q, kt, Some(stats))?;
    let p = g.inner(F32, sdims, dense(sdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_EXP, masked, None, None, p, None)?;
    let tdims = [s.b, s.h, s.s_kv, s.s_q];
    let tst = [s.h * s.s_q * s.s_kv, s.s_q * s.s_kv, 1, s.s_kv];
    let pt = g.inner(io, tdims, tst)?;
    g.reshape(p, pt)?;
    g.matmul(pt, d_o, dv)?;
    // dS = scale * P * (dO x V^T - D).
    let dp = g.inner(F32, sdims, dense(sdims))?;
    g.matmul(d_o, vt, dp)?;
    let diff = g.inner(F32, sdims, dense(sdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_SUB, dp, Some(ssum), None, diff, None)?;
    let dsp = g.inner(F32, sdims, dense(sdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_MUL, diff, Some(p), None, dsp, None)?;
    let scale = g.scalar(T::Scale as i64)?;
    let ds = g.inner(F32, sdims, dense(sdims))?;
    g.pointwise(Pw::CUDNN_POINTWISE_MUL, dsp, Some(scale), None, ds, None)?;
    let dst = g.inner(io, tdims, tst)?;
    g.reshape(ds, dst)?;
    g.matmul(dst, q, dk)?;
    // dQ = dS x K, accumulated in Float, then rounded.
    let k = g.inner(F32, kd, s.stride(T::K)?)?;
    g.reshape(kt, k)?;
    g.matmul(ds, k, acc)?;
    g.pointwise(Pw::CUDNN_POINTWISE_IDENTITY, acc, None, None, dq, None)
}

impl Gpu {
    fn dnn_handle(&self) -> Result<dnn::cudnnHandle_t, RuntimeError> {
        if let Some(h) = self.inner.dnn.get() {
            return Ok(h.raw);
        }
        self.cuda_context().bind_to_thread().ctx(|| "binding the CUDA context".into())?;
        let mut raw: dnn::cudnnHandle_t = std::ptr::null_mut();
        // SAFETY: writes one handle.
        check(unsafe { (loaded().create)(&mut raw) }, || "creating the cuDNN handle".into())?;
        let stream = self.cuda_stream().cu_stream() as dnn::cudaStream_t;
        // SAFETY: a live handle and this Gpu's stream, which outlives it.
        check(unsafe { (loaded().set_stream)(raw, stream) }, || "setting cuDNN's stream".into())?;
        let _ = self.inner.dnn.set(DnnHandle { raw, ctx: self.cuda_context().clone() });
        self.inner.dnn.get().map(|h| h.raw).ok_or_else(|| RuntimeError::Invalid("the cuDNN handle vanished".into()))
    }

    /// cuDNN's execution plan for `spec` (the first its heuristic offers
    /// that builds), with its workspace allocated. Errors say why not.
    pub fn attention_plan(&self, spec: &AttentionSpec, name: &str) -> Result<Attention, RuntimeError> {
        dnn_available().map_err(|e| RuntimeError::Blas { context: "cuDNN attention".into(), error: e })?;
        guard("planning a cuDNN attention", || {
            let handle = self.dnn_handle()?;
            let dtype = match spec.dtype {
                BlasType::BF16 => Data::CUDNN_DATA_BFLOAT16,
                BlasType::F16 => Data::CUDNN_DATA_HALF,
                other => return Err(RuntimeError::Invalid(format!("cuDNN attention of {other:?}: BFloat16 or Half only"))),
            };
            let mut g = Graph { dtype, keep: vec![], ops: vec![], next_virtual: 100, scalars: vec![] };
            if spec.backward {
                backward(&mut g, spec)?;
            } else {
                forward(&mut g, spec)?;
            }
            let graph = Desc::new(Kind::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
            let ops: Vec<&Desc> = g.ops.iter().map(|&i| &g.keep[i]).collect();
            graph.descs(Attr::CUDNN_ATTR_OPERATIONGRAPH_OPS, &ops)?;
            graph.set(Attr::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, Ty::CUDNN_TYPE_HANDLE, &[handle])?;
            graph.finalize("the attention graph")?;
            let heur = Desc::new(Kind::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
            heur.descs(Attr::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &[&graph])?;
            heur.set(Attr::CUDNN_ATTR_ENGINEHEUR_MODE, Ty::CUDNN_TYPE_HEUR_MODE, &[dnn::cudnnBackendHeurMode_t::CUDNN_HEUR_MODE_A])?;
            heur.finalize("cuDNN's heuristic")?;
            let mut count = 0i64;
            // SAFETY: asks for the count only.
            check(
                unsafe { (loaded().get_attr)(heur.0, Attr::CUDNN_ATTR_ENGINEHEUR_RESULTS, Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &mut count, std::ptr::null_mut()) },
                || "counting cuDNN's engine configurations".into(),
            )?;
            let cfgs: Vec<Desc> = (0..count.max(0)).map(|_| Desc::new(Kind::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)).collect::<Result<_, _>>()?;
            let mut raw: Vec<dnn::cudnnBackendDescriptor_t> = cfgs.iter().map(|c| c.0).collect();
            let mut got = 0i64;
            // SAFETY: `raw` holds `count` created descriptors for cuDNN to fill.
            check(
                unsafe { (loaded().get_attr)(heur.0, Attr::CUDNN_ATTR_ENGINEHEUR_RESULTS, Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &mut got, raw.as_mut_ptr() as *mut c_void) },
                || "reading cuDNN's engine configurations".into(),
            )?;
            let mut last = None;
            for cfg in cfgs.iter().take(got.max(0) as usize) {
                let plan = Desc::new(Kind::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
                plan.set(Attr::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, Ty::CUDNN_TYPE_HANDLE, &[handle])?;
                plan.descs(Attr::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[cfg])?;
                match plan.finalize("cuDNN's execution plan") {
                    Ok(()) => {
                        let mut ws = 0i64;
                        let mut n = 0i64;
                        // SAFETY: reads one int64.
                        check(
                            unsafe { (loaded().get_attr)(plan.0, Attr::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, Ty::CUDNN_TYPE_INT64, 1, &mut n, &mut ws as *mut i64 as *mut c_void) },
                            || "reading the plan's workspace size".into(),
                        )?;
                        let workspace_bytes = ws.max(0) as usize;
                        let workspace = if workspace_bytes > 0 { Some(self.alloc(workspace_bytes)?) } else { None };
                        let scalars = g.scalars.clone();
                        let roles = spec.tensors();
                        return Ok(Attention { plan, workspace, workspace_bytes, handle, gpu: self.clone(), name: Arc::from(name), roles, scalars });
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| RuntimeError::Blas {
                context: format!("cuDNN attention {name}"),
                error: "cuDNN's heuristic offered no engine for this graph".into(),
            }))
        })
    }

    /// Enqueues `a` on this Gpu's stream with the buffers at `ptrs` (by
    /// role, every tensor of its spec) and the scale.
    pub fn attention(&self, a: &Attention, ptrs: &[(AttentionTensor, u64)], scale: f32) -> Result<(), RuntimeError> {
        if !Arc::ptr_eq(&a.gpu.inner, &self.inner) {
            return Err(RuntimeError::Invalid(format!("{} was planned on another GPU handle", a.name)));
        }
        if let Some(t) = a.roles.iter().find(|r| !ptrs.iter().any(|(t, _)| t == *r)) {
            return Err(RuntimeError::Invalid(format!("{}: no buffer given for {t:?}", a.name)));
        }
        if let Some((t, p)) = ptrs.iter().find(|(_, p)| p % 16 != 0) {
            return Err(RuntimeError::Invalid(format!("{}: {t:?} at {p:#x} is not 16-byte aligned", a.name)));
        }
        self.cuda_context().bind_to_thread().ctx(|| "binding the CUDA context".into())?;
        guard("running a cuDNN attention", || {
            let (neg, one) = (f32::NEG_INFINITY, 1f32);
            let mut uids: Vec<i64> = ptrs.iter().map(|(t, _)| *t as i64).collect();
            let mut data: Vec<*mut c_void> = ptrs.iter().map(|(_, p)| *p as *mut c_void).collect();
            for (uid, v) in [(AttentionTensor::Scale as i64, &scale), (NEG_INF_UID, &neg), (ONE_UID, &one)] {
                if !a.scalars.contains(&uid) {
                    continue;
                }
                uids.push(uid);
                data.push(v as *const f32 as *mut c_void);
            }
            let ws = a.workspace.as_ref().map_or(std::ptr::null_mut(), |w| w.device_ptr() as *mut c_void);
            let pack = Desc::new(Kind::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
            pack.set(Attr::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, Ty::CUDNN_TYPE_VOID_PTR, &data)?;
            pack.set(Attr::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, Ty::CUDNN_TYPE_INT64, &uids)?;
            pack.set(Attr::CUDNN_ATTR_VARIANT_PACK_WORKSPACE, Ty::CUDNN_TYPE_VOID_PTR, &[ws])?;
            pack.finalize("the variant pack")?;
            // SAFETY: a finalized plan and pack; the pointers are the caller's live device
            // buffers of the planned shapes, and the by-value scalars live through the call,
            // which copies them.
            check(unsafe { (loaded().execute)(a.handle, a.plan.0, pack.0) }, || format!("enqueuing {}", a.name))?;
            self.record_launch(&a.name);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_reads_swap_the_last_two_strides() {
        assert_eq!(swap([1, 2, 3, 4]), [1, 2, 4, 3]);
        assert_eq!(dense([2, 4, 1000, 64]), [256000, 64000, 64, 1]);
    }
}
