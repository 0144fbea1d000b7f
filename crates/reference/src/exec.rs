//! Runs a fusion node by node.

use crate::expr::{LazyNode, Operand, Program, PwOp};
use crate::tensor::Tensor;
use crate::{gemm, ops, reduce, scan, Arg, ExecError};
use fusebench_ir::infer::{
    cat_owner_ranges, norm_dim, norm_dims, pad_widths, slice_bounds,
};
use fusebench_ir::scalar::{fold_binary, fold_ternary, fold_unary};
use fusebench_ir::{DType, Fusion, Literal, Op, Value, ValueDef, ValueId};
use std::sync::Arc;

/// What a value holds while the fusion runs.
#[derive(Clone, Debug)]
enum Val {
    Tensor(Tensor),
    /// Elementwise values not stored (see [`crate::expr`]).
    Lazy(Arc<LazyNode>),
    Scalar(Literal),
}

fn is_pointwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary { .. } | Op::Binary { .. } | Op::Ternary { .. } | Op::Where { .. } | Op::Cast { .. }
    )
}

fn is_reduction(op: &Op) -> bool {
    matches!(
        op,
        Op::Reduce { .. } | Op::Welford { .. } | Op::VarMean { .. }
    )
}

struct Plan {
    /// Whether each node has to run (some output reaches a fusion output).
    needed: Vec<bool>,
    /// Whether each value may stay a lazy expression.
    lazy: Vec<bool>,
    /// The last node reading each value.
    last_use: Vec<Option<usize>>,
    is_output: Vec<bool>,
}

/// Relative cost of computing one element of an elementwise op.
fn op_cost(op: &Op) -> u32 {
    use fusebench_ir::{BinaryOp, UnaryOp};
    match op {
        Op::Unary {
            kind: UnaryOp::Exp | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Erf | UnaryOp::Sigmoid,
            ..
        } => 16,
        Op::Binary {
            kind: BinaryOp::Pow,
            ..
        } => 24,
        _ => 1,
    }
}

/// A lazy value costing more than this per element is stored rather than
/// recomputed by each of several consumers.
const RECOMPUTE_LIMIT: u32 = 8;

/// The longest chain of lazy elementwise values (see `plan`).
const MAX_LAZY_DEPTH: usize = 512;

