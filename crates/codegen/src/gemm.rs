//! Fusions with matrix products (`matmul`, `linear`). Each product runs in
//! the GPU's BLAS library (cuBLASLt, called by the engine) and everything else
//! in this crate's kernels, in stages: stage `s` computes the values that
//! depend on products through at most `s` of them, and the products of level
//! `s + 1` run between stage `s` and stage `s + 1`.
//!
//! Each stage is planned as a fusion of its own whose inputs are the fusion's
//! inputs and the products' results it reads; what it needs of an earlier
//! stage it computes again from those rather than reading a stored value
//! (what lies between products is elementwise work and norms, cheap beside a
//! product's traffic). The stages' plans are joined into one plan: one module
//! with each stage's kernel names made its own, buffers renumbered.
//!
//! A product reads each operand where it lies: an input in its own layout, a
//! view of one (a transposed weight, a sliced row), another product's result,
//! or an output of an earlier stage, hidden where the fusion does not return
//! it. An operand the library cannot read as laid out (no unit stride, batch
//! dims that do not collapse to one stride) is copied densely by its stage.

use crate::plan::{KernelArg, Module, Operand, OutputPlan, OutputSource, Plan, Product};
use crate::{CodegenError, Device, Epilogue};
use fusebench_ir::{Fusion, GemmOp, Node, Op, TensorDecl, ValueDef, ValueId};
use std::collections::{BTreeSet, HashMap};

/// Whether `f` has a matrix product (planned by [`plan`]).
pub fn present(f: &Fusion) -> bool {
    f.nodes.iter().any(|n| is_product(&n.op))
}

/// Ops run between the stages' kernels: the library's products (`scaled_mm`
/// among them, its FP8 operands read by cuBLASLt), and flash attention's own
/// kernel (crate::attention), placed the same way.
fn is_product(op: &Op) -> bool {
    matches!(op, Op::Matmul { .. } | Op::Linear { .. } | Op::Gemm(GemmOp::ScaledMm { .. })) || own_kernel(op)
}

/// Ops placed like products whose kernels are ours: flash attention
/// (crate::attention) and grouped products (crate::grouped_mm).
fn own_kernel(op: &Op) -> bool {
    matches!(op, Op::Gemm(GemmOp::SdpfaFwd { .. } | GemmOp::SdpfaBwd { .. } | GemmOp::GroupedMm { .. }))
}

/// How many products each value depends on, through its longest chain.
fn levels(f: &Fusion) -> Vec<usize> {
    let mut level = vec![0usize; f.values.len()];
    for n in &f.nodes {
        let l = n.op.operands().iter().map(|v| level[v.index()]).max().unwrap_or(0) + usize::from(is_product(&n.op));
        for &o in &n.outputs {
            level[o.index()] = l;
        }
    }
    level
}

/// The most products one `matmul` is run as, where its batch dims do not
/// collapse to one stride (`[3, 1] x [5]` batches: 3 products of 5).
const MAX_RUNS: usize = 1024;

fn unsupported(msg: String) -> CodegenError {
    CodegenError::Unsupported(msg)
}

/// Plans a fusion with products: the stages' kernels and the products between them.
pub(crate) fn plan(f: &Fusion, layouts: &[Option<(Vec<i64>, i64)>], dev: Device) -> Result<Plan, CodegenError> {
    crate::refuse::check_but(f, is_product)?;
    if !f.aliases.is_empty() {
        return Err(unsupported(
            "outputs that update an input in place (`alias_input`) in a fusion with matrix products".into(),
        ));
    }
    // FP8 products cuBLASLt cannot read as laid out run in Float instead
    // (crate::rewrite::scaled_mm_for_library); each is found by the joiner,
    // which names its result, and the plan made again.
    let mut upcast = BTreeSet::new();
    'upcast: loop {
        let (split, scaled) = crate::rewrite::scaled_mm_for_library(f, &upcast)?;
        // Consumers the library's epilogue computes: the product writes their
        // value, and their ops are left unread.
        let (g, epilogues) = absorb(&split, dev);
        let f = &g;
        // Operands found unreadable as laid out are copied by their stage, and
        // the plan made again; each value is copied at most once.
        let mut copies = BTreeSet::new();
        loop {
            match Joiner::new(f, layouts, dev, &copies, &epilogues, &scaled.unscaled).run()? {
                Ok(p) => return Ok(p),
                Err(v) => match scaled.origin.get(&v) {
                    Some(&r) if upcast.insert(r) => continue 'upcast,
                    Some(_) => return Err(unsupported(format!("{} is run in Float and still unreadable", f.value(v).name))),
                    None if copies.insert(v) => {}
                    None => {
                        return Err(unsupported(format!(
                            "the library cannot read {} even written densely",
                            f.value(v).name
                        )))
                    }
                },
            }
        }
    }
}

