//! `fd.ops.*` of the indexing and ordering family, with nvFuser's parameter
//! names and defaults from both bindings (legacy `arg1`/`input` are accepted
//! as spellings of `arg`).

use crate::error::PResult;
use crate::ops::{bind, Call};
use crate::parse::Body;
use fusebench_ir::{DType, IndexOp, ValueId};

const ARG1: &[(&str, &str)] = &[("arg1", "arg")];

impl Body<'_, '_> {
    fn flag(&self, e: Option<&crate::expr::Expr>, what: &str, default: bool) -> PResult<bool> {
        e.map(|e| self.boolean(e, what))
            .transpose()
            .map(|b| b.unwrap_or(default))
    }

    fn opt_operand(&mut self, e: Option<&crate::expr::Expr>) -> PResult<Option<ValueId>> {
        e.map(|e| self.operand(e)).transpose()
    }

    /// Reads one op of this family; `name` is one of [`IndexOp::NAMES`].
    pub(crate) fn index_op(&mut self, name: &str, callee: &str, call: &Call) -> PResult<IndexOp> {
        Ok(match name {
            "iota" => {
                let a = bind(callee, call, &["length", "start", "step", "dtype"], &[])?;
                let length = self.operand(a.req("length")?)?;
                self.bind_length(length);
                let start = self.opt_operand(a.opt("start"))?;
                let step = self.opt_operand(a.opt("step"))?;
                let dtype = match a.get("dtype") {
                    Some(e) => self.dtype(e, false)?.unwrap_or(DType::Int),
                    None => DType::Int,
                };
                IndexOp::Iota {
                    length,
                    start,
                    step,
                    dtype,
                }
            }
            "triu" => {
                let a = bind(callee, call, &["arg", "diagonal"], &[("input", "arg")])?;
                let x = self.operand(a.req("arg")?)?;
                let diagonal = a
                    .get("diagonal")
                    .map(|e| self.int(e, "diagonal"))
                    .transpose()?;
                IndexOp::Triu {
                    x,
                    diagonal: diagonal.unwrap_or(0),
                }
            }
            "take_along_axis" | "gather" => {
                let a = bind(callee, call, &["arg", "index", "dim"], ARG1)?;
                let x = self.operand(a.req("arg")?)?;
                let index = self.operand(a.req("index")?)?;
                let dim = self.int(a.req("dim")?, "dim")?;
                if name == "gather" {
                    IndexOp::Gather { x, index, dim }
                } else {
                    IndexOp::TakeAlongAxis { x, index, dim }
                }
            }
            "select" => {
                let a = bind(callee, call, &["arg", "index", "dim"], &[])?;
                let x = self.operand(a.req("arg")?)?;
                let index = self.operand(a.req("index")?)?;
                let dim = self.int(a.req("dim")?, "dim")?;
                IndexOp::Select { x, index, dim }
            }
            "scatter" => {
                let a = bind(callee, call, &["arg", "index", "src", "dim"], ARG1)?;
                let x = self.operand(a.req("arg")?)?;
                let index = self.operand(a.req("index")?)?;
                let src = self.operand(a.req("src")?)?;
                let dim = self.int(a.req("dim")?, "dim")?;
                IndexOp::Scatter { x, index, src, dim }
            }
            "index_put_accumulate" => {
                let a = bind(callee, call, &["acc", "index", "value"], &[])?;
                let acc = self.operand(a.req("acc")?)?;
                let index = self.operand(a.req("index")?)?;
                let value = self.operand(a.req("value")?)?;
                IndexOp::IndexPutAccumulate { acc, index, value }
            }
            "topk" => {
                let a = bind(callee, call, &["arg", "k", "dim", "largest", "sorted"], &[])?;
                let x = self.operand(a.req("arg")?)?;
                let k = self.operand(a.req("k")?)?;
                let dim = a
                    .get("dim")
                    .map(|e| self.int(e, "dim"))
                    .transpose()?
                    .unwrap_or(-1);
                let largest = self.flag(a.get("largest"), "largest", true)?;
                let sorted = self.flag(a.get("sorted"), "sorted", false)?;
                IndexOp::Topk {
                    x,
                    k,
                    dim,
                    largest,
                    sorted,
                }
            }
            "argsort" => {
                let a = bind(callee, call, &["arg", "dim", "descending", "stable"], &[])?;
                let x = self.operand(a.req("arg")?)?;
                let dim = self.int(a.req("dim")?, "dim")?;
                let descending = self.flag(a.get("descending"), "descending", false)?;
                let stable = self.flag(a.get("stable"), "stable", false)?;
                IndexOp::Argsort {
                    x,
                    dim,
                    descending,
                    stable,
                }
            }
            _ => {
                // embedding_fwd
                let a = bind(
                    callee,
                    call,
                    &[
                        "input",
                        "weight",
                        "padding_idx",
                        "max_norm",
                        "norm_type",
                        "scale_grad_by_freq",
                        "sparse",
                    ],
                    &[],
                )?;
                let input = self.operand(a.req("input")?)?;
                let weight = self.operand(a.req("weight")?)?;
                IndexOp::EmbeddingFwd {
                    input,
                    weight,
                    padding_idx: self.opt_operand(a.opt("padding_idx"))?,
                    max_norm: self.opt_operand(a.opt("max_norm"))?,
                    norm_type: self.opt_operand(a.opt("norm_type"))?,
                    scale_grad_by_freq: self.opt_operand(a.opt("scale_grad_by_freq"))?,
                    sparse: self.opt_operand(a.opt("sparse"))?,
                }
            }
        })
    }
}