fn plan(f: &Fusion) -> Plan {
    let nv = f.values.len();
    let mut is_output = vec![false; nv];
    for &o in &f.outputs {
        is_output[o.index()] = true;
    }
    // Backwards: which values (and so nodes) the outputs depend on.
    let mut live = is_output.clone();
    let mut needed = vec![false; f.nodes.len()];
    for (i, n) in f.nodes.iter().enumerate().rev() {
        if n.outputs.iter().any(|o| live[o.index()]) {
            needed[i] = true;
            for v in n.op.operands() {
                live[v.index()] = true;
            }
        }
    }
    let mut consumers: Vec<Vec<usize>> = vec![vec![]; nv];
    let mut last_use = vec![None; nv];
    for (i, n) in f.nodes.iter().enumerate() {
        if !needed[i] {
            continue;
        }
        for v in n.op.operands() {
            if !consumers[v.index()].contains(&i) {
                consumers[v.index()].push(i);
            }
            last_use[v.index()] = Some(i);
        }
    }
    // A pointwise result stays lazy when every consumer is a pointwise op of
    // the same shape (no broadcast of it) or a reduction.
    let mut lazy = vec![false; nv];
    let mut cost = vec![0u32; nv];
    let mut depth = vec![0usize; nv];
    for (i, n) in f.nodes.iter().enumerate() {
        if !needed[i] || !is_pointwise(&n.op) {
            continue;
        }
        let out = n.outputs[0];
        let v = f.value(out);
        if !v.is_tensor() || is_output[out.index()] {
            continue;
        }
        lazy[out.index()] = consumers[out.index()].iter().all(|&c| {
            let cn = &f.nodes[c];
            (is_pointwise(&cn.op) && f.value(cn.outputs[0]).shape == v.shape)
                || is_reduction(&cn.op)
        });
        // A chain of lazy values deeper than this is stored at that depth:
        // compiling a lazy value recurses through its lazy operands, and a
        // script of 100,000 chained ops would overflow the stack.
        let d = n
            .op
            .operands()
            .iter()
            .filter(|u| lazy[u.index()])
            .map(|u| depth[u.index()])
            .max()
            .unwrap_or(0)
            + 1;
        if d > MAX_LAZY_DEPTH {
            lazy[out.index()] = false;
        } else {
            depth[out.index()] = d;
        }
        // Saturating: a deep DAG of shared lazy values counts each path.
        cost[out.index()] = n
            .op
            .operands()
            .iter()
            .filter(|u| lazy[u.index()])
            .fold(op_cost(&n.op), |a, u| a.saturating_add(cost[u.index()]));
    }
    // Backwards: the evaluations (stored results and reduction passes) each
    // lazy value is computed in; an expensive one computed in several is stored.
    let mut roots: Vec<Vec<usize>> = vec![vec![]; nv];
    for (i, n) in f.nodes.iter().enumerate().rev() {
        if !needed[i] {
            continue;
        }
        for &out in &n.outputs {
            let o = out.index();
            if !lazy[o] {
                continue;
            }
            let mut r: Vec<usize> = vec![];
            for &c in &consumers[o] {
                let cn = &f.nodes[c];
                let w = cn.outputs[0].index();
                if is_pointwise(&cn.op) && lazy[w] {
                    r.extend(&roots[w]);
                } else {
                    r.push(2 * w);
                    if matches!(cn.op, Op::Welford { .. } | Op::VarMean { .. }) {
                        r.push(2 * w + 1);
                    }
                }
            }
            r.sort_unstable();
            r.dedup();
            if r.len() > 1 && cost[o] > RECOMPUTE_LIMIT {
                lazy[o] = false;
                r = vec![2 * o];
            }
            roots[o] = r;
        }
    }
    Plan {
        needed,
        lazy,
        last_use,
        is_output,
    }
}

/// The same fusion with duplicated work removed: constant scalars of equal
/// value and dtype become one value, and an op applied again to the same
/// operands reuses the first result.
fn dedupe(f: &Fusion) -> Fusion {
    use std::collections::HashMap;
    let mut canon: Vec<ValueId> = (0..f.values.len() as u32).map(ValueId).collect();
    let mut consts: HashMap<(DType, String), ValueId> = HashMap::new();
    for (i, v) in f.values.iter().enumerate() {
        if let (None, Some(c), false) =
            (&v.shape, v.constant, matches!(v.def, ValueDef::ScalarInput))
        {
            let key = (v.dtype, format!("{c:?}"));
            canon[i] = *consts.entry(key).or_insert(ValueId(i as u32));
        }
    }
    let mut g = f.clone();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, n) in g.nodes.iter_mut().enumerate() {
        for v in n.op.operands_mut() {
            *v = canon[v.index()];
        }
        if fusebench_ir::rng::is_unseeded(&n.op) {
            // Each unseeded random op draws its own numbers, even from equal operands.
            continue;
        }
        let key = format!("{:?}", n.op);
        match seen.get(&key) {
            Some(&j) => {
                for (k, o) in f.nodes[i].outputs.iter().enumerate() {
                    canon[o.index()] = f.nodes[j].outputs[k];
                }
            }
            None => {
                seen.insert(key, i);
            }
        }
    }
    for o in &mut g.outputs {
        *o = canon[o.index()];
    }
    g
}

struct Env<'f> {
    f: &'f Fusion,
    vals: Vec<Option<Val>>,
}

