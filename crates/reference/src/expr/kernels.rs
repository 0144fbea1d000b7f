//! The per-step kernels: loads of leaves into registers and each op over
//! a tile of lanes, rounded to its dtype.

use super::*;

// load_f and load_i stay two monomorphic functions (one macro body): one generic
// over the register type, converting through a closure, made `fusebench check`
// of the corpus 25% slower.
macro_rules! loader {
    ($name:ident, $R:ty, $conv:ident) => {
        #[inline]
        pub(super) fn $name<T: Elem>(
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
pub(super) enum Lane<'a, T> {
    S(&'a [T]),
    C(T),
}

impl<T: Copy> Lane<'_, T> {
    #[inline(always)]
    pub(super) fn get(&self, k: usize) -> T {
        match self {
            Lane::S(s) => s[k],
            Lane::C(c) => *c,
        }
    }
}

pub(super) fn fsrc(f: &[Vec<f64>], s: SrcF, len: usize) -> Lane<'_, f64> {
    match s {
        SrcF::R(r) => Lane::S(&f[r][..len]),
        SrcF::C(c) => Lane::C(c),
    }
}

pub(super) fn isrc(i: &[Vec<i64>], s: SrcI, len: usize) -> Lane<'_, i64> {
    match s {
        SrcI::R(r) => Lane::S(&i[r][..len]),
        SrcI::C(c) => Lane::C(c),
    }
}

#[inline(always)]
pub(super) fn map1(x: &[f64], out: &mut [f64], f: impl Fn(f64) -> f64) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

pub(super) mod lane {
    //! The per-element math is `fusebench_ir::scalar`'s, inlined: the same
    //! functions fold constants when a fusion is built, so both agree bit for bit.
    pub use fusebench_ir::scalar::{
        binary_f64 as binary, binary_i64 as binary_int, ternary_f64 as ternary,
        ternary_i64 as ternary_int, unary_f64 as unary,
    };
}

#[inline(always)]
pub(super) fn map2<T: Copy, U>(a: Lane<'_, T>, b: Lane<'_, T>, out: &mut [U], f: impl Fn(T, T) -> U) {
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
        pub(super) fn unary_f(kind: UnaryOp, dtype: DType, x: &[f64], out: &mut [f64]) {
            match kind {
                $(UnaryOp::$v => with_round!(dtype, R => map1(x, out, |v| R::r(lane::unary(UnaryOp::$v, v)))),)*
            }
        }
        /// Float operands, Bool results (isnan, signbit...).
        pub(super) fn unary_f_to_i(kind: UnaryOp, x: &[f64], out: &mut [i64]) {
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
        pub(super) fn binary_f(kind: BinaryOp, dtype: DType, compute: DType, a: Lane<'_, f64>, b: Lane<'_, f64>, out: &mut [f64]) {
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
        pub(super) fn compare_f(kind: BinaryOp, compute: DType, a: Lane<'_, f64>, b: Lane<'_, f64>, out: &mut [i64]) {
            match kind {
                $(BinaryOp::$v => map2(a, b, out, |x, y| (lane::binary(BinaryOp::$v, x, y, compute) != 0.0) as i64),)*
            }
        }
        pub(super) fn binary_i(kind: BinaryOp, dtype: DType, compute: DType, a: Lane<'_, i64>, b: Lane<'_, i64>, out: &mut [i64]) {
            match kind {
                $(BinaryOp::$v => map2(a, b, out, |x, y| wrap_int(lane::binary_int(BinaryOp::$v, x, y, compute), dtype)),)*
            }
        }
    };
}
fusebench_ir::binary_table!(binary_kernels);

pub(super) fn ternary_f(kind: TernaryOp, dtype: DType, a: Lane<'_, f64>, b: Lane<'_, f64>, c: Lane<'_, f64>, out: &mut [f64]) {
    with_round!(dtype, R => for (k, o) in out.iter_mut().enumerate() {
        *o = R::r(lane::ternary(kind, a.get(k), b.get(k), c.get(k)));
    })
}
