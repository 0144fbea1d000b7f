//! Compiling a DAG of lazy elementwise ops into a `Program`: its leaves
//! (stored tensors read at strides), steps over registers of f64 or i64,
//! and the fewest registers.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Reg {
    F(usize),
    I(usize),
}

#[derive(Clone, Copy, Debug)]
pub(super) enum SrcF {
    R(usize),
    C(f64),
}

#[derive(Clone, Copy, Debug)]
pub(super) enum SrcI {
    R(usize),
    C(i64),
}

#[derive(Clone, Debug)]
pub(super) enum Step {
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
    pub(super) fn dst(&self) -> Reg {
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

    pub(super) fn srcs(&self) -> Vec<Reg> {
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

    pub(super) fn map_regs(&mut self, m: &impl Fn(Reg) -> Reg) {
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
pub(super) struct Leaf {
    pub(super) data: Arc<Buffer>,
    pub(super) offset: i64,
    /// One per dim of the iteration space.
    pub(super) strides: Vec<i64>,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Root {
    Reg(Reg),
    ConstF(f64),
    ConstI(i64),
}

/// A compiled pointwise expression over an iteration space (row-major over
/// `shape`).
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub(super) shape: Vec<usize>,
    pub(super) leaves: Vec<Leaf>,
    pub(super) steps: Vec<Step>,
    pub(super) n_f: usize,
    pub(super) n_i: usize,
    pub(super) root: Root,
    pub(super) dtype: DType,
}

/// A compile-time value: a register holding values of a dtype, or a constant.
#[derive(Clone, Copy, Debug)]
pub(super) enum CVal {
    Reg(Reg, DType),
    Const(Literal, DType),
}

pub(super) fn is_float(d: DType) -> bool {
    d.is_float()
}

/// Whether converting `from` to `to` leaves every value (as held in a lane) unchanged.
pub(super) fn conversion_is_noop(from: DType, to: DType) -> bool {
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

pub(super) struct Compiler {
    pub(super) shape: Vec<usize>,
    pub(super) leaves: Vec<Leaf>,
    pub(super) leaf_keys: HashMap<(usize, i64, Vec<i64>), Reg>,
    pub(super) steps: Vec<Step>,
    pub(super) n_f: usize,
    pub(super) n_i: usize,
    pub(super) memo: HashMap<*const LazyNode, CVal>,
}

impl Compiler {
    pub(super) fn new_reg(&mut self, dtype: DType) -> Reg {
        if is_float(dtype) {
            self.n_f += 1;
            Reg::F(self.n_f - 1)
        } else {
            self.n_i += 1;
            Reg::I(self.n_i - 1)
        }
    }

    pub(super) fn convert(&mut self, v: CVal, to: DType) -> CVal {
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

    pub(super) fn src_f(v: CVal) -> SrcF {
        match v {
            CVal::Reg(Reg::F(r), _) => SrcF::R(r),
            CVal::Const(l, _) => SrcF::C(l.as_f64()),
            other => unreachable!("{other:?} is not a float value"),
        }
    }

    pub(super) fn src_i(v: CVal) -> SrcI {
        match v {
            CVal::Reg(Reg::I(r), _) => SrcI::R(r),
            CVal::Const(l, _) => SrcI::C(l.as_i64().unwrap_or(0)),
            other => unreachable!("{other:?} is not an integer value"),
        }
    }

    pub(super) fn operand(&mut self, o: &Operand) -> CVal {
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

    pub(super) fn node(&mut self, n: &LazyNode) -> CVal {
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
    pub(super) fn allocate_registers(&mut self) {
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
}