/// `f` with each product whose consumer is an epilogue the library applies
/// writing that consumer's value (read where it was), and the epilogue of
/// each such product node.
fn absorb(f: &Fusion, dev: Device) -> (Fusion, HashMap<usize, (Epilogue, f64)>) {
    let mut g = f.clone();
    let mut epilogues = HashMap::new();
    if !dev.product_epilogue {
        return (g, epilogues);
    }
    for i in 0..f.nodes.len() {
        // (`find` takes 16-bit and Float products only; FP8 ones are planned plain.)
        if !matches!(f.nodes[i].op, Op::Matmul { .. } | Op::Linear { .. }) {
            continue;
        }
        let r = f.nodes[i].outputs[0];
        let Some(found) = crate::epilogue_fn::find(&g, r) else { continue };
        let (e, region) = (found.value, &found.nodes);
        for (j, n) in g.nodes.iter_mut().enumerate() {
            if !region.contains(&j) {
                for o in n.op.operands_mut() {
                    if *o == e {
                        *o = r;
                    }
                }
            }
        }
        for o in g.outputs.iter_mut().filter(|o| **o == e) {
            *o = r;
        }
        epilogues.insert(i, (found.epilogue, found.alpha));
    }
    (g, epilogues)
}

/// Where a value lies for a product: buffer, logical strides, element offset.
pub(crate) type Place = (KernelArg, Vec<i64>, i64);

struct Joiner<'a> {
    f: &'a Fusion,
    layouts: &'a [Option<(Vec<i64>, i64)>],
    dev: Device,
    copies: &'a BTreeSet<ValueId>,
    epilogues: &'a HashMap<usize, (Epilogue, f64)>,
    /// `scaled_mm` results planned as the plain product (crate::rewrite).
    unscaled: &'a BTreeSet<ValueId>,
    level: Vec<usize>,
    results: BTreeSet<ValueId>,
    out: Plan,
    text: String,
    outputs: Vec<Option<OutputPlan>>,
    hidden: Vec<OutputPlan>,
    at: HashMap<ValueId, Place>,
    /// Each output's layout of its own, where it has one (`layout::orders`).
    orders: Vec<Option<Vec<usize>>>,
}

impl<'a> Joiner<'a> {
    fn new(
        f: &'a Fusion,
        layouts: &'a [Option<(Vec<i64>, i64)>],
        dev: Device,
        copies: &'a BTreeSet<ValueId>,
        epilogues: &'a HashMap<usize, (Epilogue, f64)>,
        unscaled: &'a BTreeSet<ValueId>,
    ) -> Self {
        let results = f
            .nodes
            .iter()
            .filter(|n| is_product(&n.op))
            .flat_map(|n| n.outputs.iter().copied())
            .collect();
        Joiner {
            f,
            layouts,
            dev,
            copies,
            epilogues,
            unscaled,
            level: levels(f),
            results,
            out: Plan {
                source: String::new(),
                kernels: vec![],
                temps: vec![],
                outputs: vec![],
                alias_writes: vec![],
                hidden_outputs: 0,
                products: vec![],
                modules: vec![],
                pieces: vec![],
                attention: vec![],
            },
            text: String::new(),
            outputs: vec![None; f.outputs.len()],
            hidden: vec![],
            at: HashMap::new(),
            orders: crate::layout::orders(f),
        }
    }

    /// The joined plan, or the operand to copy before trying again.
    fn run(mut self) -> Result<Result<Plan, ValueId>, CodegenError> {
        let top = self.results.iter().map(|v| self.level[v.index()]).max().unwrap_or(0);
        for s in 0..=top {
            if s > 0 {
                if let Err(v) = self.products(s)? {
                    return Ok(Err(v));
                }
            }
            self.stage(s)?;
        }
        let n = self.f.outputs.len();
        let mut outputs: Vec<OutputPlan> = Vec::with_capacity(n + self.hidden.len());
        for (p, o) in self.outputs.into_iter().enumerate() {
            outputs.push(o.ok_or_else(|| unsupported(format!("output {p} was planned by no stage")))?);
        }
        self.out.hidden_outputs = self.hidden.len();
        outputs.extend(self.hidden);
        self.out.outputs = outputs;
        self.out.source = crate::prelude::module(&self.text);
        Ok(Ok(self.out))
    }

    fn hidden_output(&mut self, o: OutputPlan) -> KernelArg {
        self.hidden.push(o);
        KernelArg::Output(self.f.outputs.len() + self.hidden.len() - 1)
    }

