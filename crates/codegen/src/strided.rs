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
    lw.open(&format!("for (; {at} < {end}; {at} += {step}) {{"));
    lw.line(&format!("const {ty} {var} = {at};"));
    body(lw)?;
    lw.close("}");
    Ok(())
}
