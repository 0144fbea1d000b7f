//! Rewrites made at the start of planning: ops the kernels have no combine
//! for are replaced by equivalent ops they do run, so that every schedule
//! (inline, row-wise, persistent, outer, grid-wide) handles them unchanged.
//!
//! - `sum` of complex values is `complex(sum(real(x)), sum(imag(x)))`: complex
//!   addition is addition of the parts, so this is the same arithmetic as
//!   nvFuser's complex accumulator (ComplexFloat parts summed in float,
//!   ComplexDouble in double).
//! - `sum` or `prod` of complex values to a real dtype (`dtype=Int`) is the
//!   real reduction of each element converted first (its real part,
//!   truncated for integers), as nvFuser casts the input before reducing.
//! - `welford` / `var_mean` of integers follow nvFuser's integer
//!   welfordCombine (runtime/welford.cu, T integral): the mean merges
//!   `delta * (b_N / ab_N)` in integer division, which keeps the first element
//!   seen, and M2 gains `delta^2 * a_N * 0`. So the mean is the first element
//!   along the reduced dims (a slice, squeezed unless keepdim), M2 a full 0, N
//!   a full count, and var_mean's var `0 * (1 / max(N - correction, 0))` in
//!   Double (0, or NaN when no degree of freedom is left).
//! - For the planner of matrix products only ([`scaled_mm_for_library`]):
//!   `scaled_mm` as cuBLASLt runs it (FP8, or in Float where its FP8 kernels
//!   cannot read the operands; a scale per row and per column after the
//!   product).
//!
//! A fusion without such ops is returned as it is, so its kernels do not change.

use crate::CodegenError;
use fusebench_ir::dtype_ops::ComplexOp;
use fusebench_ir::infer::norm_dims;
use fusebench_ir::{BinaryOp, DType, Fusion, FusionBuilder, GemmOp, Literal, Node, Op, ReduceOp, Value, ValueDef, ValueId};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

/// `f` with its complex sums and integer statistics rewritten, or `f` itself
/// when it has none.
pub fn apply(f: &Fusion) -> Result<Cow<'_, Fusion>, CodegenError> {
    rebuild(f, wanted, |g, _, op, names| lower(g, op, names))
}

/// What [`scaled_mm_for_library`] made of each `scaled_mm`.
#[derive(Default, Debug)]
pub struct Scaled {
    /// Products planned as the plain product of their operands: the rows'
    /// and columns' scales are applied by the ops after them.
    pub unscaled: BTreeSet<ValueId>,
    /// Each `scaled_mm` left to the library, by its result in the new fusion:
    /// the result it had in the fusion given.
    pub origin: HashMap<ValueId, ValueId>,
}