    /// Plans stage `s`: the fusion's outputs of its level that no product
    /// writes, and the operands of later products at its level.
    fn stage(&mut self, s: usize) -> Result<(), CodegenError> {
        let f = self.f;
        let outs: Vec<usize> = (0..f.outputs.len())
            .filter(|&p| self.level[f.outputs[p].index()] == s && !self.results.contains(&f.outputs[p]))
            .collect();
        let mut exports: Vec<ValueId> = vec![];
        for n in f.nodes.iter().filter(|n| is_product(&n.op)) {
            for u in n.op.operands() {
                // (Attention's scalars are constants or inputs: no stage computes them.)
                let tensor = f.value(u).is_tensor();
                if tensor && self.level[u.index()] == s && !self.results.contains(&u) && !exports.contains(&u) {
                    exports.push(u);
                }
            }
        }
        if outs.is_empty() && exports.is_empty() {
            return Ok(());
        }
        let roots: Vec<ValueId> = outs.iter().map(|&p| f.outputs[p]).chain(exports.iter().copied()).collect();
        let (mut sub, sub_inputs) = subfusion(f, &roots, &self.results, self.copies);
        for l in &f.output_layouts {
            if let Some(q) = outs.iter().position(|&p| p == l.output) {
                sub.output_layouts.push(fusebench_ir::OutputLayout {
                    output: q,
                    stride_order: l.stride_order.clone(),
                });
            }
        }
        let sub_layouts: Vec<Option<(Vec<i64>, i64)>> = sub_inputs
            .iter()
            .map(|v| f.inputs.iter().position(|i| i == v).and_then(|i| self.layouts[i].clone()))
            .collect();
        let written: Vec<bool> = outs
            .iter()
            .map(|_| false)
            .chain(exports.iter().map(|u| self.copies.contains(u)))
            .collect();
        let p = crate::segment::plan_owning(&sub, &sub_layouts, self.dev, &written)?;
        let map_in: Vec<KernelArg> = sub_inputs
            .iter()
            .map(|v| match f.inputs.iter().position(|i| i == v) {
                Some(i) if f.value(*v).is_tensor() => KernelArg::Input(i),
                Some(i) => KernelArg::Scalar(i),
                None => self.at[v].0,
            })
            .collect();
        // Where each of the stage's outputs goes: the fusion's own, or a
        // hidden output of the plan where the stage writes it (views: none).
        let mut map_out: Vec<Option<KernelArg>> = vec![None; p.outputs.len()];
        for (q, o) in p.outputs.iter().enumerate() {
            if q < outs.len() {
                map_out[q] = Some(KernelArg::Output(outs[q]));
            } else if matches!(o.source, OutputSource::Written) {
                map_out[q] = Some(self.hidden_output(o.clone()));
            }
        }
        let source = |src: &OutputSource| -> Result<OutputSource, CodegenError> {
            Ok(match src {
                OutputSource::Written => OutputSource::Written,
                OutputSource::InputView { input, strides, offset } => view_of(map_in[*input], strides, *offset)?,
                OutputSource::OutputView { output, strides, offset } => match map_out[*output] {
                    Some(arg) => view_of(arg, strides, *offset)?,
                    None => return Err(unsupported("a view of a view in a stage of matrix products".into())),
                },
            })
        };
        for (q, o) in p.outputs.iter().enumerate() {
            let mut o2 = o.clone();
            o2.source = source(&o.source)?;
            if q < outs.len() {
                self.outputs[outs[q]] = Some(o2);
            } else if let Some(KernelArg::Output(w)) = map_out[q] {
                self.hidden[w - f.outputs.len()] = o2;
            }
        }
        for (e, &u) in exports.iter().enumerate() {
            let q = outs.len() + e;
            let o = &p.outputs[q];
            let place = match &o.source {
                OutputSource::Written => (
                    map_out[q].expect("written outputs have a buffer"),
                    o.strides.clone().unwrap_or_else(|| crate::alias::dense(&o.shape)),
                    0,
                ),
                OutputSource::InputView { input, strides, offset } => (map_in[*input], strides.clone(), *offset),
                OutputSource::OutputView { output, strides, offset } => (
                    map_out[*output].ok_or_else(|| unsupported("a product's operand viewing a view".into()))?,
                    strides.clone(),
                    *offset,
                ),
            };
            self.at.insert(u, place);
        }
        // The stage's kernels, renamed after the first stage so that names
        // stay unique in the one module, reading and writing the joined
        // plan's buffers.
        let temp_base = self.out.temps.len();
        let mut text = crate::prelude::kernels_of(&p.source).to_string();
        let renames: Vec<(String, String)> = if s == 0 {
            vec![]
        } else {
            p.kernels
                .iter()
                .map(|k| (k.name.clone(), format!("fb_s{s}{}", k.name.trim_start_matches("fb"))))
                .collect()
        };
        if !renames.is_empty() {
            text = rename(&text, &renames);
        }
        self.text.push_str(&text);
        for mut m in p.pieces {
            if !renames.is_empty() {
                m.source = rename(&m.source, &renames);
                m.kernels = m.kernels.iter().map(|k| rename(k, &renames)).collect();
            }
            self.out.pieces.push(m);
        }
        for mut k in p.kernels {
            if let Some((_, to)) = renames.iter().find(|(from, _)| *from == k.name) {
                k.name = to.clone();
            }
            for a in &mut k.args {
                *a = match *a {
                    KernelArg::Input(j) | KernelArg::Scalar(j) => map_in[j],
                    KernelArg::Output(q) => map_out[q].expect("kernels write outputs with buffers"),
                    KernelArg::Temp(t) => KernelArg::Temp(t + temp_base),
                };
            }
            self.out.kernels.push(k);
        }
        self.out.temps.extend(p.temps);
        Ok(())
    }

    /// Places the products of level `s` after the kernels planned so far.
    fn products(&mut self, s: usize) -> Result<Result<(), ValueId>, CodegenError> {
        let f = self.f;
        for (i, n) in f.nodes.iter().enumerate().filter(|(_, n)| is_product(&n.op)) {
            if self.level[n.outputs[0].index()] != s {
                continue;
            }
            if own_kernel(&n.op) {
                if let Err(v) = self.own_kernels(i, n)? {
                    return Ok(Err(v));
                }
                continue;
            }
            let r = n.outputs[0];
            let arg = self.result_buffer(r)?;
            let (epilogue, alpha) = self.epilogues.get(&i).copied().unwrap_or((Epilogue::None, 1.0));
            match self.product(n, arg)? {
                Ok(ps) => self.out.products.extend(ps.into_iter().map(|p| Product { epilogue, alpha, ..p })),
                Err(v) => return Ok(Err(v)),
            }
        }
        Ok(Ok(()))
    }

