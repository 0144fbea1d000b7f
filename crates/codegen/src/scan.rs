//! Scans (cumsum, cumprod, cummin, cummax): a thread per line along the
//! scanned dim, walking it in order and storing every prefix in a temporary
//! buffer that later kernels read. Consecutive threads take consecutive lines
//! of the innermost kept dim, so a scan over an outer dim reads coalesced.
//! Floats accumulate in double and each prefix is rounded once to the output
//! dtype, as the CPU reference does; integers in 64 bits with wrapping. With
//! `Device::scan_blocks` (the default), a line of 128 or more along the
//! innermost dim is a block's (`scan_blocks.rs`).

use crate::error::CodegenError;
use crate::ix::Ix;
use crate::kernel::{signature, Context, Stored};
use crate::plan::{Kernel, Schedule};
use crate::reduction::{self, Combine};
use crate::{ctype, view};
use fusebench_ir::{infer, DType, Op, ScanOp};

const BLOCK: u32 = 128;

/// The shortest line a block scans (`Device::scan_blocks`): 128 was the
/// shortest timed (32768 lines, 0.74 of a thread per line); shorter lines
/// would leave most of a block's 256 threads idle.
pub const BLOCK_LINE: usize = 128;

#[path = "scan_blocks.rs"]
mod blocks;

/// Appends the kernel computing the scan of node `node` and records where its
/// result is stored.
pub fn build(
    cx: &mut Context,
    node: usize,
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let f = cx.f;
    let n = &f.nodes[node];
    let Op::Scan { kind, x, dim, init } = &n.op else {
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
    let t = cx.add_temp(d, s.iter().product(), format!("{} (stored)", f.value(v).name));
    if cx.dev.scan_blocks && inner == 1 && len >= BLOCK_LINE {
        out.push(blocks::build(cx, node, &blocks::Line { s: &s, dim, len, lines, acc, combine, temp: t })?);
        cx.stored.insert(v, Stored { temp: t, dtype: d, shape: s });
        return Ok(());
    }
    let (mut lw, params) = cx.lowerer();
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
    let h = ctype::convert(acc, d, "a");
    lw.line(&format!(
        "tmp{t}[(lo * {len} + k) * {inner} + li] = {};",
        ctype::to_storage(d, &h)
    ));
    lw.close("}");
    let name = format!("fb_s{node}");
    let src = format!("{} {{\n{}}}\n", signature(&name, BLOCK, &params), lw.code);
    out.push((
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
    ));
    cx.stored.insert(
        v,
        Stored {
            temp: t,
            dtype: d,
            shape: s,
        },
    );
    Ok(())
}
