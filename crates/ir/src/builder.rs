//! Builds a fusion op by op, checking each as it goes; mirrors
//! `fd.define_tensor` / `fd.define_scalar` / `fd.ops.*` / `fd.add_output`.

use crate::infer::{infer, Graph};
use crate::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use crate::{
    DType, Fusion, IrError, Literal, Node, ScriptInfo, TensorDecl, Value, ValueDef, ValueId,
};

pub struct FusionBuilder {
    f: Fusion,
}

impl Default for FusionBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl FusionBuilder {
    pub fn new() -> Self {
        FusionBuilder { f: Fusion::default() }
    }

    /// Continues building on an existing fusion (e.g. to add outputs that
    /// only a checker needs).
    pub fn extend(f: Fusion) -> Self {
        FusionBuilder { f }
    }

    /// How far the fusion has been built, to return to with [`Self::rollback`].
    pub fn mark(&self) -> [usize; 4] {
        let f = &self.f;
        [f.values.len(), f.nodes.len(), f.inputs.len(), f.outputs.len()]
    }

    /// Forgets every value, node, input and output made since `m` (a draw
    /// that did not type-check leaves nothing behind).
    pub fn rollback(&mut self, m: [usize; 4]) {
        self.f.values.truncate(m[0]);
        self.f.nodes.truncate(m[1]);
        self.f.inputs.truncate(m[2]);
        self.f.outputs.truncate(m[3]);
    }

    pub fn script_info(&mut self, info: ScriptInfo) -> &mut Self {
        self.f.script = info;
        self
    }

    /// The fusion as built so far.
    pub fn fusion(&self) -> &Fusion {
        &self.f
    }

    pub fn finish(self) -> Fusion {
        self.f
    }

    fn push(
        &mut self,
        name: Option<&str>,
        dtype: DType,
        shape: Option<Vec<usize>>,
        def: ValueDef,
        constant: Option<Literal>,
    ) -> ValueId {
        let id = ValueId(self.f.values.len() as u32);
        let name = match name {
            Some(n) => n.to_string(),
            None if shape.is_some() => format!("tv{}", id.0),
            None => format!("c{}", id.0),
        };
        self.f.values.push(Value {
            name,
            dtype,
            shape,
            def,
            constant,
        });
        id
    }

    /// `fd.define_tensor(shape=, contiguity=, dtype=, is_cpu=, stride_order=)`.
    pub fn define_tensor(
        &mut self,
        name: Option<&str>,
        shape: &[i64],
        contiguity: Vec<Option<bool>>,
        dtype: DType,
        stride_order: &[i64],
        is_cpu: bool,
    ) -> Result<ValueId, IrError> {
        let what = "fd.define_tensor";
        let rank = shape.len();
        let extents: Vec<usize> = shape
            .iter()
            .map(|&e| {
                usize::try_from(e).map_err(|_| {
                    IrError::def(what, format!("shape {shape:?}: symbolic or negative extents are not supported; fusebench needs concrete shapes"))
                })
            })
            .collect::<Result<_, _>>()?;
        if extents
            .iter()
            .try_fold(1i64, |a, &e| a.checked_mul(e as i64))
            .is_none()
        {
            return Err(IrError::def(
                what,
                format!("shape {shape:?} has more elements than a 64-bit index can count"),
            ));
        }
        if contiguity.len() != rank {
            return Err(IrError::def(
                what,
                format!(
                    "contiguity has {} entries for shape {shape:?}",
                    contiguity.len()
                ),
            ));
        }
        let mut order = Vec::with_capacity(stride_order.len());
        if !stride_order.is_empty() {
            if stride_order.len() != rank {
                return Err(IrError::def(
                    what,
                    format!("stride_order {stride_order:?} must have {rank} entries"),
                ));
            }
            for &s in stride_order {
                let n = if s < 0 { s + rank as i64 } else { s };
                if n < 0 || n >= rank as i64 || order.contains(&(n as usize)) {
                    return Err(IrError::def(
                        what,
                        format!("stride_order {stride_order:?} is not a permutation of 0..{rank}"),
                    ));
                }
                order.push(n as usize);
            }
        }
        let decl = TensorDecl {
            contiguity,
            stride_order: order,
            is_cpu,
        };
        if is_cpu && rank != 0 {
            return Err(IrError::def(
                what,
                "is_cpu=True is only supported for 0-dim tensors",
            ));
        }
        let id = self.push(
            name,
            dtype,
            Some(extents),
            ValueDef::TensorInput(decl),
            None,
        );
        self.f.inputs.push(id);
        Ok(id)
    }

