//! Integer index expressions, kept symbolic so that the emitter can fold
//! constants and tell when consecutive lanes touch consecutive addresses.

use std::fmt;
use std::ops::{Add, Mul};

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Ix {
    Const(i64),
    /// A C variable holding an index (loop index, thread index, loaded gather index).
    Var(String),
    Add(Vec<Ix>),
    Mul(Box<Ix>, i64),
    Div(Box<Ix>, i64),
    Mod(Box<Ix>, i64),
}

impl Ix {
    pub fn var(name: impl Into<String>) -> Ix {
        Ix::Var(name.into())
    }

    pub fn c(v: i64) -> Ix {
        Ix::Const(v)
    }

    pub fn as_const(&self) -> Option<i64> {
        match self {
            Ix::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// Floor division by a positive constant, for non-negative indices.
    /// `bound` is an exclusive upper bound of `self` when known, which lets
    /// `x / c` fold to 0 when `x < c`.
    pub fn div(self, c: i64, bound: Option<i64>) -> Ix {
        if c == 1 {
            return self;
        }
        if bound.is_some_and(|b| b <= c) {
            return Ix::Const(0);
        }
        match self {
            Ix::Const(a) => Ix::Const(a / c),
            // (x * a) / c with c | a.
            Ix::Mul(x, a) if a % c == 0 => x.mul(a / c),
            x => Ix::Div(Box::new(x), c),
        }
    }

    /// Remainder by a positive constant, for non-negative indices.
    pub fn rem(self, c: i64, bound: Option<i64>) -> Ix {
        if c == 1 {
            return Ix::Const(0);
        }
        if bound.is_some_and(|b| b <= c) {
            return self;
        }
        match self {
            Ix::Const(a) => Ix::Const(a % c),
            Ix::Mul(_, a) if a % c == 0 => Ix::Const(0),
            x => Ix::Mod(Box::new(x), c),
        }
    }

    /// Whether the expression mentions variable `v`.
    pub fn uses(&self, v: &str) -> bool {
        match self {
            Ix::Const(_) => false,
            Ix::Var(n) => n == v,
            Ix::Add(ts) => ts.iter().any(|t| t.uses(v)),
            Ix::Mul(x, _) | Ix::Div(x, _) | Ix::Mod(x, _) => x.uses(v),
        }
    }

    /// `self` with variable `v` replaced by `by`.
    pub fn subst(&self, v: &str, by: &Ix) -> Ix {
        match self {
            Ix::Var(n) if n == v => by.clone(),
            Ix::Const(_) | Ix::Var(_) => self.clone(),
            Ix::Add(ts) => ts
                .iter()
                .fold(Ix::Const(0), |acc, t| acc.add(t.subst(v, by))),
            Ix::Mul(x, a) => x.subst(v, by).mul(*a),
            Ix::Div(x, c) => x.subst(v, by).div(*c, None),
            Ix::Mod(x, c) => x.subst(v, by).rem(*c, None),
        }
    }

    /// Splits `self` into `coef * v + rest` when `v` appears only linearly.
    pub fn linear_in(&self, v: &str) -> Option<(i64, Ix)> {
        match self {
            Ix::Var(n) if n == v => Some((1, Ix::Const(0))),
            x if !x.uses(v) => Some((0, x.clone())),
            Ix::Mul(x, a) => x.linear_in(v).map(|(c, r)| (c * a, r.mul(*a))),
            Ix::Add(ts) => {
                let mut coef = 0;
                let mut rest = Ix::Const(0);
                for t in ts {
                    let (c, r) = t.linear_in(v)?;
                    coef += c;
                    rest = rest.add(r);
                }
                Some((coef, rest))
            }
            _ => None,
        }
    }

    /// Conservatively: is the value always a multiple of `m`, given that each
    /// variable in `multiples` is a multiple of `m`?
    pub fn multiple_of(&self, m: i64, multiples: &[&str]) -> bool {
        match self {
            Ix::Const(c) => c % m == 0,
            Ix::Var(n) => multiples.contains(&n.as_str()),
            Ix::Add(ts) => ts.iter().all(|t| t.multiple_of(m, multiples)),
            Ix::Mul(x, a) => a % m == 0 || x.multiple_of(m, multiples),
            // x % c keeps the factors x and c share.
            Ix::Mod(x, c) => c % m == 0 && x.multiple_of(m, multiples),
            Ix::Div(..) => false,
        }
    }

    /// The non-constant terms and the constant of a sum.
    pub fn split_const(&self) -> (Ix, i64) {
        match self {
            Ix::Const(c) => (Ix::Const(0), *c),
            Ix::Add(ts) => {
                let mut k = 0;
                let mut rest = Ix::Const(0);
                for t in ts {
                    match t {
                        Ix::Const(c) => k += c,
                        t => rest = rest.add(t.clone()),
                    }
                }
                (rest, k)
            }
            x => (x.clone(), 0),
        }
    }

    /// Vector lanes: with `v` a multiple of `w` and lane `k < w` at index `v + k`,
    /// moves the lane's constant out of every `%` and `/` by a multiple of `w`:
    /// `(v + k) % c = v % c + k` and `(v + k) / c = v / c`. Lanes then share
    /// every term but the constant, so the compiler computes the index once
    /// and the emitter sees which lanes touch consecutive elements.
    pub fn pull_lanes(&self, v: &str, w: i64) -> Ix {
        match self {
            Ix::Const(_) | Ix::Var(_) => self.clone(),
            Ix::Add(ts) => ts
                .iter()
                .fold(Ix::Const(0), |acc, t| acc.add(t.pull_lanes(v, w))),
            Ix::Mul(x, a) => x.pull_lanes(v, w).mul(*a),
            Ix::Mod(x, c) | Ix::Div(x, c) => {
                let x = x.pull_lanes(v, w);
                let is_mod = matches!(self, Ix::Mod(..));
                let (s, k) = x.split_const();
                if c % w != 0 || !s.uses(v) || !s.multiple_of(w, &[v]) {
                    return if is_mod {
                        x.rem(*c, None)
                    } else {
                        x.div(*c, None)
                    };
                }
                // Indices are non-negative, so s + q is too: it is a multiple of w above -w.
                let q = k.div_euclid(w) * w;
                let base = s.add(Ix::c(q));
                if is_mod {
                    base.rem(*c, None).add(Ix::c(k - q))
                } else {
                    base.div(*c, None)
                }
            }
        }
    }

    /// How much the index moves from one lane to the next (see `pull_lanes`),
    /// when every lane's move is the same; `None` when it is not known.
    pub fn lane_step(&self, v: &str, w: i64) -> Option<i64> {
        match self {
            Ix::Const(_) => Some(0),
            Ix::Var(n) => Some(i64::from(n == v)),
            Ix::Add(ts) => ts.iter().map(|t| t.lane_step(v, w)).sum(),
            Ix::Mul(x, a) => x.lane_step(v, w).map(|d| d * a),
            Ix::Mod(x, c) | Ix::Div(x, c) => match x.lane_step(v, w)? {
                0 => Some(0),
                1 => {
                    let (s, _) = x.pull_lanes(v, w).split_const();
                    (c % w == 0 && s.multiple_of(w, &[v]))
                        .then_some(i64::from(matches!(self, Ix::Mod(..))))
                }
                _ => None,
            },
        }
    }
}

impl Ix {
    /// A form in which two ways of writing one index compare equal, for
    /// non-negative indices: `(x / a) / b` is `x / (a * b)`, and
    /// `(x % n) * k + (x / n) * (n * k)` is `x * k` (a reshape's index split
    /// and joined again). Only compared, never emitted.
    pub fn canonical(&self) -> Ix {
        match self {
            Ix::Const(_) | Ix::Var(_) => self.clone(),
            Ix::Mul(x, a) => x.canonical().mul(*a),
            Ix::Mod(x, c) => x.canonical().rem(*c, None),
            Ix::Div(x, c) => match x.canonical() {
                Ix::Div(y, a) => y.div(a * c, None),
                y => y.div(*c, None),
            },
            Ix::Add(ts) => {
                let mut terms: Vec<Ix> = ts.iter().map(Ix::canonical).collect();
                while let Some((i, j, joined)) = split_pair(&terms) {
                    let (hi, lo) = (i.max(j), i.min(j));
                    terms.remove(hi);
                    terms.remove(lo);
                    terms.push(joined);
                    terms = terms.into_iter().fold(Ix::Const(0), Ix::add).into_terms();
                }
                // Terms in one order, so that sums of the same terms compare equal.
                terms.sort_by_cached_key(|t| format!("{t:?}"));
                terms.into_iter().fold(Ix::Const(0), Ix::add)
            }
        }
    }

    fn into_terms(self) -> Vec<Ix> {
        match self {
            Ix::Add(ts) => ts,
            t => vec![t],
        }
    }

    /// `(x, k)` of a term `(x % n) * k` (k = 1 without the product) with its `n`.
    fn as_rem_term(&self) -> Option<(&Ix, i64, i64)> {
        match self {
            Ix::Mod(x, n) => Some((x, *n, 1)),
            Ix::Mul(m, k) => match &**m {
                Ix::Mod(x, n) => Some((x, *n, *k)),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Two canonical terms `(x % n) * k` and `(x / n) * (n * k)` of one sum, with
/// what they add up to, `x * k`.
fn split_pair(terms: &[Ix]) -> Option<(usize, usize, Ix)> {
    for (i, t) in terms.iter().enumerate() {
        let Some((x, n, k)) = t.as_rem_term() else { continue };
        let want = Ix::Div(Box::new(x.clone()), n).canonical().mul(n * k);
        if let Some(j) = terms.iter().position(|u| *u == want) {
            return Some((i, j, x.clone().mul(k)));
        }
    }
    None
}

/// A sum of index expressions, constants folded and nested sums flattened.
impl Add for Ix {
    type Output = Ix;

    fn add(self, other: Ix) -> Ix {
        let mut terms = Vec::new();
        let mut k = 0i64;
        for t in [self, other] {
            match t {
                Ix::Add(ts) => {
                    for t in ts {
                        match t {
                            Ix::Const(c) => k += c,
                            t => terms.push(t),
                        }
                    }
                }
                Ix::Const(c) => k += c,
                t => terms.push(t),
            }
        }
        if k != 0 {
            terms.push(Ix::Const(k));
        }
        match terms.len() {
            0 => Ix::Const(0),
            1 => terms.pop().unwrap(),
            _ => Ix::Add(terms),
        }
    }
}

/// An index expression times a constant, folded where it can be.
impl Mul<i64> for Ix {
    type Output = Ix;

    fn mul(self, c: i64) -> Ix {
        match (self, c) {
            (_, 0) => Ix::Const(0),
            (x, 1) => x,
            (Ix::Const(a), c) => Ix::Const(a * c),
            (Ix::Mul(x, a), c) => Ix::Mul(x, a * c),
            (Ix::Add(ts), c) => ts.into_iter().map(|t| t.mul(c)).fold(Ix::Const(0), Ix::add),
            (x, c) => Ix::Mul(Box::new(x), c),
        }
    }
}

impl fmt::Display for Ix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ix::Const(c) => write!(f, "{c}"),
            Ix::Var(v) => f.write_str(v),
            Ix::Add(ts) => {
                f.write_str("(")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" + ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
            Ix::Mul(x, c) => write!(f, "({x} * {c})"),
            Ix::Div(x, c) => write!(f, "({x} / {c})"),
            Ix::Mod(x, c) => write!(f, "({x} % {c})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_splits() {
        let i = Ix::var("i");
        let e = i.clone().mul(4).add(Ix::c(3)).add(Ix::c(-3));
        assert_eq!(e.to_string(), "(i * 4)");
        let (c, r) = e.add(Ix::var("j").mul(8)).linear_in("i").unwrap();
        assert_eq!(c, 4);
        assert!(r.multiple_of(8, &[]));
        assert_eq!(Ix::var("i").mul(6).div(3, None).to_string(), "(i * 2)");
        assert_eq!(Ix::var("i").div(64, Some(64)), Ix::c(0));
        assert_eq!(Ix::var("i").rem(64, Some(64)), Ix::var("i"));
    }

    #[test]
    fn a_split_index_joined_again_is_the_index() {
        let o = Ix::var("o");
        let once = o.clone().rem(3, None).add(o.clone().div(3, None).mul(3));
        assert_eq!(once.to_string(), "((o % 3) + ((o / 3) * 3))");
        assert_eq!(once.canonical(), o);
        assert_eq!(o.clone().add(Ix::c(1)).canonical(), Ix::c(1).add(o.clone()).canonical());
        // Split in three and joined: o % 3 + ((o / 3) % 2) * 3 + (o / 6) * 6.
        let q = o.clone().div(3, None);
        let twice = o
            .clone()
            .rem(3, None)
            .add(q.clone().rem(2, None).mul(3))
            .add(q.div(2, None).mul(6))
            .add(Ix::var("r").mul(12));
        assert_eq!(twice.canonical(), Ix::var("r").mul(12).add(o.clone()).canonical());
        // Not a split: another variable's quotient, or another divisor.
        let other = o.clone().rem(3, None).add(Ix::var("p").div(3, None).mul(3));
        assert_eq!(other.canonical().to_string(), "((o % 3) + ((p / 3) * 3))");
        let off = o.clone().rem(3, None).add(o.clone().div(3, None).mul(6));
        assert_eq!(off.canonical().to_string(), "((o % 3) + ((o / 3) * 6))");
    }

    #[test]
    fn lanes_leave_head_splits() {
        // Lane 3 of 8 at column jj + 3, split into heads of 128.
        let j = Ix::var("jj").add(Ix::c(3));
        let off = j
            .clone()
            .div(128, None)
            .mul(4096)
            .add(j.clone().rem(128, None))
            .add(Ix::c(-64));
        assert_eq!(off.lane_step("jj", 8), Some(1));
        let p = off.pull_lanes("jj", 8);
        assert_eq!(p.to_string(), "(((jj / 128) * 4096) + (jj % 128) + -61)");
        let (s, k) = p.split_const();
        assert!(s.multiple_of(8, &["jj"]));
        assert_eq!(k.rem_euclid(8), 3);
        // A head of 12 columns is not a multiple of the width: lanes may cross it.
        assert_eq!(j.clone().rem(12, None).lane_step("jj", 8), None);
        // Every lane reads the same element.
        assert_eq!(j.clone().div(128, None).lane_step("jj", 8), Some(0));
        // A transposed read: lanes 2048 elements apart.
        assert_eq!(j.mul(2048).lane_step("jj", 8), Some(2048));
    }
}