    /// The buffer a product or attention writes its result `r` into,
    /// dense row-major: the fusion's output (others returning `r` view it),
    /// or a hidden output of the plan. Recorded as where `r` lies.
    fn result_buffer(&mut self, r: ValueId) -> Result<KernelArg, CodegenError> {
        let f = self.f;
        let val = f.value(r);
        let shape = val.shape.clone().unwrap_or_default();
        let dense = OutputPlan {
            dtype: val.dtype,
            shape: shape.clone(),
            source: OutputSource::Written,
            strides: None,
        };
        let positions: Vec<usize> = (0..f.outputs.len()).filter(|&p| f.outputs[p] == r).collect();
        if let Some(&p) = positions.iter().find(|&&p| self.orders[p].is_some()) {
            return Err(unsupported(format!(
                "output {p} ({}), a matrix product's or attention's result, in a layout other than row-major",
                val.name
            )));
        }
        let arg = match positions.first() {
            Some(&p) => {
                self.outputs[p] = Some(dense.clone());
                for &q in &positions[1..] {
                    self.outputs[q] = Some(OutputPlan {
                        source: OutputSource::OutputView {
                            output: p,
                            strides: crate::alias::dense(&shape),
                            offset: 0,
                        },
                        ..dense.clone()
                    });
                }
                KernelArg::Output(p)
            }
            None => self.hidden_output(dense),
        };
        self.at.insert(r, (arg, crate::alias::dense(&shape), 0));
        Ok(arg)
    }

    /// Places node `i`, flash attention or a grouped product: its kernels
    /// after those planned so far, or a call of cuDNN's attention where the
    /// device plans one and cuDNN reads the operands as they lie; its results
    /// in buffers (the attention forward's philox seed and offset only where
    /// something reads them).
    fn own_kernels(&mut self, i: usize, n: &Node) -> Result<Result<(), ValueId>, CodegenError> {
        let f = self.f;
        let backward = matches!(n.op, Op::Gemm(GemmOp::SdpfaBwd { .. }));
        let mut outs = vec![];
        for (j, &r) in n.outputs.iter().enumerate() {
            let read = f.outputs.contains(&r) || f.nodes.iter().any(|m| m.op.operands().contains(&r));
            outs.push(if backward || j < 2 || read { Some(self.result_buffer(r)?) } else { None });
        }
        let place = |v: ValueId| self.place(v);
        if let Some(lib) = crate::attention::library(f, n, &place, &outs, self.out.temps.len(), self.dev)? {
            let call = crate::plan::LibraryAttention {
                before: self.out.kernels.len(),
                after_products: self.out.products.len(),
                ..lib.call
            };
            self.out.attention.push(call);
            self.out.temps.extend(lib.temps);
            return Ok(Ok(()));
        }
        let placed = if matches!(n.op, Op::Gemm(GemmOp::GroupedMm { .. })) {
            crate::grouped_mm::kernel(f, n, i, &place, outs[0].expect("a grouped product's result has a buffer"), self.dev)?
        } else if backward {
            let outs: Vec<KernelArg> = outs.into_iter().flatten().collect();
            crate::attention::backward(f, n, &place, &outs, self.out.temps.len())?
        } else {
            crate::attention::kernel(f, n, &place, &outs, self.dev)?
        };
        match placed {
            Ok(p) => {
                if !p.text.is_empty() {
                    self.text.push('\n');
                    self.text.push_str(&p.text);
                    if let [k] = &p.kernels[..] {
                        self.out.pieces.push(Module::alone(&k.name, &p.text));
                    }
                }
                // An attention met before in the fusion is the same kernel:
                // one unit. Another source under a name already taken (two
                // wrappers' hashes alike) would run the wrong kernel.
                for m in p.modules {
                    if self.out.modules.contains(&m) {
                        continue;
                    }
                    if let Some(k) = m.kernels.iter().find(|k| self.out.modules.iter().any(|o| o.kernels.contains(k))) {
                        return Err(unsupported(format!("two different kernels named {k} in one fusion")));
                    }
                    self.out.modules.push(m);
                }
                self.out.kernels.extend(p.kernels);
                self.out.temps.extend(p.temp);
                Ok(Ok(()))
            }
            Err(v) => Ok(Err(v)),
        }
    }

    /// Where `v`, an operand of a product or attention, lies.
    fn place(&self, v: ValueId) -> Result<Place, CodegenError> {
        self.at
            .get(&v)
            .cloned()
            .ok_or_else(|| unsupported(format!("{} has no buffer", self.f.value(v).name)))
    }

    fn shape(&self, v: ValueId) -> Vec<usize> {
        self.f.value(v).shape.clone().unwrap_or_default()
    }

