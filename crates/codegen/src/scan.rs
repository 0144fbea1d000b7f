//! Scans (cumsum, cumprod, cummin, cummax). Along the innermost dim a line
//! of 128 or more is a block's (`scan_blocks.rs`, `Device::scan_blocks`),
//! or, with `Device::scan_lines`, each line is scanned by a group of threads
//! sized to it (`scan_lines.rs`), and with `Device::scan_tiles` lines read
//! across (a column-major input) go through shared-memory tiles of
//! neighbouring lines (`scan_tiles.rs`); otherwise a thread walks each line in
//! order, consecutive threads taking consecutive lines of the innermost kept
//! dim, so a scan along an outer dim reads coalesced. Floats accumulate in
//! double and each prefix is rounded once to the output dtype, as the CPU
//! reference does; integers in 64 bits with wrapping. The prefixes are
//! stored in a temporary for later kernels; with `Device::scan_epilogue`,
//! outputs computed elementwise from the scan alone are written as each
//! prefix is found (`epilogue_fits`), and the temporary only where
//! something else reads the scan.

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{signature, Context, Params, Stored};
use crate::lower::{Held, Lowerer};
use crate::plan::{Kernel, Schedule};
use crate::reduction::{self, Combine};
use crate::{ctype, view};
use fusebench_ir::{infer, DType, Fusion, Op, ScanOp, ValueDef, ValueId};
use std::collections::HashSet;

const BLOCK: u32 = 128;

/// The shortest line a block scans (`Device::scan_blocks`): 128 was the
/// shortest timed (32768 lines, 0.74 of a thread per line); shorter lines
/// would leave most of a block's 256 threads idle.
pub const BLOCK_LINE: usize = 128;

#[path = "scan_blocks.rs"]
mod blocks;
#[path = "scan_lines.rs"]
mod lines;
#[path = "scan_tiles.rs"]
mod tiles;

/// One scan, with what each of its kernels reads: the op's operands, its
/// result `v` (dtype `d`, shape `s`, accumulated in `acc`), the scanned
/// dim of `len` elements and the `lines` along it (`inner` of them in each
/// run of the dims past it).
pub(crate) struct Scan<'a> {
    pub node: usize,
    pub kind: &'a ScanOp,
    pub x: ValueId,
    pub init: Option<ValueId>,
    pub v: ValueId,
    pub d: DType,
    pub s: Vec<usize>,
    pub dim: usize,
    pub len: usize,
    pub inner: usize,
    pub lines: usize,
    pub acc: DType,
    pub combine: Combine,
}

