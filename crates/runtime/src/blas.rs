//! Matrix products through cuBLASLt, enqueued on the GPU handle's own stream.
//!
//! Operands are row-major logical `[batch, rows, cols]` with element strides; cuBLASLt is
//! column-major. A row-major D `[m, n]` is the column-major D^T `[n x m]` with ld = n, and
//! D^T = B^T A^T, so cuBLASLt's "A" is our B and its "B" is our A ([`column_major`]).
//!
//! cudarc's loader panics when `libcublasLt` is absent, so every entry point checks
//! [`blas_available`] first and runs the library calls under the crate's panic guard.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublaslt::sys::{
    self as lt, cublasLtMatmulAlgoConfigAttributes_t as AlgoConfig,
    cublasLtMatmulDescAttributes_t as DescAttr, cublasLtMatmulPreferenceAttributes_t as PrefAttr,
    cublasLtMatrixLayoutAttribute_t as LayoutAttr, cublasStatus_t,
};
use cudarc::driver::CudaContext;

use crate::error::{guard, DriverContext, RuntimeError};
use crate::gpu::Gpu;
use crate::memory::DeviceBuffer;

/// The most workspace a product's algorithm may ask for; the plan allocates what the chosen
/// one needs.
const MAX_WORKSPACE: usize = 32 << 20;

/// cublasOperation_t's values (the cuBLASLt bindings do not carry the enum).
const OP_N: i32 = 0;
const OP_T: i32 = 1;

/// Element type of a product's operands and output (accumulation is f32 for the 8-, 16-bit
/// and f32 types, f64 for F64). The FP8 types are operands only (`MatmulSpec::operands`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlasType {
    F16,
    BF16,
    F32,
    F64,
    E4M3,
    E5M2,
}

impl BlasType {
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            BlasType::E4M3 | BlasType::E5M2 => 1,
            BlasType::F16 | BlasType::BF16 => 2,
            BlasType::F32 => 4,
            BlasType::F64 => 8,
        }
    }

    fn name(self) -> &'static str {
        match self {
            BlasType::F16 => "f16",
            BlasType::BF16 => "bf16",
            BlasType::F32 => "f32",
            BlasType::F64 => "f64",
            BlasType::E4M3 => "e4m3",
            BlasType::E5M2 => "e5m2",
        }
    }

    fn cuda(self) -> lt::cudaDataType {
        match self {
            BlasType::F16 => lt::cudaDataType::CUDA_R_16F,
            BlasType::BF16 => lt::cudaDataType::CUDA_R_16BF,
            BlasType::F32 => lt::cudaDataType::CUDA_R_32F,
            BlasType::F64 => lt::cudaDataType::CUDA_R_64F,
            BlasType::E4M3 => lt::cudaDataType::CUDA_R_8F_E4M3,
            BlasType::E5M2 => lt::cudaDataType::CUDA_R_8F_E5M2,
        }
    }

    /// Compute and scale types. Plain COMPUTE_32F: an f32 product must not use TF32.
    fn compute(self) -> (lt::cublasComputeType_t, lt::cudaDataType) {
        match self {
            BlasType::F64 => (
                lt::cublasComputeType_t::CUBLAS_COMPUTE_64F,
                lt::cudaDataType::CUDA_R_64F,
            ),
            _ => (
                lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                lt::cudaDataType::CUDA_R_32F,
            ),
        }
    }
}

/// A function the library applies to each element of D in its epilogue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BlasEpilogue {
    #[default]
    None,
    /// max(x, 0).
    Relu,
    /// GELU, tanh approximation (cuBLASLt's GELU).
    Gelu,
}

/// One operand seen as row-major logical `[batch, rows, cols]`, by element strides.
/// `batch` may be 0 (the same matrix for every batch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MatrixStrides {
    pub batch: i64,
    pub row: i64,
    pub col: i64,
}

/// D[batch, m, n] = A[batch, m, k] x B[batch, k, n] (+ bias[batch, n]), D's rows dense
/// row-major, its batches m x n apart unless `d_batch` says otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct MatmulSpec {
    pub dtype: BlasType,
    pub batch: u64,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub a: MatrixStrides,
    pub b: MatrixStrides,
    /// The bias's batch stride in elements (its n elements are contiguous), where there is a bias.
    pub bias: Option<i64>,
    /// D's batch stride in elements where it is not m x n (a product's batch
    /// dims run in another order than D holds them); at least m x n.
    pub d_batch: Option<i64>,
    /// What the library applies to D (after the bias) before rounding it to `dtype`.
    pub epilogue: BlasEpilogue,
    /// D = alpha x A x B (+ bias); 1 for a plain product.
    pub alpha: f64,
    /// Byte alignment of the A, B, bias and D addresses the product will be called with
    /// (powers of two, at most 256).
    pub align: [u32; 4],
    /// A's and B's element types where they are not `dtype`: FP8 operands (E4M3 or E5M2,
    /// not both E5M2), whose D is BF16, F16 or F32.
    pub operands: Option<[BlasType; 2]>,
    /// How A and B are scaled, by f32s in device memory whose addresses each call gives
    /// (FP8 products only).
    pub scales: BlasScales,
}

/// The scales of an FP8 product's operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BlasScales {
    #[default]
    None,
    /// One each: D = scale_a x scale_b x alpha x A x B. (cuBLASLt's outer-vector scales,
    /// one per row and per column, are refused on the H200: CUBLAS_STATUS_INVALID_VALUE.)
    PerOperand,
}