/// `f` with its `scaled_mm`s made into what cuBLASLt runs, for the planner of
/// matrix products only (crate::gemm):
/// - one whose result (in `f`) is in `upcast`, which cuBLASLt's FP8 kernels
///   cannot read, becomes `matmul` of its operands cast to Float (exact:
///   Float holds every FP8 value), times each scale, cast to its dtype;
/// - one with a scale per row and per column becomes the same `scaled_mm` in
///   Float read as the unscaled product (recorded in [`Scaled::unscaled`]),
///   times each scale, cast to its dtype: cuBLASLt scales a product by one
///   number per operand only (its outer-vector scales are refused on the
///   H200: CUBLAS_STATUS_INVALID_VALUE, measured);
/// - one with a scale per operand stays as it is.
///
/// Where the new fusion names a `scaled_mm` in `unscaled`, that node means
/// the plain product: the planner of products takes that meaning, and the
/// fusion goes nowhere else.
pub fn scaled_mm_for_library<'a>(f: &'a Fusion, upcast: &BTreeSet<ValueId>) -> Result<(Cow<'a, Fusion>, Scaled), CodegenError> {
    let mut out = Scaled::default();
    let is_scaled = |_: &Fusion, op: &Op| matches!(op, Op::Gemm(GemmOp::ScaledMm { .. }));
    let g = rebuild(f, is_scaled, |g, node, op, names| {
        let Op::Gemm(GemmOp::ScaledMm { mat1, mat2, scale1, scale2, dtype }) = *op else {
            unreachable!("only scaled_mm is made over")
        };
        let r = node.outputs[0];
        let name = names.first().copied().unwrap_or("scaled_mm");
        let p = if upcast.contains(&r) {
            let a = add1(g, Op::Cast { x: mat1, dtype: DType::Float }, Some(&format!("{name}_mat1_in_float")))?;
            let b = add1(g, Op::Cast { x: mat2, dtype: DType::Float }, Some(&format!("{name}_mat2_in_float")))?;
            add1(g, Op::Matmul { a, b }, Some(&format!("{name}_in_float")))?
        } else if rowwise(f, &node.op) {
            let product = Op::Gemm(GemmOp::ScaledMm { mat1, mat2, scale1, scale2, dtype: DType::Float });
            let p = add1(g, product, Some(&format!("{name}_unscaled")))?;
            out.unscaled.insert(p);
            out.origin.insert(p, r);
            p
        } else {
            let p = add1(g, op.clone(), Some(name))?;
            out.origin.insert(p, r);
            return Ok(vec![p]);
        };
        let rows = add1(g, Op::Binary { kind: BinaryOp::Mul, a: p, b: scale1 }, None)?;
        let both = add1(g, Op::Binary { kind: BinaryOp::Mul, a: rows, b: scale2 }, None)?;
        Ok(vec![add1(g, Op::Cast { x: both, dtype }, Some(name))?])
    })?;
    Ok((g, out))
}

/// Whether `op` is a `scaled_mm` with rowwise scales.
fn rowwise(f: &Fusion, op: &Op) -> bool {
    let Op::Gemm(GemmOp::ScaledMm { scale1, scale2, .. }) = op else { return false };
    let one = |v: &ValueId| f.value(*v).shape.as_ref().is_some_and(|s| s.iter().product::<usize>() == 1);
    !(one(scale1) && one(scale2))
}

/// `f` with each op `wanted` says replaced by the ops `lower` gives for it
/// (operands mapped into the new fusion), or `f` itself where none is.
fn rebuild(
    f: &Fusion,
    wanted: impl Fn(&Fusion, &Op) -> bool,
    mut lower: impl FnMut(&mut Fusion, &Node, &Op, &[&str]) -> Result<Vec<ValueId>, CodegenError>,
) -> Result<Cow<'_, Fusion>, CodegenError> {
    if !f.nodes.iter().any(|n| wanted(f, &n.op)) {
        return Ok(Cow::Borrowed(f));
    }
    let mut g = Fusion {
        values: Vec::with_capacity(f.values.len()),
        nodes: Vec::with_capacity(f.nodes.len()),
        inputs: vec![],
        outputs: vec![],
        aliases: f.aliases.clone(),
        output_layouts: f.output_layouts.clone(),
        script: f.script.clone(),
        recipe: f.recipe.clone(),
        input_facts: f.input_facts.clone(),
        unseeded_numbers: vec![],
    };
    let mut map: Vec<Option<ValueId>> = vec![None; f.values.len()];
    for (i, v) in f.values.iter().enumerate() {
        match v.def {
            ValueDef::Node { node, index: 0 } => {
                let n = &f.nodes[node];
                if fusebench_ir::rng::is_unseeded(&n.op) {
                    // Copied (never lowered): its number as in `f`.
                    g.unseeded_numbers.push((g.nodes.len(), fusebench_ir::rng::number(f, node)));
                }
                let mut op = n.op.clone();
                for r in op.operands_mut() {
                    *r = map[r.index()].expect("operands are defined before use");
                }
                let outs = if wanted(f, &n.op) {
                    let names: Vec<&str> = n.outputs.iter().map(|&o| f.value(o).name.as_str()).collect();
                    lower(&mut g, n, &op, &names)?
                } else {
                    copy(&mut g, &op, n.outputs.iter().map(|&o| f.value(o)))
                };
                for (&o, n) in n.outputs.iter().zip(outs) {
                    map[o.index()] = Some(n);
                }
            }
            ValueDef::Node { .. } => {}
            _ => map[i] = Some(push(&mut g, v.clone())),
        }
    }
    let m = |v: ValueId| map[v.index()].expect("every value is mapped");
    g.inputs = f.inputs.iter().map(|&v| m(v)).collect();
    g.outputs = f.outputs.iter().map(|&v| m(v)).collect();
    for a in &mut g.aliases {
        a.input = m(a.input);
    }
    Ok(Cow::Owned(g))
}

