//! Element types, with the names nvFuser and PyTorch print for them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element types fusebench supports. `Index` is nvFuser's index type (the
/// count output of `welford`); it runs as 64-bit and is reported as `Int32`
/// when every tensor of the fusion has fewer than 2^31 elements, as nvFuser does.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, PartialOrd, Ord)]
pub enum DType {
    Bool,
    Int32,
    Int,
    Index,
    Half,
    BFloat16,
    Float,
    Double,
    /// Unsigned 64-bit. The CPU reference holds it in i64 lanes as the same
    /// bits; ops whose result depends on signedness use unsigned variants.
    UInt64,
    Float8E4m3fn,
    Float8E5m2,
    Float8E8m0fnu,
    ComplexFloat,
    ComplexDouble,
}

pub const ALL_DTYPES: [DType; 14] = [
    DType::Bool,
    DType::Int32,
    DType::Int,
    DType::Index,
    DType::Half,
    DType::BFloat16,
    DType::Float,
    DType::Double,
    DType::UInt64,
    DType::Float8E4m3fn,
    DType::Float8E5m2,
    DType::Float8E8m0fnu,
    DType::ComplexFloat,
    DType::ComplexDouble,
];

/// nvFuser's packed 4-bit float types: parsed so that they can be refused by name.
pub const UNSUPPORTED_DTYPE_NAMES: [&str; 2] = ["Float4_e2m1fn", "Float4_e2m1fn_x2"];

impl DType {
    /// `DataType.X` name in nvFuser's Python frontend.
    pub fn nvfuser_name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::Int32 => "Int32",
            DType::Int => "Int",
            DType::Index => "Index",
            DType::Half => "Half",
            DType::BFloat16 => "BFloat16",
            DType::Float => "Float",
            DType::Double => "Double",
            DType::UInt64 => "UInt64",
            DType::Float8E4m3fn => "Float8_e4m3fn",
            DType::Float8E5m2 => "Float8_e5m2",
            DType::Float8E8m0fnu => "Float8_e8m0fnu",
            DType::ComplexFloat => "ComplexFloat",
            DType::ComplexDouble => "ComplexDouble",
        }
    }

    /// Parses a `DataType.X` name. `Null` is not a dtype; callers treat it as "none".
    pub fn from_nvfuser_name(s: &str) -> Option<DType> {
        ALL_DTYPES.iter().copied().find(|d| d.nvfuser_name() == s)
    }

    /// `torch.X` name.
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int32 => "int32",
            DType::Int | DType::Index => "int64",
            DType::Half => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float => "float32",
            DType::Double => "float64",
            DType::UInt64 => "uint64",
            DType::Float8E4m3fn => "float8_e4m3fn",
            DType::Float8E5m2 => "float8_e5m2",
            DType::Float8E8m0fnu => "float8_e8m0fnu",
            DType::ComplexFloat => "complex64",
            DType::ComplexDouble => "complex128",
        }
    }

    /// Parses a `torch.X` dtype name, aliases included.
    pub fn from_torch_name(s: &str) -> Option<DType> {
        Some(match s {
            "bool" => DType::Bool,
            "int32" | "int" => DType::Int32,
            "int64" | "long" => DType::Int,
            "float16" | "half" => DType::Half,
            "bfloat16" => DType::BFloat16,
            "float32" | "float" => DType::Float,
            "float64" | "double" => DType::Double,
            "uint64" => DType::UInt64,
            "float8_e4m3fn" => DType::Float8E4m3fn,
            "float8_e5m2" => DType::Float8E5m2,
            "float8_e8m0fnu" => DType::Float8E8m0fnu,
            "complex64" | "cfloat" => DType::ComplexFloat,
            "complex128" | "cdouble" => DType::ComplexDouble,
            _ => return None,
        })
    }

    /// The safetensors dtype tag (safetensors 0.6 has none for complex).
    pub fn safetensors_name(self) -> Option<&'static str> {
        Some(match self {
            DType::Bool => "BOOL",
            DType::Int32 => "I32",
            DType::Int | DType::Index => "I64",
            DType::Half => "F16",
            DType::BFloat16 => "BF16",
            DType::Float => "F32",
            DType::Double => "F64",
            DType::UInt64 => "U64",
            DType::Float8E4m3fn => "F8_E4M3",
            DType::Float8E5m2 => "F8_E5M2",
            DType::Float8E8m0fnu => "F8_E8M0",
            DType::ComplexFloat | DType::ComplexDouble => return None,
        })
    }

    /// The dtype of a safetensors tag.
    pub fn from_safetensors_name(s: &str) -> Option<DType> {
        ALL_DTYPES
            .iter()
            .copied()
            .filter(|&d| d != DType::Index)
            .find(|d| d.safetensors_name() == Some(s))
    }

    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::Float8E4m3fn | DType::Float8E5m2 | DType::Float8E8m0fnu => 1,
            DType::Half | DType::BFloat16 => 2,
            DType::Int32 | DType::Float => 4,
            DType::Int | DType::Index | DType::Double | DType::UInt64 | DType::ComplexFloat => 8,
            DType::ComplexDouble => 16,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Half | DType::BFloat16 | DType::Float | DType::Double
        ) || self.is_float8()
    }

    pub fn is_float8(self) -> bool {
        matches!(
            self,
            DType::Float8E4m3fn | DType::Float8E5m2 | DType::Float8E8m0fnu
        )
    }

    pub fn is_integral(self) -> bool {
        matches!(self, DType::Int32 | DType::Int | DType::Index | DType::UInt64)
    }

    pub fn is_complex(self) -> bool {
        matches!(self, DType::ComplexFloat | DType::ComplexDouble)
    }

    /// The type of the real and imaginary parts of a complex type.
    pub fn complex_part(self) -> Option<DType> {
        match self {
            DType::ComplexFloat => Some(DType::Float),
            DType::ComplexDouble => Some(DType::Double),
            _ => None,
        }
    }

    /// nvFuser's `getComplexTypeFromType`: only Float and Double have one.
    pub fn complex_of(self) -> Option<DType> {
        match self {
            DType::Float | DType::ComplexFloat => Some(DType::ComplexFloat),
            DType::Double | DType::ComplexDouble => Some(DType::ComplexDouble),
            _ => None,
        }
    }

    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// Half, BFloat16 and the float8 types: nvFuser computes arithmetic on them in Float.
    pub fn is_reduced_float(self) -> bool {
        matches!(self, DType::Half | DType::BFloat16) || self.is_float8()
    }

    /// Category rank used by type promotion: bool < integer < float < complex.
    pub(crate) fn category(self) -> u8 {
        if self.is_bool() {
            0
        } else if self.is_integral() {
            1
        } else if self.is_complex() {
            3
        } else {
            2
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.nvfuser_name())
    }
}

