//! Values of a fusion: tensors and scalars, how each is defined, constant scalars.

use crate::DType;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Index of a value in [`crate::Fusion::values`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(transparent)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A constant scalar as Python writes it: `True`, `3`, `2.5`, `float("inf")`.
#[derive(Clone, Copy, Debug)]
pub enum Literal {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl PartialEq for Literal {
    /// Bitwise on floats so that NaN equals NaN: two fusions with the same
    /// literal are the same fusion.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Literal::Bool(a), Literal::Bool(b)) => a == b,
            (Literal::Int(a), Literal::Int(b)) => a == b,
            (Literal::Float(a), Literal::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Literal {
    /// The dtype nvFuser gives a Python literal.
    pub fn natural_dtype(self) -> DType {
        match self {
            Literal::Bool(_) => DType::Bool,
            Literal::Int(_) => DType::Int,
            Literal::Float(_) => DType::Double,
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Literal::Bool(b) => b as i64 as f64,
            Literal::Int(i) => i as f64,
            Literal::Float(f) => f,
        }
    }

    pub fn as_i64(self) -> Option<i64> {
        match self {
            Literal::Bool(b) => Some(b as i64),
            Literal::Int(i) => Some(i),
            Literal::Float(f) if f.fract() == 0.0 && f.is_finite() => Some(f as i64),
            Literal::Float(_) => None,
        }
    }

    pub fn as_bool(self) -> bool {
        match self {
            Literal::Bool(b) => b,
            Literal::Int(i) => i != 0,
            Literal::Float(f) => f != 0.0,
        }
    }

    /// The value converted to `dtype` the way a C cast does (floats to integers
    /// truncate; reduced floats round to nearest even).
    pub fn cast(self, dtype: DType) -> Literal {
        match dtype {
            DType::Bool => Literal::Bool(self.as_bool()),
            DType::Int32 => Literal::Int(match self {
                Literal::Float(f) => f as i32 as i64,
                other => other.as_i64().unwrap_or(0) as i32 as i64,
            }),
            DType::Int | DType::Index => Literal::Int(match self {
                Literal::Float(f) => f as i64,
                other => other.as_i64().unwrap_or(0),
            }),
            DType::Double => Literal::Float(self.as_f64()),
            DType::Float => Literal::Float(self.as_f64() as f32 as f64),
            DType::BFloat16 => Literal::Float(crate::round::to_bf16(self.as_f64())),
            DType::Half => Literal::Float(crate::round::to_f16(self.as_f64())),
            DType::Float8E4m3fn => Literal::Float(crate::round::to_f8e4m3(self.as_f64())),
            DType::Float8E5m2 => Literal::Float(crate::round::to_f8e5m2(self.as_f64())),
            DType::Float8E8m0fnu => Literal::Float(crate::round::to_f8e8m0(self.as_f64())),
            // The same 64 bits; floats convert as CUDA does (saturating, NaN to 0).
            DType::UInt64 => Literal::Int(match self {
                Literal::Float(f) => f as u64 as i64,
                other => other.as_i64().unwrap_or(0),
            }),
            // Complex constants do not exist (type inference refuses complex
            // scalars); the real part stands for the value.
            DType::ComplexFloat => Literal::Float(self.as_f64() as f32 as f64),
            DType::ComplexDouble => Literal::Float(self.as_f64()),
        }
    }
}

impl fmt::Display for Literal {
    /// Python source for the literal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Literal::Bool(b) => f.write_str(if b { "True" } else { "False" }),
            Literal::Int(i) => write!(f, "{i}"),
            Literal::Float(x) if x.is_nan() => f.write_str("float(\"nan\")"),
            Literal::Float(x) if x.is_infinite() => f.write_str(if x > 0.0 {
                "float(\"inf\")"
            } else {
                "float(\"-inf\")"
            }),
            // `{:?}` is the shortest text that reads back to the same f64.
            Literal::Float(x) => write!(f, "{x:?}"),
        }
    }
}

// JSON has no NaN or infinity: floats that are not finite travel as strings.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum LiteralRepr {
    Bool(bool),
    Int(i64),
    Float(FloatRepr),
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum FloatRepr {
    Num(f64),
    Text(String),
}

impl Serialize for Literal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = match *self {
            Literal::Bool(b) => LiteralRepr::Bool(b),
            Literal::Int(i) => LiteralRepr::Int(i),
            Literal::Float(x) if x.is_finite() => LiteralRepr::Float(FloatRepr::Num(x)),
            Literal::Float(x) => LiteralRepr::Float(FloatRepr::Text(
                match (x.is_nan(), x.is_sign_negative()) {
                    (true, false) => "nan",
                    (true, true) => "-nan",
                    (false, false) => "inf",
                    (false, true) => "-inf",
                }
                .into(),
            )),
        };
        r.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Literal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match LiteralRepr::deserialize(d)? {
            LiteralRepr::Bool(b) => Literal::Bool(b),
            LiteralRepr::Int(i) => Literal::Int(i),
            LiteralRepr::Float(FloatRepr::Num(x)) => Literal::Float(x),
            LiteralRepr::Float(FloatRepr::Text(t)) => Literal::Float(match t.as_str() {
                "nan" => f64::NAN,
                "-nan" => -f64::NAN,
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => {
                    return Err(serde::de::Error::custom(format!(
                        "float literal {other:?}: expected a number, \"nan\", \"inf\" or \"-inf\""
                    )))
                }
            }),
        })
    }
}

