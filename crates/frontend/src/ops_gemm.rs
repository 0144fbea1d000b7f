//! `fd.ops.sdpfa_fwd`, `sdpfa_bwd`, `grouped_mm`, `scaled_mm` (read into
//! [`GemmOp`]), and the nvFuser ops fusebench knows but refuses with their
//! reason: the fp4 ones (`cutlass_nvfp4_grouped_mm`, `nv_block_quantize`,
//! `nv_grouped_block_quantize`) and `preprocess_grouped_matmul_input_sf`.
//! Signatures and defaults: nvFuser's python bindings (direct and legacy
//! declare the same names).

use crate::error::{invalid, PResult};
use crate::expr::Expr;
use crate::ops::{bind, Call};
use crate::parse::Body;
use fusebench_ir::{DType, GemmOp, Op, ValueId};

/// Names read here, refused ones included.
pub(crate) const NAMES: [&str; 8] = [
    "sdpfa_fwd",
    "sdpfa_bwd",
    "grouped_mm",
    "scaled_mm",
    "cutlass_nvfp4_grouped_mm",
    "nv_block_quantize",
    "nv_grouped_block_quantize",
    "preprocess_grouped_matmul_input_sf",
];

const SDPFA_FWD: &[&str] = &["query", "key", "value", "bias", "mask", "dropout_p", "is_causal", "scale"];
const SDPFA_BWD: &[&str] = &[
    "grad_output",
    "query",
    "key",
    "value",
    "output",
    "logsumexp",
    "dropout_p",
    "is_causal",
    "philox_seed",
    "philox_offset",
    "scale",
];
/// `grouped_mm`'s scaled overload and `scaled_mm` share these after the operands.
const SCALED_TAIL: [&str; 7] = [
    "alpha",
    "bias",
    "beta",
    "dtype",
    "output_block_scale_size",
    "output_block_scale_dtype",
    "output_gamma",
];
const GROUPED_MM: &[&str] = &[
    "mat1",
    "mat2",
    "offsets",
    "scale1",
    "scale2",
    "alpha",
    "bias",
    "beta",
    "dtype",
    "output_block_scale_size",
    "output_block_scale_dtype",
    "output_gamma",
];
const SCALED_MM: &[&str] = &[
    "mat1",
    "mat2",
    "scale1",
    "scale2",
    "alpha",
    "bias",
    "beta",
    "dtype",
    "output_block_scale_size",
    "output_block_scale_dtype",
    "output_gamma",
];
const CUTLASS: &[&str] = &[
    "mat1",
    "mat2",
    "scale1",
    "scale2",
    "alpha",
    "problem_sizes",
    "expert_offsets",
    "sf_offsets",
    "dtype",
];
const BLOCK_Q: &[&str] = &["input", "global_scale", "swizzle_block_scales", "block_size", "dtype"];
const GROUPED_BLOCK_Q: &[&str] = &["input", "input_offsets", "output_offsets", "global_scale", "block_size", "dtype"];
const PREPROCESS: &[&str] = &["input", "input_offsets", "output_offsets"];

/// Why the fp4 ops are refused (after their arguments were read).
const FP4_WHY: &str = "fusebench has no packed 4-bit float storage (Float4 types are refused), \
     and nvFuser runs this op only on Blackwell (sm100+: fp4 and Float8_e8m0fnu block scales)";

