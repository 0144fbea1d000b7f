//! Lowering: the C statements that compute one value of the fusion at one
//! symbolic index, reading loads from global memory and values the kernel
//! already holds, with common subexpressions shared within a scope.

use crate::ctype;
use crate::error::CodegenError;
use crate::ix::Ix;
use crate::reduction;
use crate::next_row::NextRow;
use crate::row_cache::{Action, RowCache, ValueCache};
use crate::view;
use fusebench_ir::elementwise;
use fusebench_ir::infer;
use fusebench_ir::{BinaryOp, DType, Fusion, Op, ReduceOp, ValueDef, ValueId};
use std::collections::HashMap;
use std::ops::{Add, Mul};

/// A tensor the kernel reads from global memory.
#[derive(Clone, Debug)]
pub struct Buffer {
    /// Name of the kernel parameter.
    pub param: String,
    pub dtype: DType,
    /// Strides in elements per logical dim.
    pub strides: Vec<i64>,
    pub offset: i64,
    /// The copy a block keeps in shared memory (`rowwise`'s prefetch): read
    /// with plain loads, not the read-only global path.
    pub shared: bool,
}

/// Vector lanes: lane `k` of a thread handles inner index `var + k`, and
/// `var` is a multiple of `width`.
#[derive(Clone, Debug)]
pub struct Lanes {
    pub var: String,
    pub width: usize,
    pub lane: usize,
}

/// A value the kernel holds in a register, valid at one index.
#[derive(Clone, Debug)]
pub struct Held {
    pub expr: String,
    pub index: Vec<Ix>,
}

/// A wide load's key: the buffer, the offset of lane 0, the branch path.
type VectorLoad = (ValueId, Ix, Vec<(ValueId, usize)>);

pub struct Lowerer<'f> {
    pub f: &'f Fusion,
    pub code: String,
    indent: usize,
    scopes: Vec<HashMap<(ValueId, Vec<Ix>), String>>,
    next: usize,
    /// Registers bound to a rounding to bf16 or fp16 (`ctype::round_reduced`),
    /// with the expression rounded: a store converts that once (`unrounded`).
    rounded: HashMap<String, (DType, String)>,
    pub buffers: HashMap<ValueId, Buffer>,
    /// Values held in registers, each valid at one index.
    pub held: HashMap<ValueId, Vec<Held>>,
    pub scalar_params: HashMap<ValueId, String>,
    pub lanes: Option<Lanes>,
    /// Wide loads done so far: (buffer, offset of lane 0, branch path) -> array.
    vector_loads: HashMap<VectorLoad, String>,
    /// The arrays of those loads: buffer, array, word type, words, elements
    /// per word.
    vector_words: Vec<(ValueId, String, &'static str, usize, usize)>,
    /// Philox blocks drawn in this vector scope: (seed and offset, the
    /// vector's first element, block) -> the register holding it.
    philox: HashMap<(String, Ix, i64), String>,
    /// Scope depth at which vector loads are allowed (unconditional code).
    vector_depth: usize,
    /// The lane-uniform branches (cat/pad value, branch) the code being
    /// written is in: every lane of a thread takes the same branch there, so
    /// a wide load in lane 0's branch serves the other lanes' same branch.
    branch_path: Vec<(ValueId, usize)>,
    /// Where declarations of such loads' arrays go: before the outermost
    /// uniform branch, in unconditional code.
    hoist_at: Option<usize>,
    /// Non-uniform branches enclosing the current code (no wide loads there).
    scopes_block_vectors: usize,
    pub idx_type: &'static str,
    /// When set, every global load is recorded here: (buffer value, index,
    /// scope depth). transpose.rs probes a lowering with it to find which
    /// inputs are read across the output's innermost dim.
    pub loads: Option<Vec<(ValueId, Vec<Ix>, usize)>>,
    /// When set, wide loads of a row re-read in later passes go through
    /// shared memory (row_cache.rs; the loop schedule sets it).
    pub row_cache: Option<RowCache>,
    /// Values a later pass reads from shared memory (row_cache.rs).
    pub value_cache: Option<ValueCache>,
    /// When set, 16-byte loads of a row variable read the row's copy in
    /// shared memory (next_row.rs; the row-wise schedule sets it).
    pub next_row: Option<NextRow>,
    /// The intrinsic global loads go through (`Device::load_hint`); empty
    /// for a plain load.
    pub load_fn: &'static str,
    /// When set, a value that does not change along some dims (`invariant`)
    /// is looked up and computed at index 0 there, so code that visits
    /// several positions of such a dim computes it once (the pointwise
    /// schedule's walk over the rows of a row given broadcast by its layout).
    pub hoist_invariant: bool,
    /// Per value, the dims it does not change along (`invariant`).
    invariant_dims: HashMap<ValueId, Vec<bool>>,
}

fn unsupported(m: String) -> CodegenError {
    CodegenError::Unsupported(m)
}

impl<'f> Lowerer<'f> {
    pub fn new(f: &'f Fusion, idx_type: &'static str) -> Self {
        Lowerer {
            f,
            code: String::new(),
            indent: 1,
            scopes: vec![HashMap::new()],
            next: 0,
            rounded: HashMap::new(),
            buffers: HashMap::new(),
            held: HashMap::new(),
            scalar_params: HashMap::new(),
            lanes: None,
            vector_loads: HashMap::new(),
            vector_words: Vec::new(),
            philox: HashMap::new(),
            vector_depth: 1,
            branch_path: Vec::new(),
            hoist_at: None,
            scopes_block_vectors: 0,
            idx_type,
            loads: None,
            row_cache: None,
            value_cache: None,
            next_row: None,
            load_fn: "__ldg",
            hoist_invariant: false,
            invariant_dims: HashMap::new(),
        }
    }

