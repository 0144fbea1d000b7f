//! Writes a fusion back as a repro script that reads back to the same fusion.
//!
//! Lines come in value-id order, which is the order the script created the
//! values in, so reusing the script's names rebinds them exactly as the
//! script did. Outputs are added as early as their order allows, which is
//! never later than a name of theirs is rebound in a script that was valid.

use crate::expr::is_identifier;
use fusebench_ir::{Fusion, InputRecipe, Literal, Op, Syntax, ValueDef, ValueId};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// The repro script for `f`, in `f.script.syntax`.
pub fn print_script(f: &Fusion) -> String {
    let legacy = f.script.syntax == Syntax::Legacy;
    let defs = definitions(f);
    let early = merge(&defs, &f.outputs, &earliest(f, &defs));
    let names = choose_names(f, &early);
    let steps = match latest(f, &defs, &names) {
        Some(pos) => merge(&defs, &f.outputs, &pos),
        None => early,
    };
    let default_fn = if legacy {
        "nvfuser_fusion_id0"
    } else {
        "nvfuser_fusion"
    };
    let fname = if is_identifier(&f.script.function_name) {
        f.script.function_name.as_str()
    } else {
        default_fn
    };
    // The FusionDefinition's name must not collide with a value or the function.
    let taken: HashSet<&str> = names.iter().map(|s| s.as_str()).chain([fname]).collect();
    let fd = (0..)
        .map(|k| {
            if k == 0 {
                "fd".to_string()
            } else {
                format!("fd{k}")
            }
        })
        .find(|n| !taken.contains(n.as_str()))
        .unwrap_or_default();

    let mut out = String::new();
    for h in &f.script.header {
        let h = h.replace(['\n', '\r'], " ");
        if h.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {h}");
        }
    }
    out.push_str("import torch\n");
    out.push_str(if legacy {
        "from nvfuser import FusionDefinition, DataType\n\n"
    } else {
        "from nvfuser_direct import FusionDefinition, DataType\n"
    });
    let _ = writeln!(out, "def {fname}({fd} : FusionDefinition) -> None :");

    let p = Printer {
        f,
        names: &names,
        fd: &fd,
        legacy,
    };
    let mut body = 0;
    // Output steps come in the order of `f.outputs`.
    let mut output = 0;
    for step in steps {
        let line = match step {
            Step::Define(i) => p.definition(i),
            Step::Node(n) => p.node(n),
            Step::Output(_) => {
                output += 1;
                p.output(output - 1)
            }
        };
        let _ = writeln!(out, "    {line}");
        body += 1;
    }
    if body == 0 {
        out.push_str("    pass\n");
    }
    if legacy {
        out.push('\n');
    }
    let _ = writeln!(out, "with FusionDefinition() as {fd}:\n    {fname}({fd})");
    if let Some(recipe) = &f.recipe {
        out.push_str("\ninputs = [\n");
        for r in recipe {
            let _ = writeln!(out, "    {},", recipe_text(r));
        }
        out.push_str("]\n");
        let _ = writeln!(out, "{fd}.execute(inputs)");
    }
    out
}

/// One line of the `def` body.
#[derive(Clone, Copy)]
enum Step {
    /// `define_tensor` or `define_scalar` of this value.
    Define(usize),
    /// This node, at its first output.
    Node(usize),
    Output(ValueId),
}

/// The definition lines, in value-id order.
fn definitions(f: &Fusion) -> Vec<Step> {
    let mut out = vec![];
    for (i, v) in f.values.iter().enumerate() {
        match v.def {
            ValueDef::TensorInput(_) | ValueDef::ScalarInput | ValueDef::DefineScalar => {
                out.push(Step::Define(i))
            }
            ValueDef::Node { node, index: 0 } if node < f.nodes.len() => out.push(Step::Node(node)),
            _ => {}
        }
    }
    out
}

/// Values each definition line binds a name to.
fn bound_by(f: &Fusion, step: Step) -> Vec<usize> {
    match step {
        Step::Define(i) => vec![i],
        Step::Node(k) => f.nodes[k]
            .outputs
            .iter()
            .map(|o| o.index())
            .filter(|&i| i < f.values.len())
            .collect(),
        Step::Output(_) => vec![],
    }
}

