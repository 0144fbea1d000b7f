//! Random well-typed fusions, for differential testing (`fusebench fuzz`) and
//! for the planner's never-panic test. Fusion `index` of `seed` is always the
//! same fusion: every draw comes from a counter-based stream of (seed, index).
//!
//! Ops come from the enumerations (`UnaryOp::ALL`, `BinaryOp::ALL`,
//! `ReduceOp::ALL`), so an op added there is fuzzed without touching this
//! file; structured ops are one line each in [`STRUCTURED`]. A draw that
//! type inference rejects is not an error: it is counted in
//! [`Drawn::ill_typed`] and the generator draws again.

/// The value of a build step of a draw, or the draw ended with its error
/// (a draw is `Option<Result<..>>`: `None` means the operand does not allow
/// the op, `Some(Err)` an ill-typed draw).
macro_rules! step {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        }
    };
}

#[path = "random_ops.rs"]
mod more;

#[path = "random_gemm.rs"]
mod products;

#[path = "random_attention.rs"]
mod attention;

use crate::dtype::ALL_DTYPES;
use crate::recipe::{row_major_strides, InputRecipe};
use crate::{
    BinaryOp, DType, Fusion, FusionBuilder, IrError, Literal, ReduceOp, ScriptInfo, Syntax,
    UnaryOp, ValueId,
};

/// A fusion and what it took to draw it.
#[derive(Clone, Debug)]
pub struct Drawn {
    /// With a recipe (`inputs = [...]`) that fixes every input's layout.
    pub fusion: Fusion,
    /// Op draws that inference rejected (skipped, redrawn).
    pub ill_typed: usize,
    /// The first few rejection messages, for the summary.
    pub rejections: Vec<String>,
}

/// Largest tensor a draw may create, in elements (keeps a run of thousands fast).
const MAX_ELEMENTS: usize = 1 << 20;
/// Op draws per fusion, accepted or not.
const MAX_DRAWS: usize = 24;