impl Env<'_> {
    fn value(&self, v: ValueId) -> &Value {
        self.f.value(v)
    }

    /// Compute and operand dtypes of an elementwise op of the op table.
    fn typing(&self, op: &Op) -> fusebench_ir::elementwise::Typing {
        fusebench_ir::elementwise::op_typing(op, &self.f.values)
            .expect("an op of the op table")
            .expect("inference accepted the op")
    }

    fn get(&self, v: ValueId) -> &Val {
        self.vals[v.index()].as_ref().unwrap_or_else(|| {
            panic!(
                "value {} ({}) read before it was computed or after it was freed",
                v.0,
                self.value(v).name
            )
        })
    }

    fn scalar(&self, v: ValueId) -> Literal {
        match self.get(v) {
            Val::Scalar(l) => *l,
            other => panic!("{} is not a scalar: {other:?}", self.value(v).name),
        }
    }

    fn operand(&self, v: ValueId) -> Operand {
        match self.get(v) {
            Val::Tensor(t) => Operand::Tensor(t.clone()),
            Val::Lazy(n) => Operand::Lazy(n.clone()),
            Val::Scalar(l) => Operand::Scalar(*l, self.value(v).dtype),
        }
    }

    /// The value as stored values, evaluating a lazy expression.
    fn tensor(&self, v: ValueId) -> Tensor {
        match self.get(v) {
            Val::Tensor(t) => t.clone(),
            Val::Lazy(n) => {
                Program::compile(&Operand::Lazy(n.clone()), &n.shape, None).materialize()
            }
            Val::Scalar(_) => panic!("{} is a scalar, not a tensor", self.value(v).name),
        }
    }
}

fn check_inputs(f: &Fusion, inputs: &[Arg]) -> Result<Vec<Val>, ExecError> {
    if inputs.len() != f.inputs.len() {
        return Err(ExecError::InputCount {
            expected: f.inputs.len(),
            got: inputs.len(),
        });
    }
    let mut out = Vec::with_capacity(inputs.len());
    for (i, (arg, &vid)) in inputs.iter().zip(&f.inputs).enumerate() {
        let v = f.value(vid);
        let bad = |m: String| ExecError::Input {
            index: i,
            name: v.name.clone(),
            message: m,
        };
        match (&v.def, arg) {
            (ValueDef::TensorInput(_), Arg::Tensor(t)) => {
                let want = v.shape.as_deref().unwrap_or(&[]);
                if t.shape() != want {
                    return Err(bad(format!(
                        "shape {:?} but the fusion defines {want:?}",
                        t.shape()
                    )));
                }
                let same = t.dtype() == v.dtype
                    || matches!(
                        (t.dtype(), v.dtype),
                        (DType::Int, DType::Index) | (DType::Index, DType::Int)
                    );
                if !same {
                    return Err(bad(format!(
                        "dtype {} but the fusion defines {}",
                        t.dtype(),
                        v.dtype
                    )));
                }
                out.push(Val::Tensor(t.clone()));
            }
            (ValueDef::ScalarInput, Arg::Scalar(l)) => {
                if matches!(l, Literal::Float(_)) && !v.dtype.is_float() {
                    return Err(bad(format!("a float scalar {l} for a {} input", v.dtype)));
                }
                f.check_bound_scalar(vid, *l).map_err(bad)?;
                out.push(Val::Scalar(l.cast(v.dtype)));
            }
            (ValueDef::TensorInput(_), Arg::Scalar(_)) => {
                return Err(bad("a scalar where the fusion defines a tensor".into()))
            }
            (_, Arg::Tensor(_)) => {
                return Err(bad("a tensor where the fusion defines a scalar".into()))
            }
            (_, Arg::Scalar(_)) => return Err(bad("not an input the fusion defines".into())),
        }
    }
    Ok(out)
}

