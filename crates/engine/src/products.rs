//! The plan's library calls: its matrix products (codegen's `Product`) as
//! calls of the BLAS library, each one's description for cuBLASLt, with the
//! alignment of the addresses it was prepared with, its algorithm chosen once
//! at preparation; and its attention calls (`LibraryAttention`) as cuDNN is
//! told them.

use crate::error::EngineError;
use fusebench_codegen::{AttentionRole, Epilogue, LibraryAttention, Operand, Product};
use fusebench_ir::DType;
use fusebench_runtime::{AttentionSpec, AttentionTensor, BlasEpilogue, BlasScales, BlasType, Gpu, MatmulSpec, MatrixStrides, Matmul};

fn blas_type(d: DType) -> Result<BlasType, EngineError> {
    Ok(match d {
        DType::Half => BlasType::F16,
        DType::BFloat16 => BlasType::BF16,
        DType::Float => BlasType::F32,
        DType::Double => BlasType::F64,
        DType::Float8E4m3fn => BlasType::E4M3,
        DType::Float8E5m2 => BlasType::E5M2,
        other => {
            return Err(EngineError::Codegen(fusebench_codegen::CodegenError::Unsupported(format!(
                "matrix products of {other}: the BLAS path takes Half, BFloat16, Float and Double, \
                 and Float8_e4m3fn or Float8_e5m2 operands of scaled_mm"
            ))))
        }
    })
}

/// The largest power of two, at most 256, that divides `addr`: what the
/// library may assume of an address (its fastest kernels need 16 bytes).
pub(crate) fn alignment(addr: u64) -> u32 {
    1u32 << addr.trailing_zeros().min(8)
}

/// Address of the element `offset` elements of `elem` bytes into a buffer at `base`.
pub(crate) fn address(base: u64, offset: i64, elem: usize) -> u64 {
    base.wrapping_add((offset as u64).wrapping_mul(elem as u64))
}

/// Prepares `p` for the library, its operands at these addresses.
pub(crate) fn prepare(gpu: &Gpu, p: &Product, a: u64, b: u64, bias: Option<u64>, d: u64) -> Result<Matmul, EngineError> {
    let strides = |o: &Operand| MatrixStrides {
        batch: o.strides[0],
        row: o.strides[1],
        col: o.strides[2],
    };
    let spec = MatmulSpec {
        dtype: blas_type(p.dtype)?,
        batch: p.batch as u64,
        m: p.m as u64,
        n: p.n as u64,
        k: p.k as u64,
        a: strides(&p.a),
        b: strides(&p.b),
        bias: p.bias.as_ref().map(|o| o.strides[0]),
        d_batch: (p.out_batch_stride != 0).then_some(p.out_batch_stride),
        epilogue: match p.epilogue {
            Epilogue::None => BlasEpilogue::None,
            Epilogue::Relu => BlasEpilogue::Relu,
            Epilogue::GeluTanh => BlasEpilogue::Gelu,
        },
        alpha: p.alpha,
        align: [alignment(a), alignment(b), bias.map_or(256, alignment), alignment(d)],
        operands: match p.operands {
            Some([x, y]) => Some([blas_type(x)?, blas_type(y)?]),
            None => None,
        },
        scales: if p.scales.is_some() { BlasScales::PerOperand } else { BlasScales::None },
    };
    Ok(gpu.matmul_plan(&spec)?)
}

/// cuDNN's name of an attention buffer's role.
pub(crate) fn attention_role(r: AttentionRole) -> AttentionTensor {
    match r {
        AttentionRole::Q => AttentionTensor::Q,
        AttentionRole::K => AttentionTensor::K,
        AttentionRole::V => AttentionTensor::V,
        AttentionRole::O => AttentionTensor::O,
        AttentionRole::Stats => AttentionTensor::Stats,
        AttentionRole::DO => AttentionTensor::DO,
        AttentionRole::DQ => AttentionTensor::DQ,
        AttentionRole::DK => AttentionTensor::DK,
        AttentionRole::DV => AttentionTensor::DV,
        AttentionRole::SoftmaxSum => AttentionTensor::SoftmaxSum,
        AttentionRole::DqAccum => AttentionTensor::DqAccum,
    }
}

/// An attention call of the plan as cuDNN is told it.
pub(crate) fn attention_spec(a: &LibraryAttention) -> Result<AttentionSpec, EngineError> {
    Ok(AttentionSpec {
        backward: a.backward,
        dtype: blas_type(a.dtype)?,
        b: a.b as i64,
        h: a.h as i64,
        s_q: a.s_q as i64,
        s_kv: a.s_kv as i64,
        d: a.d as i64,
        d_v: a.d_v as i64,
        causal: a.causal,
        strides: a.tensors.iter().map(|t| (attention_role(t.role), t.strides)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_the_largest_power_of_two_dividing_the_address() {
        assert_eq!(alignment(0x7f00_0000_0000), 256);
        assert_eq!(alignment(0x7f00_0000_0002), 2);
        assert_eq!(alignment(0x7f00_0000_0030), 16);
    }
}
