//! Running a `Program` a tile at a time: over its iteration space, in
//! parallel chunks, into a stored tensor.

use super::*;

impl Program {
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

    pub(super) fn run_steps(&self, len: usize, s: &mut Scratch) {
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
    pub(super) f: Vec<Vec<f64>>,
    pub(super) i: Vec<Vec<i64>>,
    pub(super) segs: Vec<(usize, usize)>,
    pub(super) seg_bases: Vec<i64>,
    pub(super) cf: Vec<f64>,
    pub(super) ci: Vec<i64>,
}

impl Scratch {
    pub(super) fn prepare(&mut self, p: &Program) {
        while self.f.len() < p.n_f {
            self.f.push(vec![0.0; TILE]);
        }
        while self.i.len() < p.n_i {
            self.i.push(vec![0; TILE]);
        }
    }
}