impl MatmulSpec {
    /// The product in words, for errors and logs.
    pub fn describe(&self) -> String {
        let s = |x: &MatrixStrides| format!("strides {}, {}, {}", x.batch, x.row, x.col);
        let bias = match self.bias {
            Some(stride) => format!(
                " + bias[{}, {}] (batch stride {stride})",
                self.batch, self.n
            ),
            None => String::new(),
        };
        let d = match self.d_batch {
            Some(stride) => format!(" (D's batch stride {stride})"),
            None => String::new(),
        };
        let of = |i: usize| match self.operands {
            Some(t) => format!("{} ", t[i].name()),
            None => String::new(),
        };
        let scaled = match self.scales {
            BlasScales::None => "",
            BlasScales::PerOperand => "scale_a x scale_b x ",
        };
        format!(
            "{} D[{b}, {m}, {n}] = {scaled}A[{b}, {m}, {k}] ({}{}) x B[{b}, {k}, {n}] ({}{}){bias}{d}, \
             addresses aligned to A {} B {} bias {} D {} bytes",
            self.dtype.name(),
            of(0),
            s(&self.a),
            of(1),
            s(&self.b),
            self.align[0],
            self.align[1],
            self.align[2],
            self.align[3],
            b = self.batch,
            m = self.m,
            n = self.n,
            k = self.k,
        )
    }
}

/// One matrix as cuBLASLt sees it: its stored column-major layout and whether the product
/// reads it transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CmMatrix {
    pub trans: bool,
    pub rows: u64,
    pub cols: u64,
    pub ld: i64,
    pub batch_stride: i64,
}

/// A spec mapped onto cuBLASLt's column-major product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layouts {
    /// cuBLASLt's A: our B.
    pub a: CmMatrix,
    /// cuBLASLt's B: our A.
    pub b: CmMatrix,
    /// C and D: our D.
    pub d: CmMatrix,
    pub batch: i32,
    pub bias_batch_stride: Option<i64>,
}

fn to_i64(what: &str, v: u64) -> Result<i64, String> {
    i64::try_from(v).map_err(|_| format!("{what} = {v} does not fit a 64-bit signed integer"))
}

/// Our operand, logical row-major `[r, c]`, as the stored matrix whose op is its transpose
/// `[c x r]`: with unit column stride it is that transpose already (op N, ld = row stride),
/// with unit row stride it is itself column-major (op T, ld = column stride).
/// Where both readings fit (a single line), the transposed one is taken when `prefer_t`.
fn operand(what: &str, r: u64, c: u64, s: MatrixStrides, batch: u64, prefer_t: bool) -> Result<CmMatrix, String> {
    if s.batch < 0 || s.row < 0 || s.col < 0 {
        return Err(format!(
            "{what} has a negative stride (batch {}, row {}, col {}): it needs a copy",
            s.batch, s.row, s.col
        ));
    }
    let (ri, ci) = (to_i64(what, r)?, to_i64(what, c)?);
    // A batch stride is read only between batches.
    let batch_stride = if batch == 1 { 0 } else { s.batch };
    // A dim of extent 1 is never stepped along, so its stride may be anything; cuBLASLt
    // wants ld >= the stored rows, which a unit-extent dim's made-up stride satisfies.
    let as_t = (r == 1 || s.row == 1) && (c == 1 || s.col >= ri);
    if (c == 1 || s.col == 1) && (r == 1 || s.row >= ci) && !(prefer_t && as_t) {
        return Ok(CmMatrix {
            trans: false,
            rows: c,
            cols: r,
            ld: if r == 1 { ci } else { s.row },
            batch_stride,
        });
    }
    if as_t {
        return Ok(CmMatrix {
            trans: true,
            rows: r,
            cols: c,
            ld: if c == 1 { ri } else { s.col },
            batch_stride,
        });
    }
    Err(format!(
        "{what} (logical [{r}, {c}], row stride {}, col stride {}) is neither row- nor \
         column-major with non-overlapping lines (one stride must be 1 and the other at least \
         the extent along it): it needs a copy before cuBLASLt can read it",
        s.row, s.col
    ))
}

/// The pure part of planning: the spec checked and mapped onto cuBLASLt's operands.
pub(crate) fn column_major(spec: &MatmulSpec) -> Result<Layouts, String> {
    let (batch, m, n, k) = (spec.batch, spec.m, spec.n, spec.k);
    if batch == 0 || m == 0 || n == 0 || k == 0 {
        return Err(format!(
            "empty product (batch {batch}, m {m}, n {n}, k {k}): cuBLASLt is not called for \
             one; the caller fills the output"
        ));
    }
    let batch_i32 = i32::try_from(batch).map_err(|_| {
        format!(
            "batch count {batch} exceeds cuBLASLt's limit of {}",
            i32::MAX
        )
    })?;
    fp8(spec)?;
    let [ta, tb] = spec.operands.unwrap_or([spec.dtype; 2]);
    for ((what, a), t) in ["A", "B", "bias", "D"].iter().zip(spec.align).zip([ta, tb, spec.dtype, spec.dtype]) {
        let size = t.size() as u32;
        if !a.is_power_of_two() || a > 256 || a < size {
            return Err(format!(
                "{what}'s alignment {a} must be a power of two from the element size ({size} \
                 bytes for {}) to 256",
                t.name()
            ));
        }
    }
    let bias_batch_stride = match spec.bias {
        Some(s) if s < 0 => {
            return Err(format!("the bias's batch stride {s} is negative"));
        }
        Some(s) => Some(if batch == 1 { 0 } else { s }),
        None => None,
    };
    let mn = m
        .checked_mul(n)
        .ok_or_else(|| format!("m * n = {m} * {n} overflows"))?;
    let d_batch = match spec.d_batch {
        None => to_i64("m * n", mn)?,
        Some(_) if batch == 1 => to_i64("m * n", mn)?,
        Some(s) if s < to_i64("m * n", mn)? => {
            return Err(format!("D's batch stride {s} is less than m * n = {mn}: its batches would overlap"));
        }
        Some(s) => s,
    };
    let fp8 = spec.operands.is_some();
    let (a, b) = (operand("B", k, n, spec.b, batch, fp8)?, operand("A", m, k, spec.a, batch, false)?);
    // cuBLASLt's FP8 kernels read both operands with k contiguous ("TN"): its A (our B)
    // transposed, its B (our A) not.
    if spec.operands.is_some() && (!a.trans || b.trans) {
        let which = if b.trans { "A is column-major" } else { "B is row-major" };
        return Err(format!(
            "FP8 products read both operands with k contiguous (A [m, k] row-major, B [k, n] \
             column-major, as torch._scaled_mm requires); here {which}"
        ));
    }
    Ok(Layouts {
        a,
        b,
        d: CmMatrix {
            trans: false,
            rows: n,
            cols: m,
            ld: to_i64("n", n)?,
            batch_stride: d_batch,
        },
        batch: batch_i32,
        bias_batch_stride,
    })
}

