//! The passes a block makes over a row to compute row reductions, shared by
//! the row-wise and inner-persistent schedules: when each reduction starts
//! (once every reduction it reads is complete; mean-based statistics take a
//! second pass for the squared deviations), what each pass adds to its
//! accumulators, and how a finished accumulator becomes held values.

use crate::ctype;
use crate::error::CodegenError;
use crate::ix::Ix;
use crate::lower::{Held, Lowerer};
use crate::persistent::depends_on;
use crate::reduction::{self, Combine, Kind, Reduction};
use crate::view;
use fusebench_ir::{DType, Fusion, Literal, ValueId};

/// The accumulators of one reduction and row (`Passes::declare`).
pub struct Accs(Vec<String>);

impl Accs {
    /// The accumulator of a thread's element number `e` of the row.
    pub fn at(&self, e: usize) -> &str {
        &self.0[e % self.0.len()]
    }
}

pub struct Passes {
    /// The pass in which each reduction starts.
    first: Vec<usize>,
    pub count: usize,
    /// Warps that reduce together when a block holds several rows (0: the
    /// whole block).
    pub group_warps: usize,
}

impl Passes {
    pub fn plan(f: &Fusion, reds: &[Reduction]) -> Result<Passes, CodegenError> {
        let mut first = vec![0usize; reds.len()];
        for i in 0..reds.len() {
            let deps = depends_on(f, reds[i].x, reds);
            if deps.iter().any(|&d| d >= i) {
                return Err(CodegenError::NoFit(
                    "reductions are not in dependency order".into(),
                ));
            }
            first[i] = deps
                .iter()
                .map(|&d| first[d] + reds[d].passes())
                .max()
                .unwrap_or(0);
        }
        let count = (0..reds.len())
            .map(|i| first[i] + reds[i].passes())
            .max()
            .unwrap_or(0);
        Ok(Passes {
            first,
            count,
            group_warps: 0,
        })
    }

    /// Reductions that accumulate during `pass`.
    pub fn active(&self, reds: &[Reduction], pass: usize) -> Vec<usize> {
        (0..reds.len())
            .filter(|&i| {
                self.first[i] == pass || (reds[i].passes() == 2 && self.first[i] + 1 == pass)
            })
            .collect()
    }

    fn combine(r: &Reduction) -> Combine {
        match &r.kind {
            Kind::Plain(c) => c.clone(),
            _ => Combine::Sum,
        }
    }

    /// Declares `n` fresh accumulators for `r` at its identity. A thread
    /// deals its elements among them in turn (`Accs::at`): with one, every
    /// add or maximum waits on the one before (a NaN-propagating maximum is
    /// three dependent instructions), and the block reduction on the chain.
    pub fn declare(lw: &mut Lowerer, f: &Fusion, r: &Reduction, n: usize) -> Accs {
        let acc = r.acc(f);
        let names = (0..n.max(1))
            .map(|_| {
                let a = lw.fresh("a");
                lw.line(&format!(
                    "{} {a} = {};",
                    ctype::reg(acc),
                    reduction::init(&Self::combine(r), acc)
                ));
                a
            })
            .collect();
        Accs(names)
    }

    /// Folds `accs` pairwise into the first and returns its name.
    pub fn fold(lw: &mut Lowerer, f: &Fusion, r: &Reduction, accs: &Accs) -> String {
        let a = &accs.0;
        let mut stride = 1;
        while stride < a.len() {
            for i in (0..a.len()).step_by(2 * stride) {
                if i + stride < a.len() {
                    lw.line(&reduction::step(&Self::combine(r), r.acc(f), &a[i], &a[i + stride]));
                }
            }
            stride *= 2;
        }
        a[0].clone()
    }

    /// Adds the element `x` (lowered, in the input's dtype) to accumulator `a`
    /// of reduction `i` during `pass`; `mean` is the row's mean in a second pass.
    #[allow(clippy::too_many_arguments)] // which reduction and pass, then the C names it combines: one call, no shared bundle
    pub fn step(
        &self,
        f: &Fusion,
        reds: &[Reduction],
        i: usize,
        pass: usize,
        a: &str,
        x: &str,
        mean: Option<&str>,
    ) -> String {
        let r = &reds[i];
        let acc = r.acc(f);
        let xv = r.to_acc(f, x);
        if self.first[i] == pass || matches!(r.kind, Kind::Plain(_)) {
            reduction::step(&Self::combine(r), acc, a, &xv)
        } else {
            let m = mean.expect("the mean pass ran first");
            format!(
                "{{ const {t} dv = {xv} - {m}; {a} += dv * dv; }}",
                t = ctype::reg(acc)
            )
        }
    }