    /// A contiguous row-major tensor input.
    pub fn tensor(&mut self, shape: &[i64], dtype: DType) -> Result<ValueId, IrError> {
        let contiguity = shape
            .iter()
            .map(|&e| if e == 1 { None } else { Some(true) })
            .collect();
        self.define_tensor(None, shape, contiguity, dtype, &[], false)
    }

    /// `fd.define_scalar(value, dtype=)`; without a value the scalar is a fusion input.
    pub fn define_scalar(
        &mut self,
        name: Option<&str>,
        value: Option<Literal>,
        dtype: DType,
    ) -> ValueId {
        match value {
            Some(v) => self.push(
                name,
                dtype,
                None,
                ValueDef::DefineScalar,
                Some(v.cast(dtype)),
            ),
            None => {
                let id = self.push(name, dtype, None, ValueDef::ScalarInput, None);
                self.f.inputs.push(id);
                id
            }
        }
    }

    /// Fixes scalar input `v` to `value` when the fusion is built (its value
    /// decides an extent, e.g. iota's length); run-time values must equal it
    /// (`Fusion::check_bound_scalar`).
    pub fn bind_scalar_input(&mut self, v: ValueId, value: Literal) {
        let val = &mut self.f.values[v.index()];
        if matches!(val.def, ValueDef::ScalarInput) {
            val.constant = Some(value.cast(val.dtype));
        }
    }

    /// A literal written inline as an op argument (`fd.ops.mul(tv0, 0.5)`).
    pub fn literal(&mut self, lit: Literal) -> ValueId {
        self.push(
            Some(""),
            lit.natural_dtype(),
            None,
            ValueDef::Literal,
            Some(lit),
        )
    }

    /// Applies any op; `names` name its outputs (default `tvN`/`cN`).
    pub fn op(&mut self, op: Op, names: &[&str]) -> Result<Vec<ValueId>, IrError> {
        let types = infer(
            &Graph {
                values: &self.f.values,
                nodes: &self.f.nodes,
            },
            &op,
        )?;
        if !names.is_empty() && names.len() != types.len() {
            return Err(IrError::op(
                op.name(),
                format!(
                    "returns {} values but {} names were given",
                    types.len(),
                    names.len()
                ),
            ));
        }
        let node = self.f.nodes.len();
        let outs: Vec<ValueId> = types
            .into_iter()
            .enumerate()
            .map(|(index, t)| {
                self.push(
                    names.get(index).copied(),
                    t.dtype,
                    t.shape,
                    ValueDef::Node { node, index },
                    t.constant,
                )
            })
            .collect();
        self.f.nodes.push(Node {
            op,
            outputs: outs.clone(),
        });
        Ok(outs)
    }

    fn op1(&mut self, op: Op) -> Result<ValueId, IrError> {
        Ok(self.op(op, &[])?[0])
    }

    /// `fd.add_output(v)`.
    pub fn add_output(&mut self, v: ValueId) -> Result<(), IrError> {
        let val = self.f.values.get(v.index()).ok_or_else(|| {
            IrError::def("fd.add_output", format!("value {} is not defined", v.0))
        })?;
        if !val.is_tensor() {
            return Err(IrError::def(
                "fd.add_output",
                format!("{} is a scalar; only tensors can be outputs", val.name),
            ));
        }
        self.f.outputs.push(v);
        Ok(())
    }

    /// `fd.add_output(v, alias_input=input)`: `v` is written into tensor input
    /// `input` in place; nvFuser hides it from `execute`'s results unless it
    /// was already an output.
    pub fn add_output_alias(&mut self, v: ValueId, input: ValueId) -> Result<(), IrError> {
        let what = "fd.add_output";
        let iv = self.f.values.get(input.index()).ok_or_else(|| {
            IrError::def(what, format!("value {} is not defined", input.0))
        })?;
        if !matches!(iv.def, ValueDef::TensorInput(_)) {
            return Err(IrError::def(
                what,
                format!("alias_input {} must be a tensor input of the fusion", iv.name),
            ));
        }
        let ov = self.f.value(v);
        if ov.shape != iv.shape || ov.dtype != iv.dtype {
            return Err(IrError::def(
                what,
                format!(
                    "{} ({} {:?}) cannot be written into alias_input {} ({} {:?}): shape and dtype must be the same",
                    ov.name, ov.dtype, ov.shape, iv.name, iv.dtype, iv.shape
                ),
            ));
        }
        if self.f.aliases.iter().any(|a| a.input == input) {
            return Err(IrError::def(
                what,
                format!("input {} is already updated in place by another output", iv.name),
            ));
        }
        let (output, hidden) = match self.f.outputs.iter().position(|&o| o == v) {
            Some(p) => (p, false),
            None => {
                self.add_output(v)?;
                (self.f.outputs.len() - 1, true)
            }
        };
        if self.f.aliases.iter().any(|a| a.output == output) {
            return Err(IrError::def(
                what,
                format!("{} already updates an input in place", self.f.value(v).name),
            ));
        }
        self.f.aliases.push(crate::OutputAlias {
            output,
            input,
            hidden,
        });
        Ok(())
    }

