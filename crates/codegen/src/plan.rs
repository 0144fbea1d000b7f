//! What the engine runs: kernels with their launch shapes and arguments, the
//! temporary buffers between them, and where each fusion output comes from.

use fusebench_ir::DType;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// Elementwise over one output shape, a vector of elements per thread.
    Pointwise,
    /// One block per row: reductions over the row kept on chip, then the row's outputs.
    InnerPersistent,
    /// Partial reductions over outer dims, a thread per output element.
    OuterPartial,
    /// Sums the partials of an outer reduction.
    OuterCombine,
    /// A kernel of the indexing family's own (sort, scatter, accumulate).
    Index,
    /// A few long reductions: blocks of threads each reduce a chunk of one
    /// result's elements to a partial, which `OuterCombine` then combines.
    GridPartial,
    /// Reductions over elements contiguous in memory, a group of lanes per
    /// result, in one kernel (contiguous.rs).
    Contiguous,
    /// Inclusive scans: a thread per line along the scanned dim.
    Scan,
    /// Elementwise with inputs read across the output's innermost dim,
    /// staged through shared-memory tiles (transpose.rs).
    Transpose,
    /// Flash attention forward (attention.rs).
    Attention,
    /// Grouped matrix products (grouped_mm.rs).
    Grouped,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", content = "index", rename_all = "snake_case")]
pub enum KernelArg {
    /// Tensor input `i` of the fusion (position among its inputs).
    Input(usize),
    /// Scalar input `i` of the fusion, passed as a double.
    Scalar(usize),
    /// Fusion output `i`.
    Output(usize),
    /// Temporary buffer `i`.
    Temp(usize),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    pub schedule: Schedule,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub args: Vec<KernelArg>,
    /// What it computes, for people.
    pub summary: String,
    /// Fingerprint of the kernel's own CUDA source (FNV-1a, 64 bits, hex):
    /// two measurements ran the same kernel only if these match.
    #[serde(default)]
    pub code_hash: String,
    /// Which schedule of `schedule::SCHEDULES` built it and why (set by the
    /// segmenter; `None` only while a schedule is building it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<Choice>,
    /// Dynamic shared memory per block, bytes (a row kept on chip,
    /// row_cache.rs); 0 for kernels with static shared memory only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_bytes: u32,
    /// Which setting sized its grid by blocks per multiprocessor, where one
    /// did: `launch::refit` may plan it again for the blocks that are resident.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<Fill>,
    /// TMA tensor maps the kernel takes after `args` (`__grid_constant__`
    /// parameters), encoded at each launch over their buffers' addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tensor_maps: Vec<TensorMap>,
}

impl Kernel {
    /// A kernel of the fields a schedule sets; the rest start empty (no
    /// dynamic shared memory, fill or tensor maps) and the segmenter fills
    /// `code_hash` and `choice`.
    pub fn new(name: impl Into<String>, schedule: Schedule, grid: [u32; 3], block: [u32; 3], args: Vec<KernelArg>, summary: String) -> Kernel {
        Kernel {
            name: name.into(),
            schedule,
            grid,
            block,
            args,
            summary,
            code_hash: String::new(),
            choice: None,
            shared_bytes: 0,
            fill: None,
            tensor_maps: Vec::new(),
        }
    }
}

/// A TMA tensor map over a 16-bit operand (the runtime's
/// `encode_tensor_map`): its elements from `offset` of buffer `of`, `dims`
/// extents innermost first (the innermost contiguous), `strides` the element
/// strides of the others, `boxes` what one copy moves, 128-byte swizzled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorMap {
    pub of: KernelArg,
    pub offset: i64,
    pub bf16: bool,
    pub dims: Vec<u64>,
    pub strides: Vec<u64>,
    pub boxes: Vec<u32>,
}

/// A grid sized by blocks per multiprocessor (`Kernel::fill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fill {
    /// An outer reduction's partials: `Device::outer_blocks_per_sm`.
    Outer,
    /// A row kernel with sums over rows and no row reductions, walking the
    /// rows on a fixed grid: `Device::column_sum_blocks_per_sm`.
    ColumnSums,
    /// A row kernel with row reductions and sums over rows (a backward
    /// norm), walking the rows on a fixed grid: `Device::row_blocks_per_sm`,
    /// widened before compiling by its estimated registers (`walk::plan`).
    Walk,
}

/// The schedule a kernel was built with, why it fits, and the schedules
/// tried before it (in registry order) with why they did not.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub schedule: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<Rejected>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    pub schedule: String,
    pub reason: String,
}