/// The FP8 rules cuBLASLt states for its products, checked before it is asked.
fn fp8(spec: &MatmulSpec) -> Result<(), String> {
    let is8 = |t: BlasType| matches!(t, BlasType::E4M3 | BlasType::E5M2);
    let Some([ta, tb]) = spec.operands else {
        if spec.scales != BlasScales::None {
            return Err("scaled operands are FP8 operands; none are given".into());
        }
        if is8(spec.dtype) {
            return Err(format!("D of {} is not supported (BF16, F16, F32 or F64)", spec.dtype.name()));
        }
        return Ok(());
    };
    if !is8(ta) || !is8(tb) {
        return Err(format!("operand types {} and {} given apart from D's must both be FP8", ta.name(), tb.name()));
    }
    if ta == BlasType::E5M2 && tb == BlasType::E5M2 {
        return Err("an e5m2 x e5m2 product is not supported by cuBLASLt (one operand must be e4m3)".into());
    }
    if !matches!(spec.dtype, BlasType::BF16 | BlasType::F16 | BlasType::F32) {
        return Err(format!("an FP8 product's D is BF16, F16 or F32, not {}", spec.dtype.name()));
    }
    if spec.bias.is_some() || spec.epilogue != BlasEpilogue::None {
        return Err("FP8 products are planned without a bias or epilogue".into());
    }
    Ok(())
}

/// The addresses of one call against the spec: present where needed and aligned as promised.
pub(crate) fn check_addresses(
    spec: &MatmulSpec,
    a: u64,
    b: u64,
    bias: Option<u64>,
    d: u64,
) -> Result<(), String> {
    match (spec.bias, bias) {
        (Some(_), None) => return Err("the product was planned with a bias, none given".into()),
        (None, Some(_)) => {
            return Err("a bias was given to a product planned without one".into());
        }
        _ => {}
    }
    let addrs = [Some(a), Some(b), bias, Some(d)];
    for ((what, addr), align) in ["A", "B", "bias", "D"].iter().zip(addrs).zip(spec.align) {
        let Some(addr) = addr else { continue };
        if addr == 0 {
            return Err(format!("{what}'s address is null"));
        }
        if addr % align as u64 != 0 {
            return Err(format!(
                "{what}'s address {addr:#x} is not aligned to the {align} bytes the product \
                 was planned for"
            ));
        }
    }
    Ok(())
}

/// A call's scale addresses against the spec: given exactly where it was planned scaled,
/// each non-null and aligned to its f32.
pub(crate) fn check_scales(spec: &MatmulSpec, scales: Option<[u64; 2]>) -> Result<(), String> {
    match (spec.scales != BlasScales::None, scales) {
        (true, None) => Err("the product was planned with scales, none given".into()),
        (false, Some(_)) => Err("scales were given to a product planned without them".into()),
        (false, None) => Ok(()),
        (true, Some(s)) => {
            for (what, p) in ["A", "B"].iter().zip(s) {
                if p == 0 || p % 4 != 0 {
                    return Err(format!("{what}'s scale address {p:#x} is null or not aligned to its f32"));
                }
            }
            Ok(())
        }
    }
}

/// A cuBLAS status in words.
fn describe_status(s: cublasStatus_t) -> String {
    use cublasStatus_t::*;
    let words = match s {
        CUBLAS_STATUS_SUCCESS => "success",
        CUBLAS_STATUS_NOT_INITIALIZED => {
            "cuBLASLt is not initialized (no handle, or no usable CUDA context)"
        }
        CUBLAS_STATUS_ALLOC_FAILED => "cuBLASLt could not allocate memory",
        CUBLAS_STATUS_INVALID_VALUE => {
            "an invalid value (a size, leading dimension, alignment or attribute)"
        }
        CUBLAS_STATUS_ARCH_MISMATCH => "the device lacks a feature this product needs",
        CUBLAS_STATUS_MAPPING_ERROR => "GPU memory could not be accessed",
        CUBLAS_STATUS_EXECUTION_FAILED => "the GPU program failed to launch",
        CUBLAS_STATUS_INTERNAL_ERROR => "an internal cuBLASLt operation failed",
        CUBLAS_STATUS_NOT_SUPPORTED => {
            "this combination of types, layouts and epilogue is not supported"
        }
        CUBLAS_STATUS_LICENSE_ERROR => "a license error",
    };
    format!("{s:?}: {words}")
}

fn check(status: cublasStatus_t, context: impl FnOnce() -> String) -> Result<(), RuntimeError> {
    match status {
        cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
        s => Err(RuntimeError::Blas {
            context: context(),
            error: describe_status(s),
        }),
    }
}

/// cuBLASLt's version as it reports it (130000 for 13.0.0), where it loads.
pub fn blas_version() -> Option<usize> {
    // SAFETY: loaded (checked just before); takes no argument.
    blas_available().ok().map(|()| unsafe { lt::cublasLtGetVersion() })
}

/// Whether libcublasLt can be loaded here (no panic): Ok, or why not, naming the library
/// file names tried and LD_LIBRARY_PATH.
pub fn blas_available() -> Result<(), String> {
    static FOUND: OnceLock<()> = OnceLock::new();
    if FOUND.get().is_some() {
        return Ok(());
    }
    // SAFETY: this only tries to dlopen the library by name and drops the handle.
    if unsafe { lt::is_culib_present() } {
        let _ = FOUND.set(());
        return Ok(());
    }
    let tried = cudarc::get_lib_name_candidates("cublasLt").join(", ");
    let path = std::env::var("LD_LIBRARY_PATH").unwrap_or_else(|_| "(unset)".into());
    Err(format!(
        "libcublasLt could not be loaded (tried {tried}; LD_LIBRARY_PATH={path}): put the CUDA \
         toolkit's lib directory, or that of NVIDIA's cuBLAS wheel for Python \
         (nvidia/cublas/lib), on LD_LIBRARY_PATH or in ld.so.conf"
    ))
}