/// Whether `op` is rewritten here.
fn wanted(f: &Fusion, op: &Op) -> bool {
    match op {
        Op::Reduce { kind, x, dtype, .. } if f.value(*x).dtype.is_complex() => match kind {
            ReduceOp::Sum => true,
            // A complex product runs on its complex accumulator; to a real
            // dtype it is a real product of the converted elements.
            ReduceOp::Prod => dtype.is_some_and(|d| !d.is_complex()),
            _ => false,
        },
        Op::Welford { x, .. } | Op::VarMean { x, .. } => {
            matches!(f.value(*x).dtype, DType::Int | DType::Int32)
        }
        _ => false,
    }
}

fn push(g: &mut Fusion, v: Value) -> ValueId {
    g.values.push(v);
    ValueId(g.values.len() as u32 - 1)
}

/// Appends `op` with outputs typed as `outs` were (an op copied unchanged).
fn copy<'a>(g: &mut Fusion, op: &Op, outs: impl Iterator<Item = &'a Value>) -> Vec<ValueId> {
    let node = g.nodes.len();
    let ids: Vec<ValueId> = outs
        .enumerate()
        .map(|(index, v)| {
            push(
                g,
                Value {
                    def: ValueDef::Node { node, index },
                    ..v.clone()
                },
            )
        })
        .collect();
    g.nodes.push(Node {
        op: op.clone(),
        outputs: ids.clone(),
    });
    ids
}

/// Appends a new op through the IR's builder (its inference types the
/// outputs); `names` name them when given, else they are `rwN`.
fn add(g: &mut Fusion, op: Op, names: &[&str]) -> Result<Vec<ValueId>, CodegenError> {
    let what = op.name().to_string();
    let mut b = FusionBuilder::extend(std::mem::take(g));
    let ids = b.op(op, names);
    *g = b.finish();
    let ids = ids.map_err(|e| CodegenError::Unsupported(format!("rewriting `{what}` for the GPU: {e}")))?;
    if names.is_empty() {
        for &v in &ids {
            g.values[v.index()].name = format!("rw{}", v.0);
        }
    }
    Ok(ids)
}

fn add1(g: &mut Fusion, op: Op, name: Option<&str>) -> Result<ValueId, CodegenError> {
    Ok(add(g, op, name.as_slice())?[0])
}

fn literal(g: &mut Fusion, lit: Literal) -> ValueId {
    let mut b = FusionBuilder::extend(std::mem::take(g));
    let v = b.literal(lit);
    *g = b.finish();
    v
}

