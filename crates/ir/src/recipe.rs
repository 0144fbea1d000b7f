//! The `inputs = [...]` list of a repro script: how each input was made, and
//! whether that agrees with the fusion's definition.

use crate::{DType, Fusion, Literal, ValueDef};
use serde::{Deserialize, Serialize};

/// How one input of a repro script is made.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InputRecipe {
    /// `torch.testing.make_tensor(shape, dtype=, device=, low=, high=)`: uniform values.
    MakeTensor {
        shape: Vec<usize>,
        dtype: DType,
        low: Option<f64>,
        high: Option<f64>,
    },
    /// `torch.randn(*size, dtype=, device=)`, optionally `.as_strided(size, stride)`: normal values.
    Randn {
        size: Vec<usize>,
        dtype: DType,
        as_strided: Option<(Vec<usize>, Vec<i64>)>,
    },
    /// `torch.randint(low, high, size, dtype=, device=)`: integers in [low, high).
    Randint {
        low: i64,
        high: i64,
        size: Vec<usize>,
        dtype: DType,
        /// `.as_strided(size, stride)` on the drawn storage, as for `Randn`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        as_strided: Option<(Vec<usize>, Vec<i64>)>,
    },
    /// A plain Python scalar.
    Scalar { value: Literal },
}

/// What the live run's values of one tensor input were: their range and a
/// hash of their contents, so that a saved fusion can be fed values like the
/// ones it saw (a sqrt's input stays non-negative) and a rerun can tell
/// whether it used the very same values.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct InputFacts {
    pub min: f64,
    pub max: f64,
    /// SHA-256 (first 12 bytes, hex) of the logical elements in row-major
    /// order, little-endian in the input's dtype.
    pub content_hash: String,
}

/// The distribution of values a recipe draws from.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Distribution {
    /// Uniform in [low, high); integers are drawn in [low, high).
    Uniform {
        low: f64,
        high: f64,
    },
    /// Standard normal.
    Normal,
    Constant(Literal),
}

impl InputRecipe {
    pub fn dtype(&self) -> DType {
        match self {
            InputRecipe::MakeTensor { dtype, .. }
            | InputRecipe::Randn { dtype, .. }
            | InputRecipe::Randint { dtype, .. } => *dtype,
            InputRecipe::Scalar { value } => value.natural_dtype(),
        }
    }

    /// Logical shape of the tensor it makes; `None` for a scalar.
    pub fn shape(&self) -> Option<Vec<usize>> {
        match self {
            InputRecipe::MakeTensor { shape, .. } => Some(shape.clone()),
            InputRecipe::Randn {
                as_strided: Some((size, _)),
                ..
            }
            | InputRecipe::Randint {
                as_strided: Some((size, _)),
                ..
            } => Some(size.clone()),
            InputRecipe::Randn { size, .. } | InputRecipe::Randint { size, .. } => {
                Some(size.clone())
            }
            InputRecipe::Scalar { .. } => None,
        }
    }

    /// Strides in elements of the tensor it makes.
    pub fn strides(&self) -> Option<Vec<i64>> {
        match self {
            InputRecipe::Randn {
                as_strided: Some((_, st)),
                ..
            }
            | InputRecipe::Randint {
                as_strided: Some((_, st)),
                ..
            } => Some(st.clone()),
            InputRecipe::Scalar { .. } => None,
            _ => self.shape().map(|s| row_major_strides(&s)),
        }
    }

    /// Elements of the storage it allocates.
    pub fn storage_len(&self) -> usize {
        match self {
            InputRecipe::Randn { size, .. } | InputRecipe::Randint { size, .. } => size.iter().product(),
            other => other.shape().map_or(1, |s| s.iter().product()),
        }
    }