    pub fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.code.push_str("    ");
        }
        self.code.push_str(s);
        self.code.push('\n');
    }

    pub fn open(&mut self, s: &str) {
        self.line(s);
        self.indent += 1;
        self.scopes.push(HashMap::new());
    }

    pub fn close(&mut self, s: &str) {
        self.indent -= 1;
        self.scopes.pop();
        self.line(s);
    }

    /// Closes a scope and opens the next on the same line (`} else {`).
    pub fn close_open(&mut self, s: &str) {
        self.close(s);
        self.indent += 1;
        self.scopes.push(HashMap::new());
    }

    /// Marks the current scope as unconditional code where vector loads may go.
    pub fn allow_vector_loads_here(&mut self) {
        self.vector_depth = self.scopes.len();
        self.vector_loads.clear();
        self.vector_words.clear();
        self.philox.clear();
    }

    /// Makes `v` available in a register at `h.index`.
    pub fn hold(&mut self, v: ValueId, h: Held) {
        self.held.entry(v).or_default().push(h);
    }

    /// Rows held as loaded (`Device::row_packed`): the vectors loaded so far
    /// of the `packed` inputs are marked changed (`fb_keep`) and every value
    /// computed from those inputs is forgotten, so what follows converts the
    /// loaded halves again and the registers hold them, not floats, from
    /// here on. Values computed again are the same bits.
    pub fn repack(&mut self, packed: &[ValueId]) {
        if packed.is_empty() {
            return;
        }
        for (buf, arr, word, words, per) in self.vector_words.clone() {
            if packed.contains(&buf) {
                for c in 0..words {
                    self.line(&format!("fb_keep(*reinterpret_cast<{word}*>(&{arr}[{}]));", c * per));
                }
            }
        }
        let f = self.f;
        let mut from = HashMap::new();
        for s in &mut self.scopes {
            s.retain(|(v, _), _| {
                !*from.entry(*v).or_insert_with(|| {
                    let mut hit = false;
                    f.walk_up([*v], |x| {
                        hit |= packed.contains(&x);
                        !hit
                    });
                    hit
                })
            });
        }
    }

    pub fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn lookup(&self, key: &(ValueId, Vec<Ix>)) -> Option<String> {
        self.scopes.iter().rev().find_map(|s| s.get(key).cloned())
    }

    fn remember(&mut self, key: (ValueId, Vec<Ix>), name: String) {
        self.scopes.last_mut().unwrap().insert(key, name);
    }

    /// Binds `expr` to a fresh register variable of `v`'s type.
    fn bind(&mut self, v: ValueId, idx: &[Ix], expr: String) -> String {
        let name = self.fresh("v");
        let d = self.f.value(v).dtype;
        let ty = ctype::reg(d);
        self.line(&format!("const {ty} {name} = {expr};"));
        if let Some(x) = ctype::unround(d, &expr) {
            self.rounded.insert(name.clone(), (d, x.to_string()));
        }
        self.remember((v, idx.to_vec()), name.clone());
        name
    }

    /// What to convert to store register value `e` of dtype `d`: the
    /// expression its rounding to `d` rounded, where it is such a register
    /// (`ctype::unround`), else `e`.
    pub fn unrounded(&self, d: DType, e: &str) -> String {
        match self.rounded.get(e) {
            Some((rd, x)) if *rd == d => x.clone(),
            _ => e.to_string(),
        }
    }

    fn shape(&self, v: ValueId) -> &'f [usize] {
        self.f.value(v).shape.as_deref().unwrap_or(&[])
    }

    /// `v` read from shared memory where a later pass of the loop schedule
    /// reads it at the element its first pass stored (row_cache.rs).
    fn kept_value(&mut self, v: ValueId, idx: &[Ix]) -> Option<String> {
        let l = self.lanes.clone()?;
        let vc = self.value_cache.as_mut()?;
        let (at, _) = vc.at.as_ref()?;
        let at: Vec<Ix> = at.iter().map(|i| i.pull_lanes(&l.var, l.width as i64)).collect();
        if at != idx {
            return None;
        }
        vc.read(v)
    }

    /// Offset expression of element `idx` of a buffer.
    pub fn offset(b: &Buffer, idx: &[Ix]) -> Ix {
        idx.iter()
            .zip(&b.strides)
            .fold(Ix::c(b.offset), |acc, (i, &s)| acc.add(i.clone().mul(s)))
    }

    /// The dims of `v` (of rank `rank`) its value does not change along: an
    /// input read with stride 0 there, and an elementwise op (unary, binary,
    /// ternary, where, cast: functions of their operands' values alone) of
    /// such values and scalars. Anything else, and a value held in registers
    /// at one index, changes along every dim.
    fn invariant(&mut self, v: ValueId, rank: usize) -> Vec<bool> {
        if let Some(d) = self.invariant_dims.get(&v) {
            return d.clone();
        }
        let val = self.f.value(v);
        let none = vec![false; rank];
        let dims = if val.constant.is_some() || self.scalar_params.contains_key(&v) {
            vec![true; rank]
        } else if self.held.contains_key(&v) || self.shape(v).len() != rank {
            none
        } else if let Some(b) = self.buffers.get(&v) {
            b.strides.iter().map(|&s| s == 0).chain(std::iter::repeat(false)).take(rank).collect()
        } else {
            match &val.def {
                ValueDef::Node { node, .. } => match &self.f.nodes[*node].op {
                    op @ (Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } | Op::Where { .. } | Op::Cast { .. }) => {
                        let mut d = vec![true; rank];
                        for u in op.operands() {
                            let scalar = self.f.value(u).constant.is_some() || self.shape(u).is_empty();
                            if !scalar {
                                let du = if self.shape(u) == self.shape(v) { self.invariant(u, rank) } else { none.clone() };
                                d.iter_mut().zip(du).for_each(|(a, b)| *a &= b);
                            }
                        }
                        d
                    }
                    // A dim the broadcast adds, or one of extent 1 it
                    // expands, does not change the value; the others as the
                    // operand's.
                    Op::BroadcastInDim { x, broadcast_dims, .. } if self.shape(*x).len() == broadcast_dims.len() => {
                        let xs = self.shape(*x);
                        let dx = self.invariant(*x, xs.len());
                        // Negative dims count from the end, as the script may write them.
                        let at = |b: i64| fusebench_ir::infer::norm_dim("broadcast_in_dim", b, rank).ok();
                        (0..rank)
                            .map(|j| match broadcast_dims.iter().position(|&b| at(b) == Some(j)) {
                                None => true,
                                Some(i) => xs[i] == 1 || dx[i],
                            })
                            .collect()
                    }
                    _ => none,
                },
                _ => none,
            }
        };
        self.invariant_dims.insert(v, dims.clone());
        dims
    }

    /// The value of `v` at `idx`, as a C expression of its register type.
    pub fn value_at(&mut self, v: ValueId, idx: &[Ix]) -> Result<String, CodegenError> {
        let pulled: Vec<Ix>;
        let idx = match &self.lanes {
            Some(l) => {
                pulled = idx
                    .iter()
                    .map(|i| i.pull_lanes(&l.var, l.width as i64))
                    .collect();
                &pulled[..]
            }
            None => idx,
        };
        let val = self.f.value(v);
        if let Some(c) = val.constant {
            return Ok(ctype::literal(val.dtype, c));
        }
        if let Some(p) = self.scalar_params.get(&v) {
            return Ok(p.clone());
        }
        let hoisted: Vec<Ix>;
        let idx = match self.hoist_invariant.then(|| self.invariant(v, idx.len())) {
            Some(inv) if inv.iter().zip(idx).any(|(&i, x)| i && *x != Ix::c(0)) => {
                hoisted = idx
                    .iter()
                    .zip(&inv)
                    .map(|(x, &i)| if i { Ix::c(0) } else { x.clone() })
                    .collect();
                &hoisted[..]
            }
            _ => idx,
        };
        let key = (v, idx.to_vec());
        if let Some(n) = self.lookup(&key) {
            return Ok(n);
        }
        if let Some(e) = self.kept_value(v, idx) {
            return Ok(self.bind(v, idx, e));
        }
        if let Some(hs) = self.held.get(&v) {
            let scalar = self.shape(v).is_empty();
            if let Some(h) = hs.iter().find(|h| scalar || h.index == idx) {
                return Ok(h.expr.clone());
            }
            return Err(CodegenError::NoFit(format!(
                "{} is held for {:?} but read at {:?}",
                val.name,
                hs.iter()
                    .map(|h| h.index.iter().map(|i| i.to_string()).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
                idx.iter().map(|i| i.to_string()).collect::<Vec<_>>()
            )));
        }
        if let Some(b) = self.buffers.get(&v).cloned() {
            return Ok(self.load(v, &b, idx));
        }
        match &val.def {
            ValueDef::Node { node, index } => {
                let op = self.f.nodes[*node].op.clone();
                self.lower_op(v, &op, *index, idx)
            }
            ValueDef::TensorInput(_) => Err(unsupported(format!(
                "input {} has no buffer in this kernel",
                val.name
            ))),
            ValueDef::ScalarInput => Err(unsupported(format!(
                "scalar input {} has no parameter",
                val.name
            ))),
            ValueDef::DefineScalar | ValueDef::Literal => {
                Err(unsupported(format!("scalar {} has no value", val.name)))
            }
        }
    }

/// A random op's element at `idx`: nvFuser's stream at the element's linear
    /// logical index, whatever thread computes it (prelude's `fb_rng_*`).
    fn lower_rng(&mut self, v: ValueId, op: &Op, idx: &[Ix]) -> Result<String, CodegenError> {
        use fusebench_ir::rng::{start, Start};
        use fusebench_ir::RngDist;
        let f = self.f;
        let d = f.value(v).dtype;
        let shape = self.shape(v).to_vec();
        let mut lin = Ix::c(0);
        let mut stride = 1i64;
        for (i, &e) in idx.iter().zip(&shape).rev() {
            lin = lin.add(i.clone().mul(stride));
            stride = stride.saturating_mul(e as i64);
        }
        let (dist, ab) = match op {
            Op::Rng { dist, a, b, .. } => (*dist, Some((*a, *b))),
            Op::RngLike { dist, .. } => (*dist, None),
            _ => unreachable!(),
        };
        let real = if d == DType::Double { DType::Double } else { DType::Float };
        let (a, b) = match ab {
            Some((a, b)) => {
                let (av, bv) = (self.value_at(a, &[])?, self.value_at(b, &[])?);
                (
                    format!("({})({av})", ctype::reg(real)),
                    format!("({})({bv})", ctype::reg(real)),
                )
            }
            None => ("0".to_string(), "1".to_string()),
        };
        let (seed, off) = match start(f, v) {
            Some(Start::Given { seed, offset }) => (
                format!("(unsigned long long)({})", self.value_at(seed, &[])?),
                format!("(unsigned long long)({})", self.value_at(offset, &[])?),
            ),
            Some(Start::Default { seed, offset }) => (format!("{seed}ull"), format!("{offset}ull")),
            None => return Err(unsupported(format!("{} is not a random op", f.value(v).name))),
        };
        // Lanes of one vector drawing consecutive elements share each Philox
        // block of four (the float draws; doubles take two words each).
        if d != DType::Double {
            if let Some((block, c)) = self.philox_block(&seed, &off, &lin) {
                let bf = d == DType::BFloat16;
                return Ok(match (dist, d) {
                    (RngDist::Uniform, DType::Float) => format!("fb_rng_uniformf_r({block}, {c}, {a}, {b})"),
                    (RngDist::Uniform, DType::BFloat16 | DType::Half) => {
                        format!("fb_rng_uniform_reduced_r({block}, {c}, {a}, {b}, {bf})")
                    }
                    (RngDist::Normal, DType::Float | DType::BFloat16 | DType::Half) => {
                        ctype::round_reduced(d, &format!("fb_rng_normalf_r({block}, {c}, {a}, {b})"))
                    }
                    (_, other) => return Err(unsupported(format!("{} on {other} values", op.name()))),
                });
            }
        }
        let at = format!("{seed}, {off}, (unsigned long long)({lin})");
        Ok(match (dist, d) {
            (RngDist::Uniform, DType::Double) => format!("fb_rng_uniformd({at}, {a}, {b})"),
            (RngDist::Uniform, DType::Float) => format!("fb_rng_uniformf({at}, {a}, {b})"),
            (RngDist::Uniform, DType::BFloat16 | DType::Half) => format!(
                "fb_rng_uniform_reduced({at}, {a}, {b}, {})",
                d == DType::BFloat16
            ),
            (RngDist::Normal, DType::Double) => format!("fb_rng_normald({at}, {a}, {b})"),
            (RngDist::Normal, DType::Float | DType::BFloat16 | DType::Half) => {
                ctype::round_reduced(d, &format!("fb_rng_normalf({at}, {a}, {b})"))
            }
            (_, other) => {
                return Err(unsupported(format!(
                    "{} on {other} values",
                    op.name()
                )))
            }
        })
    }

    /// The Philox block holding linear element `lin` and the word of it,
    /// when `lin` is this lane's element of a vector whose first element is a
    /// multiple of 4: the block is declared once, at the vector's first lane
    /// that needs it, and the vector's other lanes read their word of it.
    fn philox_block(&mut self, seed: &str, off: &str, lin: &Ix) -> Option<(String, i64)> {
        let l = self.lanes.clone()?;
        let w = l.width as i64;
        if w % 4 != 0
            || !self.branch_path.is_empty()
            || self.scopes_block_vectors != 0
            || self.scopes.len() != self.vector_depth
            || lin.lane_step(&l.var, w)? != 1
        {
            return None;
        }
        let (rest, k) = lin.pull_lanes(&l.var, w).split_const();
        if !rest.multiple_of(4, &[&l.var]) || k < 0 {
            return None;
        }
        let key = (format!("{seed}, {off}"), rest.clone(), k / 4);
        if let Some(name) = self.philox.get(&key) {
            return Some((name.clone(), k % 4));
        }
        let name = self.fresh("ph");
        self.line(&format!(
            "const fb_u4 {name} = fb_philox({seed}, (unsigned long long)({}) / 4 + {}, {off});",
            rest,
            k / 4
        ));
        self.philox.insert(key, name.clone());
        Some((name, k % 4))
    }

    fn load(&mut self, v: ValueId, b: &Buffer, idx: &[Ix]) -> String {
        let depth = self.scopes.len();
        if let Some(l) = &mut self.loads {
            l.push((v, idx.to_vec(), depth));
        }
        let off = Self::offset(b, idx);
        if let Some(l) = self.lanes.clone() {
            if self.scopes_block_vectors == 0
                && self.scopes.len() == self.vector_depth + self.branch_path.len()
            {
                if let Some(e) = self.vector_load(v, b, &off, &l) {
                    self.remember((v, idx.to_vec()), e.clone());
                    return e;
                }
            }
        }
        // A per-row value copied with the row (next_row.rs), outside any
        // branch: its index is then valid for every row.
        let plain = !b.dtype.is_complex() && b.dtype != DType::Bool && !b.shared;
        let copied = plain && b.dtype.size_bytes() == 4 && self.branch_path.is_empty() && self.scopes_block_vectors == 0;
        if let Some(slot) = self.next_row.as_mut().filter(|_| copied).and_then(|n| n.load(&b.param, &off, 4)) {
            let e = format!("*reinterpret_cast<const {}*>(&{slot})", ctype::storage(b.dtype));
            return self.bind(v, idx, ctype::from_storage(b.dtype, &e));
        }
        // __ldg has overloads for scalar and vector types only: a complex
        // element (a struct of two parts) is read with a plain load.
        let load = if b.dtype.is_complex() || b.shared || self.load_fn.is_empty() {
            format!("{}[{off}]", b.param)
        } else {
            format!("{}(&{}[{off}])", self.load_fn, b.param)
        };
        let e = ctype::from_storage(b.dtype, &load);
        let e = if b.dtype == DType::Bool {
            format!("({}[{off}] != 0)", b.param)
        } else {
            e
        };
        self.bind(v, idx, e)
    }

    /// A load whose lanes read consecutive aligned elements becomes one wide
    /// load shared by every lane.
    fn vector_load(&mut self, v: ValueId, b: &Buffer, off: &Ix, l: &Lanes) -> Option<String> {
        let elem = b.dtype.size_bytes();
        let size = elem * l.width;
        if l.width < 2
            || !(size == 4 || size == 8 || size.is_multiple_of(16))
            || b.dtype == DType::Bool
        {
            return None;
        }
        let w = l.width as i64;
        if off.lane_step(&l.var, w)? != 1 {
            return None;
        }
        let (rest, k) = off.pull_lanes(&l.var, w).split_const();
        if !rest.multiple_of(w, &[&l.var]) || k.rem_euclid(w) != l.lane as i64 {
            return None;
        }
        // Lane 0's element: aligned to the width, so one wide load serves all lanes.
        let base = rest.add(Ix::c(k - l.lane as i64));
        let key = (v, base.clone(), self.branch_path.clone());
        let arr = match self.vector_loads.get(&key) {
            Some(a) => a.clone(),
            None => {
                let a = self.fresh("w");
                let st = ctype::storage(b.dtype);
                let (word, wbytes) = match size {
                    4 => ("unsigned int", 4),
                    8 => ("uint2", 8),
                    _ => ("uint4", 16),
                };
                let decl = format!("__align__(16) {st} {a}[{}];", l.width);
                match (self.branch_path.is_empty(), self.hoist_at) {
                    (false, Some(at)) => {
                        let pad = "    ".repeat(self.vector_depth);
                        self.code.insert_str(at, &format!("{pad}{decl}\n"));
                    }
                    _ => self.line(&decl),
                }
                let per = wbytes / elem;
                let chunks = size / wbytes;
                let action = match &mut self.row_cache {
                    Some(rc) if self.branch_path.is_empty() && !b.shared => {
                        rc.action(&format!("{}@{base}", b.param), st, elem)
                    }
                    _ => Action::Global,
                };
                let copied = word == "uint4" && !b.shared && self.branch_path.is_empty();
                let global = |lw: &mut Self| {
                    for c in 0..chunks {
                        let at = base.clone().add(Ix::c((c * per) as i64));
                        // The row's copy in shared memory (next_row.rs).
                        if let Some(slot) = lw.next_row.as_mut().filter(|_| copied).and_then(|n| n.load(&b.param, &at, 16)) {
                            lw.line(&format!("*reinterpret_cast<uint4*>(&{a}[{}]) = {slot};", c * per));
                            continue;
                        }
                        let src = format!("reinterpret_cast<const {word}*>(&{}[{at}])", b.param);
                        let src = if b.shared || lw.load_fn.is_empty() {
                            format!("*{src}")
                        } else {
                            format!("{}({src})", lw.load_fn)
                        };
                        lw.line(&format!(
                            "*reinterpret_cast<{word}*>(&{a}[{}]) = {src};",
                            c * per
                        ));
                    }
                };
                // A row kept in shared memory (row_cache.rs): the slot is
                // indexed by the vector's position in the row, and positions
                // past `cap` (a prefix kept) read global memory.
                let var = self.row_cache.as_ref().map(|rc| rc.var.clone()).unwrap_or_default();
                let copy = |lw: &mut Self, slot: &str, to_slot: bool| {
                    for c in 0..chunks {
                        let s = format!("{slot}[{var} + {}]", c * per);
                        let r = format!("{a}[{}]", c * per);
                        let (dst, src) = if to_slot { (s, r) } else { (r, s) };
                        lw.line(&format!(
                            "*reinterpret_cast<{word}*>(&{dst}) = *reinterpret_cast<const {word}*>(&{src});"
                        ));
                    }
                };
                match action {
                    Action::Global => global(self),
                    Action::Store { slot, cap } => {
                        global(self);
                        if let Some(cap) = cap {
                            self.open(&format!("if ({var} < {cap}) {{"));
                        }
                        copy(self, &slot, true);
                        if cap.is_some() {
                            self.close("}");
                        }
                    }
                    Action::Load { slot, cap } => {
                        if let Some(cap) = cap {
                            self.open(&format!("if ({var} < {cap}) {{"));
                        }
                        copy(self, &slot, false);
                        if cap.is_some() {
                            self.close_open("} else {");
                            global(self);
                            self.close("}");
                        }
                    }
                }
                self.vector_loads.insert(key, a.clone());
                self.vector_words.push((v, a.clone(), word, chunks, per));
                a
            }
        };
        Some(ctype::from_storage(b.dtype, &format!("{arr}[{}]", l.lane)))
    }

    /// Whether comparing `i` with the constants `bounds` gives the same answer
    /// for every lane of a thread: `i` is the lane index (a multiple of the
    /// width plus the lane) and every bound is a multiple of the width.
    fn lane_uniform(&self, i: &Ix, bounds: &[i64]) -> bool {
        let Some(l) = &self.lanes else { return true };
        let w = l.width as i64;
        match i.lane_step(&l.var, w) {
            Some(0) => true,
            Some(1) => {
                let (rest, k) = i.pull_lanes(&l.var, w).split_const();
                rest.multiple_of(w, &[&l.var])
                    && k.rem_euclid(w) == l.lane as i64
                    && bounds.iter().all(|b| b % w == 0)
            }
            _ => false,
        }
    }

    /// Opens branch `k` of the value `v`'s if-chain; in a lane-uniform chain,
    /// loads inside may be wide.
    fn open_branch(&mut self, header: &str, v: ValueId, k: usize, uniform: bool) {
        if uniform
            && self.lanes.is_some()
            && self.scopes.len() == self.vector_depth + self.branch_path.len()
        {
            self.open(header);
            self.branch_path.push((v, k));
        } else {
            self.open(header);
            self.branch_path.push((v, usize::MAX));
            // A branch that is not uniform ends the wide loads below it.
            self.scopes_block_vectors += 1;
        }
    }

    fn close_branch(&mut self, s: &str) {
        if self.branch_path.pop().is_some_and(|(_, k)| k == usize::MAX) {
            self.scopes_block_vectors -= 1;
        }
        self.close(s);
    }

    /// Marks where hoisted array declarations go, if this is the outermost branch.
    fn mark_hoist(&mut self) -> bool {
        if self.branch_path.is_empty() && self.scopes.len() == self.vector_depth {
            self.hoist_at = Some(self.code.len());
            true
        } else {
            false
        }
    }

    fn lower_op(
        &mut self,
        v: ValueId,
        op: &Op,
        out_index: usize,
        idx: &[Ix],
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let d = f.value(v).dtype;
        let out_shape: Vec<usize> = self.shape(v).to_vec();
        let operand_idx = |this: &Self, x: ValueId| -> Vec<Ix> {
            let s = this.shape(x);
            if this.f.value(x).is_tensor() {
                view::broadcast_operand(idx, s)
            } else {
                vec![]
            }
        };
        if crate::complex::involved(f, op) {
            let mut vals = vec![];
            for x in op.operands() {
                let xi = operand_idx(self, x);
                vals.push((self.value_at(x, &xi)?, f.value(x).dtype));
            }
            let e = crate::complex::lower(f, op, d, &vals).map_err(unsupported)?;
            return Ok(self.bind(v, idx, e));
        }
        let expr = match op {
            Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } => {
                let t = elementwise::op_typing(op, &f.values)
                    .expect("a table op")
                    .map_err(|e| unsupported(e.to_string()))?;
                let mut args = vec![];
                for (k, x) in op.operands().into_iter().enumerate() {
                    let xi = operand_idx(self, x);
                    let xv = self.value_at(x, &xi)?;
                    args.push(ctype::convert(f.value(x).dtype, t.casts[k], &xv));
                }
                let e = match op {
                    Op::Unary { kind, .. } => table_expr(kind.name(), kind.cuda(), t.compute, &args)?,
                    Op::Ternary { kind, .. } => table_expr(kind.name(), kind.cuda(), t.compute, &args)?,
                    Op::Binary { kind, b, .. } => match (kind, f.value(*b).constant) {
                        // Small constant powers as products, as nvFuser does: exact and cheap.
                        (BinaryOp::Pow, Some(p)) if t.compute.is_float() && p.as_f64() == 2.0 => {
                            format!("({} * {})", args[0], args[0])
                        }
                        (BinaryOp::Pow, Some(p)) if t.compute.is_float() && p.as_f64() == 3.0 => {
                            format!("({} * {} * {})", args[0], args[0], args[0])
                        }
                        (BinaryOp::Pow, Some(p)) if t.compute.is_float() && p.as_f64() == 1.0 => {
                            args[0].clone()
                        }
                        _ => table_expr(kind.name(), kind.cuda(), t.compute, &args)?,
                    },
                    _ => unreachable!(),
                };
                if t.out.is_bool() {
                    e
                } else if t.compute == t.out {
                    ctype::round_reduced(t.out, &e)
                } else {
                    ctype::convert(t.compute, t.out, &e)
                }
            }
            Op::Where { cond, a, b } => {
                let (ci, ai, bi) = (
                    operand_idx(self, *cond),
                    operand_idx(self, *a),
                    operand_idx(self, *b),
                );
                let cv = self.value_at(*cond, &ci)?;
                let av = self.value_at(*a, &ai)?;
                let bv = self.value_at(*b, &bi)?;
                let av = ctype::convert(f.value(*a).dtype, d, &av);
                let bv = ctype::convert(f.value(*b).dtype, d, &bv);
                format!("({cv} ? {av} : {bv})")
            }
            Op::Cast { x, dtype } => {
                let xi = operand_idx(self, *x);
                let xv = self.value_at(*x, &xi)?;
                ctype::convert(f.value(*x).dtype, *dtype, &xv)
            }
            Op::Full { fill, .. } => {
                let fv = self.value_at(*fill, &[])?;
                ctype::convert(f.value(*fill).dtype, d, &fv)
            }
            Op::Rng { .. } | Op::RngLike { .. } => self.lower_rng(v, op, idx)?,
            Op::Broadcast {
                x,
                is_broadcast_dim,
            } => {
                let j: Vec<Ix> = idx
                    .iter()
                    .zip(is_broadcast_dim)
                    .filter(|(_, b)| !**b)
                    .map(|(i, _)| i.clone())
                    .collect();
                return self.value_at(*x, &j);
            }
            Op::BroadcastInDim {
                x, broadcast_dims, ..
            } => {
                let xs = self.shape(*x);
                let n = out_shape.len();
                let j = broadcast_dims
                    .iter()
                    .enumerate()
                    .map(|(i, &bd)| {
                        let od = infer::norm_dim("broadcast_in_dim", bd, n).expect("validated");
                        if xs[i] == 1 {
                            Ix::c(0)
                        } else {
                            idx[od].clone()
                        }
                    })
                    .collect::<Vec<_>>();
                return self.value_at(*x, &j);
            }
            Op::Expand { x, .. } => {
                let xs = self.shape(*x);
                let j = xs
                    .iter()
                    .zip(idx)
                    .map(|(&e, i)| if e == 1 { Ix::c(0) } else { i.clone() })
                    .collect::<Vec<_>>();
                return self.value_at(*x, &j);
            }
            Op::Reshape { x, .. } => {
                let j = view::reshape_input_index(idx, self.shape(*x), &out_shape);
                return self.value_at(*x, &j);
            }
            Op::Permute { x, dims } => {
                let n = idx.len();
                let mut j = vec![Ix::c(0); n];
                for (i, &dd) in dims.iter().enumerate() {
                    j[infer::norm_dim("permute", dd, n).expect("validated")] = idx[i].clone();
                }
                return self.value_at(*x, &j);
            }
            Op::Squeeze { x, dims } => {
                let xs = self.shape(*x);
                let sq = infer::norm_dims("squeeze", dims, xs.len()).expect("validated");
                let mut it = idx.iter();
                let j = (0..xs.len())
                    .map(|d| {
                        if sq.contains(&d) {
                            Ix::c(0)
                        } else {
                            it.next().unwrap().clone()
                        }
                    })
                    .collect::<Vec<_>>();
                return self.value_at(*x, &j);
            }
            Op::Slice {
                x,
                start,
                end,
                strides,
                manual_normalization,
            } => {
                let (_, starts, steps) = infer::slice_bounds(
                    "slice",
                    self.shape(*x),
                    start,
                    end,
                    strides,
                    *manual_normalization,
                )
                .expect("validated");
                let j = idx
                    .iter()
                    .enumerate()
                    .map(|(d, i)| i.clone().mul(steps[d] as i64).add(Ix::c(starts[d] as i64)))
                    .collect::<Vec<_>>();
                return self.value_at(*x, &j);
            }
            Op::Complex { .. } => unreachable!("lowered by complex.rs above"),
            Op::Pad { x, widths, value } => return self.lower_pad(v, *x, widths, *value, idx),
            Op::Cat {
                xs,
                dim,
                manual_padding,
            } => return self.lower_cat(v, xs, *dim, *manual_padding, idx),
            Op::IndexSelect { x, index, dim } => {
                let xs = self.shape(*x);
                let d = infer::norm_dim("index_select", *dim, xs.len()).expect("validated");
                let is = self.shape(*index);
                let ii: Vec<Ix> = if is.len() == 1 {
                    vec![idx[d].clone()]
                } else {
                    (0..is.len())
                        .map(|k| if k == d { idx[d].clone() } else { Ix::c(0) })
                        .collect()
                };
                let iv = self.value_at(*index, &ii)?;
                let g = self.fresh("g");
                self.line(&format!(
                    "const {} {g} = ({})({iv});",
                    self.idx_type, self.idx_type
                ));
                let mut j = idx.to_vec();
                j[d] = Ix::var(g);
                return self.value_at(*x, &j);
            }
            Op::Index(o) => match self.lower_index(v, o, idx)? {
                crate::index::Lowered::Expr(e) => e,
                // The gathered element is remembered at this index too, so a
                // second read (a per-row value read early, then used) reuses it.
                crate::index::Lowered::Bound(n) => {
                    self.remember((v, idx.to_vec()), n.clone());
                    return Ok(n);
                }
            },
            // Copies: the element of `x` at the same index. (A stride_order's
            // layout is its allocation, not its values.)
            Op::Set { x, .. } | Op::StrideOrder { x, .. } => return self.value_at(*x, idx),
            Op::Size { .. } => {
                return Err(CodegenError::NoFit(format!(
                    "size {} is a constant and is never lowered",
                    f.value(v).name
                )))
            }
            // Refused before planning (refuse.rs); never reached.
            Op::Matmul { .. } | Op::Linear { .. } | Op::Gemm(_) => {
                return Err(unsupported(format!("{} has no GPU kernel", op.name())))
            }
            Op::Welford { x, dims } if out_index == 2 => {
                let xs = self.shape(*x);
                let dims = infer::norm_dims("welford", dims, xs.len()).expect("validated");
                let n: usize = dims.iter().map(|&d| xs[d]).product();
                return Ok(ctype::literal(d, fusebench_ir::Literal::Int(n as i64)));
            }
            Op::Reduce { x, dims, kind, .. }
                if reduction::Reduction::of(f, node_of(f, v)).is_some_and(|r| r.inline(f)) =>
            {
                return self.lower_inline_reduction(v, *x, dims, *kind, idx);
            }
            Op::Scan { kind, .. } => {
                return Err(CodegenError::Unsupported(format!(
                    "{} result {} is not stored by an earlier kernel",
                    kind.name(),
                    f.value(v).name
                )));
            }
            Op::Reduce { .. } | Op::Welford { .. } | Op::VarMean { .. } => {
                return Err(CodegenError::NoFit(format!(
                    "reduction result {} is neither computed in this kernel nor stored by an earlier one",
                    f.value(v).name
                )));
            }
        };
        Ok(self.bind(v, idx, expr))
    }

    /// A small reduction computed where it is read: a loop over the reduced
    /// elements, accumulating in the reduction's accumulator type.
    fn lower_inline_reduction(
        &mut self,
        v: ValueId,
        x: ValueId,
        dims: &[i64],
        kind: ReduceOp,
        idx: &[Ix],
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let xs = self.shape(x).to_vec();
        let rd = infer::norm_dims("reduce", dims, xs.len()).expect("validated");
        let d = f.value(v).dtype;
        let combine = match kind {
            ReduceOp::Sum => reduction::Combine::Sum,
            ReduceOp::Max => reduction::Combine::Max,
            ReduceOp::Min => reduction::Combine::Min,
            ReduceOp::Prod => reduction::Combine::Prod,
        };
        let acc = reduction::acc_for(&combine, d);
        let a = self.fresh("a");
        self.line(&format!(
            "{} {a} = {};",
            ctype::reg(acc),
            reduction::init(&combine, acc)
        ));
        let red_shape: Vec<usize> = rd.iter().map(|&dd| xs[dd]).collect();
        let count: usize = red_shape.iter().product();
        // Unrolled in the source (count is at most INLINE_MAX), so the loads
        // stay in straight-line code where they can be wide.
        let keep = idx.len() == xs.len();
        for r in 0..count {
            let red_idx = view::delinearize(Ix::c(r as i64), &red_shape);
            let mut kept = idx.iter();
            let mut ri = red_idx.into_iter();
            let j: Vec<Ix> = (0..xs.len())
                .map(|dd| {
                    if rd.contains(&dd) {
                        if keep {
                            kept.next();
                        }
                        ri.next().unwrap()
                    } else {
                        kept.next().unwrap().clone()
                    }
                })
                .collect();
            let xv = self.value_at(x, &j)?;
            let xv = ctype::convert(f.value(x).dtype, d, &xv);
            let xv = ctype::convert(d, acc, &xv);
            self.line(&reduction::step(&combine, acc, &a, &xv));
        }
        Ok(self.bind(v, idx, ctype::convert(acc, d, &a)))
    }

    fn declare(&mut self, v: ValueId) -> (String, &'static str) {
        let name = self.fresh("v");
        let ty = ctype::reg(self.f.value(v).dtype);
        self.line(&format!("{ty} {name};"));
        (name, ty)
    }

    fn lower_pad(
        &mut self,
        v: ValueId,
        x: ValueId,
        widths: &[ValueId],
        value: Option<ValueId>,
        idx: &[Ix],
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let xs = self.shape(x).to_vec();
        let w = infer::pad_widths(&f.graph(), "pad", widths, xs.len())
            .map_err(|e| unsupported(e.to_string()))?;
        let d = f.value(v).dtype;
        let pad_value = match value {
            Some(pv) => {
                let e = self.value_at(pv, &[])?;
                ctype::convert(f.value(pv).dtype, d, &e)
            }
            None => ctype::literal(d, fusebench_ir::Literal::Int(0)),
        };
        // An empty source (a `full` of extent 0 padded out, as Thunder writes
        // a rotary half): every element is padding, with no branch whose
        // source side could never run.
        if xs.contains(&0) {
            return Ok(pad_value);
        }
        let mut j = idx.to_vec();
        let mut conds = Vec::new();
        for (dim, &(before, after)) in w.iter().enumerate() {
            if before == 0 && after == 0 {
                continue;
            }
            j[dim] = idx[dim].clone().add(Ix::c(-before));
            if before > 0 {
                conds.push(format!("{} >= {before}", idx[dim]));
            }
            if after > 0 {
                conds.push(format!("{} < {}", idx[dim], before + xs[dim] as i64));
            }
        }
        if conds.is_empty() {
            return self.value_at(x, &j);
        }
        let uniform = w.iter().enumerate().all(|(dim, &(before, _))| {
            (w[dim] == (0, 0)) || self.lane_uniform(&idx[dim], &[before, before + xs[dim] as i64])
        });
        let lanes = self.all_lanes(uniform, idx);
        self.mark_hoist();
        let (name, _) = self.declare_lanes(v, lanes.len());
        self.open_branch(&format!("if ({}) {{", conds.join(" && ")), v, 0, uniform);
        for (k, li) in lanes.iter().enumerate() {
            let mut j = li.clone();
            for (dim, &(before, _)) in w.iter().enumerate() {
                j[dim] = li[dim].clone().add(Ix::c(-before));
            }
            let inner = self.value_in_lane(k, x, &j)?;
            let inner = ctype::convert(f.value(x).dtype, d, &inner);
            self.line(&format!("{} = {inner};", lane_slot(&name, &lanes, k)));
        }
        self.close_branch("}");
        self.open_branch("else {", v, 1, uniform);
        for k in 0..lanes.len() {
            self.line(&format!("{} = {pad_value};", lane_slot(&name, &lanes, k)));
        }
        self.close_branch("}");
        Ok(self.remember_lanes(v, &name, &lanes))
    }

    fn lower_cat(
        &mut self,
        v: ValueId,
        xs: &[ValueId],
        dim: i64,
        manual: bool,
        idx: &[Ix],
    ) -> Result<String, CodegenError> {
        let f = self.f;
        let d = f.value(v).dtype;
        let n = idx.len();
        let dd = infer::norm_dim("cat", dim, n).expect("validated");
        // (source value, first position it owns, end, shift of index)
        let mut parts: Vec<(ValueId, i64, i64)> = Vec::new();
        if manual {
            let ranges = infer::cat_owner_ranges(&f.graph(), "cat", xs, dd)
                .map_err(|e| unsupported(e.to_string()))?;
            for (&x, (s, e)) in xs.iter().zip(ranges) {
                let Some(node) = f.producer(x) else {
                    unreachable!("validated")
                };
                let Op::Pad { x: src, .. } = &node.op else {
                    unreachable!("validated")
                };
                parts.push((*src, s as i64, e as i64));
            }
        } else {
            let mut s = 0i64;
            for &x in xs {
                let e = s + self.shape(x)[dd] as i64;
                parts.push((x, s, e));
                s = e;
            }
        }
        let bounds: Vec<i64> = parts.iter().flat_map(|&(_, s, e)| [s, e]).collect();
        let uniform = self.lane_uniform(&idx[dd], &bounds);
        let lanes = self.all_lanes(uniform, idx);
        self.mark_hoist();
        let (name, _) = self.declare_lanes(v, lanes.len());
        for (k, &(src, s, e)) in parts.iter().enumerate() {
            let mut conds = Vec::new();
            if manual || k > 0 {
                conds.push(format!("{} >= {s}", idx[dd]));
            }
            conds.push(format!("{} < {e}", idx[dd]));
            let kw = if k == 0 { "if" } else { "else if" };
            self.open_branch(&format!("{kw} ({}) {{", conds.join(" && ")), v, k, uniform);
            for (lane, li) in lanes.iter().enumerate() {
                let mut j = li.clone();
                j[dd] = li[dd].clone().add(Ix::c(-s));
                let e = self.value_in_lane(lane, src, &j)?;
                let e = ctype::convert(f.value(src).dtype, d, &e);
                self.line(&format!("{} = {e};", lane_slot(&name, &lanes, lane)));
            }
            self.close_branch("}");
        }
        self.open_branch("else {", v, parts.len(), uniform);
        // Positions no input owns (a manual cat with gaps) read the first input, as the reference does.
        for (lane, li) in lanes.iter().enumerate() {
            let first = self.value_in_lane(lane, xs[0], li)?;
            let first = ctype::convert(f.value(xs[0]).dtype, d, &first);
            self.line(&format!("{} = {first};", lane_slot(&name, &lanes, lane)));
        }
        self.close_branch("}");
        Ok(self.remember_lanes(v, &name, &lanes))
    }

    /// The indices at which a lane-uniform branch computes values: at lane 0
    /// of a vector, every lane's index, so that each branch computes all lanes
    /// at once (its wide loads serve every lane and end with the branch);
    /// otherwise only the current index.
    fn all_lanes(&self, uniform: bool, idx: &[Ix]) -> Vec<Vec<Ix>> {
        match &self.lanes {
            Some(l) if uniform && l.lane == 0 && l.width > 1 => (0..l.width)
                .map(|k| {
                    let at = Ix::var(l.var.clone()).add(Ix::c(k as i64));
                    idx.iter()
                        .map(|i| i.subst(&l.var, &at).pull_lanes(&l.var, l.width as i64))
                        .collect()
                })
                .collect(),
            _ => vec![idx.to_vec()],
        }
    }

    /// `value_at` as lane `k` of the lanes `all_lanes` gave.
    fn value_in_lane(&mut self, k: usize, v: ValueId, idx: &[Ix]) -> Result<String, CodegenError> {
        let saved = self.lanes.clone();
        if let Some(l) = &mut self.lanes {
            l.lane += k;
        }
        let r = self.value_at(v, idx);
        self.lanes = saved;
        r
    }

    /// A register for a branch chain's value, an array when it holds every lane.
    fn declare_lanes(&mut self, v: ValueId, n: usize) -> (String, &'static str) {
        if n == 1 {
            return self.declare(v);
        }
        let name = self.fresh("v");
        let ty = ctype::reg(self.f.value(v).dtype);
        self.line(&format!("{ty} {name}[{n}];"));
        (name, ty)
    }

    fn remember_lanes(&mut self, v: ValueId, name: &str, lanes: &[Vec<Ix>]) -> String {
        for (k, li) in lanes.iter().enumerate() {
            self.remember((v, li.clone()), lane_slot(name, lanes, k));
        }
        lane_slot(name, lanes, 0)
    }
}

fn lane_slot(name: &str, lanes: &[Vec<Ix>], k: usize) -> String {
    if lanes.len() == 1 {
        name.to_string()
    } else {
        format!("{name}[{k}]")
    }
}

/// An op table row's CUDA spelling for compute dtype `c`, or a plan-time
/// error naming the op when the row has none.
pub fn table_expr(name: &str, t: [&'static str; 3], c: DType, args: &[String]) -> Result<String, CodegenError> {
    let tmpl = elementwise::cuda_for(t, c);
    if tmpl.is_empty() {
        return Err(unsupported(format!("{name} on {c} values has no CUDA lowering")));
    }
    let args: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    Ok(elementwise::fill_cuda(tmpl, &args, ctype::reg(c)))
}

fn node_of(f: &Fusion, v: ValueId) -> usize {
    match f.value(v).def {
        ValueDef::Node { node, .. } => node,
        _ => unreachable!("an op output"),
    }
}