/// The equivalent ops of a wanted `op` (operands already mapped into `g`).
fn lower(g: &mut Fusion, op: &Op, names: &[&str]) -> Result<Vec<ValueId>, CodegenError> {
    match op {
        Op::Reduce {
            kind,
            x,
            dims,
            keepdim,
            dtype,
        } => {
            let d = dtype.unwrap_or(g.values[x.index()].dtype);
            let name = names.first().copied();
            if !d.is_complex() {
                // nvFuser converts each element to the real dtype first (the
                // real part, truncated for integers), then reduces.
                let c = add1(g, Op::Cast { x: *x, dtype: d }, None)?;
                let r = Op::Reduce {
                    kind: *kind,
                    x: c,
                    dims: dims.clone(),
                    keepdim: *keepdim,
                    dtype: Some(d),
                };
                return Ok(vec![add1(g, r, name)?]);
            }
            let sum = |g: &mut Fusion, kind: ComplexOp, to: DType, name: Option<&str>| -> Result<ValueId, CodegenError> {
                let part = add1(g, Op::Complex { kind, xs: vec![*x] }, None)?;
                let s = Op::Reduce {
                    kind: ReduceOp::Sum,
                    x: part,
                    dims: dims.clone(),
                    keepdim: *keepdim,
                    dtype: Some(to),
                };
                add1(g, s, name)
            };
            let p = d.complex_part().expect("a complex dtype");
            let re = sum(g, ComplexOp::Real, p, None)?;
            let im = sum(g, ComplexOp::Imag, p, None)?;
            let out = Op::Complex {
                kind: ComplexOp::Complex,
                xs: vec![re, im],
            };
            Ok(vec![add1(g, out, name)?])
        }
        Op::Welford { x, dims } => {
            let (mean, shape, n) = first_element(g, *x, dims, false, names.first().copied())?;
            let d = g.values[x.index()].dtype;
            let zero = literal(g, Literal::Int(0));
            let m2 = Op::Full {
                shape: shape.clone(),
                fill: zero,
                dtype: d,
            };
            let m2 = add1(g, m2, names.get(1).copied())?;
            let count = literal(g, Literal::Int(n as i64));
            let count = Op::Full {
                shape,
                fill: count,
                dtype: DType::Index,
            };
            let count = add1(g, count, names.get(2).copied())?;
            Ok(vec![mean, m2, count])
        }
        Op::VarMean {
            x,
            dims,
            correction,
            keepdim,
        } => {
            let (mean, shape, n) = first_element(g, *x, dims, *keepdim, names.get(1).copied())?;
            let denom = (n as i64 - correction).max(0) as f64;
            let fill = literal(g, Literal::Float(0.0 * (1.0 / denom)));
            let var = Op::Full {
                shape,
                fill,
                dtype: DType::Double,
            };
            let var = add1(g, var, names.first().copied())?;
            Ok(vec![var, mean])
        }
        _ => unreachable!("only wanted ops are lowered here"),
    }
}

/// The first element of `x` along `dims` (shape kept when `keepdim`), the
/// result's shape, and the number of elements reduced.
fn first_element(
    g: &mut Fusion,
    x: ValueId,
    dims: &[i64],
    keepdim: bool,
    name: Option<&str>,
) -> Result<(ValueId, Vec<i64>, usize), CodegenError> {
    let s = g.values[x.index()].shape.clone().unwrap_or_default();
    let rd = norm_dims("welford", dims, s.len())
        .map_err(|e| CodegenError::Unsupported(e.to_string()))?;
    let n: usize = rd.iter().map(|&d| s[d]).product();
    if n == 0 {
        return Err(CodegenError::Unsupported(
            "`welford`/`var_mean` of an integer tensor over an empty extent has no GPU kernel \
             (there is no first element); the CPU reference runs it"
                .into(),
        ));
    }
    let end: Vec<i64> = (0..s.len())
        .map(|d| if rd.contains(&d) { 1 } else { s[d] as i64 })
        .collect();
    let sliced = Op::Slice {
        x,
        start: vec![0; s.len()],
        end,
        strides: vec![1; s.len()],
        manual_normalization: false,
    };
    let squeeze = !keepdim && !rd.is_empty();
    let first = add1(g, sliced, if squeeze { None } else { name })?;
    let first = if squeeze {
        let dims = rd.iter().map(|&d| d as i64).collect();
        add1(g, Op::Squeeze { x: first, dims }, name)?
    } else {
        first
    };
    let shape = g.values[first.index()]
        .shape
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|&e| e as i64)
        .collect();
    Ok((first, shape, n))
}
