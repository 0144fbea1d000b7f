//! Ops the GPU engine has no kernels for yet. They are refused when planning,
//! naming the op and the value it defines, before any schedule is tried, so
//! no fusion containing one can run half-lowered.

use crate::CodegenError;
use fusebench_ir::{Fusion, Op};

/// Why the GPU engine cannot run `op` yet, if it cannot.
fn why(op: &Op) -> Option<&'static str> {
    match op {
        Op::Matmul { .. } | Op::Linear { .. } => Some(
            "matrix products have no GPU kernel yet (planned: cuBLASLt); \
             the CPU reference runs them (`fusebench check` without --device gpu)",
        ),
        Op::Gemm(fusebench_ir::GemmOp::SdpfaFwd { .. } | fusebench_ir::GemmOp::SdpfaBwd { .. }) => {
            Some(
                "flash attention has no GPU kernel yet (planned: with the GPU GEMM work); \
             the CPU reference runs it (`fusebench check` without --device gpu)",
            )
        }
        Op::Gemm(_) => Some(
            "grouped and scaled matrix products have no GPU kernel yet (planned: cuBLASLt); \
             the CPU reference runs them (`fusebench check` without --device gpu)",
        ),
        _ => None,
    }
}

/// The first op of `f` the GPU engine cannot run, as an error.
pub(crate) fn check(f: &Fusion) -> Result<(), CodegenError> {
    for n in &f.nodes {
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