pub(crate) fn run(f: &Fusion, inputs: &[Arg]) -> Result<Vec<Tensor>, ExecError> {
    f.validate()?;
    let given = check_inputs(f, inputs)?;
    let index32 = f.index_is_32bit();
    let g = dedupe(f);
    let f = &g;
    let plan = plan(f);
    let profile = std::env::var_os("FUSEBENCH_REF_PROFILE").is_some();
    let mut env = Env {
        f,
        vals: vec![None; f.values.len()],
    };
    for (v, val) in f.values.iter().enumerate() {
        if let (None, Some(c)) = (&val.shape, val.constant) {
            env.vals[v] = Some(Val::Scalar(c));
        }
    }
    for (&vid, val) in f.inputs.iter().zip(given) {
        env.vals[vid.index()] = Some(val);
    }
    for (i, node) in f.nodes.iter().enumerate() {
        if !plan.needed[i] {
            continue;
        }
        // Outputs that are constant scalars are known already.
        if node.outputs.iter().all(|o| env.vals[o.index()].is_some()) {
            continue;
        }
        check_memory(f, node, &plan)?;
        let t0 = std::time::Instant::now();
        let results = exec_node(&env, node, &plan)?;
        if profile {
            let o = f.value(node.outputs[0]);
            let how = match &results[0] {
                Val::Lazy(_) => "lazy",
                Val::Tensor(_) => "tensor",
                Val::Scalar(_) => "scalar",
            };
            eprintln!(
                "{:>9.3} ms  {:<6} {} = {} {:?} {}",
                t0.elapsed().as_secs_f64() * 1e3,
                how,
                o.name,
                node.op.name(),
                o.shape,
                o.dtype
            );
        }
        for (o, r) in node.outputs.iter().zip(results) {
            env.vals[o.index()] = Some(r);
        }
        for v in node.op.operands() {
            if plan.last_use[v.index()] == Some(i)
                && !plan.is_output[v.index()]
                && f.value(v).is_tensor()
            {
                env.vals[v.index()] = None;
            }
        }
    }
    let mut outs = Vec::with_capacity(f.outputs.len());
    for (k, &o) in f.outputs.iter().enumerate() {
        let t = env.tensor(o);
        // `add_output(out, stride_order=...)` or the layout nvFuser infers
        // from the inputs': the output in its own layout.
        let t = match fusebench_ir::alloc_order::output_order(f, k) {
            Some(order) => t.relaid(&ordered_strides(t.shape(), &order))?,
            None => t,
        };
        let t = if t.dtype() == DType::Index && index32 {
            Program::compile(&Operand::Tensor(t.clone()), t.shape(), Some(DType::Int32))
                .materialize()
        } else {
            t
        };
        outs.push(t);
    }
    Ok(outs)
}

/// Results this small are not checked (reading the free memory costs more than they do).
const CHECK_FROM_BYTES: u64 = 64 << 20;

/// Checks that the stored results of `node` fit in the memory available now:
/// an allocation the system cannot give aborts the process. Views (broadcast,
/// expand, permute, ...) and lazy elementwise values store nothing.
fn check_memory(f: &Fusion, node: &fusebench_ir::Node, plan: &Plan) -> Result<(), ExecError> {
    use fusebench_host::memory;
    let views = node.op.is_view()
        || matches!(node.op, Op::Set { .. } | Op::StrideOrder { .. } | Op::Full { .. } | Op::Size { .. });
    if views {
        return Ok(());
    }
    for &o in &node.outputs {
        let v = f.value(o);
        if !v.is_tensor() || plan.lazy[o.index()] {
            continue;
        }
        let need = memory::bytes(v.numel(), v.dtype.size_bytes());
        if need.is_some_and(|b| b < CHECK_FROM_BYTES) {
            continue;
        }
        let what = format!(
            "{} = fd.ops.{} ({} {:?})",
            v.name,
            node.op.name(),
            v.dtype.torch_name(),
            v.shape.as_deref().unwrap_or_default()
        );
        memory::fits(&what, need, memory::available())?;
    }
    Ok(())
}

