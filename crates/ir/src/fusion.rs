//! A whole fusion: values, nodes in definition order, inputs, outputs, and
//! what the script said about itself.

use crate::infer::{infer, Graph};
use crate::recipe::InputRecipe;
use crate::{IrError, Op, Value, ValueDef, ValueId};
use serde::{Deserialize, Serialize};

/// Which Python frontend a script was written for.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Syntax {
    /// `from nvfuser import FusionDefinition, DataType`
    Legacy,
    /// `from nvfuser_direct import FusionDefinition, DataType`
    #[default]
    Direct,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Node {
    pub op: Op,
    pub outputs: Vec<ValueId>,
}

/// The script's own description of where it came from.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, Default)]
pub struct ScriptInfo {
    pub syntax: Syntax,
    /// Comment lines at the top (devices, versions), without the leading `#`.
    #[serde(default)]
    pub header: Vec<String>,
    /// Name of the `def` that defines the fusion.
    #[serde(default)]
    pub function_name: String,
}

/// Output `output` (a position in `Fusion::outputs`) updates tensor input
/// `input` in place. nvFuser returns it from `execute` only if it was an
/// output before the alias was added (csrc/fusion.cpp `aliasOutputToInput`):
/// otherwise it is `hidden`.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct OutputAlias {
    pub output: usize,
    pub input: ValueId,
    pub hidden: bool,
}

/// Output `output` is allocated in `stride_order` (rank of each dim from the
/// innermost, as `define_tensor` takes it).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct OutputLayout {
    pub output: usize,
    pub stride_order: Vec<usize>,
}

/// Version of the JSON form; bump when its meaning changes.
pub const FUSION_JSON_VERSION: u32 = 1;

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, Default)]
pub struct Fusion {
    /// Every value, in the order the script created it.
    pub values: Vec<Value>,
    /// Every op, in the order the script applied it.
    pub nodes: Vec<Node>,
    /// `define_tensor` and value-less `define_scalar`, in definition order.
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    /// `fd.add_output(out, alias_input=inp)`: outputs written into an input in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<OutputAlias>,
    /// `fd.add_output(out, stride_order=[...])`: outputs with a memory layout of their own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_layouts: Vec<OutputLayout>,
    #[serde(default)]
    pub script: ScriptInfo,
    /// The script's `inputs = [...]`, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<Vec<InputRecipe>>,
    /// Per input, what the live values were (`fusebench save` records them;
    /// `None` for scalars and inputs not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_facts: Option<Vec<Option<crate::recipe::InputFacts>>>,
    /// Unseeded random ops' numbers among the unseeded ops of the fusion
    /// they were cut from, by node, where that is not their count here: a
    /// stage of matrix products holds only the ops it computes, and each
    /// op's Philox offset is its number in the whole fusion (`rng::number`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseeded_numbers: Vec<(usize, u64)>,
}

#[derive(Serialize, Deserialize)]
struct Versioned<T> {
    fusebench_fusion: u32,
    #[serde(flatten)]
    fusion: T,
}

impl Fusion {
    pub fn value(&self, v: ValueId) -> &Value {
        &self.values[v.index()]
    }

    /// A scalar input whose value was fixed when the fusion was built (it
    /// decides a shape) must be given that value at run time.
    pub fn check_bound_scalar(&self, input: ValueId, given: crate::Literal) -> Result<(), String> {
        let v = self.value(input);
        match (&v.def, v.constant) {
            (crate::ValueDef::ScalarInput, Some(c)) if c.cast(v.dtype) != given.cast(v.dtype) => Err(format!(
                "scalar input {} was {c} when the fusion was built and fixes a shape (iota's length); \
                 {given} was given: build the fusion again for this value",
                v.name
            )),
            _ => Ok(()),
        }
    }