/// How a tensor input was declared by `fd.define_tensor`.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct TensorDecl {
    /// In allocation order (outermost first), as nvFuser takes it; `None` marks a broadcast dim.
    pub contiguity: Vec<Option<bool>>,
    /// `stride_order[i]` is the rank of logical dim `i` in the allocation, 0 being innermost.
    /// Empty means row-major.
    pub stride_order: Vec<usize>,
    pub is_cpu: bool,
}

impl TensorDecl {
    /// Logical dims from outermost to innermost in memory.
    pub fn allocation_order(&self, rank: usize) -> Vec<usize> {
        if self.stride_order.is_empty() {
            return (0..rank).collect();
        }
        let mut order = vec![0; rank];
        for (dim, &so) in self.stride_order.iter().enumerate() {
            order[rank - 1 - so] = dim;
        }
        order
    }

    /// Contiguity of logical dim `dim`.
    pub fn contiguity_of(&self, dim: usize, rank: usize) -> Option<bool> {
        let pos = if self.stride_order.is_empty() {
            dim
        } else {
            rank - 1 - self.stride_order[dim]
        };
        self.contiguity[pos]
    }

    /// Dims declared broadcast (contiguity `None`).
    pub fn is_broadcast(&self, dim: usize, rank: usize) -> bool {
        self.contiguity_of(dim, rank).is_none()
    }

    /// Strides of a dense tensor that satisfies this declaration: allocation
    /// order from `stride_order`, broadcast dims of extent > 1 at stride 0.
    pub fn dense_strides(&self, shape: &[usize]) -> Vec<i64> {
        let rank = shape.len();
        let mut strides = vec![0i64; rank];
        let mut next = 1i64;
        for &dim in self.allocation_order(rank).iter().rev() {
            if self.is_broadcast(dim, rank) && shape[dim] != 1 {
                strides[dim] = 0;
            } else {
                strides[dim] = next;
                next *= shape[dim].max(1) as i64;
            }
        }
        strides
    }

    /// Checks concrete strides against the declaration the way nvFuser derives
    /// contiguity from strides. Returns one message per disagreement.
    pub fn check_strides(&self, shape: &[usize], strides: &[i64]) -> Vec<String> {
        let rank = shape.len();
        let mut problems = Vec::new();
        if strides.len() != rank {
            problems.push(format!("has {} strides for {} dims", strides.len(), rank));
            return problems;
        }
        let order = self.allocation_order(rank);
        let is_bcast = |d: usize| strides[d] == 0 || shape[d] == 1;
        for (pos, &dim) in order.iter().enumerate() {
            let declared = self.contiguity[pos];
            match declared {
                None => {
                    if !is_bcast(dim) {
                        problems.push(format!(
                            "dim {dim} is declared broadcast (contiguity None) but has extent {} and stride {}",
                            shape[dim], strides[dim]
                        ));
                    }
                }
                Some(c) => {
                    if strides[dim] == 0 && shape[dim] != 1 {
                        problems.push(format!(
                            "dim {dim} has stride 0 (an expanded broadcast) but is declared contiguity {}, not None",
                            if c { "True" } else { "False" }
                        ));
                        continue;
                    }
                    if !c {
                        continue;
                    }
                    let inner = order[pos + 1..].iter().copied().find(|&d| !is_bcast(d));
                    let expected = inner.map_or(1, |d| strides[d] * shape[d] as i64);
                    if strides[dim] != expected && shape[dim] != 1 {
                        problems.push(format!(
                            "dim {dim} is declared contiguous but has stride {} where {} was expected",
                            strides[dim], expected
                        ));
                    }
                }
            }
        }
        let mut sorted: Vec<usize> = (0..rank).filter(|&d| !is_bcast(d)).collect();
        sorted.sort_by_key(|&d| std::cmp::Reverse(strides[d]));
        let declared: Vec<usize> = order.iter().copied().filter(|&d| !is_bcast(d)).collect();
        if sorted != declared && problems.is_empty() {
            let same_strides = sorted
                .iter()
                .zip(&declared)
                .all(|(&a, &b)| strides[a] == strides[b]);
            if !same_strides {
                problems.push(format!(
                    "memory order of dims (outermost first) is {sorted:?} but the declaration's stride_order gives {declared:?}"
                ));
            }
        }
        problems
    }
}

/// Where a value comes from.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ValueDef {
    /// `fd.define_tensor(...)`
    TensorInput(TensorDecl),
    /// `fd.define_scalar(dtype=...)` with no value: supplied at run time.
    ScalarInput,
    /// `fd.define_scalar(value, dtype=...)`
    DefineScalar,
    /// A literal written inline as an op argument.
    Literal,
    /// Output `index` of node `node`.
    Node { node: usize, index: usize },
}

/// One tensor or scalar of a fusion.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Value {
    /// The name the script gave it (`tv3`, `T2`, `c53`), used when printing.
    pub name: String,
    pub dtype: DType,
    /// Extents of a tensor; `None` for a scalar.
    pub shape: Option<Vec<usize>>,
    pub def: ValueDef,
    /// The value of a scalar known when the fusion is built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constant: Option<Literal>,
}

impl Value {
    pub fn is_tensor(&self) -> bool {
        self.shape.is_some()
    }
    pub fn rank(&self) -> usize {
        self.shape.as_ref().map_or(0, |s| s.len())
    }
    /// Element count; saturates instead of overflowing (the builder rejects
    /// shapes that large, but a value built by hand may not be checked).
    pub fn numel(&self) -> usize {
        self.shape
            .as_ref()
            .map_or(1, |s| s.iter().fold(1usize, |a, &e| a.saturating_mul(e)))
    }
}