    /// The product node `n` writing `out` (one product per index of batch
    /// dims that do not collapse), or the operand to copy first (a
    /// `scaled_mm` the library cannot read names its own result: it is run
    /// in Float).
    fn product(&self, n: &Node, out: KernelArg) -> Result<Result<Vec<Product>, ValueId>, CodegenError> {
        let f = self.f;
        let name = |v: ValueId| f.value(v).name.clone();
        let r = n.outputs[0];
        let dtype = f.value(r).dtype;
        let place = |v: ValueId| self.place(v);
        match n.op {
            Op::Matmul { a, b } => {
                let (sa, sb) = (self.shape(a), self.shape(b));
                let ms = fusebench_ir::gemm::matmul_shape(&sa, &sb).map_err(|e| unsupported(e.to_string()))?;
                let (pa, pb) = (place(a)?, place(b)?);
                let (m, k, nn) = (ms.m, ms.k, ms.n);
                let (ra, ca, ba) = matrix(&pa.1, &sa, &ms.batch, true, k);
                let (rb, cb, bb) = matrix(&pb.1, &sb, &ms.batch, false, k);
                let batch = &ms.batch;
                // D is dense: each batch dim steps the ones after it times m x n.
                let mut out_st = vec![0i64; batch.len()];
                let mut acc = (m * nn) as i64;
                for i in (0..batch.len()).rev() {
                    out_st[i] = acc;
                    acc *= batch[i] as i64;
                }
                let steps = [(m * k) as i64, (k * nn) as i64, (m * nn) as i64];
                let (outer, inner) = batch_runs(batch, [&ba, &bb, &out_st], steps);
                let runs: usize = outer.iter().map(|&i| batch[i]).product();
                if runs > MAX_RUNS {
                    return Err(unsupported(format!(
                        "matmul {}: {runs} products for batch dims {batch:?} that do not collapse to one stride in any order (at most {MAX_RUNS})",
                        name(r)
                    )));
                }
                let inner_ext: Vec<usize> = inner.iter().map(|&i| batch[i]).collect();
                let bt_all: usize = inner_ext.iter().product();
                let stride = |st: &[i64], step: i64| {
                    let st: Vec<i64> = inner.iter().map(|&i| st[i]).collect();
                    if bt_all <= 1 { 0 } else { collapse(&inner_ext, &st, step).unwrap_or(0) }
                };
                let (sa_b, sb_b, sd_b) = (stride(&ba, steps[0]), stride(&bb, steps[1]), stride(&out_st, steps[2]));
                // 0: D's batches m x n apart, as the library lays them by default.
                let out_batch_stride = if bt_all <= 1 || sd_b == steps[2] { 0 } else { sd_b };
                let mut products = Vec::with_capacity(runs);
                for run in 0..runs {
                    // This run's index in the outer dims, the last fastest.
                    let (mut rest, mut off) = (run, [pa.2, pb.2, 0]);
                    for &i in outer.iter().rev() {
                        let idx = (rest % batch[i]) as i64;
                        rest /= batch[i];
                        off[0] += idx * ba[i];
                        off[1] += idx * bb[i];
                        off[2] += idx * out_st[i];
                    }
                    let mut oa = Operand { arg: pa.0, offset: off[0], strides: [sa_b, ra, ca] };
                    let ob = Operand { arg: pb.0, offset: off[1], strides: [sb_b, rb, cb] };
                    let (mut bt, mut rows) = (bt_all, m);
                    // A batch of A's rows over one B is one taller product
                    // (where D's batches follow one another too).
                    if bt > 1 && ob.strides[0] == 0 && oa.strides[0] == rows as i64 * oa.strides[1] && out_batch_stride == 0 {
                        rows *= bt;
                        bt = 1;
                        oa.strides[0] = 0;
                    }
                    if !readable(rows, k, &oa) {
                        return Ok(Err(a));
                    }
                    if !readable(k, nn, &ob) {
                        return Ok(Err(b));
                    }
                    products.push(Product {
                        summary: format!("matmul {} = {} x {}", name(r), name(a), name(b)),
                        dtype,
                        batch: bt,
                        m: rows,
                        n: nn,
                        k,
                        a: oa,
                        b: ob,
                        bias: None,
                        out,
                        out_offset: off[2],
                        out_batch_stride,
                        epilogue: Epilogue::None,
                        alpha: 1.0,
                        operands: None,
                        scales: None,
                        before: self.out.kernels.len(),
                    });
                }
                Ok(Ok(products))
            }
            Op::Linear { a, weight, bias } => {
                let (sa, sw) = (self.shape(a), self.shape(weight));
                let (pa, pw) = (place(a)?, place(weight)?);
                let k = sa[sa.len() - 1];
                let (nn, wr) = (sw[sw.len() - 2], sw.len());
                let m: usize = sa[..sa.len() - 1].iter().product();
                let wbatch = &sw[..wr - 2];
                let batch: usize = wbatch.iter().product();
                // A: the input's leading dims as rows of one stride, the same for every batch.
                let Some(row) = collapse(&sa[..sa.len() - 1], &pa.1[..sa.len() - 1], k as i64) else {
                    return Ok(Err(a));
                };
                let oa = Operand {
                    arg: pa.0,
                    offset: pa.2,
                    strides: [0, row, pa.1[sa.len() - 1]],
                };
                // B: the weight [*, n, k] read as its transpose [*, k, n].
                let Some(wb) = collapse(wbatch, &pw.1[..wr - 2], (nn * k) as i64) else {
                    return Ok(Err(weight));
                };
                let ob = Operand {
                    arg: pw.0,
                    offset: pw.2,
                    strides: [wb, pw.1[wr - 1], pw.1[wr - 2]],
                };
                if !readable(m, k, &oa) {
                    return Ok(Err(a));
                }
                if !readable(k, nn, &ob) {
                    return Ok(Err(weight));
                }
                let bias = match bias {
                    None => None,
                    Some(bv) => {
                        let sbias = self.shape(bv);
                        let pbias = place(bv)?;
                        let last = pbias.1[sbias.len() - 1];
                        let bb = if sbias.len() == 1 {
                            Some(0)
                        } else {
                            collapse(wbatch, &pbias.1[..sbias.len() - 1], nn as i64)
                        };
                        match bb {
                            Some(bb) if last == 1 || nn == 1 => Some(Operand {
                                arg: pbias.0,
                                offset: pbias.2,
                                strides: [bb, 0, 1],
                            }),
                            _ => return Ok(Err(bv)),
                        }
                    }
                };
                let plus = bias.as_ref().map(|_| format!(" + {}", name(n.op.operands()[2]))).unwrap_or_default();
                Ok(Ok(vec![Product {
                    summary: format!("linear {} = {} x {}^T{plus}", name(r), name(a), name(weight)),
                    dtype,
                    batch,
                    m,
                    n: nn,
                    k,
                    a: oa,
                    b: ob,
                    bias,
                    out,
                    out_offset: 0,
                    out_batch_stride: 0,
                    epilogue: Epilogue::None,
                    alpha: 1.0,
                    operands: None,
                    scales: None,
                    before: self.out.kernels.len(),
                }]))
            }
            Op::Gemm(GemmOp::ScaledMm { mat1, mat2, scale1, scale2, .. }) => {
                let (sa, sb) = (self.shape(mat1), self.shape(mat2));
                let (m, k, nn) = (sa[0], sa[1], sb[1]);
                let (pa, pb) = (place(mat1)?, place(mat2)?);
                let oa = Operand { arg: pa.0, offset: pa.2, strides: [0, pa.1[0], pa.1[1]] };
                let ob = Operand { arg: pb.0, offset: pb.2, strides: [0, pb.1[0], pb.1[1]] };
                // cuBLASLt's FP8 kernels read both operands with k contiguous,
                // every row 16 bytes apart and aligned, and write rows of 16
                // bytes; otherwise the product runs in Float (its own result
                // named: crate::rewrite). Extent-1 dims take any stride.
                let lines16 = |o: &Operand, ld: i64| ld % 16 == 0 && o.offset % 16 == 0;
                let mat1_ok = (oa.strides[2] == 1 || k <= 1) && (m <= 1 || oa.strides[1] >= k as i64) && lines16(&oa, oa.strides[1]);
                let mat2_ok = (ob.strides[1] == 1 || k <= 1) && (nn <= 1 || ob.strides[2] >= k as i64) && lines16(&ob, ob.strides[2]);
                let rows_ok = k.is_multiple_of(16) && (nn * dtype.size_bytes()).is_multiple_of(16);
                if !(mat1_ok && mat2_ok && rows_ok) {
                    return Ok(Err(r));
                }
                let scales = if self.unscaled.contains(&r) {
                    None
                } else {
                    let one = |v: ValueId| -> Result<Operand, CodegenError> {
                        let p = place(v)?;
                        Ok(Operand { arg: p.0, offset: p.2, strides: [0, 0, 0] })
                    };
                    Some([one(scale1)?, one(scale2)?])
                };
                let how = if scales.is_some() { "" } else { " (unscaled: each row's and column's scale after)" };
                Ok(Ok(vec![Product {
                    summary: format!("scaled_mm {} = {} x {}{how}", name(r), name(mat1), name(mat2)),
                    dtype,
                    batch: 1,
                    m,
                    n: nn,
                    k,
                    a: oa,
                    b: ob,
                    bias: None,
                    out,
                    out_offset: 0,
                    out_batch_stride: 0,
                    epilogue: Epilogue::None,
                    alpha: 1.0,
                    operands: Some([f.value(mat1).dtype, f.value(mat2).dtype]),
                    scales,
                    before: self.out.kernels.len(),
                }]))
            }
            _ => unreachable!("only products are placed"),
        }
    }
}