    pub fn graph(&self) -> Graph<'_> {
        Graph {
            values: &self.values,
            nodes: &self.nodes,
        }
    }

    /// Positions in `outputs` of the outputs nvFuser's `execute` returns: all
    /// but the hidden aliases.
    pub fn visible_outputs(&self) -> Vec<usize> {
        (0..self.outputs.len())
            .filter(|&o| !self.aliases.iter().any(|a| a.output == o && a.hidden))
            .collect()
    }

    /// The input that output `o` updates in place, if any.
    pub fn alias_of(&self, o: usize) -> Option<ValueId> {
        self.aliases.iter().find(|a| a.output == o).map(|a| a.input)
    }

    /// The stride order output `o` is allocated in, if it has one.
    pub fn layout_of(&self, o: usize) -> Option<&[usize]> {
        self.output_layouts
            .iter()
            .find(|l| l.output == o)
            .map(|l| l.stride_order.as_slice())
    }

    /// Number of ops, not counting value definitions.
    pub fn op_count(&self) -> usize {
        self.nodes.len()
    }

    /// Node that defines `v`, if an op does.
    pub fn producer(&self, v: ValueId) -> Option<&Node> {
        match self.value(v).def {
            ValueDef::Node { node, .. } => Some(&self.nodes[node]),
            _ => None,
        }
    }

    /// Walks from `roots` to what they read, each value once, depth first
    /// from the last root: `visit(v)` sees every value reached, and where it
    /// returns false the walk does not go on to the operands of v's producer.
    pub fn walk_up(&self, roots: impl IntoIterator<Item = ValueId>, mut visit: impl FnMut(ValueId) -> bool) {
        let mut seen = std::collections::HashSet::new();
        let mut stack: Vec<ValueId> = roots.into_iter().collect();
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            if visit(v) {
                if let Some(n) = self.producer(v) {
                    stack.extend(n.op.operands());
                }
            }
        }
    }

    /// Whether every tensor has fewer than 2^31 elements: nvFuser then uses
    /// 32-bit indexing and reports `Index` values as Int32.
    pub fn index_is_32bit(&self) -> bool {
        self.values
            .iter()
            .filter(|v| v.is_tensor())
            .all(|v| v.numel() < (1usize << 31))
    }

    /// Serializes to the versioned JSON form.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&Versioned {
            fusebench_fusion: FUSION_JSON_VERSION,
            fusion: self,
        })
        .expect("a fusion always serializes")
    }

    /// Reads the JSON form and checks that it describes a valid fusion.
    pub fn from_json(text: &str) -> Result<Fusion, IrError> {
        let v: Versioned<Fusion> =
            serde_json::from_str(text).map_err(|e| IrError::Json(e.to_string()))?;
        if v.fusebench_fusion != FUSION_JSON_VERSION {
            return Err(IrError::Json(format!(
                "version {} is not supported; this build reads version {FUSION_JSON_VERSION}",
                v.fusebench_fusion
            )));
        }
        v.fusion
            .validate()
            .map_err(|e| IrError::Json(e.to_string()))?;
        Ok(v.fusion)
    }

    /// Re-derives every op's output types and checks them against those stored,
    /// and that every reference points backwards.
    pub fn validate(&self) -> Result<(), IrError> {
        let bad = |m: String| IrError::Json(m);
        for (i, v) in self.values.iter().enumerate() {
            if let ValueDef::Node { node, index } = v.def {
                let n = self
                    .nodes
                    .get(node)
                    .ok_or_else(|| bad(format!("value {i} names missing node {node}")))?;
                if n.outputs.get(index) != Some(&ValueId(i as u32)) {
                    return Err(bad(format!(
                        "value {i} is not output {index} of node {node}"
                    )));
                }
            }
        }
        for (ni, n) in self.nodes.iter().enumerate() {
            let first_out = n.outputs.iter().map(|o| o.index()).min().unwrap_or(0);
            for v in n.op.operands() {
                if v.index() >= first_out {
                    return Err(bad(format!(
                        "node {ni} reads value {} defined after it",
                        v.0
                    )));
                }
            }
            let g = Graph {
                values: &self.values[..first_out],
                nodes: &self.nodes[..ni],
            };
            let types = infer(&g, &n.op)?;
            if types.len() != n.outputs.len() {
                return Err(bad(format!(
                    "node {ni} ({}) has {} outputs, expected {}",
                    n.op.name(),
                    n.outputs.len(),
                    types.len()
                )));
            }
            for (t, o) in types.iter().zip(&n.outputs) {
                let v = self
                    .values
                    .get(o.index())
                    .ok_or_else(|| bad(format!("node {ni} output {} missing", o.0)))?;
                if v.dtype != t.dtype || v.shape != t.shape || v.constant != t.constant {
                    return Err(bad(format!(
                        "node {ni} ({}) output {} is stored as {} {:?} but the op gives {} {:?}",
                        n.op.name(),
                        v.name,
                        v.dtype,
                        v.shape,
                        t.dtype,
                        t.shape
                    )));
                }
            }
        }
        for &o in self.inputs.iter().chain(&self.outputs) {
            if o.index() >= self.values.len() {
                return Err(bad(format!("input/output {} is not a value", o.0)));
            }
        }
        for a in &self.aliases {
            let ok = a.output < self.outputs.len()
                && self.inputs.contains(&a.input)
                && self.value(self.outputs[a.output]).shape == self.value(a.input).shape;
            if !ok {
                return Err(bad(format!("alias of output {} to value {} does not fit", a.output, a.input.0)));
            }
        }
        for l in &self.output_layouts {
            let rank = self.outputs.get(l.output).map(|&o| self.value(o).rank());
            let order: Vec<i64> = l.stride_order.iter().map(|&x| x as i64).collect();
            if rank.is_none_or(|r| crate::infer::stride_permutation("fd.add_output", &order, r).is_err()) {
                return Err(bad(format!("stride_order of output {} does not fit", l.output)));
            }
        }
        Ok(())
    }
}