impl<'a> Scan<'a> {
    fn new(f: &'a Fusion, node: usize) -> Result<Scan<'a>, CodegenError> {
        let n = &f.nodes[node];
        let Op::Scan { kind, x, dim, init } = &n.op else {
            return Err(CodegenError::NoFit("not a scan".into()));
        };
        let v = n.outputs[0];
        let d = f.value(v).dtype;
        let s = f.value(v).shape.clone().unwrap_or_default();
        let dim = infer::norm_dim(kind.name(), *dim, s.len()).map_err(|e| CodegenError::Unsupported(e.to_string()))?;
        let inner: usize = s[dim + 1..].iter().product();
        let lines = s[..dim].iter().product::<usize>() * inner;
        let combine = match kind {
            ScanOp::Cumsum => Combine::Sum,
            ScanOp::Cumprod => Combine::Prod,
            ScanOp::Cummin => Combine::Min,
            ScanOp::Cummax => Combine::Max,
        };
        let acc = if d.is_float() { DType::Double } else { DType::Int };
        Ok(Scan { node, kind, x: *x, init: *init, v, d, len: s[dim], s, dim, inner, lines, acc, combine })
    }

    /// The index of element `k` of the line at `lo` (the dims before the
    /// scanned one) and `li` (those past it).
    fn index(&self) -> Vec<Ix> {
        let mut idx = view::delinearize(Ix::var("lo"), &self.s[..self.dim]);
        idx.push(Ix::var("k"));
        idx.extend(view::delinearize(Ix::var("li"), &self.s[self.dim + 1..]));
        idx
    }

    /// The scanned value at `idx`, rounded to the result's dtype and held
    /// in the accumulator.
    fn element(&self, lw: &mut Lowerer, idx: &[Ix]) -> Result<String, CodegenError> {
        let xv = lw.value_at(self.x, idx)?;
        let xv = ctype::convert(lw.f.value(self.x).dtype, self.d, &xv);
        Ok(ctype::convert(self.d, self.acc, &xv))
    }

    /// What each line starts from: `init` where given, the identity
    /// otherwise. A line of one element is a copy (nvFuser's scan of a
    /// broadcast dim), so `init` only counts on longer lines.
    fn start(&self, lw: &mut Lowerer) -> Result<String, CodegenError> {
        match self.init {
            Some(i) if self.len > 1 => {
                let e = lw.value_at(i, &[])?;
                let e = ctype::convert(lw.f.value(i).dtype, self.d, &e);
                Ok(ctype::convert(self.d, self.acc, &e))
            }
            _ => Ok(reduction::init(&self.combine, self.acc)),
        }
    }

    /// The combine's identity in the accumulator.
    fn identity(&self) -> String {
        reduction::init(&self.combine, self.acc)
    }

    /// `into = into (op) w` in the accumulator.
    fn step(&self, into: &str, w: &str) -> String {
        reduction::step(&self.combine, self.acc, into, w)
    }

    /// `into = a (op) b`, `a` the earlier; `into` may be `b`.
    fn op(&self, into: &str, a: &str, b: &str) -> String {
        format!("{{ const {} w = {b}; {into} = {a}; {} }}", ctype::reg(self.acc), self.step(into, "w"))
    }

    /// Sets `into` to the element at (`lo`, `k`, `li`) where `live`, else
    /// to the identity; the index, for the prefixes' writes.
    fn load(&self, lw: &mut Lowerer, into: &str, live: &str) -> Result<Vec<Ix>, CodegenError> {
        lw.line(&format!("{into} = {};", self.identity()));
        lw.open(&format!("if ({live}) {{"));
        let idx = self.index();
        let xv = self.element(lw, &idx)?;
        lw.line(&format!("{into} = {xv};"));
        lw.close("}");
        Ok(idx)
    }

    /// "cumsum of x along dim 1", the start of its kernels' summaries.
    fn named(&self, f: &Fusion) -> String {
        format!("{} of {} along dim {}", self.kind.name(), f.value(self.x).name, self.dim)
    }

    /// Kernel `name` of the code `lw` wrote over `params`, `blocks` blocks
    /// of `threads`.
    fn kernel(&self, name: String, lw: Lowerer, params: Params, blocks: usize, threads: u32, summary: String) -> (String, Kernel) {
        let src = format!("{} {{\n{}}}\n", signature(&name, threads, &params), lw.code);
        let kernel = Kernel::new(name, Schedule::Scan, [crate::launch::grid_dim(blocks), 1, 1], [threads, 1, 1], params.args, summary);
        (src, kernel)
    }

    /// The inclusive scan of each lane's `s` across its group of `width`
    /// lanes (a power of two up to the warp) by shuffles.
    fn across_lanes(&self, lw: &mut Lowerer, width: usize) {
        let ty = ctype::reg(self.acc);
        lw.open(&format!("for (int o = 1; o < {width}; o <<= 1) {{"));
        if width == 32 {
            lw.line(&format!("const {ty} u = __shfl_up_sync(0xffffffffu, s, o);"));
            lw.line(&format!("if (lane >= o) {}", self.op("s", "u", "s")));
        } else {
            lw.line(&format!("const {ty} u = __shfl_up_sync(0xffffffffu, s, o, {width});"));
            lw.line(&format!("if ((lane & {}) >= o) {}", width - 1, self.op("s", "u", "s")));
        }
        lw.close("}");
    }
}

/// Where a scan's prefixes go: its temporary (where something else reads
/// it) and the outputs computed elementwise from it alone.
pub(crate) struct Sink<'a> {
    pub temp: Option<usize>,
    pub epilogue: &'a [(ValueId, usize)],
}

impl Sink<'_> {
    /// A kernel's lowerer, with the outputs it writes among its parameters.
    fn lowerer<'f>(&self, cx: &Context<'f>) -> (Lowerer<'f>, Params) {
        let (lw, mut params) = cx.lowerer();
        for &(o, pos) in self.epilogue {
            params.push_output(cx.f, o, pos);
        }
        (lw, params)
    }

    /// Writes the prefix `before (op) own` of the element of the line at
    /// `lo`, `k` (along the innermost dim) at index `idx`.
    fn write_after(&self, lw: &mut Lowerer, sc: &Scan, before: &str, own: &str, idx: &[Ix]) -> Result<(), CodegenError> {
        lw.line(&format!("{} y = {before};", ctype::reg(sc.acc)));
        lw.line(&sc.step("y", own));
        self.write(lw, sc, "y", idx, &format!("lo * {} + k", sc.len))
    }

    /// Writes the prefix `y` (an accumulator) of `sc` at index `idx`, linear offset `at`.
    fn write(&self, lw: &mut Lowerer, sc: &Scan, y: &str, idx: &[Ix], at: &str) -> Result<(), CodegenError> {
        let (f, v, d, acc) = (lw.f, sc.v, sc.d, sc.acc);
        // Readers index a dim of one element at 0 (a line of one, the size-1 dims past it).
        let shape = f.value(v).shape.as_deref().unwrap_or(&[]);
        let idx: Vec<Ix> = idx.iter().zip(shape).map(|(i, &e)| if e == 1 { Ix::c(0) } else { i.clone() }).collect();
        let h = lw.fresh("h");
        lw.line(&format!("const {} {h} = {};", ctype::reg(d), ctype::convert(acc, d, y)));
        if let Some(t) = self.temp {
            lw.line(&format!("tmp{t}[{at}] = {};", ctype::to_storage(d, &h)));
        }
        lw.hold(v, Held { expr: h, index: idx.clone() });
        for &(o, pos) in self.epilogue {
            let e = lw.value_at(o, &idx)?;
            lw.line(&format!("out{pos}[{at}] = {};", ctype::to_storage(f.value(o).dtype, &e)));
        }
        Ok(())
    }
}

