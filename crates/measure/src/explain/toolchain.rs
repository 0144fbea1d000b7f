//! The compiler and the libraries that made what ran: NVRTC's version, which
//! compiles the same kernel source to other machine code, and the versions
//! of the libraries that ran part of the fusion (cuBLASLt's products, cuDNN's
//! attention), whose kernels are theirs. When the two were timed differently,
//! B's sibling at A's conditions less A measures the change of the subject,
//! and the toolchain holds it unless the GPU differs too
//! (`Ctx::subject_check`). Otherwise the kernels' own time difference is
//! counted here where their source is the same on both sides (`kernels.rs`:
//! same code hashes, other registers or library kernels); where the source
//! changed too, the kernels keep it and this takes what the measured causes
//! leave.

use super::check::{known_differ, Check, Ctx, Est};
use super::Cause;

pub(super) const TITLE: &str = "different compiler or library version";

pub(super) fn check(ctx: &Ctx) -> Check {
    let (ea, eb) = (&ctx.a().environment, &ctx.b().environment);
    let mut d = Vec::new();
    if known_differ(&ea.nvrtc, &eb.nvrtc) {
        d.push(format!("NVRTC {} vs {}", ea.nvrtc, eb.nvrtc));
    }
    if known_differ(&ea.libraries, &eb.libraries) {
        d.push(format!("libraries {} vs {}", ea.libraries, eb.libraries));
    }
    if !d.is_empty() {
        let detail = d.join("; ");
        return ctx.subject_check(Cause::Toolchain, &detail).unwrap_or_else(|| {
            Check::differs(
                detail,
                Est::open("not measured separately: no record times the same kernels built by both"),
            )
        });
    }
    let nvrtc = if ea.nvrtc.is_empty() || eb.nvrtc.is_empty() {
        "NVRTC not recorded on both".to_string()
    } else {
        format!("same NVRTC ({})", ea.nvrtc)
    };
    let libraries = match (ea.libraries.is_empty(), eb.libraries.is_empty()) {
        (true, true) => "no library named by either".to_string(),
        (false, false) => format!("the same libraries ({})", ea.libraries),
        // One ran a library where the other ran kernels of its own (or
        // predates the field): which kernels ran is the kernels' cause.
        (false, true) => format!("only A names a library ({}): which kernels ran is the kernels' cause", ea.libraries),
        (true, false) => format!("only B names a library ({}): which kernels ran is the kernels' cause", eb.libraries),
    };
    Check::ruled_out(format!("{nvrtc}, {libraries}"))
}
