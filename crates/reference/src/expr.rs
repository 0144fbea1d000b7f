//! Pointwise expressions and their evaluation in tiles.
//!
//! Chains of elementwise ops (unary, binary, where, cast) whose intermediate
//! results are used only by other elementwise ops of the same shape (or by a
//! reduction) are not stored: they stay a [`LazyNode`] DAG, and a consumer
//! that needs values compiles the DAG into a [`Program`] that computes
//! `TILE` elements at a time through every op, in registers of f64 (float
//! dtypes) or i64 (integer and bool dtypes). Each op rounds its result to its
//! own dtype exactly as if it were stored, so fusing changes no value.

use crate::tensor::{unravel, with_buffer, with_dtype, Buffer, Elem, Tensor};
use fusebench_ir::op::{BinaryOp, TernaryOp, UnaryOp};
use fusebench_ir::scalar::{fold_binary, fold_ternary, fold_unary, unary_i64};
use fusebench_ir::{round, DType, Literal};
use rayon::prelude::*;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// Elements computed per step of a program.
pub(crate) const TILE: usize = 1024;

/// An operand of a pointwise op.
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    /// An elementwise result not stored, of the consumer's shape.
    Lazy(Arc<LazyNode>),
    /// Stored values; broadcast to the consumer's shape when read.
    Tensor(Tensor),
    /// A scalar value of the given dtype.
    Scalar(Literal, DType),
}

impl Operand {
    pub fn dtype(&self) -> DType {
        match self {
            Operand::Lazy(n) => n.dtype,
            Operand::Tensor(t) => t.dtype(),
            Operand::Scalar(_, d) => *d,
        }
    }
}

/// An elementwise op.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PwOp {
    /// With the dtype operands are converted to and computed in (the op table's typing).
    Unary(UnaryOp, DType),
    Binary(BinaryOp, DType),
    /// With the dtype each operand is converted to, and the compute dtype.
    Ternary(TernaryOp, [DType; 3], DType),
    Where,
    Cast,
}

/// One elementwise op whose result is not stored.
#[derive(Debug)]
pub(crate) struct LazyNode {
    pub op: PwOp,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub args: Vec<Operand>,
}

// ---------------------------------------------------------------- rounding

/// Rounding of an f64 lane to a float dtype.
pub(crate) trait Rnd {
    fn r(x: f64) -> f64;
}
pub(crate) struct RDouble;
pub(crate) struct RFloat;
pub(crate) struct RBf16;
pub(crate) struct RHalf;
impl Rnd for RDouble {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        x
    }
}
impl Rnd for RFloat {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        x as f32 as f64
    }
}
impl Rnd for RBf16 {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round_bf16(x)
    }
}
impl Rnd for RHalf {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round_f16(x)
    }
}

/// Rounds to `bits` significant bits (round to nearest even) directly on
/// the f64 encoding; exact while the result is a normal number of the target
/// format, which the callers check.
#[inline(always)]
fn round_significand(u: u64, bits: u32) -> u64 {
    let drop = 53 - bits;
    let lsb = (u >> drop) & 1;
    (u + (1u64 << (drop - 1)) - 1 + lsb) & !((1u64 << drop) - 1)
}

/// `fusebench_ir::round::to_bf16`, with a fast path for the normal range
/// (2^-126 <= |x| < 2^128) that gives the same value.
#[inline(always)]
pub(crate) fn round_bf16(x: f64) -> f64 {
    let u = x.to_bits();
    let e = (u >> 52) & 0x7FF;
    if (1023 - 126..1023 + 128).contains(&e) {
        let r = round_significand(u, 8);
        if (r >> 52) & 0x7FF < 1023 + 128 {
            return f64::from_bits(r);
        }
    }
    round::to_bf16(x)
}

/// `fusebench_ir::round::to_f16`, with a fast path for the normal range
/// (2^-14 <= |x| < 2^16) that gives the same value.
#[inline(always)]
pub(crate) fn round_f16(x: f64) -> f64 {
    let u = x.to_bits();
    let e = (u >> 52) & 0x7FF;
    if (1023 - 14..1023 + 16).contains(&e) {
        let r = round_significand(u, 11);
        if (r >> 52) & 0x7FF < 1023 + 16 {
            return f64::from_bits(r);
        }
    }
    round::to_f16(x)
}

/// Rounding to the float8 formats (`fusebench_ir::round`).
pub(crate) struct RF8E4m3;
pub(crate) struct RF8E5m2;
pub(crate) struct RF8E8m0;
impl Rnd for RF8E4m3 {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round::to_f8e4m3(x)
    }
}
impl Rnd for RF8E5m2 {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round::to_f8e5m2(x)
    }
}
impl Rnd for RF8E8m0 {
    #[inline(always)]
    fn r(x: f64) -> f64 {
        round::to_f8e8m0(x)
    }
}

macro_rules! with_round {
    ($dtype:expr, $R:ident => $body:expr) => {
        match $dtype {
            DType::Float8E4m3fn => {
                type $R = RF8E4m3;
                $body
            }
            DType::Float8E5m2 => {
                type $R = RF8E5m2;
                $body
            }
            DType::Float8E8m0fnu => {
                type $R = RF8E8m0;
                $body
            }
            // Complex values never enter lanes; a lane would hold the real part.
            DType::ComplexFloat => {
                type $R = RFloat;
                $body
            }
            DType::ComplexDouble => {
                type $R = RDouble;
                $body
            }
            DType::Double => {
                type $R = RDouble;
                $body
            }
            DType::Float => {
                type $R = RFloat;
                $body
            }
            DType::BFloat16 => {
                type $R = RBf16;
                $body
            }
            DType::Half => {
                type $R = RHalf;
                $body
            }
            other => unreachable!("{other} is not a float dtype"),
        }
    };
}

