//! Ops the GPU engine has no kernels for yet. They are refused when planning,
//! naming the op and the value it defines, before any schedule is tried, so
//! no fusion containing one can run half-lowered.

use crate::CodegenError;
use fusebench_ir::{Fusion, Op};

/// Why the GPU engine cannot run `op` yet, if it cannot.
fn why(op: &Op) -> Option<&'static str> {
    match op {
        // Reached only where crate::gemm could not take a product apart.
        Op::Matmul { .. } | Op::Linear { .. } | Op::Gemm(_) => {
            Some("a matrix product or attention inside a kernel: they run between kernels (crate::gemm)")
        }
        _ => None,
    }
}

/// The first op of `f` the GPU engine cannot run, as an error.
pub(crate) fn check(f: &Fusion) -> Result<(), CodegenError> {
    check_but(f, |_| false)
}

/// [`check`] passing over the ops `skip` says are run another way (the
/// matrix products, crate::gemm).
pub(crate) fn check_but(f: &Fusion, skip: impl Fn(&Op) -> bool) -> Result<(), CodegenError> {
    for n in f.nodes.iter().filter(|n| !skip(&n.op)) {
        if let Some(why) = why(&n.op) {
            let out = n.outputs.first().map(|&v| f.value(v).name.clone());
            return Err(CodegenError::Unsupported(format!(
                "`{}`{}: {why}",
                n.op.name(),
                out.map(|o| format!(" (defining {o})")).unwrap_or_default()
            )));
        }
    }
    Ok(())
}

/// The longest chain of ops, each reading the one before, that the planner
/// takes: lowering an expression recurses through its operands, and a
/// generated script of many thousands of chained ops would overflow the
/// stack (an abort, not an error). The corpus chains at most 31.
pub const MAX_CHAIN: usize = 1000;

/// Refuses a fusion whose ops chain more than [`MAX_CHAIN`] deep, naming
/// the value where the chain passes the limit.
pub(crate) fn chain(f: &Fusion) -> Result<(), CodegenError> {
    let mut depth = vec![0usize; f.values.len()];
    for n in &f.nodes {
        let d = 1 + n
            .op
            .operands()
            .iter()
            .map(|v| depth.get(v.index()).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        for &o in &n.outputs {
            if d > MAX_CHAIN {
                return Err(CodegenError::TooLarge(format!(
                    "{} is computed by a chain of more than {MAX_CHAIN} ops, each reading the one before; \
                     the planner takes chains up to {MAX_CHAIN} (the CPU reference runs longer ones)",
                    f.value(o).name
                )));
            }
            depth[o.index()] = d;
        }
    }
    Ok(())
}