/// The definitions with each output placed after `pos[k]` of them.
fn merge(defs: &[Step], outputs: &[ValueId], pos: &[usize]) -> Vec<Step> {
    let mut out = Vec::with_capacity(defs.len() + outputs.len());
    let mut k = 0;
    for p in 0..=defs.len() {
        while k < outputs.len() && pos[k] <= p {
            out.push(Step::Output(outputs[k]));
            k += 1;
        }
        if let Some(&d) = defs.get(p) {
            out.push(d);
        }
    }
    out
}

/// How many definition lines precede the one that defines each value.
fn def_positions(f: &Fusion, defs: &[Step]) -> Vec<Option<usize>> {
    let mut at = vec![None; f.values.len()];
    for (p, &d) in defs.iter().enumerate() {
        for i in bound_by(f, d) {
            at[i] = Some(p);
        }
    }
    at
}

/// Each output right after its own definition and those of the outputs
/// before it: never after a name of theirs is rebound in a valid script.
fn earliest(f: &Fusion, defs: &[Step]) -> Vec<usize> {
    let at = def_positions(f, defs);
    let mut lo = 0;
    f.outputs
        .iter()
        .map(|o| {
            lo = lo.max(
                at.get(o.index())
                    .copied()
                    .flatten()
                    .map_or(defs.len(), |p| p + 1),
            );
            lo
        })
        .collect()
}

/// Each output as late as its name still means it and the order allows,
/// which puts them all at the end unless names are reused; `None` if some
/// output cannot be placed so.
fn latest(f: &Fusion, defs: &[Step], names: &[String]) -> Option<Vec<usize>> {
    let at = def_positions(f, defs);
    let mut pos = vec![0; f.outputs.len()];
    for (k, o) in f.outputs.iter().enumerate() {
        let def = at.get(o.index()).copied().flatten()?;
        let name = &names[o.index()];
        let rebound = (def + 1..defs.len())
            .find(|&p| bound_by(f, defs[p]).iter().any(|&i| &names[i] == name));
        pos[k] = rebound.unwrap_or(defs.len());
    }
    for k in (0..pos.len().saturating_sub(1)).rev() {
        pos[k] = pos[k].min(pos[k + 1]);
    }
    let ok = f
        .outputs
        .iter()
        .zip(&pos)
        .all(|(o, &p)| at[o.index()].is_some_and(|d| p > d));
    ok.then_some(pos)
}

fn is_literal(f: &Fusion, v: ValueId) -> bool {
    f.values
        .get(v.index())
        .is_some_and(|v| matches!(v.def, ValueDef::Literal))
}

/// The name each value is printed under: its own, unless that is not an
/// identifier or would not refer to the value where it is used (a fusion not
/// read from a script can have either); then a fresh one.
fn choose_names(f: &Fusion, steps: &[Step]) -> Vec<String> {
    let n = f.values.len();
    let mut bad: Vec<bool> = f
        .values
        .iter()
        .map(|v| {
            !matches!(v.def, ValueDef::Literal)
                && (!is_identifier(&v.name) || ["DataType", "float"].contains(&v.name.as_str()))
        })
        .collect();
    let mut bound: HashMap<&str, usize> = HashMap::new();
    let used = |v: ValueId, bound: &HashMap<&str, usize>, bad: &mut Vec<bool>| {
        if v.index() < n
            && !is_literal(f, v)
            && bound.get(f.values[v.index()].name.as_str()) != Some(&v.index())
        {
            bad[v.index()] = true;
        }
    };
    for &step in steps {
        match step {
            Step::Node(k) => {
                for v in f.nodes[k].op.operands() {
                    used(v, &bound, &mut bad);
                }
            }
            Step::Output(v) => used(v, &bound, &mut bad),
            Step::Define(_) => {}
        }
        for i in bound_by(f, step) {
            bound.insert(&f.values[i].name, i);
        }
    }
    let mut taken: HashSet<String> = f
        .values
        .iter()
        .zip(&bad)
        .filter(|(_, b)| !**b)
        .map(|(v, _)| v.name.clone())
        .collect();
    f.values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if !bad[i] {
                return v.name.clone();
            }
            let base = if v.is_tensor() {
                format!("tv{i}")
            } else {
                format!("c{i}")
            };
            let mut cand = base.clone();
            let mut k = 0;
            while taken.contains(&cand) {
                k += 1;
                cand = format!("{base}_{k}");
            }
            taken.insert(cand.clone());
            cand
        })
        .collect()
}