    /// `finish` for each of `folded` (reduction, accumulator, row) of one
    /// pass, in order; with `paired`, Float sums two at a time in one block
    /// reduction (`fb_block_sum2_f`: one pair of barriers for both, the same
    /// additions in the same order as one at a time). A backward LayerNorm's
    /// two row sums, or one sum of two rows taken at once, are such pairs.
    pub fn finish_all(
        &self,
        lw: &mut Lowerer,
        f: &Fusion,
        reds: &[Reduction],
        pass: usize,
        folded: &[(usize, String, String)],
        paired: bool,
    ) -> Vec<Option<String>> {
        let sums: Vec<usize> = (0..folded.len())
            .filter(|&k| paired && Self::combine(&reds[folded[k].0]) == Combine::Sum && reds[folded[k].0].acc(f) == DType::Float)
            .collect();
        let mut reduced = vec![false; folded.len()];
        for two in sums.chunks_exact(2) {
            lw.line(&format!(
                "fb_block_sum2_f({}, {}, reinterpret_cast<float2*>(fb_sd){});",
                folded[two[0]].1,
                folded[two[1]].1,
                self.group()
            ));
            reduced[two[0]] = true;
            reduced[two[1]] = true;
        }
        folded
            .iter()
            .zip(reduced)
            .map(|((i, a, row), done)| self.finish_reduced(lw, f, reds, (*i, pass), a, row, done))
            .collect()
    }

    /// The group-size argument of the block helpers: none for a whole block.
    fn group(&self) -> String {
        match self.group_warps {
            0 => String::new(),
            g => format!(", {g}"),
        }
    }

    /// Reduces accumulator `a` across the block and holds the results for the
    /// row `row` (a C variable). Returns the mean after the first of two passes.
    #[allow(clippy::too_many_arguments)] // which reduction and pass, then the C names it combines: one call, no shared bundle
    pub fn finish(
        &self,
        lw: &mut Lowerer,
        f: &Fusion,
        reds: &[Reduction],
        i: usize,
        pass: usize,
        a: &str,
        row: &str,
    ) -> Option<String> {
        self.finish_reduced(lw, f, reds, (i, pass), a, row, false)
    }

    /// `finish`, with `reduced`: `a` already holds the block's result.
    #[allow(clippy::too_many_arguments)] // as `finish`
    fn finish_reduced(
        &self,
        lw: &mut Lowerer,
        f: &Fusion,
        reds: &[Reduction],
        (i, pass): (usize, usize),
        a: &str,
        row: &str,
        reduced: bool,
    ) -> Option<String> {
        let r = &reds[i];
        let acc = r.acc(f);
        if !reduced {
            lw.line(&format!(
                "{a} = {}({a}, {}{});",
                reduction::block_fn(&Self::combine(r), acc),
                reduction::smem_name(acc),
                self.group()
            ));
        }
        let held_idx = |v: ValueId| {
            view::delinearize(Ix::var(row), f.value(v).shape.as_deref().unwrap_or(&[]))
        };
        let bind = |lw: &mut Lowerer, d: DType, e: String| {
            let name = lw.fresh("h");
            lw.line(&format!("const {} {name} = {e};", ctype::reg(d)));
            name
        };
        let count = r.count(f) as i64;
        let (out, value) = match (&r.kind, self.first[i] == pass) {
            (Kind::Plain(_), _) => (r.outputs[0], a.to_string()),
            (kind, true) => {
                let m = bind(
                    lw,
                    acc,
                    format!("{a} / ({})", ctype::literal(acc, Literal::Int(count))),
                );
                let mean_out = if *kind == Kind::Welford {
                    r.outputs[0]
                } else {
                    r.outputs[1]
                };
                let d = f.value(mean_out).dtype;
                lw.hold(
                    mean_out,
                    Held {
                        expr: ctype::convert(acc, d, &m),
                        index: held_idx(mean_out),
                    },
                );
                return Some(m);
            }
            (Kind::Welford, false) => (r.outputs[1], a.to_string()),
            (Kind::VarMean { correction }, false) => (
                r.outputs[0],
                format!(
                    "{a} / ({})",
                    ctype::literal(acc, Literal::Int((count - correction).max(0)))
                ),
            ),
        };
        let d = f.value(out).dtype;
        let e = bind(lw, d, ctype::convert(acc, d, &value));
        lw.hold(
            out,
            Held {
                expr: e,
                index: held_idx(out),
            },
        );
        None
    }
}