/// SplitMix64 on a counter: small, stable across platforms and crate versions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, index: u64) -> Rng {
        let mut r = Rng(seed ^ 0x6A09_E667_F3BC_C909);
        let s = r.next_u64();
        Rng(s ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

/// The drawing state: the fusion so far, its tensors, the inputs' recipes.
pub struct Ctx {
    pub fd: FusionBuilder,
    pub rng: Rng,
    /// Tensor values usable as operands, oldest first.
    pub pool: Vec<ValueId>,
    /// Scalar inputs (`define_scalar` without a value).
    pub scalars: Vec<ValueId>,
    recipes: Vec<InputRecipe>,
}

/// A structured op: draws its arguments from the context and applies it.
/// `None`: the chosen operand does not allow it (not counted as ill-typed).
pub type Gen = fn(&mut Ctx) -> Option<Result<Vec<ValueId>, IrError>>;

/// Structured ops the fuzzer draws, one line each (the elementwise ops and
/// reductions come from the op enumerations).
pub const STRUCTURED: &[(&str, Gen)] = &[
    ("cast", cast),
    ("where", where_),
    ("broadcast", broadcast),
    ("broadcast_in_dim", broadcast_in_dim),
    ("expand", expand),
    ("reshape", reshape),
    ("permute", permute),
    ("squeeze", squeeze),
    ("slice", slice),
    ("pad", pad),
    ("cat", cat),
    ("index_select", index_select),
    ("index_select of an iota", more::index_select_iota),
    ("cumsum/cumprod/cummin/cummax", more::scan),
    ("gather/take_along_axis", more::gather),
    ("select", more::select),
    ("scatter", more::scatter),
    ("index_put_accumulate", more::index_put_accumulate),
    ("topk", more::topk),
    ("argsort", more::argsort),
    ("embedding_fwd", more::embedding),
    ("iota", more::iota),
    ("triu", more::triu),
    ("uniform/normal", more::rng),
    ("rand_like/randn_like", more::rng_like),
    ("matmul", products::matmul),
    ("linear", products::linear),
    ("grouped_mm", products::grouped_mm),
    ("scaled_mm", products::scaled_mm),
    ("sdpfa_fwd", attention::sdpfa_fwd),
    ("full", full),
    ("sum_dtype", sum_dtype),
    ("var_mean", var_mean),
    ("welford", welford),
];

/// Fusion `index` of `seed`.
pub fn fusion(seed: u64, index: u64) -> Drawn {
    let mut c = Ctx {
        fd: FusionBuilder::new(),
        rng: Rng::new(seed, index),
        pool: vec![],
        scalars: vec![],
        recipes: vec![],
    };
    let base = c.shape(1 << 12);
    let n_inputs = 1 + c.rng.below(3);
    for k in 0..n_inputs {
        let shape = if k == 0 {
            base.clone()
        } else {
            c.related(&base)
        };
        let dtype = c.dtype();
        if let Ok(v) = c.input(&shape, dtype) {
            c.pool.push(v);
        }
    }
    if c.rng.chance(0.15) {
        let d = c.rng.pick(&[DType::Double, DType::Int, DType::Bool]);
        let v = c.scalar(d);
        c.recipes.push(InputRecipe::Scalar { value: v });
        let s = c.fd.define_scalar(None, None, d);
        c.scalars.push(s);
    }
    let mut ill_typed = 0;
    let mut rejections = vec![];
    let ops = 1 + c.rng.below(12);
    let (mut done, mut draws) = (0, 0);
    while done < ops && draws < MAX_DRAWS {
        draws += 1;
        let (mark, recipes) = (c.fd.mark(), c.recipes.len());
        let mut r = c.step();
        // Broadcasting can multiply sizes: a draw that makes a value too large is undone.
        if let Some(Ok(vs)) = &r {
            if vs.iter().any(|&v| numel(&c.shape_of(v)) > MAX_ELEMENTS) {
                r = None;
            }
        }
        if !matches!(r, Some(Ok(_))) {
            c.fd.rollback(mark);
            c.recipes.truncate(recipes);
        }
        match r {
            None => {}
            Some(Ok(vs)) => {
                done += 1;
                for v in vs {
                    if c.fd.fusion().value(v).is_tensor() {
                        c.pool.push(v);
                    }
                }
            }
            Some(Err(e)) => {
                ill_typed += 1;
                if rejections.len() < 4 {
                    rejections.push(e.to_string());
                }
            }
        }
    }
    // The newest value is always an output; up to two more at random.
    let last = *c.pool.last().expect("an input was drawn");
    let _ = c.fd.add_output(last);
    for _ in 0..c.rng.below(3) {
        let v = c.rng.pick(&c.pool);
        if v != last && !c.fd.fusion().outputs.contains(&v) {
            let _ = c.fd.add_output(v);
        }
    }
    let legacy = c.rng.chance(0.3);
    let mut fusion = c.fd.finish();
    fusion.recipe = Some(c.recipes);
    fusion.script = ScriptInfo {
        syntax: if legacy {
            Syntax::Legacy
        } else {
            Syntax::Direct
        },
        header: vec![],
        function_name: if legacy {
            "nvfuser_fusion_id0"
        } else {
            "nvfuser_fusion"
        }
        .into(),
    };
    Drawn {
        fusion,
        ill_typed,
        rejections,
    }
}

impl Ctx {
    fn step(&mut self) -> Option<Result<Vec<ValueId>, IrError>> {
        let x = self.operand();
        match self.rng.below(10) {
            0..=2 => Some(
                self.fd
                    .unary(self.rng.pick(UnaryOp::ALL), x)
                    .map(|v| vec![v]),
            ),
            3..=5 => {
                let kind = self.rng.pick(BinaryOp::ALL);
                let (a, b) = if self.rng.chance(0.5) {
                    (x, self.other(x))
                } else {
                    (self.other(x), x)
                };
                Some(self.fd.binary(kind, a, b).map(|v| vec![v]))
            }
            6 => {
                let dims = self.dims(x)?;
                let keep = self.rng.chance(0.3);
                let kind = self.rng.pick(ReduceOp::ALL);
                Some(self.fd.reduce(kind, x, &dims, keep).map(|v| vec![v]))
            }
            _ => (self.rng.pick(STRUCTURED).1)(self),
        }
    }

    pub fn shape_of(&self, v: ValueId) -> Vec<usize> {
        self.fd.fusion().value(v).shape.clone().unwrap_or_default()
    }

    pub fn dtype_of(&self, v: ValueId) -> DType {
        self.fd.fusion().value(v).dtype
    }

    /// A tensor of the pool, most often one of the newest.
    pub fn operand(&mut self) -> ValueId {
        let n = self.pool.len();
        if self.rng.chance(0.6) {
            self.pool[n - 1 - self.rng.below(n.min(2))]
        } else {
            self.pool[self.rng.below(n)]
        }
    }

    /// A second operand for `x`: a tensor of the same shape when there is
    /// one, another tensor, or a literal.
    pub fn other(&mut self, x: ValueId) -> ValueId {
        let s = self.shape_of(x);
        let same: Vec<ValueId> = self
            .pool
            .iter()
            .copied()
            .filter(|&v| self.shape_of(v) == s)
            .collect();
        match self.rng.below(10) {
            0..=4 => self.rng.pick(&same),
            5..=6 => self.operand(),
            7 if !self.scalars.is_empty() => self.rng.pick(&self.scalars),
            _ => {
                let d = self.rng.pick(&[DType::Double, DType::Int, DType::Bool]);
                let l = self.scalar(d);
                self.fd.literal(l)
            }
        }
    }

    /// `v`, or a new copy of it if it is a literal (a script writes a literal
    /// at each use, so each use is a value of its own).
    pub fn fresh(&mut self, v: ValueId) -> ValueId {
        let val = self.fd.fusion().value(v);
        match (&val.def, val.constant) {
            (crate::ValueDef::Literal, Some(l)) => self.fd.literal(l),
            _ => v,
        }
    }

    /// A literal of kind `d` (Double, Int or Bool), values an op will see.
    pub fn scalar(&mut self, d: DType) -> Literal {
        if d == DType::Bool {
            Literal::Bool(self.rng.chance(0.5))
        } else if d.is_integral() {
            Literal::Int(self.rng.pick(&[0, 1, 2, -3, 7]))
        } else {
            Literal::Float(self.rng.pick(&[0.5, 2.0, -1.5, 3.0, 1e-3, 0.0, -0.25]))
        }
    }

    /// A dtype for an input: Float half the time, else any input dtype.
    pub fn dtype(&mut self) -> DType {
        if self.rng.chance(0.4) {
            return DType::Float;
        }
        let all: Vec<DType> = ALL_DTYPES
            .iter()
            .copied()
            .filter(|&d| d != DType::Index)
            .collect();
        self.rng.pick(&all)
    }

    /// One extent: often 1, small or odd, sometimes large.
    pub fn extent(&mut self) -> usize {
        match self.rng.below(20) {
            0..=3 => 1,
            4..=10 => 2 + self.rng.below(7),
            11..=16 => self
                .rng
                .pick(&[3, 5, 7, 9, 13, 17, 31, 33, 63, 65, 127, 129]),
            _ => self.rng.pick(&[255, 257, 511, 1023, 1025, 2047, 4097]),
        }
    }

    /// A shape of rank 0 to 4 with at most `max` elements (rarely up to
    /// [`MAX_ELEMENTS`], for large extents).
    pub fn shape(&mut self, max: usize) -> Vec<usize> {
        let rank = self.rng.pick(&[0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4]);
        let max = if self.rng.chance(0.05) {
            MAX_ELEMENTS
        } else {
            max
        };
        let mut s = vec![];
        for _ in 0..rank {
            let n: usize = s.iter().product();
            let mut e = self.extent();
            if n * e > max {
                e = (max / n).clamp(1, 9);
            }
            s.push(e);
        }
        if s.len() == 1 && max == MAX_ELEMENTS && self.rng.chance(0.5) {
            s[0] = self.rng.pick(&[65537, 100_003, 1 << 20]);
        }
        s
    }

    /// A shape that combines with `base`: equal, with some extents 1
    /// (broadcast), a suffix of it, or unrelated.
    pub fn related(&mut self, base: &[usize]) -> Vec<usize> {
        match self.rng.below(10) {
            0..=5 => base.to_vec(),
            6..=7 => base
                .iter()
                .map(|&e| if self.rng.chance(0.5) { 1 } else { e })
                .collect(),
            8 => base[self.rng.below(base.len() + 1)..].to_vec(),
            _ => self.shape(1 << 12),
        }
    }

    /// A tensor input of `shape`: dense, transposed (a stride order) or
    /// sliced out of a larger buffer, declared as nvFuser derives
    /// contiguity from its strides.
    pub fn input(&mut self, shape: &[usize], dtype: DType) -> Result<ValueId, IrError> {
        self.input_of(shape, dtype, None)
    }

    /// A dense row-major tensor input of `shape` with uniform values (a
    /// grouped product's offsets, which the input generator replaces by a
    /// split of the extent they cut).
    pub fn dense_input(&mut self, shape: &[usize], dtype: DType) -> Result<ValueId, IrError> {
        let ishape: Vec<i64> = shape.iter().map(|&e| e as i64).collect();
        let (contiguity, _) = declaration(shape, &row_major_strides(shape));
        let v = self.fd.define_tensor(None, &ishape, contiguity, dtype, &[], false)?;
        self.recipes.push(InputRecipe::MakeTensor { shape: shape.to_vec(), dtype, low: None, high: None });
        Ok(v)
    }

    /// A tensor input of integers drawn in `[low, high)` (an index tensor:
    /// every value in range), laid out as [`Ctx::input`] lays out its inputs.
    pub fn index_input(
        &mut self,
        shape: &[usize],
        dtype: DType,
        low: i64,
        high: i64,
    ) -> Result<ValueId, IrError> {
        self.input_of(shape, dtype, Some((low, high)))
    }

    fn input_of(
        &mut self,
        shape: &[usize],
        dtype: DType,
        ints: Option<(i64, i64)>,
    ) -> Result<ValueId, IrError> {
        let rank = shape.len();
        let strides = match self.rng.below(10) {
            0..=5 => row_major_strides(shape),
            6..=7 => {
                let mut order: Vec<usize> = (0..rank).collect();
                for i in (1..rank).rev() {
                    order.swap(i, self.rng.below(i + 1));
                }
                permuted_strides(shape, &order)
            }
            _ => {
                let parent: Vec<usize> = shape.iter().map(|&e| e + self.rng.below(3)).collect();
                row_major_strides(&parent)
            }
        };
        let (contiguity, stride_order) = declaration(shape, &strides);
        let ishape: Vec<i64> = shape.iter().map(|&e| e as i64).collect();
        let v = self
            .fd
            .define_tensor(None, &ishape, contiguity, dtype, &stride_order, false)?;
        let dense = strides == row_major_strides(shape);
        let reach = shape
            .iter()
            .zip(&strides)
            .map(|(&e, &s)| (e.max(1) - 1) as i64 * s)
            .sum::<i64>()
            + 1;
        let recipe = if let Some((low, high)) = ints {
            InputRecipe::Randint {
                low,
                high,
                size: if dense { shape.to_vec() } else { vec![reach as usize] },
                dtype,
                as_strided: (!dense).then(|| (shape.to_vec(), strides.clone())),
            }
        } else if dense {
            InputRecipe::MakeTensor {
                shape: shape.to_vec(),
                dtype,
                low: None,
                high: None,
            }
        } else {
            InputRecipe::Randn {
                size: vec![reach as usize],
                dtype,
                as_strided: Some((shape.to_vec(), strides)),
            }
        };
        self.recipes.push(recipe);
        Ok(v)
    }

    /// A non-empty set of dims of `x` to reduce (sometimes all, sometimes negative).
    pub fn dims(&mut self, x: ValueId) -> Option<Vec<i64>> {
        let rank = self.shape_of(x).len() as i64;
        if rank == 0 {
            return None;
        }
        let mut dims: Vec<i64> = (0..rank).filter(|_| self.rng.chance(0.5)).collect();
        if dims.is_empty() {
            dims.push(self.rng.below(rank as usize) as i64);
        }
        if self.rng.chance(0.2) {
            dims = dims.iter().map(|d| d - rank).collect();
        }
        Some(dims)
    }
}

/// Strides of a dense tensor whose dims lie in memory in `order` (outermost first).
fn permuted_strides(shape: &[usize], order: &[usize]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut next = 1i64;
    for &d in order.iter().rev() {
        strides[d] = next;
        next *= shape[d].max(1) as i64;
    }
    strides
}

/// Contiguity (in allocation order) and stride order of a tensor of these
/// strides, as nvFuser derives them: dims sorted by decreasing stride,
/// extent-1 dims broadcast, each other dim contiguous when its stride is the
/// next inner dim's stride times its extent (the innermost: stride 1).
pub fn declaration(shape: &[usize], strides: &[i64]) -> (Vec<Option<bool>>, Vec<i64>) {
    let rank = shape.len();
    let mut order: Vec<usize> = (0..rank).collect();
    order.sort_by(|&a, &b| strides[b].cmp(&strides[a]));
    let mut contiguity = vec![None; rank];
    for (pos, &d) in order.iter().enumerate() {
        if shape[d] == 1 {
            continue;
        }
        let inner = order[pos + 1..].iter().find(|&&i| shape[i] != 1);
        let want = inner.map_or(1, |&i| strides[i] * shape[i] as i64);
        contiguity[pos] = Some(strides[d] == want);
    }
    let stride_order = if order.iter().enumerate().all(|(p, &d)| p == d) {
        vec![]
    } else {
        let mut so = vec![0i64; rank];
        for (pos, &d) in order.iter().enumerate() {
            so[d] = (rank - 1 - pos) as i64;
        }
        so
    };
    (contiguity, stride_order)
}

fn one(r: Result<ValueId, IrError>) -> Option<Result<Vec<ValueId>, IrError>> {
    Some(r.map(|v| vec![v]))
}

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

fn cast(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let all: Vec<DType> = ALL_DTYPES
        .iter()
        .copied()
        .filter(|&d| d != DType::Index)
        .collect();
    let d = c.rng.pick(&all);
    one(c.fd.cast(x, d))
}

fn where_(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let y = c.other(x);
    let (cond, y) = if c.dtype_of(x) == DType::Bool && c.rng.chance(0.3) {
        (x, y)
    } else {
        let k = c
            .rng
            .pick(&[BinaryOp::Gt, BinaryOp::Lt, BinaryOp::Ge, BinaryOp::Ne]);
        // A literal is written where it is used: a second use is a new literal.
        (step!(c.fd.binary(k, x, y)), c.fresh(y))
    };
    let (a, b) = if c.rng.chance(0.5) { (x, y) } else { (y, x) };
    one(c.fd.where_(cond, a, b))
}

fn broadcast(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    if s.len() >= 4 {
        return None;
    }
    let at = c.rng.below(s.len() + 1);
    let flags: Vec<bool> = (0..=s.len()).map(|i| i == at).collect();
    let b = step!(c.fd.broadcast(x, &flags));
    if !c.rng.chance(0.7) {
        return one(Ok(b));
    }
    let e = c.rng.pick(&[2, 3, 5]);
    if numel(&s) * e > MAX_ELEMENTS {
        return one(Ok(b));
    }
    let mut to: Vec<i64> = s.iter().map(|&e| e as i64).collect();
    to.insert(at, e as i64);
    one(c.fd.expand(b, &to))
}

fn broadcast_in_dim(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    if s.len() >= 4 {
        return None;
    }
    // Output = the input's extents (1s may grow) with one new dim inserted.
    let at = c.rng.below(s.len() + 1);
    let new = c.rng.pick(&[1, 2, 3, 4]);
    let mut out: Vec<i64> = s
        .iter()
        .map(|&e| {
            if e == 1 {
                c.rng.pick(&[1, 1, 3])
            } else {
                e as i64
            }
        })
        .collect();
    out.insert(at, new);
    if out.iter().product::<i64>() as usize > MAX_ELEMENTS {
        return None;
    }
    let bdims: Vec<i64> = (0..=s.len() as i64).filter(|&d| d != at as i64).collect();
    one(c.fd.broadcast_in_dim(x, &out, &bdims))
}

fn expand(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    let to: Vec<i64> = s
        .iter()
        .map(|&e| {
            if e == 1 {
                c.rng.pick(&[1, 2, 7])
            } else {
                e as i64
            }
        })
        .collect();
    if to.iter().product::<i64>() as usize > MAX_ELEMENTS {
        return None;
    }
    one(c.fd.expand(x, &to))
}

fn reshape(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    let n = numel(&s) as i64;
    let to: Vec<i64> = match c.rng.below(4) {
        0 => vec![n],
        1 if s.len() >= 2 => vec![-1, *s.last().unwrap() as i64],
        2 => {
            // Split the element count into two factors.
            let f = (2..=n.min(64)).filter(|f| n % f == 0).collect::<Vec<_>>();
            if f.is_empty() {
                vec![1, n]
            } else {
                let f = c.rng.pick(&f);
                vec![n / f, f]
            }
        }
        _ => {
            let mut t: Vec<i64> = s.iter().map(|&e| e as i64).collect();
            t.insert(c.rng.below(t.len() + 1), 1);
            t
        }
    };
    one(c.fd.reshape(x, &to))
}

fn permute(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let rank = c.shape_of(x).len();
    if rank < 2 {
        return None;
    }
    let mut p: Vec<i64> = (0..rank as i64).collect();
    for i in (1..rank).rev() {
        p.swap(i, c.rng.below(i + 1));
    }
    one(c.fd.permute(x, &p))
}

fn squeeze(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let ones: Vec<i64> = c
        .shape_of(x)
        .iter()
        .enumerate()
        .filter(|(_, &e)| e == 1)
        .map(|(d, _)| d as i64)
        .collect();
    if ones.is_empty() {
        return None;
    }
    let d = c.rng.pick(&ones);
    one(c.fd.squeeze(x, &[d]))
}

fn slice(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    if s.is_empty() {
        return None;
    }
    let mut start = vec![];
    let mut end = vec![];
    for &e in &s {
        let a = c.rng.below(e.div_ceil(2));
        let b = e - c.rng.below((e - a).div_ceil(2));
        start.push(a as i64);
        end.push(b as i64);
    }
    one(c.fd.slice(x, &start, &end))
}

fn pad(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    if s.is_empty() {
        return None;
    }
    let pairs = 1 + c.rng.below(s.len().min(2));
    let widths: Vec<i64> = (0..2 * pairs).map(|_| c.rng.below(3) as i64).collect();
    if numel(&s) * 25 > MAX_ELEMENTS {
        return None;
    }
    let value = if c.rng.chance(0.5) {
        None
    } else {
        let d = c.dtype_of(x);
        Some(if d.is_float() {
            Literal::Float(c.rng.pick(&[0.0, -1.0, 2.5]))
        } else if d.is_bool() {
            Literal::Bool(true)
        } else {
            Literal::Int(3)
        })
    };
    one(c.fd.pad(x, &widths, value))
}

fn cat(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    if s.is_empty() || numel(&s) * 3 > MAX_ELEMENTS {
        return None;
    }
    let dim = c.rng.below(s.len());
    // Another tensor that differs from x at most along `dim`.
    let fits: Vec<ValueId> = c
        .pool
        .iter()
        .copied()
        .filter(|&v| {
            let t = c.shape_of(v);
            t.len() == s.len() && (0..s.len()).all(|d| d == dim || t[d] == s[d])
        })
        .collect();
    let mut xs = vec![x, c.rng.pick(&fits)];
    if c.rng.chance(0.3) {
        xs.push(c.rng.pick(&fits));
    }
    let dim = if c.rng.chance(0.3) {
        dim as i64 - s.len() as i64
    } else {
        dim as i64
    };
    one(c.fd.cat(&xs, dim, false))
}

fn index_select(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s = c.shape_of(x);
    if s.is_empty() {
        return None;
    }
    let dim = c.rng.below(s.len());
    let m = c.rng.pick(&[1, 3, 4, 17]);
    if numel(&s) / s[dim].max(1) * m > MAX_ELEMENTS {
        return None;
    }
    let dt = c.rng.pick(&[DType::Int, DType::Int32]);
    let idx = step!(c.fd.tensor(&[m as i64], dt));
    c.recipes.push(InputRecipe::Randint {
        low: 0,
        high: s[dim].max(1) as i64,
        size: vec![m],
        dtype: dt,
        as_strided: None,
    });
    one(c.fd.index_select(x, idx, dim as i64))
}

fn full(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let s: Vec<i64> = c.shape_of(x).iter().map(|&e| e as i64).collect();
    let d = c.dtype();
    let l = if d.is_float() {
        c.scalar(DType::Double)
    } else if d.is_bool() {
        c.scalar(DType::Bool)
    } else {
        c.scalar(DType::Int)
    };
    one(c.fd.full(&s, l, d))
}

fn sum_dtype(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let dims = c.dims(x)?;
    let d = c.rng.pick(&[DType::Float, DType::Double, DType::Int]);
    let keep = c.rng.chance(0.5);
    one(c.fd.sum(x, &dims, keep, Some(d)))
}

fn var_mean(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let dims = c.dims(x)?;
    let corr = c.rng.pick(&[0, 1]);
    let keep = c.rng.chance(0.5);
    Some(c.fd.var_mean(x, &dims, corr, keep).map(|(v, m)| vec![v, m]))
}

fn welford(c: &mut Ctx) -> Option<Result<Vec<ValueId>, IrError>> {
    let x = c.operand();
    let dims = c.dims(x)?;
    Some(c.fd.welford(x, &dims).map(|(m, m2, n)| vec![m, m2, n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_index_draws_the_same_fusion() {
        for i in 0..50 {
            assert_eq!(fusion(7, i).fusion, fusion(7, i).fusion);
        }
        assert_ne!(fusion(7, 1).fusion, fusion(8, 1).fusion);
    }

    #[test]
    fn drawn_fusions_are_valid_and_declared_as_their_strides() {
        for i in 0..300 {
            let f = fusion(1, i).fusion;
            f.validate().unwrap();
            assert!(!f.outputs.is_empty());
            let issues = crate::recipe::check_recipes(&f, f.recipe.as_ref().unwrap());
            assert!(issues.is_empty(), "fusion {i}: {issues:?}");
        }
    }

    #[test]
    fn declarations_follow_nvfusers_rule() {
        // A transposed [3, 4]: dim 1 is outermost.
        assert_eq!(
            declaration(&[3, 4], &[1, 3]),
            (vec![Some(true), Some(true)], vec![0, 1])
        );
        // Sliced out of a [3, 6] buffer: the outer dim is not contiguous.
        assert_eq!(
            declaration(&[3, 4], &[6, 1]),
            (vec![Some(false), Some(true)], vec![])
        );
        assert_eq!(
            declaration(&[1, 4], &[4, 1]),
            (vec![None, Some(true)], vec![])
        );
    }
}