/// `arg` viewed with `strides` from `offset`, as an output's source.
fn view_of(arg: KernelArg, strides: &[i64], offset: i64) -> Result<OutputSource, CodegenError> {
    let strides = strides.to_vec();
    Ok(match arg {
        KernelArg::Input(input) => OutputSource::InputView { input, strides, offset },
        KernelArg::Output(output) => OutputSource::OutputView { output, strides, offset },
        _ => return Err(unsupported("an output viewing a scalar or a temporary".into())),
    })
}

/// Which batch dims a `matmul` loops over (outer, one library call each)
/// and which one call runs as its batch (inner, collapsing to one stride in
/// A, B and D: `strides`, each dim's, `steps` the matrices' sizes). In
/// order, the fewest outer dims that leave the rest collapsing; where that
/// still loops, the dims in any order (D's batches then laid out by a
/// stride of their own) if that loops fewer times: [B, 1, m, k] x [1, H, k, n]
/// runs H products of B, not B of H, where H < B.
fn batch_runs(batch: &[usize], strides: [&[i64]; 3], steps: [i64; 3]) -> (Vec<usize>, Vec<usize>) {
    let fits = |dims: &[usize], with_d: bool| {
        let ext: Vec<usize> = dims.iter().map(|&i| batch[i]).collect();
        (0..if with_d { 3 } else { 2 }).all(|o| {
            let st: Vec<i64> = dims.iter().map(|&i| strides[o][i]).collect();
            collapse(&ext, &st, steps[o]).is_some()
        })
    };
    let all: Vec<usize> = (0..batch.len()).collect();
    let split = (0..=batch.len()).find(|&p| fits(&all[p..], false)).unwrap_or(batch.len());
    let runs = |dims: &[usize]| dims.iter().map(|&i| batch[i]).product::<usize>();
    let mut best = (all[..split].to_vec(), all[split..].to_vec());
    let live: Vec<usize> = all.iter().copied().filter(|&i| batch[i] > 1).collect();
    if runs(&best.0) <= 1 || live.len() > 6 {
        return best;
    }
    let mut order = live.clone();
    let mut each = |perm: &[usize]| {
        for q in 0..perm.len() {
            if runs(&perm[..q]) < runs(&best.0) && fits(&perm[q..], true) {
                best = (perm[..q].to_vec(), perm[q..].to_vec());
            }
        }
    };
    permutations(&mut order, 0, &mut each);
    best
}