struct Printer<'a> {
    f: &'a Fusion,
    names: &'a [String],
    fd: &'a str,
    legacy: bool,
}

fn ints<T: std::fmt::Display>(v: &[T]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

impl Printer<'_> {
    /// An operand as written in a call: a literal inline, anything else by name.
    fn arg(&self, v: ValueId) -> String {
        match self.f.values.get(v.index()) {
            Some(val) if matches!(val.def, ValueDef::Literal) => {
                val.constant.map_or("None".to_string(), |c| c.to_string())
            }
            Some(_) => self.names[v.index()].clone(),
            None => "None".to_string(),
        }
    }

    fn args(&self, vs: &[ValueId]) -> String {
        format!(
            "[{}]",
            vs.iter()
                .map(|&v| self.arg(v))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    fn definition(&self, i: usize) -> String {
        let (v, fd, name) = (&self.f.values[i], self.fd, &self.names[i]);
        match &v.def {
            ValueDef::TensorInput(decl) => {
                let shape = v.shape.as_deref().unwrap_or(&[]);
                let contiguity: Vec<&str> = decl
                    .contiguity
                    .iter()
                    .map(|c| c.map_or("None", py_bool))
                    .collect();
                let mut s = format!(
                    "{name} = {fd}.define_tensor(shape={}, contiguity=[{}], dtype=DataType.{}, is_cpu={}",
                    ints(shape),
                    contiguity.join(", "),
                    v.dtype,
                    py_bool(decl.is_cpu)
                );
                if !decl.stride_order.is_empty() {
                    let _ = write!(s, ", stride_order={}", ints(&decl.stride_order));
                }
                s.push(')');
                s
            }
            _ => {
                let value = match (&v.def, v.constant) {
                    (ValueDef::DefineScalar, Some(c)) => c.to_string(),
                    _ => "None".to_string(),
                };
                format!(
                    "{name} = {fd}.define_scalar({value}, dtype=DataType.{})",
                    v.dtype
                )
            }
        }
    }

    /// `fd.add_output(...)` of output `k`: with its alias (keyword in legacy
    /// scripts, positional in direct ones, as their printers write it) or its
    /// stride order. An alias of a value that was already an output is a
    /// second line, as nvFuser then returns it too.
    fn output(&self, k: usize) -> String {
        let (f, fd) = (self.f, self.fd);
        let out = self.arg(f.outputs[k]);
        if let Some(a) = f.aliases.iter().find(|a| a.output == k) {
            let input = self.arg(a.input);
            let alias = if self.legacy {
                format!("{fd}.add_output({out}, alias_input={input})")
            } else {
                format!("{fd}.add_output({out}, {input})")
            };
            return if a.hidden {
                alias
            } else {
                format!("{fd}.add_output({out})\n    {alias}")
            };
        }
        match f.layout_of(k) {
            Some(order) => format!("{fd}.add_output({out}, stride_order={})", ints(order)),
            None => format!("{fd}.add_output({out})"),
        }
    }

    fn node(&self, k: usize) -> String {
        let node = &self.f.nodes[k];
        let targets: Vec<&str> = node
            .outputs
            .iter()
            .map(|o| self.names.get(o.index()).map_or("_", |s| s.as_str()))
            .collect();
        // `scaled_mm` returns `(out, None, None)` in Python.
        let mut targets = targets;
        if let Op::Gemm(o) = &node.op {
            targets.resize(o.python_returns(), "_");
        }
        let lhs = if targets.len() == 1 {
            targets[0].to_string()
        } else {
            targets.join(", ")
        };
        format!("{lhs} = {}.ops.{}", self.fd, self.call(&node.op))
    }

    /// `NAME(args)` of an op, after `fd.ops.`.
    fn call(&self, op: &Op) -> String {
        let a = |v: &ValueId| self.arg(*v);
        match op {
            Op::Unary { kind, x } => format!("{}({})", kind.name(), a(x)),
            Op::Binary { kind, a: l, b: r } => format!("{}({}, {})", kind.name(), a(l), a(r)),
            Op::Where { cond, a: l, b: r } => format!("where({}, {}, {})", a(cond), a(l), a(r)),
            Op::Ternary { kind, a: x, b: y, c: z } => {
                format!("{}({}, {}, {})", kind.name(), a(x), a(y), a(z))
            }
            Op::Cast { x, dtype } => format!("cast({}, dtype=DataType.{dtype})", a(x)),
            Op::Complex { kind, xs } => {
                let args: Vec<String> = xs.iter().map(a).collect();
                format!("{}({})", kind.name(), args.join(", "))
            }
            Op::Reduce {
                kind,
                x,
                dims,
                keepdim,
                dtype,
            } => {
                let mut s = format!("{}({}, dims={}", kind.name(), a(x), ints(dims));
                if self.legacy {
                    // The legacy frontend spells out every argument.
                    let d = dtype.map_or("Null".to_string(), |d| d.to_string());
                    let _ = write!(s, ", keepdim={}, dtype=DataType.{d}", py_bool(*keepdim));
                } else {
                    if *keepdim {
                        s.push_str(", keepdim=True");
                    }
                    if let Some(d) = dtype {
                        let _ = write!(s, ", dtype=DataType.{d}");
                    }
                }
                s.push(')');
                s
            }
            Op::Welford { x, dims } => format!("welford({}, dims={})", a(x), ints(dims)),
            Op::Scan { kind, x, dim, init } => match init {
                Some(i) => format!("{}({}, dim={dim}, init={})", kind.name(), a(x), a(i)),
                None => format!("{}({}, dim={dim})", kind.name(), a(x)),
            },
            Op::VarMean {
                x,
                dims,
                correction,
                keepdim,
            } => {
                format!(
                    "var_mean({}, dims={}, correction={correction}, keepdim={})",
                    a(x),
                    ints(dims),
                    py_bool(*keepdim)
                )
            }
            Op::Broadcast {
                x,
                is_broadcast_dim,
            } => {
                let b: Vec<&str> = is_broadcast_dim.iter().map(|&b| py_bool(b)).collect();
                format!("broadcast({}, is_broadcast_dim=[{}])", a(x), b.join(", "))
            }
            Op::BroadcastInDim {
                x,
                shape,
                broadcast_dims,
            } => {
                format!(
                    "broadcast_in_dim({}, shape={}, broadcast_dims={})",
                    a(x),
                    ints(shape),
                    ints(broadcast_dims)
                )
            }
            Op::Expand { x, shape } => format!("expand({}, shape={})", a(x), ints(shape)),
            Op::Reshape { x, new_shape } => {
                format!("reshape({}, new_shape={})", a(x), ints(new_shape))
            }
            Op::Permute { x, dims } => format!("permute({}, dims={})", a(x), ints(dims)),
            Op::Squeeze { x, dims } => {
                // Squeezing a dim of extent > 1 (an expanded broadcast) needs the flag.
                let shape = self.f.value(*x).shape.clone().unwrap_or_default();
                let expanded = dims.iter().any(|&d| {
                    let d = if d < 0 { d + shape.len() as i64 } else { d };
                    shape.get(d as usize).is_some_and(|&e| e != 1)
                });
                let flag = if expanded { ", squeeze_expanded=True" } else { "" };
                format!("squeeze({}, dims={}{flag})", a(x), ints(dims))
            }
            Op::Slice {
                x,
                start,
                end,
                strides,
                manual_normalization,
            } => {
                let mut s = format!(
                    "slice({}, start_indices={}, end_indices={}, strides={}",
                    a(x),
                    ints(start),
                    ints(end),
                    ints(strides)
                );
                if *manual_normalization {
                    s.push_str(", manual_normalization=True");
                }
                s.push(')');
                s
            }
            Op::Pad { x, widths, value } => {
                let mut s = format!("pad({}, pad_widths={}", a(x), self.args(widths));
                if let Some(v) = value {
                    let _ = write!(s, ", value={}", a(v));
                }
                s.push(')');
                s
            }
            Op::Cat {
                xs,
                dim,
                manual_padding,
            } => {
                let mut s = format!("cat({}, dim={dim}", self.args(xs));
                if *manual_padding {
                    s.push_str(", manual_padding=True");
                }
                s.push(')');
                s
            }
            Op::Full { shape, fill, dtype } => {
                format!(
                    "full(shape={}, fill_value={}, dtype=DataType.{dtype})",
                    ints(shape),
                    a(fill)
                )
            }
            Op::IndexSelect { x, index, dim } => {
                format!("index_select({}, {}, dim={dim})", a(x), a(index))
            }
            Op::Index(o) => crate::ops_index::print_index(o, &a),
            Op::Gemm(o) => crate::ops_gemm::print_gemm(o, &a),
            Op::Rng {
                dist,
                a: l,
                b: r,
                shape,
                seed,
                offset,
                dtype,
            } => {
                let mut s = format!("{}({}, {}, shape={}", dist.name(), a(l), a(r), ints(shape));
                if let (Some(sd), Some(of)) = (seed, offset) {
                    let _ = write!(s, ", rng_seed={}, rng_offset={}", a(sd), a(of));
                }
                let _ = write!(s, ", dtype=DataType.{dtype})");
                s
            }
            Op::RngLike { dist, x } => format!("{}({})", dist.like_name(), a(x)),
            Op::Set { x, segment } => {
                format!("{}({})", if *segment { "segment_set" } else { "set" }, a(x))
            }
            Op::StrideOrder { x, stride_order } => {
                format!("stride_order({}, stride_order={})", a(x), ints(stride_order))
            }
            Op::Size { x, dim } => format!("size({}, dim={dim})", a(x)),
            Op::Matmul { a: x, b } => format!("matmul({}, {})", a(x), a(b)),
            Op::Linear { a: x, weight, bias } => match bias {
                Some(bias) => format!("linear({}, {}, bias={})", a(x), a(weight), a(bias)),
                None => format!("linear({}, {})", a(x), a(weight)),
            },
        }
    }
}

fn tuple<T: std::fmt::Display>(v: &[T]) -> String {
    match v {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A bound of make_tensor: whole numbers as integers, as people write them.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        Literal::Float(x).to_string()
    }
}

fn recipe_text(r: &InputRecipe) -> String {
    const DEVICE: &str = "device='cuda:0'";
    match r {
        InputRecipe::MakeTensor {
            shape,
            dtype,
            low,
            high,
        } => {
            let mut s = format!(
                "torch.testing.make_tensor({}, dtype=torch.{}, {DEVICE}",
                tuple(shape),
                dtype.torch_name()
            );
            if let Some(l) = low {
                let _ = write!(s, ", low={}", number(*l));
            }
            if let Some(h) = high {
                let _ = write!(s, ", high={}", number(*h));
            }
            s.push(')');
            s
        }
        InputRecipe::Randn {
            size,
            dtype,
            as_strided,
        } => {
            let size = if let [one] = size.as_slice() {
                one.to_string()
            } else {
                tuple(size)
            };
            let mut s = format!(
                "torch.randn({size}, dtype=torch.{}, {DEVICE})",
                dtype.torch_name()
            );
            if let Some((shape, strides)) = as_strided {
                let _ = write!(s, ".as_strided({}, {})", tuple(shape), tuple(strides));
            }
            s
        }
        InputRecipe::Randint {
            low,
            high,
            size,
            dtype,
            as_strided,
        } => {
            let mut s = format!(
                "torch.randint({low}, {high}, {}, dtype=torch.{}, {DEVICE})",
                tuple(size),
                dtype.torch_name()
            );
            if let Some((shape, strides)) = as_strided {
                let _ = write!(s, ".as_strided({}, {})", tuple(shape), tuple(strides));
            }
            s
        }
        InputRecipe::Scalar { value } => value.to_string(),
    }
}