fn exec_node(env: &Env, node: &fusebench_ir::Node, plan: &Plan) -> Result<Vec<Val>, ExecError> {
    let f = env.f;
    let out_id = node.outputs[0];
    let out = f.value(out_id);
    let op = &node.op;
    // nvFuser's cast to the dtype a value has is `set`, and so is `real` of a
    // real tensor: the same elements (an e5m2 infinity stays, where a
    // conversion would saturate it).
    let copy_of = match op {
        Op::Cast { x, dtype } if env.value(*x).dtype == *dtype => Some(*x),
        Op::Complex {
            kind: fusebench_ir::dtype_ops::ComplexOp::Real,
            xs,
        } if xs.len() == 1 && !env.value(xs[0]).dtype.is_complex() => Some(xs[0]),
        _ => None,
    };
    if let Some(x) = copy_of.filter(|_| out.is_tensor()) {
        return Ok(vec![Val::Tensor(env.tensor(x))]);
    }
    if crate::complex::involved(f, op, out) {
        let ids = op.operands();
        let vals: Vec<&fusebench_ir::Value> = ids.iter().map(|&v| env.value(v)).collect();
        let args: Vec<crate::complex::CArg> = ids
            .iter()
            .map(|&v| match env.value(v).is_tensor() {
                true => crate::complex::CArg::Tensor(env.tensor(v)),
                false => crate::complex::CArg::Scalar(env.scalar(v), env.value(v).dtype),
            })
            .collect();
        return Ok(vec![Val::Tensor(crate::complex::exec(op, &vals, out, &args)?)]);
    }
    if is_pointwise(op) {
        let Some(shape) = out.shape.clone() else {
            return Ok(vec![Val::Scalar(scalar_op(env, op, out))]);
        };
        let (pw, args) = match op {
            Op::Unary { kind, x } => (PwOp::Unary(*kind, env.typing(op).compute), vec![*x]),
            Op::Binary { kind, a, b } => (PwOp::Binary(*kind, env.typing(op).compute), vec![*a, *b]),
            Op::Ternary { kind, a, b, c } => {
                let t = env.typing(op);
                let casts = [t.casts[0], t.casts[1], t.casts[2]];
                (PwOp::Ternary(*kind, casts, t.compute), vec![*a, *b, *c])
            }
            Op::Where { cond, a, b } => (PwOp::Where, vec![*cond, *a, *b]),
            Op::Cast { x, .. } => (PwOp::Cast, vec![*x]),
            _ => unreachable!(),
        };
        let node = Arc::new(LazyNode {
            op: pw,
            dtype: out.dtype,
            shape: shape.clone(),
            args: args.iter().map(|&a| env.operand(a)).collect(),
        });
        if plan.lazy[out_id.index()] {
            return Ok(vec![Val::Lazy(node)]);
        }
        return Ok(vec![Val::Tensor(
            Program::compile(&Operand::Lazy(node), &shape, None).materialize(),
        )]);
    }
    let name = op.name();
    let out_shape = out.shape.clone().unwrap_or_default();
    let shape_of = |v: ValueId| env.value(v).shape.clone().unwrap_or_default();
    let ir = |e: fusebench_ir::IrError| ExecError::Ir(e);
    let t = match op {
        Op::Reduce { kind, x, dims, .. } if env.value(*x).dtype.is_complex() && out.dtype.is_complex() => {
            let d = norm_dims(name, dims, shape_of(*x).len()).map_err(ir)?;
            crate::complex::reduce(&env.tensor(*x), &d, *kind, out.dtype, &out_shape)?
        }
        Op::Reduce { kind, x, dims, .. } if env.value(*x).dtype.is_complex() => {
            // A real `dtype`: nvFuser converts each element first (the real
            // part, truncated for integers), then reduces real values.
            let s = shape_of(*x);
            let d = norm_dims(name, dims, s.len()).map_err(ir)?;
            let t = crate::complex::cast(&env.tensor(*x), out.dtype)?;
            reduce::reduce(&Operand::Tensor(t), &s, &d, *kind, out.dtype, &out_shape)
        }
        Op::Reduce { kind, x, dims, .. } => {
            let s = shape_of(*x);
            let d = norm_dims(name, dims, s.len()).map_err(ir)?;
            reduce::reduce(&env.operand(*x), &s, &d, *kind, out.dtype, &out_shape)
        }
        Op::Welford { x, dims } if !out.dtype.is_float() => {
            let s = shape_of(*x);
            let d = norm_dims(name, dims, s.len()).map_err(ir)?;
            let (mean, n) = reduce::int_welford_mean(&env.tensor(*x), &d);
            let m2 = Tensor::full(out.dtype, &out_shape, Literal::Int(0));
            let count = Tensor::full(DType::Index, &out_shape, Literal::Int(n as i64));
            return Ok(vec![Val::Tensor(mean), Val::Tensor(m2), Val::Tensor(count)]);
        }
        Op::VarMean {
            x,
            dims,
            correction,
            keepdim,
        } if !f.value(node.outputs[1]).dtype.is_float() => {
            let s = shape_of(*x);
            let d = norm_dims(name, dims, s.len()).map_err(ir)?;
            let (mean, n) = reduce::int_welford_mean(&env.tensor(*x), &d);
            let mean = if *keepdim { mean.reshape(&out_shape) } else { mean };
            // M2 is 0; times 1 / max(n - correction, 0), which is inf for 0.
            let denom = (n as i64 - correction).max(0) as f64;
            let var = Tensor::full(out.dtype, &out_shape, Literal::Float(0.0 * (1.0 / denom)));
            return Ok(vec![Val::Tensor(var), Val::Tensor(mean)]);
        }
        Op::Welford { x, dims } => {
            let s = shape_of(*x);
            let d = norm_dims(name, dims, s.len()).map_err(ir)?;
            let (mean, m2, n) = reduce::moments(&env.operand(*x), &s, &d);
            let mv = reduce::tensor_from_f64(out.dtype, &out_shape, &mean);
            let m2v = reduce::tensor_from_f64(f.value(node.outputs[1]).dtype, &out_shape, &m2);
            let count = Tensor::full(DType::Index, &out_shape, Literal::Int(n as i64));
            return Ok(vec![Val::Tensor(mv), Val::Tensor(m2v), Val::Tensor(count)]);
        }
        Op::VarMean {
            x,
            dims,
            correction,
            ..
        } => {
            let s = shape_of(*x);
            let d = norm_dims(name, dims, s.len()).map_err(ir)?;
            let (mean, m2, n) = reduce::moments(&env.operand(*x), &s, &d);
            let denom = n as f64 - *correction as f64;
            let var: Vec<f64> = m2.iter().map(|&m| m / denom).collect();
            let vt = reduce::tensor_from_f64(out.dtype, &out_shape, &var);
            let mt = reduce::tensor_from_f64(f.value(node.outputs[1]).dtype, &out_shape, &mean);
            return Ok(vec![Val::Tensor(vt), Val::Tensor(mt)]);
        }
        Op::Broadcast {
            x,
            is_broadcast_dim,
        } => {
            let t = env.tensor(*x);
            let mut strides = Vec::with_capacity(out_shape.len());
            let mut it = t.strides().iter();
            for &b in is_broadcast_dim {
                strides.push(if b { 0 } else { *it.next().unwrap() });
            }
            t.with_layout(out_shape, strides, t.offset())
        }
        Op::BroadcastInDim {
            x, broadcast_dims, ..
        } => {
            let t = env.tensor(*x);
            let mut strides = vec![0i64; out_shape.len()];
            for (i, &bd) in broadcast_dims.iter().enumerate() {
                let d = norm_dim(name, bd, out_shape.len()).map_err(ir)?;
                if t.shape()[i] == out_shape[d] {
                    strides[d] = t.strides()[i];
                }
            }
            t.with_layout(out_shape, strides, t.offset())
        }
        Op::Expand { x, .. } => {
            let t = env.tensor(*x);
            let strides = t
                .shape()
                .iter()
                .zip(t.strides())
                .zip(&out_shape)
                .map(|((&e, &s), &o)| if e == o { s } else { 0 })
                .collect();
            t.with_layout(out_shape, strides, t.offset())
        }
        Op::Reshape { x, .. } => env.tensor(*x).reshape(&out_shape),
        Op::Permute { x, dims } => {
            let t = env.tensor(*x);
            let perm: Vec<usize> = dims
                .iter()
                .map(|&d| norm_dim(name, d, t.rank()))
                .collect::<Result<_, _>>()
                .map_err(ir)?;
            t.permute(&perm)
        }
        Op::Squeeze { x, dims } => {
            let t = env.tensor(*x);
            let d = norm_dims(name, dims, t.rank()).map_err(ir)?;
            let keep: Vec<usize> = (0..t.rank()).filter(|i| !d.contains(i)).collect();
            t.with_layout(
                keep.iter().map(|&i| t.shape()[i]).collect(),
                keep.iter().map(|&i| t.strides()[i]).collect(),
                t.offset(),
            )
        }
        Op::Slice {
            x,
            start,
            end,
            strides,
            manual_normalization,
        } => {
            let t = env.tensor(*x);
            let (shape, starts, steps) =
                slice_bounds(name, t.shape(), start, end, strides, *manual_normalization)
                    .map_err(ir)?;
            let mut v = t;
            for d in 0..shape.len() {
                v = v.slice_dim(d, starts[d], shape[d], steps[d]);
            }
            v
        }
        Op::Pad { x, widths, value } => {
            let t = env.tensor(*x);
            let w = pad_widths(&f.graph(), name, widths, t.rank()).map_err(ir)?;
            let fill = value.map(|v| env.scalar(v)).unwrap_or(Literal::Int(0));
            ops::pad(&t, &w, fill)
        }
        Op::Cat {
            xs,
            dim,
            manual_padding,
        } => {
            let rank = out_shape.len();
            let d = norm_dim(name, *dim, rank).map_err(ir)?;
            let ts: Vec<Tensor> = xs
                .iter()
                .map(|&x| {
                    let t = env.tensor(x);
                    if t.dtype() == out.dtype {
                        Ok(t)
                    } else if out.dtype.is_complex() {
                        // A real part into a complex cat: the value itself, not
                        // the real-only program's integer truncation (seed 1
                        // fusions 127, 2069, 5832, 7797).
                        crate::complex::cast(&t, out.dtype)
                    } else {
                        Ok(Program::compile(&Operand::Tensor(t.clone()), t.shape(), Some(out.dtype))
                            .materialize())
                    }
                })
                .collect::<Result<_, ExecError>>()?;
            if *manual_padding {
                let ranges = cat_owner_ranges(&f.graph(), name, xs, d).map_err(ir)?;
                ops::cat_manual(&ts, d, &ranges)
            } else {
                ops::cat(&ts, d, &out_shape)
            }
        }
        Op::Full { fill, dtype, .. } => Tensor::full(*dtype, &out_shape, env.scalar(*fill)),
        Op::Rng { .. } | Op::RngLike { .. } => rng_node(env, op, out_id, &out_shape)?,
        Op::Scan { kind, x, dim, init } => {
            let t = env.tensor(*x);
            let d = norm_dim(name, *dim, t.rank()).map_err(ir)?;
            let init = init.map(|i| env.scalar(i).cast(out.dtype));
            scan::scan(&t, d, *kind, init, out.dtype)?
        }
        Op::IndexSelect { x, index, dim } => {
            let t = env.tensor(*x);
            let d = norm_dim(name, *dim, t.rank()).map_err(ir)?;
            let idx = env.tensor(*index).to_i64_vec();
            let bound = t.shape()[d];
            if let Some((pos, &v)) = idx
                .iter()
                .enumerate()
                .find(|(_, &v)| v < 0 || v as u64 >= bound as u64)
            {
                return Err(ExecError::Op {
                    op: name.into(),
                    value: out.name.clone(),
                    message: format!(
                        "index {} holds {v} at position {pos}, outside [0, {bound}) (dim {d} of {} has extent {bound})",
                        env.value(*index).name,
                        env.value(*x).name
                    ),
                });
            }
            ops::index_select(&t, &idx, d)
        }
        Op::Index(o) => {
            let cx = crate::index::Ctx {
                tensor: &|v| env.tensor(v),
                scalar: &|v| env.scalar(v),
                value: &|v| f.value(v),
                outs: node.outputs.iter().map(|&v| f.value(v)).collect(),
            };
            return Ok(crate::index::exec(o, &cx)?
                .into_iter()
                .map(Val::Tensor)
                .collect());
        }
        // A copy, as nvFuser's set and segment_set write one.
        Op::Set { x, .. } => env.tensor(*x).to_contiguous(),
        Op::StrideOrder { x, stride_order } => {
            let order = fusebench_ir::infer::stride_permutation(name, stride_order, out_shape.len())
                .map_err(ir)?;
            env.tensor(*x).relaid(&ordered_strides(&out_shape, &order))?
        }
        // Known when the fusion is built: `run` never gets here.
        Op::Size { x, dim } => {
            let d = norm_dim(name, *dim, shape_of(*x).len()).map_err(ir)?;
            return Ok(vec![Val::Scalar(Literal::Int(shape_of(*x)[d] as i64))]);
        }
        Op::Gemm(o) => {
            let cx = crate::index::Ctx {
                tensor: &|v| env.tensor(v),
                scalar: &|v| env.scalar(v),
                value: &|v| f.value(v),
                outs: node.outputs.iter().map(|&v| f.value(v)).collect(),
            };
            return Ok(gemm::exec_gemm(o, &cx)?.into_iter().map(Val::Tensor).collect());
        }
        Op::Matmul { a, b } => gemm::matmul(&env.tensor(*a), &env.tensor(*b), out.dtype)?,
        Op::Linear { a, weight, bias } => gemm::linear(
            &env.tensor(*a),
            &env.tensor(*weight),
            bias.map(|b| env.tensor(b)).as_ref(),
            out.dtype,
            &out_shape,
        )?,
        Op::Unary { .. }
        | Op::Binary { .. }
        | Op::Ternary { .. }
        | Op::Where { .. }
        | Op::Cast { .. }
        | Op::Complex { .. } => unreachable!(),
    };
    Ok(vec![Val::Tensor(t)])
}