/// Calls `each` with every ordering of `v[at..]` after `v[..at]`.
fn permutations(v: &mut Vec<usize>, at: usize, each: &mut impl FnMut(&[usize])) {
    if at == v.len() {
        each(v);
        return;
    }
    for i in at..v.len() {
        v.swap(at, i);
        permutations(v, at + 1, each);
        v.swap(at, i);
    }
}

/// One stride that steps through `dims` (with `strides`) in order, the
/// innermost step being `inner` elements of the matrix after them: `Some(0)`
/// where every dim of extent above 1 has stride 0 (a broadcast), `None` where
/// they do not collapse. Dims of extent 1 step nothing.
fn collapse(dims: &[usize], strides: &[i64], inner: i64) -> Option<i64> {
    let live: Vec<(usize, i64)> = dims.iter().copied().zip(strides.iter().copied()).filter(|&(e, _)| e > 1).collect();
    if live.is_empty() {
        return Some(inner.max(1));
    }
    if live.iter().all(|&(_, s)| s == 0) {
        return Some(0);
    }
    for w in live.windows(2) {
        if w[0].1 != w[1].1 * w[1].0 as i64 {
            return None;
        }
    }
    Some(live[live.len() - 1].1)
}

/// A `matmul` operand (`left`: A, else B) with these logical strides, seen
/// as rows and columns (row stride, column stride) and a stride for each of
/// the product's batch dims (0 where it is missing or of extent 1: broadcast).
fn matrix(st: &[i64], shape: &[usize], batch: &[usize], left: bool, k: usize) -> (i64, i64, Vec<i64>) {
    let r = shape.len();
    let (row, col) = match (r, left) {
        // A 1-D operand gains a dim of extent 1, whose stride is never stepped.
        (1, true) => (k as i64 * st[0].max(1), st[0]),
        (1, false) => (st[0], 1),
        _ => (st[r - 2], st[r - 1]),
    };
    let own = r.saturating_sub(2).min(batch.len());
    let lead = batch.len() - own;
    let strides = (0..batch.len())
        .map(|i| {
            if i < lead || r < 2 || shape[i - lead] == 1 {
                0
            } else {
                st[i - lead]
            }
        })
        .collect();
    (row, col, strides)
}

/// Whether a `[rows, cols]` matrix with these strides is one the library
/// reads: one of its dims at unit stride (or of extent 1), the other at a
/// stride that does not overlap it, none negative.
fn readable(rows: usize, cols: usize, o: &Operand) -> bool {
    let (r, c) = (o.strides[1], o.strides[2]);
    if r < 0 || c < 0 || o.strides[0] < 0 {
        return false;
    }
    let row_major = (c == 1 || cols <= 1) && (rows <= 1 || r >= cols as i64);
    let col_major = (r == 1 || rows <= 1) && (cols <= 1 || c >= rows as i64);
    row_major || col_major
}