impl Choice {
    /// A kernel with no alternative (scans, the index family, alias writes).
    pub fn only(schedule: &str, reason: impl Into<String>) -> Choice {
        Choice {
            schedule: schedule.into(),
            reason: reason.into(),
            rejected: vec![],
        }
    }
}

/// FNV-1a over the bytes: stable across builds and platforms, enough to tell
/// kernels apart (not a defence against anyone).
pub fn code_hash(source: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Temp {
    pub dtype: DType,
    pub elements: usize,
    pub what: String,
    /// Zeroed when allocated, and left zero by every launch (the counters of
    /// `last_block`): poisoning leaves it as the last launch left it, so a
    /// launch that did not reset it fails the next run's check.
    #[serde(default)]
    pub zeroed: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutputSource {
    /// Written by a kernel into its own dense buffer.
    Written,
    /// A view of tensor input `input` (no kernel touches it).
    InputView {
        input: usize,
        strides: Vec<i64>,
        offset: i64,
    },
    /// A view of fusion output `output`.
    OutputView {
        output: usize,
        strides: Vec<i64>,
        offset: i64,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutputPlan {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub source: OutputSource,
    /// Strides of a written output's buffer when it is not dense row-major
    /// (a stride order: `add_output(out, stride_order=...)` or an output of
    /// `fd.ops.stride_order`); the buffer holds exactly its elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strides: Option<Vec<i64>>,
}

/// Kernels compiled as a translation unit of their own, apart from the
/// fusion's: on a thread of its own beside the fusion's module, and, its
/// source holding nothing of the fusion but the kernel, one entry of the
/// kernel cache for every fusion with the same kernel (attention.rs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Module {
    /// The kernels it holds, by name.
    pub kernels: Vec<String>,
    /// The whole translation unit: the prelude it needs, then the kernels.
    pub source: String,
}

impl Module {
    /// Kernel `name`, whose text (as written after the prelude) is `text`,
    /// by itself: the prelude sections it names, then it.
    pub fn alone(name: &str, text: &str) -> Module {
        Module { kernels: vec![name.to_string()], source: crate::prelude::module(&format!("\n{text}")) }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// One CUDA C translation unit holding every kernel not in `modules`.
    pub source: String,
    /// Kernels in launch order.
    pub kernels: Vec<Kernel>,
    pub temps: Vec<Temp>,
    pub outputs: Vec<OutputPlan>,
    /// Outputs (positions) whose `add_output(out, alias_input)` update a
    /// kernel of the plan writes into the input's own strided elements; the
    /// engine copies the others into their (dense) input after the kernels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alias_writes: Vec<usize>,
    /// How many outputs at the end of `outputs` are the plan's own, not the
    /// fusion's: values computed once that broadcast outputs are views of
    /// (crate::expanded). The engine returns only the outputs before them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hidden_outputs: usize,
    /// Matrix products run by the GPU's BLAS library between the kernels
    /// (crate::gemm), in launch order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub products: Vec<Product>,
    /// Kernels compiled apart (each named in `kernels`, which may name one
    /// several times: two identical attention calls), one entry per
    /// distinct source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<Module>,
    /// Each kernel of `source` as a translation unit by itself, where the
    /// planner wrote it as one piece (every schedule does): what
    /// `units(true)` compiles instead of `source`, a kernel a thread. Not in
    /// the plan's JSON, which `source` already holds.
    #[serde(skip)]
    pub pieces: Vec<Module>,
    /// Flash attention run by cuDNN between the kernels (crate::attention),
    /// in launch order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attention: Vec<LibraryAttention>,
}

/// A call of a library between the plan's kernels (`Plan::calls_before`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LibraryCall {
    /// `products[i]`.
    Product(usize),
    /// `attention[i]`.
    Attention(usize),
}

/// `sdpfa_fwd` or `sdpfa_bwd` run by cuDNN's fused attention before kernel
/// `before` and after the first `after_products` products: `[b, h, s, d]`
/// operands read where they lie.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LibraryAttention {
    /// What it computes, for people.
    pub summary: String,
    pub backward: bool,
    pub dtype: DType,
    /// Batch rows, heads, queries, keys and the head dims of Q/K and V.
    pub b: usize,
    pub h: usize,
    pub s_q: usize,
    pub s_kv: usize,
    pub d: usize,
    pub d_v: usize,
    pub causal: bool,
    /// The scores' scale, a positive constant (crate::attention::library).
    pub scale: f64,
    pub tensors: Vec<AttentionOperand>,
    /// Outputs nothing else writes that read zero (the forward's philox
    /// seed and offset without dropout): set to zero before the call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zeroed: Vec<KernelArg>,
    pub before: usize,
    pub after_products: usize,
}

/// What an attention's buffer holds: its operands and results, and the
/// backward's Float intermediates (D = rowsum(dO * O) and dQ's accumulator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttentionRole {
    Q,
    K,
    V,
    O,
    Stats,
    DO,
    DQ,
    DK,
    DV,
    SoftmaxSum,
    DqAccum,
}

/// A buffer of an attention: from element `offset`, the element strides of
/// its `[b, h, s, d]` (`[b, h, s, 1]` for the log-sum-exp and D).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttentionOperand {
    pub role: AttentionRole,
    pub arg: KernelArg,
    pub offset: i64,
    pub strides: [i64; 4],
}