/// A Gpu's cuBLASLt handle, destroyed with the Gpu.
pub(crate) struct BlasHandle {
    raw: lt::cublasLtHandle_t,
    ctx: Arc<CudaContext>,
}

// SAFETY: a cuBLASLt handle may be used from any thread; it is only destroyed on drop.
unsafe impl Send for BlasHandle {}
unsafe impl Sync for BlasHandle {}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        let raw = self.raw;
        // SAFETY: created by cublasLtCreate and destroyed only here. Never panic in drop.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { lt::cublasLtDestroy(raw) }));
    }
}

/// Owns a cuBLASLt descriptor and destroys it on drop.
struct Owned<T: Copy> {
    raw: T,
    destroy: unsafe fn(T) -> cublasStatus_t,
}

impl<T: Copy> Drop for Owned<T> {
    fn drop(&mut self) {
        let (raw, destroy) = (self.raw, self.destroy);
        // SAFETY: created by the matching create call and destroyed only here.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { destroy(raw) }));
    }
}

/// Sets one attribute of a descriptor from a plain value.
unsafe fn set<D, A, T>(
    f: unsafe fn(D, A, *const c_void, usize) -> cublasStatus_t,
    desc: D,
    attr: A,
    value: &T,
    what: &str,
) -> Result<(), RuntimeError>
where
    A: Copy + std::fmt::Debug,
{
    check(
        f(
            desc,
            attr,
            value as *const T as *const c_void,
            std::mem::size_of::<T>(),
        ),
        || format!("setting {attr:?} ({what})"),
    )
}

fn layout(
    dtype: BlasType,
    m: &CmMatrix,
    batch: i32,
) -> Result<Owned<lt::cublasLtMatrixLayout_t>, RuntimeError> {
    let mut raw: lt::cublasLtMatrixLayout_t = std::ptr::null_mut();
    // SAFETY: writes one handle.
    check(
        unsafe { lt::cublasLtMatrixLayoutCreate(&mut raw, dtype.cuda(), m.rows, m.cols, m.ld) },
        || format!("creating a {} x {} layout with ld {}", m.rows, m.cols, m.ld),
    )?;
    let owned = Owned {
        raw,
        destroy: lt::cublasLtMatrixLayoutDestroy,
    };
    let f = lt::cublasLtMatrixLayoutSetAttribute;
    // SAFETY: a live layout; the values have the attributes' types (int32, int64).
    unsafe {
        set(
            f,
            raw,
            LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
            &batch,
            "batch count",
        )?;
        set(
            f,
            raw,
            LayoutAttr::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
            &m.batch_stride,
            "batch stride",
        )?;
    }
    Ok(owned)
}

/// A planned product: descriptors, the chosen algorithm and its workspace.
pub struct Matmul {
    spec: MatmulSpec,
    handle: lt::cublasLtHandle_t,
    /// Locked for each call: the bias pointer is set on it then.
    desc: Mutex<Owned<lt::cublasLtMatmulDesc_t>>,
    a_layout: Owned<lt::cublasLtMatrixLayout_t>,
    b_layout: Owned<lt::cublasLtMatrixLayout_t>,
    d_layout: Owned<lt::cublasLtMatrixLayout_t>,
    algo: lt::cublasLtMatmulAlgo_t,
    workspace: Option<DeviceBuffer>,
    workspace_bytes: usize,
    name: Arc<str>,
    described: String,
    /// Last, so the descriptors and workspace go before a Gpu this may hold the last clone of.
    gpu: Gpu,
}

// SAFETY: the descriptors are host objects of cuBLASLt; after planning only the matmul
// descriptor changes (its bias pointer), and only under its mutex. The handle outlives the
// plan because `gpu` keeps it alive.
unsafe impl Send for Matmul {}
unsafe impl Sync for Matmul {}

impl std::fmt::Debug for Matmul {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matmul")
            .field("spec", &self.spec)
            .field("algorithm", &self.described)
            .finish_non_exhaustive()
    }
}

impl Matmul {
    /// The spec this was planned for.
    pub fn spec(&self) -> &MatmulSpec {
        &self.spec
    }

    /// Device workspace the chosen algorithm uses (allocated with the plan).
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    /// The chosen algorithm: cuBLASLt's algorithm id, tile and stages ids, split-k count,
    /// workspace and estimated waves.
    pub fn describe(&self) -> String {
        self.described.clone()
    }
}