impl Body<'_, '_> {
    pub(crate) fn gemm_op(&mut self, name: &str, callee: &str, call: &Call) -> PResult<Op> {
        let opt = |s: &mut Self, e: Option<&Expr>| e.map(|e| s.operand(e)).transpose();
        Ok(Op::Gemm(match name {
            "sdpfa_fwd" => {
                let a = bind(callee, call, SDPFA_FWD, &[])?;
                for p in ["bias", "mask"] {
                    if let Some(e) = a.opt(p) {
                        return Err(invalid(
                            e.span,
                            format!(
                                "{callee}: `{p}` is not supported (nvFuser then runs ATen's math attention, \
                                 whose second output is the attention weights, not a log-sum-exp)"
                            ),
                        ));
                    }
                }
                let (q, k, v) = (a.req("query")?, a.req("key")?, a.req("value")?);
                let (query, key, value) = (self.operand(q)?, self.operand(k)?, self.operand(v)?);
                GemmOp::SdpfaFwd {
                    query,
                    key,
                    value,
                    dropout_p: opt(self, a.opt("dropout_p"))?,
                    is_causal: opt(self, a.opt("is_causal"))?,
                    scale: opt(self, a.opt("scale"))?,
                }
            }
            "sdpfa_bwd" => {
                let a = bind(callee, call, SDPFA_BWD, &[])?;
                let mut t = vec![];
                for p in &SDPFA_BWD[..6] {
                    let e = a.req(p)?;
                    t.push(self.operand(e)?);
                }
                let dropout_p = opt(self, a.opt("dropout_p"))?;
                let is_causal = opt(self, a.opt("is_causal"))?;
                let (s, o) = (a.req("philox_seed")?, a.req("philox_offset")?);
                let (philox_seed, philox_offset) = (self.operand(s)?, self.operand(o)?);
                GemmOp::SdpfaBwd {
                    grad_output: t[0],
                    query: t[1],
                    key: t[2],
                    value: t[3],
                    output: t[4],
                    logsumexp: t[5],
                    dropout_p,
                    is_causal,
                    philox_seed,
                    philox_offset,
                    scale: opt(self, a.opt("scale"))?,
                }
            }
            "grouped_mm" => {
                let a = bind(callee, call, GROUPED_MM, &[])?;
                // pybind picks the scaled overload when more than the three
                // operands are given; fusebench reads only the plain one.
                if let Some(p) = GROUPED_MM[3..].iter().find(|p| a.get(p).is_some()) {
                    return Err(invalid(
                        a.get(p).map_or(call.span, |e| e.span),
                        format!(
                            "{callee}: the scaled overload (scale1, scale2, {}) is not supported; \
                             fusebench reads grouped_mm(mat1, mat2, offsets)",
                            SCALED_TAIL.join(", ")
                        ),
                    ));
                }
                let (x, y, o) = (a.req("mat1")?, a.req("mat2")?, a.req("offsets")?);
                let (mat1, mat2, offsets) = (self.operand(x)?, self.operand(y)?, self.operand(o)?);
                GemmOp::GroupedMm { mat1, mat2, offsets }
            }
            "scaled_mm" => {
                let a = bind(callee, call, SCALED_MM, &[])?;
                for p in ["alpha", "bias", "beta"] {
                    if let Some(e) = a.opt(p) {
                        return Err(invalid(e.span, format!("{callee}: `{p}` is not supported yet")));
                    }
                }
                if let Some(e) = a.get("output_block_scale_size") {
                    if self.int(e, "output_block_scale_size")? != 0 {
                        return Err(invalid(
                            e.span,
                            format!("{callee}: output block scales are not supported (nvFuser: \"output_block_scale is not yet supported\")"),
                        ));
                    }
                }
                if let Some(e) = a.get("output_block_scale_dtype") {
                    self.dtype(e, false)?;
                }
                if let Some(e) = a.get("output_gamma") {
                    if self.boolean(e, "output_gamma")? {
                        return Err(invalid(
                            e.span,
                            format!("{callee}: output_gamma is not supported (nvFuser: \"output_gamma is not yet supported\")"),
                        ));
                    }
                }
                let dtype = match a.get("dtype") {
                    Some(e) => self.dtype(e, false)?.unwrap_or(DType::BFloat16),
                    None => DType::BFloat16,
                };
                let mut t = vec![];
                for p in &SCALED_MM[..4] {
                    let e = a.req(p)?;
                    t.push(self.operand(e)?);
                }
                GemmOp::ScaledMm {
                    mat1: t[0],
                    mat2: t[1],
                    scale1: t[2],
                    scale2: t[3],
                    dtype,
                }
            }
            "cutlass_nvfp4_grouped_mm" => return self.refuse_fp4(callee, call, CUTLASS, 8, "Float4_e2m1fn_x2 operands (mat1, mat2)"),
            "nv_block_quantize" => return self.refuse_fp4(callee, call, BLOCK_Q, 1, "a Float4_e2m1fn output"),
            "nv_grouped_block_quantize" => {
                return self.refuse_fp4(callee, call, GROUPED_BLOCK_Q, 3, "a Float4_e2m1fn output")
            }
            "preprocess_grouped_matmul_input_sf" => {
                let a = bind(callee, call, PREPROCESS, &[])?;
                for p in PREPROCESS {
                    let e = a.req(p)?;
                    self.operand(e)?;
                }
                return Err(invalid(
                    call.span,
                    format!(
                        "{callee} is not supported: its output is a swizzled, padded block-scale buffer \
                         that its [m, k] shape does not describe (nvFuser: \"the actual padding in buffer is \
                         not represented by the size/stride of the output tensor\"), nvFuser has no \
                         evaluator for it, and its consumer, cutlass_nvfp4_grouped_mm, needs fp4 operands; \
                         {FP4_WHY}"
                    ),
                ));
            }
            _ => unreachable!("ops_gemm::NAMES lists {name}"),
        }))
    }