impl LibraryAttention {
    /// The call in words, for `emit`.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "{} (cuDNN's fused attention, f32 accumulation): batch {} x {} heads, {} queries, {} keys, head dims {}/{}, {}{}",
            self.summary,
            self.b,
            self.h,
            self.s_q,
            self.s_kv,
            self.d,
            self.d_v,
            self.dtype,
            if self.causal { ", causal mask" } else { "" }
        )];
        lines.push(format!("scale {}", self.scale));
        for t in &self.tensors {
            let arg = match t.arg {
                KernelArg::Input(i) => format!("input {i}"),
                KernelArg::Output(o) => format!("output {o}"),
                KernelArg::Temp(t) => format!("temp {t}"),
                KernelArg::Scalar(s) => format!("scalar {s}"),
            };
            lines.push(format!("{:?}: {arg} from element {} at strides {:?}", t.role, t.offset, t.strides));
        }
        if !self.zeroed.is_empty() {
            lines.push(format!("{} set to zero before it (no dropout: the philox seed and offset)", self.zeroed.len()));
        }
        lines
    }
}

/// `D[batch, m, n] = A[batch, m, k] x B[batch, k, n] (+ bias[batch, n])`, run
/// by the BLAS library (cuBLASLt) before kernel `before` (after them all
/// when it equals the kernel count). D is dense row-major.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Product {
    /// What it computes, for people: `linear T5 = T0 x T1^T + T2`.
    pub summary: String,
    pub dtype: DType,
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Operand,
    pub b: Operand,
    /// Its `n` elements contiguous; `strides[0]` steps the batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<Operand>,
    /// An output (`KernelArg::Output`): fusion outputs and the plan's hidden ones.
    pub out: KernelArg,
    /// Element offset of D in `out`: batch dims that do not collapse to one
    /// stride are run as one product per index of the outer ones.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub out_offset: i64,
    /// Elements between D's batches where they are not m x n apart (0): a
    /// product's batch dims run in another order than D holds them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub out_batch_stride: i64,
    /// What the library applies to D before rounding it (crate::epilogue_fn).
    #[serde(default, skip_serializing_if = "crate::Epilogue::is_none")]
    pub epilogue: crate::Epilogue,
    /// D is alpha times the product (a constant scale of its consumer).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub alpha: f64,
    /// A's and B's dtypes where they are not `dtype` (`scaled_mm`'s FP8 operands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operands: Option<[DType; 2]>,
    /// One Float each that A and B are scaled by (`scaled_mm` with one scale
    /// per operand), read by the library where they lie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scales: Option<[Operand; 2]>,
    pub before: usize,
}

