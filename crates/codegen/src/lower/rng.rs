//! Random ops: each element's value from nvFuser's Philox stream at its
//! linear logical index (prelude `fb_philox`, `fb_rng_*`).

use super::*;

impl<'f> Lowerer<'f> {
    /// A random op's element at `idx`: nvFuser's stream at the element's linear
    /// logical index, whatever thread computes it (prelude's `fb_rng_*`).
    pub(super) fn lower_rng(&mut self, v: ValueId, op: &Op, idx: &[Ix]) -> Result<String, CodegenError> {
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
    pub(super) fn philox_block(&mut self, seed: &str, off: &str, lin: &Ix) -> Option<(String, i64)> {
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
}