    /// Reads the arguments of an fp4 op (the first `tensors` are values that
    /// must exist), then refuses it naming the fp4 type involved.
    fn refuse_fp4(
        &mut self,
        callee: &str,
        call: &Call,
        params: &'static [&'static str],
        tensors: usize,
        involves: &str,
    ) -> PResult<Op> {
        let a = bind(callee, call, params, &[])?;
        for p in &params[..tensors] {
            let e = a.req(p)?;
            self.operand(e)?;
        }
        for p in &params[tensors..] {
            match (*p, a.opt(p)) {
                (_, None) | ("dtype", _) => {}
                ("swizzle_block_scales", Some(e)) => drop(self.boolean(e, p)?),
                ("block_size", Some(e)) => drop(self.int(e, p)?),
                (_, Some(e)) => drop(self.operand(e)?),
            }
        }
        Err(invalid(
            call.span,
            format!("{callee} is not supported: it takes {involves}; {FP4_WHY}"),
        ))
    }
}

/// `NAME(args)` of a [`GemmOp`], after `fd.ops.`, with every argument given
/// so that both bindings read it back alike.
pub(crate) fn print_gemm(o: &GemmOp, a: &dyn Fn(&ValueId) -> String) -> String {
    let opt = |v: &Option<ValueId>| v.as_ref().map_or("None".to_string(), a);
    match o {
        GemmOp::SdpfaFwd {
            query,
            key,
            value,
            dropout_p,
            is_causal,
            scale,
        } => {
            let mut s = format!("sdpfa_fwd({}, {}, {}", a(query), a(key), a(value));
            for (p, v) in [("dropout_p", dropout_p), ("is_causal", is_causal), ("scale", scale)] {
                if let Some(v) = v {
                    s += &format!(", {p}={}", a(v));
                }
            }
            s + ")"
        }
        GemmOp::SdpfaBwd {
            grad_output,
            query,
            key,
            value,
            output,
            logsumexp,
            dropout_p,
            is_causal,
            philox_seed,
            philox_offset,
            scale,
        } => format!(
            "sdpfa_bwd({}, {}, {}, {}, {}, {}, dropout_p={}, is_causal={}, philox_seed={}, philox_offset={}, scale={})",
            a(grad_output),
            a(query),
            a(key),
            a(value),
            a(output),
            a(logsumexp),
            opt(dropout_p),
            opt(is_causal),
            a(philox_seed),
            a(philox_offset),
            opt(scale)
        ),
        GemmOp::GroupedMm { mat1, mat2, offsets } => {
            format!("grouped_mm({}, {}, {})", a(mat1), a(mat2), a(offsets))
        }
        GemmOp::ScaledMm {
            mat1,
            mat2,
            scale1,
            scale2,
            dtype,
        } => format!(
            "scaled_mm({}, {}, {}, {}, dtype=DataType.{dtype})",
            a(mat1),
            a(mat2),
            a(scale1),
            a(scale2)
        ),
    }
}