fn describe_algo(h: &lt::cublasLtMatmulHeuristicResult_t) -> String {
    let get = |attr: AlgoConfig| -> String {
        let mut v: u32 = 0;
        let mut written = 0usize;
        // SAFETY: the attributes read here are 4-byte integers; the buffer holds 4 bytes.
        let s = unsafe {
            lt::cublasLtMatmulAlgoConfigGetAttribute(
                &h.algo,
                attr,
                &mut v as *mut u32 as *mut c_void,
                4,
                &mut written,
            )
        };
        if s == cublasStatus_t::CUBLAS_STATUS_SUCCESS && written == 4 {
            v.to_string()
        } else {
            "?".into()
        }
    };
    format!(
        "cuBLASLt algo {} (tile id {}, stages id {}, split-k {}), workspace {} B, {:.2} waves",
        get(AlgoConfig::CUBLASLT_ALGO_CONFIG_ID),
        get(AlgoConfig::CUBLASLT_ALGO_CONFIG_TILE_ID),
        get(AlgoConfig::CUBLASLT_ALGO_CONFIG_STAGES_ID),
        get(AlgoConfig::CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
        h.workspaceSize,
        h.wavesCount
    )
}

impl Gpu {
    /// The Gpu's cuBLASLt handle, created on first use. Callers have checked the library.
    fn blas_handle(&self) -> Result<lt::cublasLtHandle_t, RuntimeError> {
        if let Some(h) = self.inner.blas.get() {
            return Ok(h.raw);
        }
        let mut raw: lt::cublasLtHandle_t = std::ptr::null_mut();
        // SAFETY: writes one handle.
        check(unsafe { lt::cublasLtCreate(&mut raw) }, || {
            "creating the cuBLASLt handle".into()
        })?;
        // Another thread may have won the race: its handle is kept, this one destroyed.
        let _ = self.inner.blas.set(BlasHandle {
            raw,
            ctx: self.cuda_context().clone(),
        });
        self.inner
            .blas
            .get()
            .map(|h| h.raw)
            .ok_or_else(|| RuntimeError::Invalid("the cuBLASLt handle vanished".into()))
    }

    /// Whether the spec can be run, and the chosen algorithm (cuBLASLt's heuristic, first
    /// result, for at most 32 MiB of workspace, which this allocates as that algorithm needs).
    /// Errors say in words what is not supported.
    pub fn matmul_plan(&self, spec: &MatmulSpec) -> Result<Matmul, RuntimeError> {
        let layouts = column_major(spec).map_err(|m| {
            RuntimeError::Invalid(format!("cuBLASLt product {}: {m}", spec.describe()))
        })?;
        blas_available().map_err(|error| RuntimeError::Blas {
            context: "loading cuBLASLt".into(),
            error,
        })?;
        self.cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        guard("planning a cuBLASLt product", || {
            self.plan_checked(spec, &layouts)
        })
    }

    fn plan_checked(&self, spec: &MatmulSpec, l: &Layouts) -> Result<Matmul, RuntimeError> {
        let handle = self.blas_handle()?;
        let (compute, scale) = spec.dtype.compute();
        let mut raw: lt::cublasLtMatmulDesc_t = std::ptr::null_mut();
        // SAFETY: writes one handle.
        check(
            unsafe { lt::cublasLtMatmulDescCreate(&mut raw, compute, scale) },
            || "creating the matmul descriptor".into(),
        )?;
        let desc = Owned {
            raw,
            destroy: lt::cublasLtMatmulDescDestroy,
        };
        let op = |t: bool| if t { OP_T } else { OP_N };
        let f = lt::cublasLtMatmulDescSetAttribute;
        // SAFETY: a live descriptor; each value has its attribute's type (int32 operations,
        // uint32 epilogue, int32 data type, int64 stride, a pointer).
        unsafe {
            set(
                f,
                raw,
                DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
                &op(l.a.trans),
                "op of B",
            )?;
            set(
                f,
                raw,
                DescAttr::CUBLASLT_MATMUL_DESC_TRANSB,
                &op(l.b.trans),
                "op of A",
            )?;
            use lt::cublasLtEpilogue_t as E;
            let epilogue = match (l.bias_batch_stride.is_some(), spec.epilogue) {
                (false, BlasEpilogue::None) => None,
                (true, BlasEpilogue::None) => Some(E::CUBLASLT_EPILOGUE_BIAS),
                (false, BlasEpilogue::Relu) => Some(E::CUBLASLT_EPILOGUE_RELU),
                (true, BlasEpilogue::Relu) => Some(E::CUBLASLT_EPILOGUE_RELU_BIAS),
                (false, BlasEpilogue::Gelu) => Some(E::CUBLASLT_EPILOGUE_GELU),
                (true, BlasEpilogue::Gelu) => Some(E::CUBLASLT_EPILOGUE_GELU_BIAS),
            };
            if let Some(epilogue) = epilogue {
                set(
                    f,
                    raw,
                    DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE,
                    &epilogue,
                    "epilogue",
                )?;
            }

            if let Some(stride) = l.bias_batch_stride {
                let dtype = spec.dtype.cuda();
                set(
                    f,
                    raw,
                    DescAttr::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                    &dtype,
                    "bias type",
                )?;
                set(
                    f,
                    raw,
                    DescAttr::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                    &stride,
                    "bias batch stride",
                )?;
                // A stand-in with exactly the promised alignment, so that the heuristic may
                // weigh it; the real address is set at each call.
                let stand_in = (0x7f00_0000_0000u64 + spec.align[2] as u64) as *const c_void;
                set(
                    f,
                    raw,
                    DescAttr::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &stand_in,
                    "bias",
                )?;
            }
        }
        // cuBLASLt's A is our B, its B our A.
        let [ta, tb] = spec.operands.unwrap_or([spec.dtype; 2]);
        let a_layout = layout(tb, &l.a, l.batch)?;
        let b_layout = layout(ta, &l.b, l.batch)?;
        let d_layout = layout(spec.dtype, &l.d, l.batch)?;

        let mut raw_pref: lt::cublasLtMatmulPreference_t = std::ptr::null_mut();
        // SAFETY: writes one handle.
        check(
            unsafe { lt::cublasLtMatmulPreferenceCreate(&mut raw_pref) },
            || "creating the matmul preference".into(),
        )?;
        let pref = Owned {
            raw: raw_pref,
            destroy: lt::cublasLtMatmulPreferenceDestroy,
        };
        let f = lt::cublasLtMatmulPreferenceSetAttribute;
        let max_ws = MAX_WORKSPACE as u64;
        // cuBLASLt's A is our B, its B our A; C and D are our D.
        let [align_a, align_b, _, align_d] = spec.align;
        // SAFETY: a live preference; uint64 workspace, uint32 alignments.
        unsafe {
            set(
                f,
                raw_pref,
                PrefAttr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &max_ws,
                "workspace",
            )?;
            set(
                f,
                raw_pref,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                &align_b,
                "B's alignment",
            )?;
            set(
                f,
                raw_pref,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                &align_a,
                "A's alignment",
            )?;
            set(
                f,
                raw_pref,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                &align_d,
                "D's alignment",
            )?;
            set(
                f,
                raw_pref,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                &align_d,
                "D's alignment",
            )?;
        }

        // SAFETY: an all-zero heuristic result is a valid bit pattern (status 0 is SUCCESS).
        let mut found: lt::cublasLtMatmulHeuristicResult_t = unsafe { std::mem::zeroed() };
        let mut count: std::ffi::c_int = 0;
        // SAFETY: live descriptors; room for the one result asked for.
        check(
            unsafe {
                lt::cublasLtMatmulAlgoGetHeuristic(
                    handle,
                    desc.raw,
                    a_layout.raw,
                    b_layout.raw,
                    d_layout.raw,
                    d_layout.raw,
                    pref.raw,
                    1,
                    &mut found,
                    &mut count,
                )
            },
            || format!("choosing a cuBLASLt algorithm for {}", spec.describe()),
        )?;
        if count < 1 || found.state != cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(RuntimeError::Blas {
                context: "choosing a cuBLASLt algorithm".into(),
                error: format!(
                    "cuBLASLt has no algorithm for {} within {MAX_WORKSPACE} bytes of workspace{}{}",
                    spec.describe(),
                    if spec.operands.is_some() {
                        " (FP8 products need k a multiple of 16 and rows of D a multiple of 16 bytes)"
                    } else {
                        ""
                    },
                    if count < 1 {
                        String::new()
                    } else {
                        format!(" ({})", describe_status(found.state))
                    }
                ),
            });
        }
        drop(pref);
        let workspace_bytes = found.workspaceSize;
        let workspace = match workspace_bytes {
            0 => None,
            n => Some(self.alloc(n)?),
        };
        let name: Arc<str> = format!(
            "cuBLASLt matmul {}{} [{}, {}, {}] x [{}, {}, {}]",
            spec.operands.map(|[a, b]| format!("{}x{}->", a.name(), b.name())).unwrap_or_default(),
            spec.dtype.name(),
            spec.batch,
            spec.m,
            spec.k,
            spec.batch,
            spec.k,
            spec.n
        )
        .into();
        Ok(Matmul {
            spec: spec.clone(),
            gpu: self.clone(),
            handle,
            desc: Mutex::new(desc),
            a_layout,
            b_layout,
            d_layout,
            algo: found.algo,
            workspace,
            workspace_bytes,
            name,
            described: describe_algo(&found),
        })
    }

    /// Enqueues D = A x B (+ bias) on this GPU's stream (the one kernels launch on); a
    /// product planned `scaled` takes the addresses of A's and B's f32 scales. The
    /// addresses are checked against the plan's alignments first: an error, not undefined
    /// behaviour, where one is lower.
    pub fn matmul(
        &self,
        mm: &Matmul,
        a: u64,
        b: u64,
        scales: Option<[u64; 2]>,
        bias: Option<u64>,
        d: u64,
    ) -> Result<(), RuntimeError> {
        if !Arc::ptr_eq(&mm.gpu.inner, &self.inner) {
            return Err(RuntimeError::Invalid(format!(
                "{} was planned on another GPU handle",
                mm.name
            )));
        }
        check_addresses(&mm.spec, a, b, bias, d)
            .and_then(|()| check_scales(&mm.spec, scales))
            .map_err(|m| RuntimeError::Invalid(format!("{}: {m}", mm.name)))?;
        self.cuda_context()
            .bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        guard("running a cuBLASLt product", || {
            let desc = mm.desc.lock().unwrap_or_else(|p| p.into_inner());
            if let Some([sa, sb]) = scales {
                // cuBLASLt's A is our B: its scale is B's.
                let (sa, sb) = (sb as *const c_void, sa as *const c_void);
                // SAFETY: a live descriptor, held under its lock; the attributes are pointers.
                unsafe {
                    let f = lt::cublasLtMatmulDescSetAttribute;
                    set(f, desc.raw, DescAttr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, "B's scale")?;
                    set(f, desc.raw, DescAttr::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, "A's scale")?;
                }
            }
            if let Some(p) = bias {
                let p = p as *const c_void;
                // SAFETY: a live descriptor, held under its lock; the attribute is a pointer.
                unsafe {
                    set(
                        lt::cublasLtMatmulDescSetAttribute,
                        desc.raw,
                        DescAttr::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                        &p,
                        "bias",
                    )?;
                }
            }
            let (alpha32, zero32, alpha64, zero64) = (mm.spec.alpha as f32, 0f32, mm.spec.alpha, 0f64);
            let (alpha, beta) = match mm.spec.dtype {
                BlasType::F64 => (
                    &alpha64 as *const f64 as *const c_void,
                    &zero64 as *const f64 as *const c_void,
                ),
                _ => (
                    &alpha32 as *const f32 as *const c_void,
                    &zero32 as *const f32 as *const c_void,
                ),
            };
            let (ws, ws_bytes) = match &mm.workspace {
                Some(w) => (w.device_ptr() as *mut c_void, mm.workspace_bytes),
                None => (std::ptr::null_mut(), 0),
            };
            // SAFETY: the descriptors are live and were checked by the heuristic; the
            // addresses are the caller's device memory of the planned shapes, checked for
            // alignment above; alpha and beta live through the call, which reads them then.
            // cuBLASLt's A is our B and its B our A; C is D, unread with beta 0.
            let status = unsafe {
                lt::cublasLtMatmul(
                    mm.handle,
                    desc.raw,
                    alpha,
                    b as *const c_void,
                    mm.a_layout.raw,
                    a as *const c_void,
                    mm.b_layout.raw,
                    beta,
                    d as *const c_void,
                    mm.d_layout.raw,
                    d as *mut c_void,
                    mm.d_layout.raw,
                    &mm.algo,
                    ws,
                    ws_bytes,
                    self.cuda_stream().cu_stream() as lt::cudaStream_t,
                )
            };
            check(status, || format!("enqueuing {}", mm.name))?;
            self.record_launch(&mm.name);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(batch: i64, row: i64, col: i64) -> MatrixStrides {
        MatrixStrides { batch, row, col }
    }

    fn spec(m: u64, n: u64, k: u64, a: MatrixStrides, b: MatrixStrides) -> MatmulSpec {
        MatmulSpec {
            d_batch: None,
            dtype: BlasType::BF16,
            batch: 3,
            m,
            n,
            k,
            a,
            b,
            bias: None,
            epilogue: BlasEpilogue::None,
            alpha: 1.0,
            align: [16; 4],
            operands: None,
            scales: BlasScales::None,
        }
    }

    fn cm(trans: bool, rows: u64, cols: u64, ld: i64, batch_stride: i64) -> CmMatrix {
        CmMatrix {
            trans,
            rows,
            cols,
            ld,
            batch_stride,
        }
    }

    #[test]
    fn row_major_operands_are_op_n() {
        let (m, n, k) = (5, 7, 11);
        let l = column_major(&spec(m, n, k, st(55, 11, 1), st(77, 7, 1))).unwrap();
        // cuBLASLt's A is our B: [k, n] row-major is column-major [n x k], ld n.
        assert_eq!(l.a, cm(false, 7, 11, 7, 77));
        // Its B is our A: [m, k] row-major is column-major [k x m], ld k.
        assert_eq!(l.b, cm(false, 11, 5, 11, 55));
        assert_eq!(l.d, cm(false, 7, 5, 7, 35));
        assert_eq!(l.batch, 3);
        assert_eq!(l.bias_batch_stride, None);
    }

    #[test]
    fn a_linear_weight_is_b_transposed() {
        // weight [n, k] row-major seen as B [k, n]: row stride 1, col stride k, broadcast.
        let (m, n, k) = (4, 6, 8);
        let mut s = spec(m, n, k, st(32, 8, 1), st(0, 1, 8));
        s.bias = Some(6);
        let l = column_major(&s).unwrap();
        assert_eq!(l.a, cm(true, 8, 6, 8, 0));
        assert_eq!(l.b, cm(false, 8, 4, 8, 32));
        assert_eq!(l.bias_batch_stride, Some(6));
        // Padded rows: ld is the stride, not the extent.
        let l = column_major(&spec(m, n, k, st(64, 16, 1), st(0, 1, 10))).unwrap();
        assert_eq!(l.a, cm(true, 8, 6, 10, 0));
        assert_eq!(l.b, cm(false, 8, 4, 16, 64));
    }

    #[test]
    fn a_column_major_a_is_op_t() {
        let l = column_major(&spec(5, 7, 11, st(55, 1, 5), st(77, 7, 1))).unwrap();
        assert_eq!(l.b, cm(true, 5, 11, 5, 55));
    }

    #[test]
    fn extent_one_dims_take_any_stride() {
        // m = 1: A's row stride is never used (0 here, 12345 below).
        let l = column_major(&spec(1, 7, 11, st(11, 0, 1), st(77, 7, 1))).unwrap();
        assert_eq!(l.b, cm(false, 11, 1, 11, 11));
        let l = column_major(&spec(1, 7, 11, st(11, 12345, 1), st(77, 7, 1))).unwrap();
        assert_eq!(l.b, cm(false, 11, 1, 11, 11));
        // m = 1 and A's column stride not 1: a column-major [1 x k] row.
        let l = column_major(&spec(1, 7, 11, st(44, 0, 4), st(77, 7, 1))).unwrap();
        assert_eq!(l.b, cm(true, 1, 11, 4, 44));
        // n = 1: B's column stride is free.
        let l = column_major(&spec(5, 1, 11, st(55, 11, 1), st(11, 1, 0))).unwrap();
        assert_eq!(l.a, cm(false, 1, 11, 1, 11));
        let l = column_major(&spec(5, 1, 11, st(55, 11, 1), st(33, 3, 0))).unwrap();
        assert_eq!(l.a, cm(false, 1, 11, 3, 33));
        // k = 1: an outer product; every operand is one line.
        let l = column_major(&spec(5, 7, 1, st(5, 1, 99), st(7, 0, 1))).unwrap();
        assert_eq!(l.a, cm(false, 7, 1, 7, 7));
        assert_eq!(l.b, cm(false, 1, 5, 1, 5));
        // Every ld is at least its rows and at least 1.
        let l = column_major(&spec(1, 1, 1, st(0, 0, 0), st(0, 0, 0))).unwrap();
        for x in [l.a, l.b, l.d] {
            assert!(x.ld >= x.rows as i64 && x.ld >= 1, "{x:?}");
        }
    }

    #[test]
    fn operands_without_a_unit_stride_need_a_copy() {
        let e = column_major(&spec(5, 7, 11, st(110, 22, 2), st(77, 7, 1))).unwrap_err();
        assert!(
            e.contains("A (logical [5, 11]") && e.contains("needs a copy"),
            "{e}"
        );
        // A row broadcast along k (stride 0 on a dim of extent 11) is no matrix cuBLASLt reads.
        let e = column_major(&spec(5, 7, 11, st(55, 11, 1), st(7, 0, 1))).unwrap_err();
        assert!(e.starts_with("B (logical [11, 7]"), "{e}");
        // Overlapping rows.
        let e = column_major(&spec(5, 7, 11, st(55, 3, 1), st(77, 7, 1))).unwrap_err();
        assert!(e.contains("needs a copy"), "{e}");
        let e = column_major(&spec(5, 7, 11, st(55, -11, 1), st(77, 7, 1))).unwrap_err();
        assert!(e.contains("negative"), "{e}");
    }

    #[test]
    fn bad_specs_are_explained() {
        let ok = spec(5, 7, 11, st(55, 11, 1), st(77, 7, 1));
        let e = column_major(&MatmulSpec { k: 0, ..ok.clone() }).unwrap_err();
        assert!(e.contains("empty product"), "{e}");
        // D's batches laid out by a stride of their own, never overlapping.
        let batched = MatmulSpec { batch: 4, d_batch: Some(3 * 35), ..ok.clone() };
        assert_eq!(column_major(&batched).unwrap().d.batch_stride, 105);
        let e = column_major(&MatmulSpec { d_batch: Some(34), ..batched }).unwrap_err();
        assert!(e.contains("less than m * n = 35"), "{e}");
        let e = column_major(&MatmulSpec {
            align: [16, 16, 16, 1],
            ..ok.clone()
        })
        .unwrap_err();
        assert!(e.starts_with("D's alignment 1"), "{e}");
        let e = column_major(&MatmulSpec {
            align: [512, 16, 16, 16],
            ..ok.clone()
        })
        .unwrap_err();
        assert!(e.starts_with("A's alignment 512"), "{e}");
        let e = column_major(&MatmulSpec {
            align: [16, 12, 16, 16],
            ..ok.clone()
        })
        .unwrap_err();
        assert!(e.starts_with("B's alignment 12"), "{e}");
        let e = column_major(&MatmulSpec {
            bias: Some(-1),
            ..ok.clone()
        })
        .unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = column_major(&MatmulSpec {
            batch: 1 << 31,
            ..ok.clone()
        })
        .unwrap_err();
        assert!(e.contains("batch count"), "{e}");
        // One batch: strides between batches are never read.
        let l = column_major(&MatmulSpec {
            batch: 1,
            bias: Some(7),
            ..ok
        })
        .unwrap();
        assert_eq!((l.a.batch_stride, l.b.batch_stride), (0, 0));
        assert_eq!(l.bias_batch_stride, Some(0));
    }

    #[test]
    fn addresses_are_checked_against_the_plan() {
        let mut s = spec(5, 7, 11, st(55, 11, 1), st(77, 7, 1));
        s.align = [16, 8, 4, 256];
        assert_eq!(check_addresses(&s, 0x1010, 0x1008, None, 0x1100), Ok(()));
        let e = check_addresses(&s, 0x1010, 0x1004, None, 0x1100).unwrap_err();
        assert!(
            e.contains("B's address 0x1004") && e.contains("8 bytes"),
            "{e}"
        );
        let e = check_addresses(&s, 0, 0x1008, None, 0x1100).unwrap_err();
        assert!(e.contains("null"), "{e}");
        assert!(check_addresses(&s, 0x1010, 0x1008, Some(0x2000), 0x1100).is_err());
        s.bias = Some(7);
        assert!(check_addresses(&s, 0x1010, 0x1008, None, 0x1100).is_err());
        assert_eq!(
            check_addresses(&s, 0x1010, 0x1008, Some(0x2004), 0x1100),
            Ok(())
        );
        assert!(check_addresses(&s, 0x1010, 0x1008, Some(0x2002), 0x1100).is_err());
    }

    #[test]
    fn fp8_products_read_k_contiguous_operands() {
        // A [m, k] row-major, B [k, n] column-major: cuBLASLt's "TN".
        let mut s = spec(16, 32, 64, st(0, 64, 1), st(0, 1, 64));
        s.batch = 1;
        s.operands = Some([BlasType::E4M3, BlasType::E5M2]);
        s.scales = BlasScales::PerOperand;
        s.align = [16, 16, 256, 16];
        let l = column_major(&s).unwrap();
        assert!(l.a.trans && !l.b.trans, "{l:?}");
        assert!(s.describe().contains("scale_a x scale_b x A[1, 16, 64] (e4m3 "), "{}", s.describe());
        // Alignments are checked against each operand's own element size.
        assert!(column_major(&MatmulSpec { align: [1, 16, 256, 16], ..s.clone() }).is_ok());
        let e = column_major(&MatmulSpec { b: st(0, 32, 1), ..s.clone() }).unwrap_err();
        assert!(e.contains("k contiguous") && e.contains("B is row-major"), "{e}");
        let e = column_major(&MatmulSpec { a: st(0, 1, 16), ..s.clone() }).unwrap_err();
        assert!(e.contains("A is column-major"), "{e}");
        let e = column_major(&MatmulSpec { operands: Some([BlasType::E5M2; 2]), ..s.clone() }).unwrap_err();
        assert!(e.contains("e5m2 x e5m2"), "{e}");
        let e = column_major(&MatmulSpec { dtype: BlasType::F64, ..s.clone() }).unwrap_err();
        assert!(e.contains("BF16, F16 or F32"), "{e}");
        let e = column_major(&MatmulSpec { operands: None, ..s.clone() }).unwrap_err();
        assert!(e.contains("none are given"), "{e}");
        assert_eq!(check_scales(&s, Some([0x1000, 0x2004])), Ok(()));
        assert!(check_scales(&s, None).unwrap_err().contains("none given"));
        assert!(check_scales(&s, Some([0, 0x2004])).unwrap_err().contains("null"));
        assert!(check_scales(&MatmulSpec { scales: BlasScales::None, ..s }, Some([0x1000, 0x2000])).is_err());
    }

    #[test]
    fn statuses_and_specs_read_well() {
        let t = describe_status(cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED);
        assert!(t.starts_with("CUBLAS_STATUS_NOT_SUPPORTED: "), "{t}");
        let mut s = spec(5, 7, 11, st(55, 11, 1), st(0, 1, 11));
        s.bias = Some(7);
        let d = s.describe();
        assert!(
            d.starts_with("bf16 D[3, 5, 7] = A[3, 5, 11] (strides 55, 11, 1) x B[3, 11, 7]"),
            "{d}"
        );
        assert!(d.contains("bias[3, 7] (batch stride 7)"), "{d}");
    }

    #[test]
    fn availability_never_panics() {
        match blas_available() {
            Ok(()) => {}
            Err(e) => {
                assert!(
                    e.contains("libcublasLt.so") && e.contains("LD_LIBRARY_PATH"),
                    "{e}"
                );
            }
        }
    }
}
