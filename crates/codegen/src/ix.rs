//! Integer index expressions, kept symbolic so that the emitter can fold
//! constants and tell when consecutive lanes touch consecutive addresses.

use std::fmt;

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

    pub fn add(self, other: Ix) -> Ix {
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

    pub fn mul(self, c: i64) -> Ix {
        match (self, c) {
            (_, 0) => Ix::Const(0),
            (x, 1) => x,
            (Ix::Const(a), c) => Ix::Const(a * c),
            (Ix::Mul(x, a), c) => Ix::Mul(x, a * c),
            (Ix::Add(ts), c) => ts.into_iter().map(|t| t.mul(c)).fold(Ix::Const(0), Ix::add),
            (x, c) => Ix::Mul(Box::new(x), c),
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
            Ix::Div(..) | Ix::Mod(..) => false,
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
}