    /// `fd.add_output(v, stride_order=order)`: an output allocated in `order`.
    pub fn add_output_stride_order(&mut self, v: ValueId, order: &[i64]) -> Result<(), IrError> {
        let rank = self.f.values.get(v.index()).map_or(0, |x| x.rank());
        let order = crate::infer::stride_permutation("fd.add_output", order, rank)?;
        self.add_output(v)?;
        self.f.output_layouts.push(crate::OutputLayout {
            output: self.f.outputs.len() - 1,
            stride_order: order,
        });
        Ok(())
    }

    pub fn unary(&mut self, kind: UnaryOp, x: ValueId) -> Result<ValueId, IrError> {
        self.op1(Op::Unary { kind, x })
    }
    pub fn binary(&mut self, kind: BinaryOp, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.op1(Op::Binary { kind, a, b })
    }
    pub fn add(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.binary(BinaryOp::Add, a, b)
    }
    pub fn mul(&mut self, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.binary(BinaryOp::Mul, a, b)
    }
    pub fn where_(&mut self, cond: ValueId, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.op1(Op::Where { cond, a, b })
    }
    pub fn cast(&mut self, x: ValueId, dtype: DType) -> Result<ValueId, IrError> {
        self.op1(Op::Cast { x, dtype })
    }
    pub fn sum(
        &mut self,
        x: ValueId,
        dims: &[i64],
        keepdim: bool,
        dtype: Option<DType>,
    ) -> Result<ValueId, IrError> {
        self.op1(Op::Reduce {
            kind: ReduceOp::Sum,
            x,
            dims: dims.to_vec(),
            keepdim,
            dtype,
        })
    }
    pub fn reduce(
        &mut self,
        kind: ReduceOp,
        x: ValueId,
        dims: &[i64],
        keepdim: bool,
    ) -> Result<ValueId, IrError> {
        self.op1(Op::Reduce {
            kind,
            x,
            dims: dims.to_vec(),
            keepdim,
            dtype: None,
        })
    }
    /// Returns (mean, M2, count).
    pub fn welford(
        &mut self,
        x: ValueId,
        dims: &[i64],
    ) -> Result<(ValueId, ValueId, ValueId), IrError> {
        let o = self.op(
            Op::Welford {
                x,
                dims: dims.to_vec(),
            },
            &[],
        )?;
        Ok((o[0], o[1], o[2]))
    }
    /// Returns (variance, mean).
    pub fn var_mean(
        &mut self,
        x: ValueId,
        dims: &[i64],
        correction: i64,
        keepdim: bool,
    ) -> Result<(ValueId, ValueId), IrError> {
        let o = self.op(
            Op::VarMean {
                x,
                dims: dims.to_vec(),
                correction,
                keepdim,
            },
            &[],
        )?;
        Ok((o[0], o[1]))
    }
    pub fn broadcast(&mut self, x: ValueId, is_broadcast_dim: &[bool]) -> Result<ValueId, IrError> {
        self.op1(Op::Broadcast {
            x,
            is_broadcast_dim: is_broadcast_dim.to_vec(),
        })
    }
    pub fn broadcast_in_dim(
        &mut self,
        x: ValueId,
        shape: &[i64],
        broadcast_dims: &[i64],
    ) -> Result<ValueId, IrError> {
        self.op1(Op::BroadcastInDim {
            x,
            shape: shape.to_vec(),
            broadcast_dims: broadcast_dims.to_vec(),
        })
    }
    pub fn expand(&mut self, x: ValueId, shape: &[i64]) -> Result<ValueId, IrError> {
        self.op1(Op::Expand {
            x,
            shape: shape.to_vec(),
        })
    }
    pub fn reshape(&mut self, x: ValueId, new_shape: &[i64]) -> Result<ValueId, IrError> {
        self.op1(Op::Reshape {
            x,
            new_shape: new_shape.to_vec(),
        })
    }
    pub fn permute(&mut self, x: ValueId, dims: &[i64]) -> Result<ValueId, IrError> {
        self.op1(Op::Permute {
            x,
            dims: dims.to_vec(),
        })
    }
    pub fn squeeze(&mut self, x: ValueId, dims: &[i64]) -> Result<ValueId, IrError> {
        self.op1(Op::Squeeze {
            x,
            dims: dims.to_vec(),
        })
    }
    pub fn slice(&mut self, x: ValueId, start: &[i64], end: &[i64]) -> Result<ValueId, IrError> {
        let strides = vec![1; start.len()];
        self.op1(Op::Slice {
            x,
            start: start.to_vec(),
            end: end.to_vec(),
            strides,
            manual_normalization: false,
        })
    }
    /// Pad widths as integers, (before, after) pairs from the last dim.
    pub fn pad(
        &mut self,
        x: ValueId,
        widths: &[i64],
        value: Option<Literal>,
    ) -> Result<ValueId, IrError> {
        let widths = widths
            .iter()
            .map(|&w| self.literal(Literal::Int(w)))
            .collect();
        let value = value.map(|v| self.literal(v));
        self.op1(Op::Pad { x, widths, value })
    }
    pub fn cat(
        &mut self,
        xs: &[ValueId],
        dim: i64,
        manual_padding: bool,
    ) -> Result<ValueId, IrError> {
        self.op1(Op::Cat {
            xs: xs.to_vec(),
            dim,
            manual_padding,
        })
    }
    pub fn full(&mut self, shape: &[i64], fill: Literal, dtype: DType) -> Result<ValueId, IrError> {
        let fill = self.literal(fill);
        self.op1(Op::Full {
            shape: shape.to_vec(),
            fill,
            dtype,
        })
    }
    pub fn index_select(
        &mut self,
        x: ValueId,
        index: ValueId,
        dim: i64,
    ) -> Result<ValueId, IrError> {
        self.op1(Op::IndexSelect { x, index, dim })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmsnorm_types() {
        let mut fd = FusionBuilder::new();
        let x = fd.tensor(&[4, 8], DType::BFloat16).unwrap();
        let w = fd.tensor(&[8], DType::BFloat16).unwrap();
        let xf = fd.cast(x, DType::Float).unwrap();
        let sq = fd.mul(xf, xf).unwrap();
        let s = fd.sum(sq, &[1], true, None).unwrap();
        assert_eq!(fd.fusion().value(s).shape, Some(vec![4, 1]));
        let y = fd.mul(xf, s).unwrap();
        let wb = fd.broadcast_in_dim(w, &[4, 8], &[1]).unwrap();
        let out = fd.mul(y, wb).unwrap();
        assert_eq!(fd.fusion().value(out).dtype, DType::Float);
        let out = fd.cast(out, DType::BFloat16).unwrap();
        fd.add_output(out).unwrap();
        let f = fd.finish();
        f.validate().unwrap();
        let back = Fusion::from_json(&f.to_json()).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn constant_scalars_fold() {
        let mut fd = FusionBuilder::new();
        let a = fd.literal(Literal::Int(0));
        let b = fd.literal(Literal::Int(32));
        let c = fd.add(a, b).unwrap();
        assert_eq!(fd.fusion().value(c).constant, Some(Literal::Int(32)));
        let sixteen = fd.literal(Literal::Int(16));
        let ge = fd.binary(BinaryOp::Ge, c, sixteen).unwrap();
        let two = fd.literal(Literal::Float(2.0));
        let three = fd.literal(Literal::Float(3.0));
        let w = fd.where_(ge, two, three).unwrap();
        assert_eq!(fd.fusion().value(w).constant, Some(Literal::Float(2.0)));
        assert_eq!(fd.fusion().value(w).dtype, DType::Double);
    }

    #[test]
    fn bad_ops_are_errors() {
        let mut fd = FusionBuilder::new();
        let x = fd.tensor(&[4, 8], DType::Float).unwrap();
        let y = fd.tensor(&[4, 7], DType::Float).unwrap();
        assert!(fd.add(x, y).is_err());
        assert!(fd.reshape(x, &[5, 7]).is_err());
        assert!(fd.squeeze(x, &[0]).is_err());
        assert!(fd.permute(x, &[0, 0]).is_err());
        assert!(fd.sum(x, &[2], false, None).is_err());
        let e = fd.expand(x, &[4, 9]).unwrap_err();
        assert!(
            e.to_string().contains("only extent-1 dims can be expanded"),
            "{e}"
        );
    }
}