/// `NAME(args)` of one op of this family, after `fd.ops.`; `a` spells an operand.
/// Tensors go positionally (legacy calls the first `arg1`, direct `arg`).
pub(crate) fn print_index(op: &IndexOp, a: &dyn Fn(&ValueId) -> String) -> String {
    let o = |v: &Option<ValueId>| v.as_ref().map_or("None".to_string(), a);
    let py = |b: bool| if b { "True" } else { "False" };
    match op {
        IndexOp::Iota {
            length,
            start,
            step,
            dtype,
        } => {
            format!(
                "iota({}, {}, {}, dtype=DataType.{dtype})",
                a(length),
                o(start),
                o(step)
            )
        }
        IndexOp::Triu { x, diagonal } => format!("triu({}, diagonal={diagonal})", a(x)),
        IndexOp::TakeAlongAxis { x, index, dim } => {
            format!("take_along_axis({}, {}, dim={dim})", a(x), a(index))
        }
        IndexOp::Gather { x, index, dim } => format!("gather({}, {}, dim={dim})", a(x), a(index)),
        IndexOp::Select { x, index, dim } => format!("select({}, {}, dim={dim})", a(x), a(index)),
        IndexOp::Scatter { x, index, src, dim } => {
            format!("scatter({}, {}, {}, dim={dim})", a(x), a(index), a(src))
        }
        IndexOp::IndexPutAccumulate { acc, index, value } => {
            format!(
                "index_put_accumulate({}, {}, {})",
                a(acc),
                a(index),
                a(value)
            )
        }
        IndexOp::Topk {
            x,
            k,
            dim,
            largest,
            sorted,
        } => format!(
            "topk({}, {}, dim={dim}, largest={}, sorted={})",
            a(x),
            a(k),
            py(*largest),
            py(*sorted)
        ),
        IndexOp::Argsort {
            x,
            dim,
            descending,
            stable,
        } => format!(
            "argsort({}, dim={dim}, descending={}, stable={})",
            a(x),
            py(*descending),
            py(*stable)
        ),
        IndexOp::EmbeddingFwd {
            input,
            weight,
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
        } => {
            let mut s = format!("embedding_fwd({}, {}", a(input), a(weight));
            let named = [
                ("padding_idx", padding_idx),
                ("max_norm", max_norm),
                ("norm_type", norm_type),
                ("scale_grad_by_freq", scale_grad_by_freq),
                ("sparse", sparse),
            ];
            for (k, v) in named {
                if let Some(v) = v {
                    s.push_str(&format!(", {k}={}", a(v)));
                }
            }
            s.push(')');
            s
        }
    }
}

impl Body<'_, '_> {
    /// iota's length decides its extent, which fusebench fixes when the fusion
    /// is built: a scalar input takes the value the script's inputs list gives
    /// it (nvFuser reads it at run time; other values are refused then).
    fn bind_length(&mut self, length: ValueId) {
        let f = self.b.fusion();
        if f.value(length).constant.is_some() {
            return;
        }
        let Some(pos) = f.inputs.iter().position(|&i| i == length) else {
            return;
        };
        if let Some(Some(v)) = self.scalars.get(pos) {
            let v = *v;
            self.b.bind_scalar_input(length, v);
        }
    }
}