/// Whether output `o` can be written by the kernel of the scan at `node`:
/// it reads the scan, and every value on its way from the scan has the
/// scan's shape and is elementwise; it reads no reduction stored by a
/// kernel of its own (the caller checks) and no other scan or op of the
/// index family (built later, or stored for other readers).
pub fn epilogue_fits(f: &Fusion, node: usize, o: ValueId) -> bool {
    let v = f.nodes[node].outputs[0];
    let shape = &f.value(v).shape;
    if &f.value(o).shape != shape {
        return false;
    }
    // Values computed from the scan, in definition order.
    let mut from: HashSet<ValueId> = HashSet::from([v]);
    for n in &f.nodes[node + 1..] {
        if n.op.operands().iter().any(|x| from.contains(x)) {
            from.extend(n.outputs.iter().copied());
        }
    }
    if !from.contains(&o) {
        return false;
    }
    let mut ok = true;
    f.walk_up(std::iter::once(o), |w| {
        if w == v {
            return false;
        }
        if let ValueDef::Node { node: m, .. } = f.value(w).def {
            let op = &f.nodes[m].op;
            if matches!(op, Op::Scan { .. }) || crate::index::is_special(op) {
                ok = false;
            }
            let elementwise = matches!(
                op,
                Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } | Op::Where { .. } | Op::Cast { .. }
            );
            if from.contains(&w) && (!elementwise || &f.value(w).shape != shape) {
                ok = false;
            }
        }
        ok
    });
    ok
}

/// Appends the kernels computing the scan of node `node`, which also write
/// the outputs `epilogue` (`epilogue_fits`), and records where its result
/// is stored if `store` (something else reads it).
pub fn build(
    cx: &mut Context,
    node: usize,
    epilogue: &[(ValueId, usize)],
    store: bool,
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let sc = Scan::new(f, node)?;
    let name = &f.value(sc.v).name;
    let temp = store.then(|| cx.add_temp(sc.d, sc.s.iter().product(), format!("{name} (stored)")));
    let sink = Sink { temp, epilogue };
    let tiled = (cx.dev.scan_tiles && sc.inner == 1)
        .then(|| tiles::across(cx, &sc))
        .flatten()
        .and_then(|least| tiles::lines_per_block(sc.lines, least, cx.dev.sm_count as usize));
    if let Some(p) = tiled {
        out.push(tiles::build(cx, &sc, p, &sink)?);
    } else if cx.dev.scan_lines && sc.inner == 1 {
        let lay = lines::layout(&sc, &cx.dev);
        let tot = (lay.chunks > 1)
            .then(|| cx.add_temp(sc.acc, sc.lines * (lay.chunks - 1), format!("chunk totals of {name}")));
        out.extend(lines::build(cx, &sc, &lay, tot, &sink)?);
    } else if cx.dev.scan_blocks && sc.inner == 1 && sc.len >= BLOCK_LINE {
        out.push(blocks::build(cx, &sc, &sink)?);
    } else {
        out.push(one_thread(cx, &sc, &sink)?);
    }
    if let Some(t) = temp {
        cx.stored.insert(sc.v, Stored { temp: t, dtype: sc.d, shape: sc.s });
    }
    Ok(())
}

/// The scan a thread per line, walking it in order.
fn one_thread(cx: &Context, sc: &Scan, sink: &Sink) -> Result<(String, Kernel), CodegenError> {
    let Scan { len, inner, lines, acc, .. } = *sc;
    let (mut lw, params) = sink.lowerer(cx);
    let it = lw.idx_type;
    lw.line(&format!("const {it} l = ({it})blockIdx.x * {BLOCK} + threadIdx.x;"));
    lw.line(&format!("if (l >= {lines}) return;"));
    lw.line(&format!("const {it} lo = l / {inner};"));
    lw.line(&format!("const {it} li = l % {inner};"));
    let start = sc.start(&mut lw)?;
    lw.line(&format!("{} a = {start};", ctype::reg(acc)));
    lw.open(&format!("for ({it} k = 0; k < {len}; ++k) {{"));
    let idx = sc.index();
    let xv = sc.element(&mut lw, &idx)?;
    lw.line(&reduction::step(&sc.combine, acc, "a", &xv));
    sink.write(&mut lw, sc, "a", &idx, &format!("(lo * {len} + k) * {inner} + li"))?;
    lw.close("}");
    let summary = format!("{}: {lines} lines of {len}, a thread per line", sc.named(cx.f));
    Ok(sc.kernel(format!("fb_s{}", sc.node), lw, params, lines.div_ceil(BLOCK as usize).max(1), BLOCK, summary))
}
