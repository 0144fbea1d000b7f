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

mod load;
mod ops;
mod rng;
pub use ops::table_expr;

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
            // The same element written another way (a reshape's index split and joined).
            let canon: Vec<Ix> = idx.iter().map(Ix::canonical).collect();
            if let Some(h) = hs.iter().find(|h| h.index.iter().map(Ix::canonical).eq(canon.iter().cloned())) {
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
}
