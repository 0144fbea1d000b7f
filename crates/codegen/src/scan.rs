//! Scans (cumsum, cumprod, cummin, cummax). Along the innermost dim a line
//! of 128 or more is a block's (`scan_blocks.rs`, `Device::scan_blocks`),
//! or, with `Device::scan_lines`, each line is scanned by a group of threads
//! sized to it (`scan_lines.rs`); otherwise a thread walks each line in
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
use crate::kernel::{signature, Context, Stored};
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

/// Where the prefixes of scan value `v` (dtype `d`, accumulated in `acc`)
/// go: its temporary (where something else reads it) and the outputs
/// computed elementwise from it alone.
pub(crate) struct Sink<'a> {
    pub v: ValueId,
    pub d: DType,
    pub acc: DType,
    pub temp: Option<usize>,
    pub epilogue: &'a [(ValueId, usize)],
}

impl Sink<'_> {
    /// Writes the prefix `y` (an `acc`) at index `idx`, linear offset `at`.
    fn write(&self, lw: &mut Lowerer, y: &str, idx: &[Ix], at: &str) -> Result<(), CodegenError> {
        let (f, v, d, acc) = (lw.f, self.v, self.d, self.acc);
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
    let n = &f.nodes[node];
    let Op::Scan { kind, dim, .. } = &n.op else {
        return Err(CodegenError::NoFit("not a scan".into()));
    };
    let v = n.outputs[0];
    let d = f.value(v).dtype;
    let s = f.value(v).shape.clone().unwrap_or_default();
    let dim = infer::norm_dim(kind.name(), *dim, s.len())
        .map_err(|e| CodegenError::Unsupported(e.to_string()))?;
    let len = s[dim];
    let inner: usize = s[dim + 1..].iter().product();
    let outer: usize = s[..dim].iter().product();
    let lines = outer * inner;
    let acc = if d.is_float() { DType::Double } else { DType::Int };
    let combine = match kind {
        ScanOp::Cumsum => Combine::Sum,
        ScanOp::Cumprod => Combine::Prod,
        ScanOp::Cummin => Combine::Min,
        ScanOp::Cummax => Combine::Max,
    };
    let temp = store.then(|| cx.add_temp(d, s.iter().product(), format!("{} (stored)", f.value(v).name)));
    let sink = Sink { v, d, acc, temp, epilogue };
    if cx.dev.scan_lines && inner == 1 {
        let line = lines::Line { s: &s, dim, len, lines, acc, combine };
        let lay = line.layout(&cx.dev);
        let tot = (lay.chunks > 1)
            .then(|| cx.add_temp(acc, lines * (lay.chunks - 1), format!("chunk totals of {}", f.value(v).name)));
        out.extend(lines::build(cx, node, &line, tot, &sink)?);
    } else if cx.dev.scan_blocks && inner == 1 && len >= BLOCK_LINE {
        out.push(blocks::build(cx, node, &blocks::Line { s: &s, dim, len, lines, acc, combine }, &sink)?);
    } else {
        out.push(one_thread(cx, node, &s, dim, acc, combine, &sink)?);
    }
    if let Some(t) = temp {
        cx.stored.insert(v, Stored { temp: t, dtype: d, shape: s });
    }
    Ok(())
}

/// The scan a thread per line, walking it in order.
fn one_thread(
    cx: &Context,
    node: usize,
    s: &[usize],
    dim: usize,
    acc: DType,
    combine: Combine,
    sink: &Sink,
) -> Result<(String, Kernel), CodegenError> {
    let f = cx.f;
    let n = &f.nodes[node];
    let Op::Scan { kind, x, init, .. } = &n.op else {
        return Err(CodegenError::NoFit("not a scan".into()));
    };
    let v = n.outputs[0];
    let d = f.value(v).dtype;
    let len = s[dim];
    let inner: usize = s[dim + 1..].iter().product();
    let lines = s[..dim].iter().product::<usize>() * inner;
    let (mut lw, mut params) = cx.lowerer();
    for &(o, pos) in sink.epilogue {
        params.push_output(f, o, pos);
    }
    let it = lw.idx_type;
    lw.line(&format!("const {it} l = ({it})blockIdx.x * {BLOCK} + threadIdx.x;"));
    lw.line(&format!("if (l >= {lines}) return;"));
    lw.line(&format!("const {it} lo = l / {inner};"));
    lw.line(&format!("const {it} li = l % {inner};"));
    // A line of one element is a copy (nvFuser's scan of a broadcast dim), so
    // `init` only counts on longer lines.
    let start = match init {
        Some(i) if len > 1 => {
            let e = lw.value_at(*i, &[])?;
            let e = ctype::convert(f.value(*i).dtype, d, &e);
            ctype::convert(d, acc, &e)
        }
        _ => reduction::init(&combine, acc),
    };
    lw.line(&format!("{} a = {start};", ctype::reg(acc)));
    lw.open(&format!("for ({it} k = 0; k < {len}; ++k) {{"));
    let mut idx = view::delinearize(Ix::var("lo"), &s[..dim]);
    idx.push(Ix::var("k"));
    idx.extend(view::delinearize(Ix::var("li"), &s[dim + 1..]));
    let xv = lw.value_at(*x, &idx)?;
    let xv = ctype::convert(f.value(*x).dtype, d, &xv);
    let xv = ctype::convert(d, acc, &xv);
    lw.line(&reduction::step(&combine, acc, "a", &xv));
    sink.write(&mut lw, "a", &idx, &format!("(lo * {len} + k) * {inner} + li"))?;
    lw.close("}");
    let name = format!("fb_s{node}");
    let src = format!("{} {{\n{}}}\n", signature(&name, BLOCK, &params), lw.code);
    Ok((
        src,
        Kernel {
            name,
            schedule: Schedule::Scan,
            grid: [crate::launch::grid_dim(lines.div_ceil(BLOCK as usize).max(1)), 1, 1],
            block: [BLOCK, 1, 1],
            args: params.args,
            code_hash: String::new(),
            choice: None,
            shared_bytes: 0,
            fill: None,
            tensor_maps: Vec::new(),
            summary: format!(
                "{} of {} along dim {dim}: {lines} lines of {len}, a thread per line",
                kind.name(),
                f.value(*x).name
            ),
        },
    ))
}