/// nvFuser's `promoteType` (csrc/type.h) over fusebench's dtypes; pairs it
/// refuses come back as `Err` with its reasoning. Infallible callers use
/// [`promote_types`].
pub fn try_promote_types(a: DType, b: DType) -> Result<DType, String> {
    use DType::*;
    if a == b {
        return Ok(a);
    }
    // Index with any integer stays Index (nvFuser assumes index arithmetic).
    if (a == Index && b.is_integral()) || (b == Index && a.is_integral()) {
        return Ok(Index);
    }
    if a.is_complex() || b.is_complex() {
        // ComplexFloat with Double is ComplexDouble (ATen's rule, which nvFuser
        // follows); otherwise C++'s common_type: the wider complex type wins.
        if a == ComplexDouble || b == ComplexDouble || a == Double || b == Double {
            return Ok(ComplexDouble);
        }
        return Ok(ComplexFloat);
    }
    if a == UInt64 || b == UInt64 {
        // uint64 has no C++ common type with int/int64/bool in nvFuser's
        // table; only a floating type absorbs it (as in PyTorch).
        let other = if a == UInt64 { b } else { a };
        if other.is_float() {
            return Ok(other);
        }
        return Err(format!(
            "nvFuser cannot promote {a} with {b} (UInt64 promotes only with floating types)"
        ));
    }
    let rank = |d: DType| match d {
        Bool => 0,
        Int32 => 1,
        Int | Index => 2,
        _ => 3,
    };
    Ok(match (a.is_float(), b.is_float()) {
        (true, true) => {
            if a == Double || b == Double {
                Double
            } else {
                // float + half, half + bfloat16, any float8 mix: Float.
                Float
            }
        }
        (true, false) => a,
        (false, true) => b,
        (false, false) => {
            if rank(a) >= rank(b) {
                if a == Index {
                    Int
                } else {
                    a
                }
            } else if b == Index {
                Int
            } else {
                b
            }
        }
    })
}