    /// What `torch` draws values from, defaults included
    /// (`make_tensor`: floats in [-9, 9], integers in [-9, 10), bools 0/1).
    pub fn distribution(&self) -> Distribution {
        match self {
            InputRecipe::MakeTensor {
                dtype, low, high, ..
            } => {
                let (dl, dh) = if dtype.is_bool() {
                    (0.0, 2.0)
                } else if dtype.is_integral() {
                    (-9.0, 10.0)
                } else {
                    (-9.0, 9.0)
                };
                Distribution::Uniform {
                    low: low.unwrap_or(dl),
                    high: high.unwrap_or(dh),
                }
            }
            InputRecipe::Randn { .. } => Distribution::Normal,
            InputRecipe::Randint { low, high, .. } => Distribution::Uniform {
                low: *low as f64,
                high: *high as f64,
            },
            InputRecipe::Scalar { value } => Distribution::Constant(*value),
        }
    }
}

pub fn row_major_strides(shape: &[usize]) -> Vec<i64> {
    let mut st = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for d in (0..shape.len()).rev() {
        st[d] = acc;
        acc *= shape[d].max(1) as i64;
    }
    st
}

/// One way a script's inputs disagree with its definition.
#[derive(Clone, PartialEq, Debug, Serialize)]
pub struct InputIssue {
    /// Position in the `inputs` list.
    pub input: usize,
    pub message: String,
}

/// Checks each recipe against the matching fusion input: count, kind, shape,
/// dtype, strides against contiguity/stride_order, storage bounds.
pub fn check_recipes(f: &Fusion, recipes: &[InputRecipe]) -> Vec<InputIssue> {
    let mut issues = Vec::new();
    if recipes.len() != f.inputs.len() {
        issues.push(InputIssue {
            input: recipes.len().min(f.inputs.len()),
            message: format!(
                "the script gives {} inputs but the fusion defines {}",
                recipes.len(),
                f.inputs.len()
            ),
        });
    }
    for (i, (r, &vid)) in recipes.iter().zip(&f.inputs).enumerate() {
        let v = f.value(vid);
        let mut say = |m: String| {
            issues.push(InputIssue {
                input: i,
                message: format!("input {i} ({}): {m}", v.name),
            })
        };
        match (&v.def, r.shape()) {
            (ValueDef::TensorInput(decl), Some(shape)) => {
                let want = v.shape.as_ref().unwrap();
                if &shape != want {
                    say(format!("shape {shape:?} but the definition says {want:?}"));
                    continue;
                }
                if r.dtype() != v.dtype {
                    say(format!(
                        "dtype {} but the definition says {}",
                        r.dtype().torch_name(),
                        v.dtype.torch_name()
                    ));
                }
                let strides = r.strides().unwrap();
                if let InputRecipe::Randn {
                    size,
                    as_strided: Some(_),
                    ..
                }
                | InputRecipe::Randint {
                    size,
                    as_strided: Some(_),
                    ..
                } = r
                {
                    let storage: usize = size.iter().product();
                    let reach: i64 = shape
                        .iter()
                        .zip(&strides)
                        .map(|(&e, &s)| (e.max(1) as i64 - 1) * s)
                        .sum::<i64>()
                        + 1;
                    if reach > storage as i64 || strides.iter().any(|&s| s < 0) {
                        say(format!(
                            "as_strided reaches element {} of a storage of {storage}",
                            reach - 1
                        ));
                    }
                }
                for m in decl.check_strides(&shape, &strides) {
                    say(format!("strides {strides:?}: {m}"));
                }
            }
            (ValueDef::ScalarInput, None) => {
                let d = r.dtype();
                if d.is_float() && !v.dtype.is_float() || d.is_integral() && v.dtype.is_bool() {
                    say(format!("a {} scalar for a {} input", d, v.dtype));
                }
            }
            (ValueDef::TensorInput(_), None) => {
                say("a scalar where the definition has a tensor".into())
            }
            (_, Some(_)) => say("a tensor where the definition has a scalar".into()),
            _ => {}
        }
    }
    issues
}