impl Product {
    /// The product in words: what, its extents, where each operand lies and
    /// how the library reads it.
    pub fn describe(&self) -> Vec<String> {
        let arg = |a: &KernelArg| match *a {
            KernelArg::Input(i) => format!("input {i}"),
            KernelArg::Output(o) => format!("output {o}"),
            KernelArg::Temp(t) => format!("temp {t}"),
            KernelArg::Scalar(s) => format!("scalar {s}"),
        };
        let operand = |name: &str, o: &Operand| {
            let how = if o.strides[2] == 1 { "rows contiguous" } else if o.strides[1] == 1 { "columns contiguous (read transposed, no copy)" } else { "one row or column" };
            format!(
                "{name}: {} from element {} at strides [batch {}, row {}, col {}]: {how}",
                arg(&o.arg), o.offset, o.strides[0], o.strides[1], o.strides[2]
            )
        };
        let inputs = self.operands.map(|[a, b]| format!(", operands {a} and {b}")).unwrap_or_default();
        let mut lines = vec![
            format!("{} (cuBLASLt, {} accumulation{inputs})", self.summary, if self.dtype == DType::Double { "f64" } else { "f32" }),
            format!(
                "{}m {} x n {} x k {}, {} into {}{} (dense row-major{}){}",
                if self.batch > 1 { format!("batch {} of ", self.batch) } else { String::new() },
                self.m, self.n, self.k, self.dtype, arg(&self.out),
                if self.out_offset != 0 { format!(" from element {}", self.out_offset) } else { String::new() },
                if self.out_batch_stride != 0 { format!(", batches {} apart", self.out_batch_stride) } else { String::new() },
                if self.bias.is_some() { ", bias added by the library's epilogue" } else { "" }
            ),
        ];
        if self.alpha != 1.0 {
            lines.push(format!(
                "scaled by {} in the product (alpha), before D is rounded to {} (the fusion rounds first: at most about a unit apart)",
                self.alpha, self.dtype
            ));
        }
        if !self.epilogue.is_none() {
            lines.push(format!(
                "then {} in the library's epilogue, before D is rounded to {} (the fusion rounds first: at most about a unit apart)",
                self.epilogue.describe(),
                self.dtype
            ));
        }
        lines.extend([
            operand("A", &self.a),
            operand("B", &self.b),
        ]);
        if let Some(b) = &self.bias {
            lines.push(format!("bias: {} from element {}, batch stride {}", arg(&b.arg), b.offset, b.strides[0]));
        }
        if let Some([sa, sb]) = &self.scales {
            lines.push(format!(
                "scaled by A's scale ({} element {}) and B's ({} element {}) in the product, before D is rounded to {}",
                arg(&sa.arg), sa.offset, arg(&sb.arg), sb.offset, self.dtype
            ));
        }
        lines
    }
}

/// An operand read where it lies: a buffer, the element offset of its first
/// element, and the element strides of its `[batch, rows, cols]` (a batch
/// stride of 0 reads the same matrix for every batch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Operand {
    pub arg: KernelArg,
    pub offset: i64,
    pub strides: [i64; 3],
}

fn one() -> f64 {
    1.0
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

impl Plan {
    /// The translation units to compile, each with the kernels it holds: the
    /// fusion's own module (where it holds any kernel), or with `apart` and
    /// two kernels or more, each of them by itself (`pieces`, where every
    /// one has a piece); then `modules`.
    pub fn units(&self, apart: bool) -> Vec<(&str, Vec<&str>)> {
        let in_modules: Vec<&str> = self.modules.iter().flat_map(|m| m.kernels.iter().map(String::as_str)).collect();
        let mut own: Vec<&str> = vec![];
        for k in &self.kernels {
            if !in_modules.contains(&k.name.as_str()) && !own.contains(&k.name.as_str()) {
                own.push(&k.name);
            }
        }
        let mut units = vec![];
        let piece = |n: &str| self.pieces.iter().find(|m| m.kernels.len() == 1 && m.kernels[0] == n);
        if apart && own.len() >= 2 && own.iter().all(|n| piece(n).is_some()) {
            for n in own {
                let m = piece(n).expect("checked above");
                units.push((m.source.as_str(), vec![n]));
            }
        } else if !own.is_empty() {
            units.push((self.source.as_str(), own));
        }
        units.extend(self.modules.iter().map(|m| (m.source.as_str(), m.kernels.iter().map(String::as_str).collect())));
        units
    }

    /// The library calls run just before kernel `k` (after the last kernel
    /// at `k == kernels.len()`), in launch order: the products placed there,
    /// each attention call after the products placed before it.
    pub fn calls_before(&self, k: usize) -> Vec<LibraryCall> {
        let mut calls = vec![];
        let mut products = self.products.iter().enumerate().filter(|(_, p)| p.before == k).map(|(i, _)| i).peekable();
        for (a, call) in self.attention.iter().enumerate().filter(|(_, a)| a.before == k) {
            while let Some(p) = products.next_if(|&p| p < call.after_products) {
                calls.push(LibraryCall::Product(p));
            }
            calls.push(LibraryCall::Attention(a));
        }
        calls.extend(products.map(LibraryCall::Product));
        calls
    }

    /// Whether libraries (cuBLASLt, cuDNN) run part of the plan: they pick
    /// their own kernels, known only once they ran.
    pub fn runs_library(&self) -> bool {
        !self.products.is_empty() || !self.attention.is_empty()
    }

    /// Bytes the kernels must move at least: inputs they read once and outputs they write.
    pub fn written_bytes(&self) -> usize {
        self.outputs
            .iter()
            .filter(|o| matches!(o.source, OutputSource::Written))
            .map(|o| o.shape.iter().product::<usize>() * o.dtype.size_bytes())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn code_hash_is_fnv1a() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(super::code_hash(""), "cbf29ce484222325");
        assert_eq!(super::code_hash("a"), "af63dc4c8601ec8c");
        assert_ne!(super::code_hash("x + 1"), super::code_hash("x + 2"));
    }
}