/// Wraps an i64 result into an integer or bool dtype.
#[inline(always)]
pub(crate) fn wrap_int(x: i64, dtype: DType) -> i64 {
    match dtype {
        DType::Bool => (x != 0) as i64,
        DType::Int32 => x as i32 as i64,
        _ => x,
    }
}

// ---------------------------------------------------------------- programs

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Reg {
    F(usize),
    I(usize),
}

#[derive(Clone, Copy, Debug)]
enum SrcF {
    R(usize),
    C(f64),
}

#[derive(Clone, Copy, Debug)]
enum SrcI {
    R(usize),
    C(i64),
}

#[derive(Clone, Debug)]
enum Step {
    Load {
        leaf: usize,
        dst: Reg,
    },
    /// `dst` is an I register for ops with a Bool result (isnan...).
    UnaryF {
        kind: UnaryOp,
        x: usize,
        dst: Reg,
        dtype: DType,
    },
    UnaryI {
        kind: UnaryOp,
        x: usize,
        dst: usize,
        dtype: DType,
        compute: DType,
    },
    /// `dst` is an I register for comparisons.
    BinaryF {
        kind: BinaryOp,
        a: SrcF,
        b: SrcF,
        dst: Reg,
        dtype: DType,
        compute: DType,
    },
    BinaryI {
        kind: BinaryOp,
        a: SrcI,
        b: SrcI,
        dst: usize,
        dtype: DType,
        compute: DType,
    },
    TernaryF {
        kind: TernaryOp,
        a: SrcF,
        b: SrcF,
        c: SrcF,
        dst: usize,
        dtype: DType,
    },
    TernaryI {
        kind: TernaryOp,
        a: SrcI,
        b: SrcI,
        c: SrcI,
        dst: usize,
        dtype: DType,
    },
    WhereF {
        c: SrcI,
        a: SrcF,
        b: SrcF,
        dst: usize,
    },
    WhereI {
        c: SrcI,
        a: SrcI,
        b: SrcI,
        dst: usize,
    },
    Cast {
        x: Reg,
        from: DType,
        to: DType,
        dst: Reg,
    },
}

impl Step {
    fn dst(&self) -> Reg {
        match *self {
            Step::Load { dst, .. }
            | Step::UnaryF { dst, .. }
            | Step::BinaryF { dst, .. }
            | Step::Cast { dst, .. } => dst,
            Step::WhereF { dst, .. } | Step::TernaryF { dst, .. } => Reg::F(dst),
            Step::UnaryI { dst, .. }
            | Step::BinaryI { dst, .. }
            | Step::WhereI { dst, .. }
            | Step::TernaryI { dst, .. } => Reg::I(dst),
        }
    }

    fn srcs(&self) -> Vec<Reg> {
        let f = |s: SrcF| match s {
            SrcF::R(r) => Some(Reg::F(r)),
            SrcF::C(_) => None,
        };
        let i = |s: SrcI| match s {
            SrcI::R(r) => Some(Reg::I(r)),
            SrcI::C(_) => None,
        };
        match *self {
            Step::Load { .. } => vec![],
            Step::UnaryF { x, .. } => vec![Reg::F(x)],
            Step::UnaryI { x, .. } => vec![Reg::I(x)],
            Step::BinaryF { a, b, .. } => [f(a), f(b)].into_iter().flatten().collect(),
            Step::BinaryI { a, b, .. } => [i(a), i(b)].into_iter().flatten().collect(),
            Step::WhereF { c, a, b, .. } => [i(c), f(a), f(b)].into_iter().flatten().collect(),
            Step::TernaryF { a, b, c, .. } => [f(a), f(b), f(c)].into_iter().flatten().collect(),
            Step::TernaryI { a, b, c, .. } => [i(a), i(b), i(c)].into_iter().flatten().collect(),
            Step::WhereI { c, a, b, .. } => [i(c), i(a), i(b)].into_iter().flatten().collect(),
            Step::Cast { x, .. } => vec![x],
        }
    }