/// Dense strides with dims laid out by `order` (rank of each dim from the
/// innermost), as a define_tensor of that stride order is.
pub(crate) fn ordered_strides(shape: &[usize], order: &[usize]) -> Vec<i64> {
    fusebench_ir::TensorDecl {
        contiguity: vec![Some(true); shape.len()],
        stride_order: order.to_vec(),
        is_cpu: false,
    }
    .dense_strides(shape)
}

/// An elementwise op on scalars known only at run time.
/// A random op's output (crate::rng), its stream placed by `ir::rng::start`.
fn rng_node(env: &Env, op: &Op, out: ValueId, shape: &[usize]) -> Result<Tensor, ExecError> {
    use fusebench_ir::rng::{start, Start};
    let (dist, a, b) = match op {
        Op::Rng { dist, a, b, .. } => (*dist, env.scalar(*a).as_f64(), env.scalar(*b).as_f64()),
        Op::RngLike { dist, .. } => (*dist, 0.0, 1.0),
        _ => unreachable!(),
    };
    let (seed, offset) = match start(env.f, out) {
        Some(Start::Given { seed, offset }) => {
            let int = |v: ValueId| env.scalar(v).as_i64().unwrap_or(0) as u64;
            (int(seed), int(offset))
        }
        Some(Start::Default { seed, offset }) => (seed, offset),
        None => unreachable!("{} is not a random op's output", env.value(out).name),
    };
    crate::rng::generate(dist, env.value(out).dtype, shape, a, b, seed, offset)
}

fn scalar_op(env: &Env, op: &Op, out: &Value) -> Literal {
    match op {
        Op::Unary { kind, x } => {
            let t = env.typing(op);
            fold_unary(*kind, env.scalar(*x).cast(t.casts[0]), t.compute, t.out)
        }
        Op::Binary { kind, a, b } => {
            let t = env.typing(op);
            let (x, y) = (env.scalar(*a).cast(t.casts[0]), env.scalar(*b).cast(t.casts[1]));
            fold_binary(*kind, x, y, t.compute, t.out)
        }
        Op::Ternary { kind, a, b, c } => {
            let t = env.typing(op);
            let args = [env.scalar(*a), env.scalar(*b), env.scalar(*c)];
            fold_ternary(*kind, args, [t.casts[0], t.casts[1], t.casts[2]], t.compute, t.out)
        }
        Op::Where { cond, a, b } => (if env.scalar(*cond).as_bool() {
            env.scalar(*a)
        } else {
            env.scalar(*b)
        })
        .cast(out.dtype),
        Op::Cast { x, dtype } => {
            fusebench_ir::dtype_ops::cast_literal(env.scalar(*x), env.value(*x).dtype, *dtype)
        }
        _ => unreachable!("not an elementwise op"),
    }
}
