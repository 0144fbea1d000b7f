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
        Op::Gemm(fusebench_ir::GemmOp::SdpfaFwd { .. } | fusebench_ir::GemmOp::SdpfaBwd { .. }) => Some(
            "flash attention has no GPU kernel yet (planned: with the GPU GEMM work); \
             the CPU reference runs it (`fusebench check` without --device gpu)",
        ),
        Op::Gemm(_) => Some(
            "grouped and scaled matrix products have no GPU kernel yet (planned: cuBLASLt); \
             the CPU reference runs them (`fusebench check` without --device gpu)",
        ),
        _ => None,
    }
}

/// `add_output(out, stride_order=...)` whose layout is not row-major: the
/// kernels write every output dense row-major, so the output would come back
/// in another layout than nvFuser allocates (its values would agree).
fn check_layouts(f: &Fusion) -> Result<(), CodegenError> {
    for l in &f.output_layouts {
        let v = f.value(f.outputs[l.output]);
        let shape = v.shape.clone().unwrap_or_default();
        let decl = |order: Vec<usize>| fusebench_ir::TensorDecl {
            contiguity: vec![Some(true); shape.len()],
            stride_order: order,
            is_cpu: false,
        };
        let want = decl(l.stride_order.clone()).dense_strides(&shape);
        let row_major = decl(vec![]).dense_strides(&shape);
        let same = shape
            .iter()
            .zip(want.iter().zip(&row_major))
            .all(|(&e, (a, b))| e == 1 || a == b);
        if !same {
            return Err(CodegenError::Unsupported(format!(
                "output {} has stride_order {:?} (strides {want:?}): the GPU kernels write outputs \
                 row-major only ({row_major:?}), so its layout would differ from nvFuser's; \
                 the CPU reference runs it",
                v.name, l.stride_order
            )));
        }
    }
    Ok(())
}

/// The first op of `f` the GPU engine cannot run, as an error.
pub(crate) fn check(f: &Fusion) -> Result<(), CodegenError> {
    check_layouts(f)?;
    for n in &f.nodes {
        let why = why(&n.op)
            .map(String::from)
            .or_else(|| crate::complex::unsupported(f, &n.op));
        if let Some(why) = why {
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