    fn map_regs(&mut self, m: &impl Fn(Reg) -> Reg) {
        let mf = |r: usize| match m(Reg::F(r)) {
            Reg::F(x) => x,
            Reg::I(_) => unreachable!(),
        };
        let mi = |r: usize| match m(Reg::I(r)) {
            Reg::I(x) => x,
            Reg::F(_) => unreachable!(),
        };
        let sf = |s: SrcF| match s {
            SrcF::R(r) => SrcF::R(mf(r)),
            c => c,
        };
        let si = |s: SrcI| match s {
            SrcI::R(r) => SrcI::R(mi(r)),
            c => c,
        };
        match self {
            Step::Load { dst, .. } => *dst = m(*dst),
            Step::UnaryF { x, dst, .. } => {
                *x = mf(*x);
                *dst = m(*dst)
            }
            Step::TernaryF { a, b, c, dst, .. } => {
                *a = sf(*a);
                *b = sf(*b);
                *c = sf(*c);
                *dst = mf(*dst)
            }
            Step::TernaryI { a, b, c, dst, .. } => {
                *a = si(*a);
                *b = si(*b);
                *c = si(*c);
                *dst = mi(*dst)
            }
            Step::UnaryI { x, dst, .. } => {
                *x = mi(*x);
                *dst = mi(*dst)
            }
            Step::BinaryF { a, b, dst, .. } => {
                *a = sf(*a);
                *b = sf(*b);
                *dst = m(*dst)
            }
            Step::BinaryI { a, b, dst, .. } => {
                *a = si(*a);
                *b = si(*b);
                *dst = mi(*dst)
            }
            Step::WhereF { c, a, b, dst } => {
                *c = si(*c);
                *a = sf(*a);
                *b = sf(*b);
                *dst = mf(*dst)
            }
            Step::WhereI { c, a, b, dst } => {
                *c = si(*c);
                *a = si(*a);
                *b = si(*b);
                *dst = mi(*dst)
            }
            Step::Cast { x, dst, .. } => {
                *x = m(*x);
                *dst = m(*dst)
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Leaf {
    data: Arc<Buffer>,
    offset: i64,
    /// One per dim of the iteration space.
    strides: Vec<i64>,
}

#[derive(Clone, Copy, Debug)]
enum Root {
    Reg(Reg),
    ConstF(f64),
    ConstI(i64),
}

/// A compiled pointwise expression over an iteration space (row-major over
/// `shape`).
#[derive(Clone, Debug)]
pub(crate) struct Program {
    shape: Vec<usize>,
    leaves: Vec<Leaf>,
    steps: Vec<Step>,
    n_f: usize,
    n_i: usize,
    root: Root,
    dtype: DType,
}

/// A compile-time value: a register holding values of a dtype, or a constant.
#[derive(Clone, Copy, Debug)]
enum CVal {
    Reg(Reg, DType),
    Const(Literal, DType),
}

fn is_float(d: DType) -> bool {
    d.is_float()
}

/// Whether converting `from` to `to` leaves every value (as held in a lane) unchanged.
fn conversion_is_noop(from: DType, to: DType) -> bool {
    use DType::*;
    if from == to {
        return true;
    }
    match to {
        Float => matches!(from, Half | BFloat16),
        Double => matches!(from, Half | BFloat16 | Float),
        Int | Index => matches!(from, Bool | Int32 | Int | Index),
        Int32 => from == Bool,
        _ => false,
    }
}

struct Compiler {
    shape: Vec<usize>,
    leaves: Vec<Leaf>,
    leaf_keys: HashMap<(usize, i64, Vec<i64>), Reg>,
    steps: Vec<Step>,
    n_f: usize,
    n_i: usize,
    memo: HashMap<*const LazyNode, CVal>,
}

impl Compiler {
    fn new_reg(&mut self, dtype: DType) -> Reg {
        if is_float(dtype) {
            self.n_f += 1;
            Reg::F(self.n_f - 1)
        } else {
            self.n_i += 1;
            Reg::I(self.n_i - 1)
        }
    }

    fn convert(&mut self, v: CVal, to: DType) -> CVal {
        match v {
            CVal::Const(l, from) => CVal::Const(fusebench_ir::dtype_ops::cast_literal(l, from, to), to),
            CVal::Reg(r, from) => {
                if conversion_is_noop(from, to) {
                    CVal::Reg(r, to)
                } else {
                    let dst = self.new_reg(to);
                    self.steps.push(Step::Cast { x: r, from, to, dst });
                    CVal::Reg(dst, to)
                }
            }
        }
    }

    fn src_f(v: CVal) -> SrcF {
        match v {
            CVal::Reg(Reg::F(r), _) => SrcF::R(r),
            CVal::Const(l, _) => SrcF::C(l.as_f64()),
            other => unreachable!("{other:?} is not a float value"),
        }
    }

    fn src_i(v: CVal) -> SrcI {
        match v {
            CVal::Reg(Reg::I(r), _) => SrcI::R(r),
            CVal::Const(l, _) => SrcI::C(l.as_i64().unwrap_or(0)),
            other => unreachable!("{other:?} is not an integer value"),
        }
    }

    fn operand(&mut self, o: &Operand) -> CVal {
        match o {
            Operand::Scalar(l, d) => CVal::Const(*l, *d),
            Operand::Tensor(t) => {
                let t = t.broadcast_to(&self.shape);
                let key = (
                    Arc::as_ptr(t.buffer_arc()) as usize,
                    t.offset() as i64,
                    t.strides().to_vec(),
                );
                if let Some(&r) = self.leaf_keys.get(&key) {
                    return CVal::Reg(r, t.dtype());
                }
                let leaf = self.leaves.len();
                self.leaves.push(Leaf {
                    data: t.buffer_arc().clone(),
                    offset: t.offset() as i64,
                    strides: t.strides().to_vec(),
                });
                let dst = self.new_reg(t.dtype());
                self.steps.push(Step::Load { leaf, dst });
                self.leaf_keys.insert(key, dst);
                CVal::Reg(dst, t.dtype())
            }
            Operand::Lazy(n) => {
                let key = Arc::as_ptr(n);
                if let Some(&v) = self.memo.get(&key) {
                    return v;
                }
                let v = self.node(n);
                self.memo.insert(key, v);
                v
            }
        }
    }

    fn node(&mut self, n: &LazyNode) -> CVal {
        let args: Vec<CVal> = n.args.iter().map(|a| self.operand(a)).collect();
        let out = n.dtype;
        match n.op {
            PwOp::Cast => self.convert(args[0], out),
            PwOp::Unary(kind, compute) => {
                let x = self.convert(args[0], compute);
                match x {
                    CVal::Const(l, _) => CVal::Const(fold_unary(kind, l, compute, out), out),
                    CVal::Reg(Reg::F(x), _) => {
                        let dst = self.new_reg(out);
                        self.steps.push(Step::UnaryF {
                            kind,
                            x,
                            dst,
                            dtype: out,
                        });
                        CVal::Reg(dst, out)
                    }
                    CVal::Reg(Reg::I(x), _) => {
                        let dst = self.n_i;
                        self.n_i += 1;
                        self.steps.push(Step::UnaryI {
                            kind,
                            x,
                            dst,
                            dtype: out,
                            compute,
                        });
                        CVal::Reg(Reg::I(dst), out)
                    }
                }
            }
            PwOp::Ternary(kind, casts, compute) => {
                let v: Vec<CVal> = (0..3).map(|k| self.convert(args[k], casts[k])).collect();
                if let [CVal::Const(x, _), CVal::Const(y, _), CVal::Const(z, _)] = v[..] {
                    return CVal::Const(fold_ternary(kind, [x, y, z], casts, compute, out), out);
                }
                let dst = self.new_reg(out);
                match dst {
                    Reg::F(d) => self.steps.push(Step::TernaryF {
                        kind,
                        a: Self::src_f(v[0]),
                        b: Self::src_f(v[1]),
                        c: Self::src_f(v[2]),
                        dst: d,
                        dtype: out,
                    }),
                    Reg::I(d) => self.steps.push(Step::TernaryI {
                        kind,
                        a: Self::src_i(v[0]),
                        b: Self::src_i(v[1]),
                        c: Self::src_i(v[2]),
                        dst: d,
                        dtype: out,
                    }),
                }
                CVal::Reg(dst, out)
            }
            PwOp::Binary(kind, compute) => {
                let a = self.convert(args[0], compute);
                let b = self.convert(args[1], compute);
                if let (CVal::Const(x, _), CVal::Const(y, _)) = (a, b) {
                    return CVal::Const(fold_binary(kind, x, y, compute, out), out);
                }
                if is_float(compute) {
                    let dst = self.new_reg(out);
                    self.steps.push(Step::BinaryF {
                        kind,
                        a: Self::src_f(a),
                        b: Self::src_f(b),
                        dst,
                        dtype: out,
                        compute,
                    });
                    CVal::Reg(dst, out)
                } else {
                    let dst = self.new_reg(out);
                    let Reg::I(d) = dst else { unreachable!() };
                    self.steps.push(Step::BinaryI {
                        kind,
                        a: Self::src_i(a),
                        b: Self::src_i(b),
                        dst: d,
                        dtype: out,
                        compute,
                    });
                    CVal::Reg(dst, out)
                }
            }
            PwOp::Where => {
                let c = self.convert(args[0], DType::Bool);
                let a = self.convert(args[1], out);
                let b = self.convert(args[2], out);
                if let CVal::Const(cl, _) = c {
                    return if cl.as_bool() { a } else { b };
                }
                let dst = self.new_reg(out);
                match dst {
                    Reg::F(d) => self.steps.push(Step::WhereF {
                        c: Self::src_i(c),
                        a: Self::src_f(a),
                        b: Self::src_f(b),
                        dst: d,
                    }),
                    Reg::I(d) => self.steps.push(Step::WhereI {
                        c: Self::src_i(c),
                        a: Self::src_i(a),
                        b: Self::src_i(b),
                        dst: d,
                    }),
                }
                CVal::Reg(dst, out)
            }
        }
    }
}

impl Program {
    /// Compiles the values of `root` over its logical shape, converted to
    /// `dtype` (as a cast would) when given.
    pub fn compile(root: &Operand, shape: &[usize], dtype: Option<DType>) -> Program {
        let mut c = Compiler {
            shape: shape.to_vec(),
            leaves: vec![],
            leaf_keys: HashMap::new(),
            steps: vec![],
            n_f: 0,
            n_i: 0,
            memo: HashMap::new(),
        };
        let mut v = c.operand(root);
        let out_dtype = dtype.unwrap_or(root.dtype());
        v = c.convert(v, out_dtype);
        let root = match v {
            CVal::Reg(r, _) => Root::Reg(r),
            CVal::Const(l, d) if is_float(d) => Root::ConstF(l.as_f64()),
            CVal::Const(l, _) => Root::ConstI(l.as_i64().unwrap_or(0)),
        };
        let mut p = Program {
            shape: shape.to_vec(),
            leaves: c.leaves,
            steps: c.steps,
            n_f: c.n_f,
            n_i: c.n_i,
            root,
            dtype: out_dtype,
        };
        p.allocate_registers();
        p
    }

    /// Maps virtual registers (one per step) onto few physical ones, reusing
    /// a register once its last reader has run.
    fn allocate_registers(&mut self) {
        let mut last_use: HashMap<Reg, usize> = HashMap::new();
        for (i, s) in self.steps.iter().enumerate() {
            for r in s.srcs() {
                last_use.insert(r, i);
            }
        }
        if let Root::Reg(r) = self.root {
            last_use.insert(r, usize::MAX);
        }
        let mut map: HashMap<Reg, Reg> = HashMap::new();
        let (mut free_f, mut free_i): (Vec<usize>, Vec<usize>) = (vec![], vec![]);
        let (mut nf, mut ni) = (0usize, 0usize);
        for i in 0..self.steps.len() {
            let dst = self.steps[i].dst();
            let phys = match dst {
                Reg::F(_) => Reg::F(free_f.pop().unwrap_or_else(|| {
                    nf += 1;
                    nf - 1
                })),
                Reg::I(_) => Reg::I(free_i.pop().unwrap_or_else(|| {
                    ni += 1;
                    ni - 1
                })),
            };
            map.insert(dst, phys);
            let mut srcs = self.steps[i].srcs();
            srcs.sort_by_key(|r| match r {
                Reg::F(x) => (0, *x),
                Reg::I(x) => (1, *x),
            });
            srcs.dedup();
            for r in srcs {
                if last_use.get(&r) == Some(&i) {
                    match map[&r] {
                        Reg::F(x) => free_f.push(x),
                        Reg::I(x) => free_i.push(x),
                    }
                }
            }
            // A result nobody reads frees its register at once.
            if !last_use.contains_key(&dst) {
                match phys {
                    Reg::F(x) => free_f.push(x),
                    Reg::I(x) => free_i.push(x),
                }
            }
            let m = map.clone();
            self.steps[i].map_regs(&|r| m[&r]);
        }
        if let Root::Reg(r) = self.root {
            self.root = Root::Reg(map[&r]);
        }
        self.n_f = nf;
        self.n_i = ni;
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Reorders the iteration space: new dim `i` is old dim `perm[i]`.
    pub fn permute(&mut self, perm: &[usize]) {
        self.shape = perm.iter().map(|&p| self.shape[p]).collect();
        for l in &mut self.leaves {
            l.strides = perm.iter().map(|&p| l.strides[p]).collect();
        }
    }

    /// Merges adjacent dims inside each group of dims where every leaf
    /// allows it and drops extent-1 dims; returns the new groups. The
    /// iteration order of elements is unchanged.
    pub fn coalesce(&mut self, groups: &[Range<usize>]) -> Vec<Range<usize>> {
        let mut shape: Vec<usize> = vec![];
        let mut strides: Vec<Vec<i64>> = vec![vec![]; self.leaves.len()];
        let mut new_groups = vec![];
        for g in groups {
            let start = shape.len();
            for d in g.clone() {
                let e = self.shape[d];
                if e == 1 {
                    continue;
                }
                let can_merge = shape.len() > start
                    && self
                        .leaves
                        .iter()
                        .enumerate()
                        .all(|(k, l)| strides[k][shape.len() - 1] == l.strides[d] * e as i64);
                if can_merge {
                    let last = shape.len() - 1;
                    shape[last] *= e;
                    for (k, l) in self.leaves.iter().enumerate() {
                        strides[k][last] = l.strides[d];
                    }
                } else {
                    shape.push(e);
                    for (k, l) in self.leaves.iter().enumerate() {
                        strides[k].push(l.strides[d]);
                    }
                }
            }
            new_groups.push(start..shape.len());
        }
        if shape.is_empty() {
            shape.push(1);
            for s in &mut strides {
                s.push(0);
            }
        }
        self.shape = shape;
        for (l, s) in self.leaves.iter_mut().zip(strides) {
            l.strides = s;
        }
        new_groups
    }

    /// Evaluates the elements `[start, end)` of the iteration space, TILE at a
    /// time, calling `f(position of the tile's first element, values)`.
    pub fn for_each_tile(
        &self,
        start: usize,
        end: usize,
        s: &mut Scratch,
        mut f: impl FnMut(usize, TileRef<'_>),
    ) {
        if start >= end {
            return;
        }
        // The walk needs an innermost dim: a 0-dim space is one element of a 1-dim one.
        if self.shape.is_empty() {
            let mut p = self.clone();
            p.shape.push(1);
            p.leaves.iter_mut().for_each(|l| l.strides.push(0));
            return p.for_each_tile(start, end, s, f);
        }
        s.prepare(self);
        let rank = self.shape.len();
        let inner_len = self.shape[rank - 1];
        let outer_shape = &self.shape[..rank - 1];
        // Cursor at `start`.
        let idx_full = unravel(start, &self.shape);
        let mut outer: Vec<usize> = idx_full[..rank - 1].to_vec();
        let mut inner = idx_full[rank - 1];
        let nl = self.leaves.len();
        let mut bases: Vec<i64> = self
            .leaves
            .iter()
            .map(|l| {
                l.offset
                    + outer
                        .iter()
                        .enumerate()
                        .map(|(d, &i)| i as i64 * l.strides[d])
                        .sum::<i64>()
            })
            .collect();
        let inner_strides: Vec<i64> = self.leaves.iter().map(|l| l.strides[rank - 1]).collect();
        let mut t = start;
        while t < end {
            let len = (end - t).min(TILE);
            // Segments of this tile along the innermost dim.
            s.segs.clear();
            s.seg_bases.clear();
            let mut pos = 0;
            while pos < len {
                let n = (inner_len - inner).min(len - pos);
                s.segs.push((pos, n));
                for k in 0..nl {
                    s.seg_bases.push(bases[k] + inner as i64 * inner_strides[k]);
                }
                pos += n;
                inner += n;
                if inner == inner_len {
                    inner = 0;
                    // Next row: advance the outer multi-index.
                    for d in (0..outer_shape.len()).rev() {
                        outer[d] += 1;
                        if outer[d] < outer_shape[d] {
                            for (b, l) in bases.iter_mut().zip(&self.leaves) {
                                *b += l.strides[d];
                            }
                            break;
                        }
                        outer[d] = 0;
                        for (b, l) in bases.iter_mut().zip(&self.leaves) {
                            *b -= (outer_shape[d] as i64 - 1) * l.strides[d];
                        }
                    }
                }
            }
            self.run_steps(len, s);
            let tile = match self.root {
                Root::Reg(Reg::F(r)) => TileRef::F(&s.f[r][..len]),
                Root::Reg(Reg::I(r)) => TileRef::I(&s.i[r][..len]),
                Root::ConstF(c) => {
                    s.cf.clear();
                    s.cf.resize(len, c);
                    TileRef::F(&s.cf)
                }
                Root::ConstI(c) => {
                    s.ci.clear();
                    s.ci.resize(len, c);
                    TileRef::I(&s.ci)
                }
            };
            f(t, tile);
            t += len;
        }
    }

    fn run_steps(&self, len: usize, s: &mut Scratch) {
        let nl = self.leaves.len();
        for step in &self.steps {
            match *step {
                Step::Load { leaf, dst } => {
                    let l = &self.leaves[leaf];
                    let rank = self.shape.len();
                    let stride = l.strides[rank - 1];
                    match dst {
                        Reg::F(d) => {
                            let out = &mut s.f[d];
                            with_buffer!(&*l.data, v, T => load_f::<T>(v, &s.segs, &s.seg_bases, nl, leaf, stride, out));
                        }
                        Reg::I(d) => {
                            let out = &mut s.i[d];
                            with_buffer!(&*l.data, v, T => load_i::<T>(v, &s.segs, &s.seg_bases, nl, leaf, stride, out));
                        }
                    }
                }
                Step::UnaryF {
                    kind,
                    x,
                    dst,
                    dtype,
                } => match dst {
                    Reg::F(d) => {
                        let mut out = std::mem::take(&mut s.f[d]);
                        unary_f(kind, dtype, &s.f[x][..len], &mut out[..len]);
                        s.f[d] = out;
                    }
                    Reg::I(d) => {
                        let mut out = std::mem::take(&mut s.i[d]);
                        unary_f_to_i(kind, &s.f[x][..len], &mut out[..len]);
                        s.i[d] = out;
                    }
                },
                Step::UnaryI {
                    kind,
                    x,
                    dst,
                    dtype,
                    compute,
                } => {
                    let mut out = std::mem::take(&mut s.i[dst]);
                    // |x| of an unsigned value is the value.
                    let keep = dtype == DType::UInt64 && kind == UnaryOp::Abs;
                    for (o, &v) in out[..len].iter_mut().zip(&s.i[x][..len]) {
                        *o = if keep { v } else { wrap_int(unary_i64(kind, v, compute), dtype) };
                    }
                    s.i[dst] = out;
                }
                Step::TernaryF {
                    kind,
                    a,
                    b,
                    c,
                    dst,
                    dtype,
                } => {
                    let mut out = std::mem::take(&mut s.f[dst]);
                    let (a, b, c) = (fsrc(&s.f, a, len), fsrc(&s.f, b, len), fsrc(&s.f, c, len));
                    ternary_f(kind, dtype, a, b, c, &mut out[..len]);
                    s.f[dst] = out;
                }
                Step::TernaryI {
                    kind,
                    a,
                    b,
                    c,
                    dst,
                    dtype,
                } => {
                    let mut out = std::mem::take(&mut s.i[dst]);
                    let (a, b, c) = (isrc(&s.i, a, len), isrc(&s.i, b, len), isrc(&s.i, c, len));
                    for (k, o) in out[..len].iter_mut().enumerate() {
                        *o = wrap_int(lane::ternary_int(kind, a.get(k), b.get(k), c.get(k)), dtype);
                    }
                    s.i[dst] = out;
                }
                Step::BinaryF {
                    kind,
                    a,
                    b,
                    dst,
                    dtype,
                    compute,
                } => match dst {
                    Reg::F(d) => {
                        let mut out = std::mem::take(&mut s.f[d]);
                        binary_f(
                            kind,
                            dtype,
                            compute,
                            fsrc(&s.f, a, len),
                            fsrc(&s.f, b, len),
                            &mut out[..len],
                        );
                        s.f[d] = out;
                    }
                    Reg::I(d) => {
                        let mut out = std::mem::take(&mut s.i[d]);
                        compare_f(
                            kind,
                            compute,
                            fsrc(&s.f, a, len),
                            fsrc(&s.f, b, len),
                            &mut out[..len],
                        );
                        s.i[d] = out;
                    }
                },
                Step::BinaryI {
                    kind,
                    a,
                    b,
                    dst,
                    dtype,
                    compute: DType::UInt64,
                } => {
                    let mut out = std::mem::take(&mut s.i[dst]);
                    let (a, b) = (isrc(&s.i, a, len), isrc(&s.i, b, len));
                    for (k, o) in out[..len].iter_mut().enumerate() {
                        *o = wrap_int(fusebench_ir::dtype_ops::binary_u64(kind, a.get(k), b.get(k)), dtype);
                    }
                    s.i[dst] = out;
                }
                Step::BinaryI {
                    kind,
                    a,
                    b,
                    dst,
                    dtype,
                    compute,
                } => {
                    let mut out = std::mem::take(&mut s.i[dst]);
                    binary_i(
                        kind,
                        dtype,
                        compute,
                        isrc(&s.i, a, len),
                        isrc(&s.i, b, len),
                        &mut out[..len],
                    );
                    s.i[dst] = out;
                }
                Step::WhereF { c, a, b, dst } => {
                    let mut out = std::mem::take(&mut s.f[dst]);
                    let (c, a, b) = (isrc(&s.i, c, len), fsrc(&s.f, a, len), fsrc(&s.f, b, len));
                    for (k, o) in out[..len].iter_mut().enumerate() {
                        *o = if c.get(k) != 0 { a.get(k) } else { b.get(k) };
                    }
                    s.f[dst] = out;
                }
                Step::WhereI { c, a, b, dst } => {
                    let mut out = std::mem::take(&mut s.i[dst]);
                    let (c, a, b) = (isrc(&s.i, c, len), isrc(&s.i, a, len), isrc(&s.i, b, len));
                    for (k, o) in out[..len].iter_mut().enumerate() {
                        *o = if c.get(k) != 0 { a.get(k) } else { b.get(k) };
                    }
                    s.i[dst] = out;
                }
                Step::Cast { x, from, to, dst } => match (x, dst) {
                    (Reg::F(x), Reg::F(d)) => {
                        let mut out = std::mem::take(&mut s.f[d]);
                        with_round!(to, R => {
                            for (o, &v) in out[..len].iter_mut().zip(&s.f[x][..len]) {
                                *o = R::r(v);
                            }
                        });
                        s.f[d] = out;
                    }
                    (Reg::F(x), Reg::I(d)) => {
                        let src = &s.f[x][..len];
                        let out = &mut s.i[d][..len];
                        match to {
                            DType::Bool => out
                                .iter_mut()
                                .zip(src)
                                .for_each(|(o, &v)| *o = (v != 0.0) as i64),
                            DType::Int32 => out
                                .iter_mut()
                                .zip(src)
                                .for_each(|(o, &v)| *o = v as i32 as i64),
                            // CUDA's conversion saturates (negatives to 0), as Rust's does.
                            DType::UInt64 => out
                                .iter_mut()
                                .zip(src)
                                .for_each(|(o, &v)| *o = v as u64 as i64),
                            _ => out.iter_mut().zip(src).for_each(|(o, &v)| *o = v as i64),
                        }
                    }
                    (Reg::I(x), Reg::F(d)) => {
                        let src = &s.i[x][..len];
                        let out = &mut s.f[d][..len];
                        if from == DType::UInt64 {
                            with_round!(to, R => out.iter_mut().zip(src).for_each(|(o, &v)| *o = R::r(v as u64 as f64)));
                        } else {
                            with_round!(to, R => out.iter_mut().zip(src).for_each(|(o, &v)| *o = R::r(v as f64)));
                        }
                    }
                    (Reg::I(x), Reg::I(d)) => {
                        let mut out = std::mem::take(&mut s.i[d]);
                        for (o, &v) in out[..len].iter_mut().zip(&s.i[x][..len]) {
                            *o = wrap_int(v, to);
                        }
                        s.i[d] = out;
                    }
                },
            }
        }
    }

    /// Evaluates every element into a new dense tensor of the program's dtype.
    pub fn materialize(&self) -> Tensor {
        let n = self.numel();
        let shape = self.shape.clone();
        let buf = with_dtype!(self.dtype, T => {
            let mut out = T::zeros(n);
            let chunk = chunk_len(n);
            let fill = |(ci, part): (usize, &mut [T])| {
                let mut s = Scratch::default();
                let start = ci * chunk;
                self.for_each_tile(start, start + part.len(), &mut s, |t, tile| store(tile, &mut part[t - start..]));
            };
            if n <= chunk {
                out.chunks_mut(chunk.max(1)).enumerate().for_each(fill);
            } else {
                out.par_chunks_mut(chunk).enumerate().for_each(fill);
            }
            T::wrap(out)
        });
        Tensor::from_buffer(self.dtype, shape, buf).expect("sizes agree")
    }
}

/// Elements per parallel task when evaluating `n` elements.
pub(crate) fn chunk_len(n: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    let c = n.div_ceil(threads * 8);
    c.clamp(16 * TILE, 512 * TILE).div_ceil(TILE) * TILE
}

/// Writes tile values (already rounded to the dtype) into storage.
#[inline]
pub(crate) fn store<T: Elem>(tile: TileRef<'_>, out: &mut [T]) {
    match tile {
        TileRef::F(v) => out
            .iter_mut()
            .zip(v)
            .for_each(|(o, &x)| *o = T::from_f64(x)),
        TileRef::I(v) => out
            .iter_mut()
            .zip(v)
            .for_each(|(o, &x)| *o = T::from_i64(x)),
    }
}

/// Values of one tile.
#[derive(Clone, Copy)]
pub(crate) enum TileRef<'a> {
    F(&'a [f64]),
    I(&'a [i64]),
}

/// Per-task working memory of a program.
#[derive(Default)]
pub(crate) struct Scratch {
    f: Vec<Vec<f64>>,
    i: Vec<Vec<i64>>,
    segs: Vec<(usize, usize)>,
    seg_bases: Vec<i64>,
    cf: Vec<f64>,
    ci: Vec<i64>,
}

impl Scratch {
    fn prepare(&mut self, p: &Program) {
        while self.f.len() < p.n_f {
            self.f.push(vec![0.0; TILE]);
        }
        while self.i.len() < p.n_i {
            self.i.push(vec![0; TILE]);
        }
    }
}

// ---------------------------------------------------------------- kernels

// load_f and load_i stay two monomorphic functions (one macro body): one generic
// over the register type, converting through a closure, made `fusebench check`
// of the corpus 25% slower.
macro_rules! loader {
    ($name:ident, $R:ty, $conv:ident) => {
        #[inline]
        fn $name<T: Elem>(
            v: &[T],
            segs: &[(usize, usize)],
            bases: &[i64],
            nl: usize,
            leaf: usize,
            stride: i64,
            out: &mut [$R],
        ) {
            for (si, &(pos, n)) in segs.iter().enumerate() {
                let base = bases[si * nl + leaf];
                let dst = &mut out[pos..pos + n];
                match stride {
                    1 => {
                        let b = base as usize;
                        dst.iter_mut()
                            .zip(&v[b..b + n])
                            .for_each(|(d, &x)| *d = x.$conv());
                    }
                    0 => dst.fill(v[base as usize].$conv()),
                    _ => dst
                        .iter_mut()
                        .enumerate()
                        .for_each(|(k, d)| *d = v[(base + k as i64 * stride) as usize].$conv()),
                }
            }
        }
    };
}
loader!(load_f, f64, to_f64);
loader!(load_i, i64, to_i64);

/// A kernel's input per lane: a register's slice or a constant.
#[derive(Clone, Copy)]
enum Lane<'a, T> {
    S(&'a [T]),
    C(T),
}

impl<T: Copy> Lane<'_, T> {
    #[inline(always)]
    fn get(&self, k: usize) -> T {
        match self {
            Lane::S(s) => s[k],
            Lane::C(c) => *c,
        }
    }
}

fn fsrc(f: &[Vec<f64>], s: SrcF, len: usize) -> Lane<'_, f64> {
    match s {
        SrcF::R(r) => Lane::S(&f[r][..len]),
        SrcF::C(c) => Lane::C(c),
    }
}

fn isrc(i: &[Vec<i64>], s: SrcI, len: usize) -> Lane<'_, i64> {
    match s {
        SrcI::R(r) => Lane::S(&i[r][..len]),
        SrcI::C(c) => Lane::C(c),
    }
}

#[inline(always)]
fn map1(x: &[f64], out: &mut [f64], f: impl Fn(f64) -> f64) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

mod lane {
    //! The per-element math is `fusebench_ir::scalar`'s, inlined: the same
    //! functions fold constants when a fusion is built, so both agree bit for bit.
    pub use fusebench_ir::scalar::{
        binary_f64 as binary, binary_i64 as binary_int, ternary_f64 as ternary,
        ternary_i64 as ternary_int, unary_f64 as unary,
    };
}

#[inline(always)]
fn map2<T: Copy, U>(a: Lane<'_, T>, b: Lane<'_, T>, out: &mut [U], f: impl Fn(T, T) -> U) {
    match (a, b) {
        (Lane::S(a), Lane::S(b)) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        (Lane::S(a), Lane::C(y)) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
        }
        (Lane::C(x), Lane::S(b)) => {
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
        }
        (Lane::C(x), Lane::C(y)) => out.fill_with(|| f(x, y)),
    }
}

// One monomorphised loop per op and rounding, generated from the op table
// (`fusebench_ir::elementwise`): the op is a constant inside each loop.
macro_rules! unary_kernels {
    ($($v:ident => [$($rest:tt)*]),* $(,)?) => {
        fn unary_f(kind: UnaryOp, dtype: DType, x: &[f64], out: &mut [f64]) {
            match kind {
                $(UnaryOp::$v => with_round!(dtype, R => map1(x, out, |v| R::r(lane::unary(UnaryOp::$v, v)))),)*
            }
        }
        /// Float operands, Bool results (isnan, signbit...).
        fn unary_f_to_i(kind: UnaryOp, x: &[f64], out: &mut [i64]) {
            match kind {
                $(UnaryOp::$v => {
                    for (o, &v) in out.iter_mut().zip(x) {
                        *o = (lane::unary(UnaryOp::$v, v) != 0.0) as i64;
                    }
                })*
            }
        }
    };
}
fusebench_ir::unary_table!(unary_kernels);

macro_rules! binary_kernels {
    ($($v:ident => [$($rest:tt)*]),* $(,)?) => {
        fn binary_f(kind: BinaryOp, dtype: DType, compute: DType, a: Lane<'_, f64>, b: Lane<'_, f64>, out: &mut [f64]) {
            // `powf(x, 2.0)` is `x * x` (LLVM makes the same substitution when
            // the exponent is a known 2.0); the general call costs ~20x more.
            if kind == BinaryOp::Pow && matches!(b, Lane::C(e) if e == 2.0) {
                return with_round!(dtype, R => map2(a, b, out, |x, _| R::r(x * x)));
            }
            match kind {
                $(BinaryOp::$v => with_round!(dtype, R => map2(a, b, out, |x, y| R::r(lane::binary(BinaryOp::$v, x, y, compute)))),)*
            }
        }
        /// Float operands, Bool results (comparisons).
        fn compare_f(kind: BinaryOp, compute: DType, a: Lane<'_, f64>, b: Lane<'_, f64>, out: &mut [i64]) {
            match kind {
                $(BinaryOp::$v => map2(a, b, out, |x, y| (lane::binary(BinaryOp::$v, x, y, compute) != 0.0) as i64),)*
            }
        }
        fn binary_i(kind: BinaryOp, dtype: DType, compute: DType, a: Lane<'_, i64>, b: Lane<'_, i64>, out: &mut [i64]) {
            match kind {
                $(BinaryOp::$v => map2(a, b, out, |x, y| wrap_int(lane::binary_int(BinaryOp::$v, x, y, compute), dtype)),)*
            }
        }
    };
}
fusebench_ir::binary_table!(binary_kernels);

fn ternary_f(kind: TernaryOp, dtype: DType, a: Lane<'_, f64>, b: Lane<'_, f64>, c: Lane<'_, f64>, out: &mut [f64]) {
    with_round!(dtype, R => for (k, o) in out.iter_mut().enumerate() {
        *o = R::r(lane::ternary(kind, a.get(k), b.get(k), c.get(k)));
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random f64 bit patterns concentrated near the formats' ranges, ties included.
    fn samples() -> Vec<f64> {
        let mut v = vec![];
        let mut z = 0x1234_5678_9ABC_DEF0u64;
        for i in 0..400_000u64 {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            let exp = 1023 + ((z >> 53) % 300) as i64 - 170;
            let mut mant = z & ((1 << 52) - 1);
            if i % 4 == 0 {
                // An exact tie or near-tie for bf16 / f16.
                mant &= !((1 << 44) - 1);
                mant |= 1 << 44;
            } else if i % 4 == 1 {
                mant &= !((1 << 41) - 1);
                mant |= 1 << 41;
            }
            let bits = ((z >> 63) << 63) | ((exp.clamp(0, 2046) as u64) << 52) | mant;
            v.push(f64::from_bits(bits));
        }
        v.extend([
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            65504.0,
            65519.99,
            65520.0,
            3.3895e38,
            3.4e38,
            1e-40,
            6e-8,
        ]);
        v
    }

    #[test]
    fn fast_rounding_matches_ir_rounding() {
        for x in samples() {
            let (a, b) = (round_bf16(x), round::to_bf16(x));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "bf16 {x:e}: {a:e} vs {b:e}"
            );
            let (a, b) = (round_f16(x), round::to_f16(x));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "f16 {x:e}: {a:e} vs {b:e}"
            );
        }
    }
}