/// The fusion that computes `roots` from `f`'s inputs and the values in
/// `cut` (products' results, which become its inputs), and the original
/// value of each of its inputs. Roots in `copies` are copied (`set`) so that
/// they are written densely rather than returned as views.
fn subfusion(f: &Fusion, roots: &[ValueId], cut: &BTreeSet<ValueId>, copies: &BTreeSet<ValueId>) -> (Fusion, Vec<ValueId>) {
    let mut needed = vec![false; f.values.len()];
    let mut nodes = vec![false; f.nodes.len()];
    let mut stack: Vec<ValueId> = roots.to_vec();
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut needed[v.index()], true) {
            continue;
        }
        if cut.contains(&v) {
            continue;
        }
        if let ValueDef::Node { node, .. } = f.value(v).def {
            if !std::mem::replace(&mut nodes[node], true) {
                stack.extend(f.nodes[node].op.operands());
                stack.extend(f.nodes[node].outputs.iter().copied());
            }
        }
    }
    let mut g = Fusion {
        script: f.script.clone(),
        ..Fusion::default()
    };
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    let mut inputs = vec![];
    // Values in creation order, so every operand is mapped before its node.
    let mut node_done = vec![false; f.nodes.len()];
    for (i, val) in f.values.iter().enumerate() {
        let v = ValueId(i as u32);
        if !needed[i] || map.contains_key(&v) {
            continue;
        }
        let cut_here = cut.contains(&v);
        match (&val.def, cut_here) {
            (ValueDef::Node { node, .. }, false) => {
                let node = *node;
                if std::mem::replace(&mut node_done[node], true) {
                    continue;
                }
                let n = &f.nodes[node];
                let mut op = n.op.clone();
                for o in op.operands_mut() {
                    *o = map[o];
                }
                let at = g.nodes.len();
                if fusebench_ir::rng::is_unseeded(&n.op) {
                    // Its Philox offset is its number in the whole fusion.
                    g.unseeded_numbers.push((at, fusebench_ir::rng::number(f, node)));
                }
                let outs: Vec<ValueId> = n
                    .outputs
                    .iter()
                    .enumerate()
                    .map(|(index, &o)| {
                        let mut nv = f.value(o).clone();
                        nv.def = ValueDef::Node { node: at, index };
                        g.values.push(nv);
                        let id = ValueId(g.values.len() as u32 - 1);
                        map.insert(o, id);
                        id
                    })
                    .collect();
                g.nodes.push(Node { op, outputs: outs });
            }
            (ValueDef::Node { .. }, true) => {
                let mut nv = val.clone();
                let rank = nv.rank();
                nv.def = ValueDef::TensorInput(TensorDecl {
                    contiguity: vec![Some(true); rank],
                    stride_order: vec![],
                    is_cpu: false,
                });
                nv.constant = None;
                g.values.push(nv);
                let id = ValueId(g.values.len() as u32 - 1);
                map.insert(v, id);
                g.inputs.push(id);
                inputs.push(v);
            }
            (def, _) => {
                g.values.push(val.clone());
                let id = ValueId(g.values.len() as u32 - 1);
                map.insert(v, id);
                if matches!(def, ValueDef::TensorInput(_) | ValueDef::ScalarInput) {
                    g.inputs.push(id);
                    inputs.push(v);
                }
            }
        }
    }
    for &r in roots {
        let mut id = map[&r];
        if copies.contains(&r) {
            let mut nv = f.value(r).clone();
            nv.name = format!("{}_dense", nv.name);
            nv.def = ValueDef::Node { node: g.nodes.len(), index: 0 };
            nv.constant = None;
            g.values.push(nv);
            let c = ValueId(g.values.len() as u32 - 1);
            g.nodes.push(Node {
                op: Op::Set { x: id, segment: false },
                outputs: vec![c],
            });
            id = c;
        }
        g.outputs.push(id);
    }
    (g, inputs)
}

/// `text` with each whole identifier named in `names` replaced.
fn rename(text: &str, names: &[(String, String)]) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| word(c)) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail.find(|c: char| !word(c)).unwrap_or(tail.len());
        let id = &tail[..end];
        match names.iter().find(|(from, _)| from == id) {
            Some((_, to)) => out.push_str(to),
            None => out.push_str(id),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_takes_whole_identifiers() {
        let names = vec![("fb_n0".to_string(), "fb_s1_n0".to_string())];
        assert_eq!(rename("void fb_n0(int fb_n01) { fb_n0_t(); fb_n0; }", &names), "void fb_s1_n0(int fb_n01) { fb_n0_t(); fb_s1_n0; }");
    }

    #[test]
    fn batch_dims_collapse_to_one_stride() {
        assert_eq!(collapse(&[2, 3], &[12, 4], 4), Some(4));
        assert_eq!(collapse(&[2, 3], &[0, 0], 4), Some(0));
        assert_eq!(collapse(&[2, 1, 3], &[12, 99, 4], 4), Some(4));
        assert_eq!(collapse(&[2, 3], &[4, 12], 4), None);
        assert_eq!(collapse(&[], &[], 16), Some(16));
    }

    #[test]
    fn readable_needs_a_unit_stride() {
        let o = |r, c| Operand {
            arg: KernelArg::Input(0),
            offset: 0,
            strides: [0, r, c],
        };
        assert!(readable(4, 8, &o(8, 1)));
        assert!(readable(4, 8, &o(1, 4)));
        assert!(readable(4, 8, &o(16, 1)), "a sliced row-major matrix");
        assert!(!readable(4, 8, &o(16, 2)), "no unit stride");
        assert!(!readable(4, 8, &o(4, 1)), "rows overlap");
        assert!(readable(1, 8, &o(0, 1)), "one row");
    }
}
