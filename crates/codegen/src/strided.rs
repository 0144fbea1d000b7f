//! A loop over a strided range (`for (i = start; i < end; i += step)`) whose
//! iterations' loads a thread issues together. A loop unrolled with
//! `#pragma unroll` still checks its bound before each iteration, and the
//! compiler does not move a global load above that check, so each thread had
//! one load in flight: a grid reduction of 2048x16384 bf16 at 4 blocks of 256
//! threads per SM read at 77% of the copy ceiling on the H200. Here the body is
//! written `batch` times in straight-line code under one bound check, so the
//! loads of all of them can be in flight at once; a plain loop takes the rest.

use crate::error::CodegenError;
use crate::lower::Lowerer;

/// Writes the loop. `body` writes one iteration for index variable `var`
/// (declared by this function in a scope of its own, of type `ty`), and is
/// called `batch + 1` times: once per copy in the batched loop, once for the
/// remainder loop. `ty` must hold `end + batch * step`.
#[allow(clippy::too_many_arguments)]
pub fn emit(
    lw: &mut Lowerer,
    ty: &str,
    var: &str,
    start: &str,
    end: &str,
    step: &str,
    batch: usize,
    mut body: impl FnMut(&mut Lowerer) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    if batch <= 1 {
        lw.open(&format!("for ({ty} {var} = {start}; {var} < {end}; {var} += {step}) {{"));
        body(lw)?;
        lw.close("}");
        return Ok(());
    }
    let at = batches(lw, (ty, var), start, end, step, batch, &mut body)?;
    lw.open(&format!("for (; {at} < {end}; {at} += {step}) {{"));
    lw.line(&format!("const {ty} {var} = {at};"));
    body(lw)?;
    lw.close("}");
    Ok(())
}

/// The batched loop of `emit`: `batch` copies of `body` under one bound
/// check, from `start`; returns the position variable, where the rest begins.
fn batches(
    lw: &mut Lowerer,
    (ty, var): (&str, &str),
    start: &str,
    end: &str,
    step: &str,
    batch: usize,
    body: &mut impl FnMut(&mut Lowerer) -> Result<(), CodegenError>,
) -> Result<String, CodegenError> {
    let at = lw.fresh("fb_at");
    lw.line(&format!("{ty} {at} = {start};"));
    lw.open(&format!(
        "for (; {at} + ({ty})({}) * ({step}) < {end}; {at} += ({ty})({batch}) * ({step})) {{",
        batch - 1
    ));
    for u in 0..batch {
        lw.open("{");
        lw.line(&format!("const {ty} {var} = {at} + ({ty})({u}) * ({step});"));
        body(lw)?;
        lw.close("}");
    }
    lw.close("}");
    Ok(at)
}

/// As `emit`, but what the batched loop leaves (fewer than `batch`
/// iterations) is one more straight-line batch, not a loop: the first copy
/// is in range, each other copy's index falls back to the first one's when
/// past `end`, and `body` is handed the flag that says whether its index is
/// its own (None where it always is), to guard what it folds but not what it
/// loads. So every load of the rest is in flight at once too: where each
/// thread's share is not a multiple of `batch` (a sum of 2048x4096 over 528
/// blocks: 7 or 8 tiles each, batches of 4) the remainder loop read its last
/// iterations one L2 or DRAM round trip after another.
#[allow(clippy::too_many_arguments)]
pub fn emit_guarded(
    lw: &mut Lowerer,
    ty: &str,
    var: &str,
    start: &str,
    end: &str,
    step: &str,
    batch: usize,
    mut body: impl FnMut(&mut Lowerer, Option<&str>) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    if batch <= 1 {
        return emit(lw, ty, var, start, end, step, 1, |lw| body(lw, None));
    }
    let at = batches(lw, (ty, var), start, end, step, batch, &mut |lw| body(lw, None))?;
    lw.open(&format!("if ({at} < {end}) {{"));
    lw.open("{");
    lw.line(&format!("const {ty} {var} = {at};"));
    body(lw, None)?;
    lw.close("}");
    for u in 1..batch - 1 {
        lw.open("{");
        let ok = lw.fresh("fb_ok");
        lw.line(&format!("const bool {ok} = {at} + ({ty})({u}) * ({step}) < {end};"));
        lw.line(&format!("const {ty} {var} = {ok} ? {at} + ({ty})({u}) * ({step}) : {at};"));
        body(lw, Some(&ok))?;
        lw.close("}");
    }
    lw.close("}");
    Ok(())
}

/// `line` under `guard` where there is one.
pub fn guarded(guard: Option<&str>, line: &str) -> String {
    match guard {
        Some(g) => format!("if ({g}) {{ {line} }}"),
        None => line.to_string(),
    }
}