/// [`try_promote_types`], falling back to `a` for pairs nvFuser refuses (type
/// inference reports those before anything uses this).
pub fn promote_types(a: DType, b: DType) -> DType {
    let a2 = if a == DType::Index && !b.is_integral() { DType::Int } else { a };
    let b2 = if b == DType::Index && !a.is_integral() { DType::Int } else { b };
    let r = try_promote_types(a2, b2).unwrap_or(a);
    if r == DType::Index { DType::Int } else { r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in ALL_DTYPES {
            assert_eq!(DType::from_nvfuser_name(d.nvfuser_name()), Some(d));
        }
        assert_eq!(DType::from_torch_name("bfloat16"), Some(DType::BFloat16));
        assert_eq!(DType::from_nvfuser_name("Null"), None);
    }

    #[test]
    fn promotion_lattice() {
        use DType::*;
        assert_eq!(promote_types(Half, BFloat16), Float);
        assert_eq!(promote_types(BFloat16, Float), Float);
        assert_eq!(promote_types(Int, Float), Float);
        assert_eq!(promote_types(Bool, Int32), Int32);
        assert_eq!(promote_types(Int32, Int), Int);
        assert_eq!(promote_types(Double, Float), Double);
        assert_eq!(promote_types(Index, Int32), Int);
    }

    #[test]
    fn new_dtype_names() {
        use DType::*;
        for d in ALL_DTYPES {
            if d != Index {
                assert_eq!(DType::from_torch_name(d.torch_name()), Some(d));
            }
            if let Some(t) = d.safetensors_name() {
                if d != Index {
                    assert_eq!(DType::from_safetensors_name(t), Some(d));
                }
            }
        }
        assert_eq!(DType::from_nvfuser_name("Float8_e4m3fn"), Some(Float8E4m3fn));
        assert_eq!(DType::from_nvfuser_name("Float8_e8m0fnu"), Some(Float8E8m0fnu));
        assert_eq!(DType::from_nvfuser_name("Float4_e2m1fn"), None);
        assert_eq!(DType::from_torch_name("cdouble"), Some(ComplexDouble));
        assert_eq!(Float8E5m2.safetensors_name(), Some("F8_E5M2"));
        assert_eq!(UInt64.safetensors_name(), Some("U64"));
        assert_eq!(ComplexFloat.safetensors_name(), None);
        assert_eq!(ComplexDouble.size_bytes(), 16);
        assert_eq!(Float8E8m0fnu.size_bytes(), 1);
    }

    #[test]
    fn promotion_of_new_dtypes() {
        use DType::*;
        let p = |a, b| try_promote_types(a, b);
        // float8: floating with floating is Float unless Double is involved.
        assert_eq!(p(Float8E4m3fn, Float8E5m2), Ok(Float));
        assert_eq!(p(Float8E4m3fn, Half), Ok(Float));
        assert_eq!(p(Float8E5m2, Double), Ok(Double));
        assert_eq!(p(Float8E4m3fn, Int), Ok(Float8E4m3fn));
        assert_eq!(p(Bool, Float8E8m0fnu), Ok(Float8E8m0fnu));
        // uint64 only with floats.
        assert_eq!(p(UInt64, Float), Ok(Float));
        assert_eq!(p(BFloat16, UInt64), Ok(BFloat16));
        assert!(p(UInt64, Int).is_err());
        assert!(p(Int32, UInt64).is_err());
        assert!(p(Bool, UInt64).is_err());
        assert_eq!(p(Index, UInt64), Ok(Index));
        // complex.
        assert_eq!(p(ComplexFloat, Double), Ok(ComplexDouble));
        assert_eq!(p(ComplexFloat, Float), Ok(ComplexFloat));
        assert_eq!(p(Int, ComplexFloat), Ok(ComplexFloat));
        assert_eq!(p(ComplexFloat, ComplexDouble), Ok(ComplexDouble));
        assert_eq!(p(ComplexDouble, Half), Ok(ComplexDouble));
        assert_eq!(p(UInt64, ComplexFloat), Ok(ComplexFloat));
    }
}
