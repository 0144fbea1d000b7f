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
}

pub const ALL_DTYPES: [DType; 8] = [
    DType::Bool,
    DType::Int32,
    DType::Int,
    DType::Index,
    DType::Half,
    DType::BFloat16,
    DType::Float,
    DType::Double,
];

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
            _ => return None,
        })
    }

    /// The safetensors dtype tag.
    pub fn safetensors_name(self) -> &'static str {
        match self {
            DType::Bool => "BOOL",
            DType::Int32 => "I32",
            DType::Int | DType::Index => "I64",
            DType::Half => "F16",
            DType::BFloat16 => "BF16",
            DType::Float => "F32",
            DType::Double => "F64",
        }
    }

    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::Half | DType::BFloat16 => 2,
            DType::Int32 | DType::Float => 4,
            DType::Int | DType::Index | DType::Double => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Half | DType::BFloat16 | DType::Float | DType::Double
        )
    }

    pub fn is_integral(self) -> bool {
        matches!(self, DType::Int32 | DType::Int | DType::Index)
    }

    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// Half and BFloat16: nvFuser computes arithmetic on them in Float.
    pub fn is_reduced_float(self) -> bool {
        matches!(self, DType::Half | DType::BFloat16)
    }

    /// Category rank used by type promotion: bool < integer < float.
    pub(crate) fn category(self) -> u8 {
        if self.is_bool() {
            0
        } else if self.is_integral() {
            1
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

/// PyTorch's `promoteTypes` lattice restricted to fusebench's dtypes.
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    let a = if a == Index { Int } else { a };
    let b = if b == Index { Int } else { b };
    if a == b {
        return a;
    }
    match (a, b) {
        (Half, BFloat16) | (BFloat16, Half) => Float,
        _ => {
            // Within the remaining set the order is a total one.
            let rank = |d: DType| match d {
                Bool => 0,
                Int32 => 1,
                Int => 2,
                Half | BFloat16 => 3,
                Float => 4,
                Double => 5,
                Index => 2,
            };
            if rank(a) >= rank(b) {
                a
            } else {
                b
            }
        }
    }
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
    }
}
