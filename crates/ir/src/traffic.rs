//! The bytes a fusion must read from each tensor input, and how they were
//! counted: the "bytes moved" a kernel time is read against.
//!
//! An input counts every element its layout addresses, once: a dim of stride 0
//! (a broadcast) counts one element, and an input read by several ops counts
//! once. Some inputs count less, because the fusion never needs more:
//! - an input no op reads (unused, or returned as it is) counts nothing;
//! - what only outputs the caller returns as views read (a slice of a fused
//!   qkv returned reshaped and permuted) counts nothing ([`traffic_with_views`]);
//! - a gather table (the `x` of `index_select`) that nothing else reads counts
//!   the slices its ids select: ids x row bytes, or distinct ids x row bytes
//!   when the caller knows the index values, never more than the whole table;
//! - an input read only through `slice`s counts the elements they cover.
//!
//! Outputs are not counted here: which outputs a kernel writes (views of an
//! input write nothing) is the GPU plan's to say; [`Traffic::describe`] takes
//! those bytes so that the record says everything that was counted.

use crate::infer::{index_extent, norm_dim, slice_bounds};
use crate::op::Op;
use crate::recipe::row_major_strides;
use crate::{DType, Fusion, ValueDef, ValueId};

/// How one tensor input is actually laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputShape {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// In elements; 0 for a dim every index of which is the same element.
    pub strides: Vec<i64>,
}

impl InputShape {
    /// A dense row-major tensor.
    pub fn dense(dtype: DType, shape: &[usize]) -> InputShape {
        InputShape {
            dtype,
            shape: shape.to_vec(),
            strides: row_major_strides(shape),
        }
    }

    /// Every element the layout addresses, a dim of stride 0 once, in bytes.
    pub fn addressed_bytes(&self) -> u64 {
        let elements: u128 = (0..self.shape.len())
            .map(|d| self.addressed_extent(d) as u128)
            .product();
        saturate(elements * self.dtype.size_bytes() as u128)
    }

    /// Extent of `dim` as memory sees it: one element where the stride is 0.
    fn addressed_extent(&self, dim: usize) -> usize {
        if self.strides[dim] == 0 {
            self.shape[dim].min(1)
        } else {
            self.shape[dim]
        }
    }
}

/// How an input's bytes were counted.
#[derive(Clone, Debug, PartialEq)]
pub enum Counted {
    /// Every element its layout addresses, once.
    Whole,
    /// Every element although some op reads only part of it: why that part
    /// was not counted instead.
    WholeBecause(String),
    /// No op reads it: unused, or returned as it is.
    NotRead,
    /// A gather table nothing else reads: what each gather's ids select.
    Gathered(Vec<GatherRead>),
    /// Read only through slices: the elements they cover together.
    Sliced { slices: usize, elements: u64 },
}

/// What one gather op reads from its table.
#[derive(Clone, Debug, PartialEq)]
pub struct GatherRead {
    /// The op's `fd.ops` name.
    pub op: &'static str,
    /// Ids it looks up.
    pub ids: u64,
    /// Distinct ids, when the caller knew the values of the index input.
    pub distinct: Option<u64>,
    /// Slices along the selected dim read, and how many the table has.
    pub rows: u64,
    pub of_rows: u64,
    /// Bytes of the input this op reads.
    pub bytes: u64,
}

/// What the fusion reads from one tensor input.
#[derive(Clone, Debug, PartialEq)]
pub struct InputTraffic {
    /// Position among the fusion's inputs.
    pub input: usize,
    /// The name the script gave it.
    pub name: String,
    pub layout: InputShape,
    /// Bytes the fusion must read from it.
    pub bytes: u64,
    /// Bytes it addresses: what it counts when read whole.
    pub whole: u64,
    pub counted: Counted,
}

/// What a fusion reads from its tensor inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Traffic {
    /// One entry per tensor input, in input order.
    pub inputs: Vec<InputTraffic>,
    /// Bytes read, all inputs together.
    pub read: u64,
}

impl Traffic {
    /// Bytes read if every input were read whole.
    pub fn addressed(&self) -> u64 {
        self.inputs.iter().map(|i| i.whole).sum()
    }

    /// One line for a record: the rule, every input not read whole, and the
    /// `written` bytes of outputs the caller adds to [`Traffic::read`].
    pub fn describe(&self, written: u64) -> String {
        let mut parts = vec![
            "inputs as addressed (stride-0 dims once), each once however many ops read it"
                .to_string(),
        ];
        for i in &self.inputs {
            let what = format!(
                "input {} ({} {:?} {})",
                i.input, i.name, i.layout.shape, i.layout.dtype
            );
            let how = match &i.counted {
                Counted::Whole => continue,
                // Slices that cover all of it read it whole.
                Counted::Sliced { .. } if i.bytes == i.whole => continue,
                Counted::WholeBecause(why) => format!("{} B, whole: {why}", i.bytes),
                Counted::NotRead => "not read".to_string(),
                Counted::Gathered(reads) => {
                    let each: Vec<String> = reads.iter().map(describe_gather).collect();
                    format!(
                        "{}; {} B, not the whole {} B",
                        each.join(", "),
                        i.bytes,
                        i.whole
                    )
                }
                Counted::Sliced { slices, elements } => format!(
                    "{elements} elements under {slices} slice(s) = {} B, not the whole {} B",
                    i.bytes, i.whole
                ),
            };
            parts.push(format!("{what}: {how}"));
        }
        parts.push(format!("plus {written} B of outputs written"));
        parts.join("; ")
    }
}

fn describe_gather(g: &GatherRead) -> String {
    let ids = match g.distinct {
        Some(d) => format!("{d} distinct of {} ids", g.ids),
        None => format!("{} ids", g.ids),
    };
    format!("{} reads {} of {} rows ({ids})", g.op, g.rows, g.of_rows)
}

/// The bytes `f` must read from each tensor input.
///
/// `inputs[i]` is the actual layout of input `i` (`None` for a scalar, or to
/// take the declared shape, dense); `distinct[i]` is the number of distinct
/// values of integer input `i` when the caller knows them (it may be shorter
/// than the inputs). Only inputs that feed a gather's index matter there:
/// [`crate::analysis::index_inputs`] names them.
pub fn traffic(f: &Fusion, inputs: &[Option<InputShape>], distinct: &[Option<u64>]) -> Traffic {
    traffic_with_views(f, inputs, distinct, &[])
}

/// As [`traffic`], where the outputs `views` are returned as views of what
/// they are computed from (the GPU plan's aliases): no kernel reads for them,
/// so an input, or a slice of one, that only they reach counts nothing.
pub fn traffic_with_views(
    f: &Fusion,
    inputs: &[Option<InputShape>],
    distinct: &[Option<u64>],
    views: &[ValueId],
) -> Traffic {
    let uses = uses_of(f);
    let seen = Seen { f, uses: &uses, views };
    let mut out = Vec::new();
    for (i, &v) in f.inputs.iter().enumerate() {
        let val = f.value(v);
        let (Some(declared), ValueDef::TensorInput(decl)) = (&val.shape, &val.def) else {
            continue;
        };
        let layout = inputs
            .get(i)
            .cloned()
            .flatten()
            .unwrap_or_else(|| InputShape {
                dtype: val.dtype,
                shape: declared.clone(),
                strides: decl.dense_strides(declared),
            });
        let whole = layout.addressed_bytes();
        let counted = if &layout.shape != declared || layout.strides.len() != declared.len() {
            Counted::WholeBecause("its layout does not match the definition's shape".into())
        } else {
            count(&seen, v, &layout, distinct)
        };
        let size = layout.dtype.size_bytes() as u128;
        let bytes = match &counted {
            Counted::Whole | Counted::WholeBecause(_) => whole,
            Counted::NotRead => 0,
            Counted::Gathered(reads) => reads.iter().map(|g| g.bytes).sum::<u64>().min(whole),
            Counted::Sliced { elements, .. } => saturate(*elements as u128 * size).min(whole),
        };
        out.push(InputTraffic {
            input: i,
            name: val.name.clone(),
            layout,
            bytes,
            whole,
            counted,
        });
    }
    let read = out.iter().map(|i| i.bytes).sum();
    Traffic { inputs: out, read }
}

/// An op that reads only part of one operand (the table), chosen by the
/// values of another (the index). Each gather-like op says here which operand
/// is which and what one id reads; the counting is the same for all of them.
struct Gather {
    table: ValueId,
    index: ValueId,
    /// The dim of the table the index values select along.
    dim: usize,
    /// Ids looked up.
    ids: u64,
    /// Elements of the table one id reads.
    per_id: u64,
}

fn gather_of(f: &Fusion, op: &Op) -> Option<Gather> {
    match op {
        // Each id reads one whole slice of `x` along `dim`: a row of an
        // embedding table.
        Op::IndexSelect { x, index, dim } => {
            let xs = f.value(*x).shape.as_deref()?;
            let is = f.value(*index).shape.as_deref()?;
            let dim = norm_dim(op.name(), *dim, xs.len()).ok()?;
            let ids = index_extent(op.name(), is, xs.len(), dim).ok()?;
            Some(Gather {
                table: *x,
                index: *index,
                dim,
                ids: ids as u64,
                per_id: slice_elements(xs, dim),
            })
        }
        // Each id reads one row of the weight.
        Op::Index(crate::op_index::IndexOp::EmbeddingFwd { input, weight, .. }) => {
            let ws = f.value(*weight).shape.as_deref()?;
            let is = f.value(*input).shape.as_deref()?;
            Some(Gather {
                table: *weight,
                index: *input,
                dim: 0,
                ids: is.iter().product::<usize>() as u64,
                per_id: slice_elements(ws, 0),
            })
        }
        _ => None,
    }
}

/// Elements of one slice of `shape` along `dim`.
fn slice_elements(shape: &[usize], dim: usize) -> u64 {
    shape
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != dim)
        .map(|(_, &e)| e as u64)
        .product()
}

/// How one op reads an input.
enum Read {
    /// The table of gather op `node`, reached as value `table` through ops
    /// that give each element exactly once; `via` is the first of them.
    Gather {
        node: usize,
        table: ValueId,
        via: Option<&'static str>,
    },
    /// A slice of the input itself.
    Slice(usize),
    /// Reads all of it. `partial`: the op reads only part, but in a way not
    /// counted here (`by` says how).
    Full { by: String, partial: bool },
}

/// The nodes that read each value, each node once.
fn uses_of(f: &Fusion) -> Vec<Vec<usize>> {
    let mut uses = vec![Vec::new(); f.values.len()];
    for (n, node) in f.nodes.iter().enumerate() {
        for v in node.op.operands() {
            let u: &mut Vec<usize> = &mut uses[v.index()];
            if u.last() != Some(&n) {
                u.push(n);
            }
        }
    }
    uses
}

/// Ops each output element of which is one element of their operand, moved,
/// repeated or cast: layout changes, broadcasts, casts. They are followed to
/// find how the input is finally read: a gather after them reads only the
/// elements it selects, as long as none of them repeated elements.
fn moves_elements(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape { .. }
            | Op::Permute { .. }
            | Op::Squeeze { .. }
            | Op::Broadcast { .. }
            | Op::BroadcastInDim { .. }
            | Op::Expand { .. }
            | Op::Cast { .. }
    )
}

/// The fusion with the nodes that read each value and the outputs returned
/// as views.
struct Seen<'a> {
    f: &'a Fusion,
    uses: &'a [Vec<usize>],
    views: &'a [ValueId],
}

impl Seen<'_> {
    /// Whether every element of `v` that anything needs reaches only outputs
    /// returned as views, through ops that move elements or slice: then no
    /// kernel reads `v` for them.
    fn only_viewed(&self, v: ValueId) -> bool {
        let (f, uses) = (self.f, &self.uses[v.index()]);
        if self.views.contains(&v) {
            return uses.is_empty() || uses.iter().all(|&n| self.viewing(n));
        }
        !f.outputs.contains(&v) && !uses.is_empty() && uses.iter().all(|&n| self.viewing(n))
    }

    /// Whether node `n` moves or slices its operand into a value only views reach.
    fn viewing(&self, n: usize) -> bool {
        let node = &self.f.nodes[n];
        (moves_elements(&node.op) || matches!(node.op, Op::Slice { .. })) && self.only_viewed(node.outputs[0])
    }
}

/// Every read of `input`, following the ops that move its elements.
fn reads_of(seen: &Seen, input: ValueId) -> Vec<Read> {
    let (f, uses) = (seen.f, seen.uses);
    let mut reads = Vec::new();
    // (value, every element of it is one element of the input, first op on the way)
    let mut todo = vec![(input, true, None::<&'static str>)];
    while let Some((v, one_to_one, via)) = todo.pop() {
        if v != input && f.outputs.contains(&v) && !seen.views.contains(&v) {
            reads.push(Read::Full {
                by: format!("output {}", f.value(v).name),
                partial: false,
            });
        }
        for &node in &uses[v.index()] {
            let op = &f.nodes[node].op;
            let name = op.name();
            let gather = gather_of(f, op).filter(|g| g.table == v && g.index != v);
            if matches!(op, Op::Slice { .. }) && seen.only_viewed(f.nodes[node].outputs[0]) {
                // A slice only views return: read by no kernel.
            } else if gather.is_some() && one_to_one {
                reads.push(Read::Gather {
                    node,
                    table: v,
                    via,
                });
            } else if gather.is_some() {
                let by = format!(
                    "{name} reads it through {}, which repeats elements",
                    via.unwrap_or("?")
                );
                reads.push(Read::Full { by, partial: true });
            } else if matches!(op, Op::Slice { .. }) && v != input {
                let by = format!("slice reads it through {}", via.unwrap_or("?"));
                reads.push(Read::Full { by, partial: true });
            } else if matches!(op, Op::Slice { .. }) {
                reads.push(Read::Slice(node));
            } else if matches!(op, Op::RngLike { .. }) {
                // rand_like/randn_like read only the input's shape.
            } else if moves_elements(op) {
                let out = f.nodes[node].outputs[0];
                let same = f.value(out).numel() == f.value(v).numel();
                todo.push((out, one_to_one && same, via.or(Some(name))));
            } else {
                reads.push(Read::Full {
                    by: name.to_string(),
                    partial: false,
                });
            }
        }
    }
    reads
}

fn count(seen: &Seen, input: ValueId, layout: &InputShape, distinct: &[Option<u64>]) -> Counted {
    let f = seen.f;
    let reads = reads_of(seen, input);
    if reads.is_empty() {
        return Counted::NotRead;
    }
    let (mut gathers, mut slices, mut whole_by, mut partial_by) = (vec![], vec![], vec![], vec![]);
    for r in reads {
        match r {
            Read::Gather { node, table, via } => gathers.push((node, table, via)),
            Read::Slice(node) => slices.push(node),
            Read::Full { by, partial: true } => partial_by.push(by),
            Read::Full { by, partial: false } => whole_by.push(by),
        }
    }
    if !whole_by.is_empty() {
        whole_by.sort();
        whole_by.dedup();
        let mut part: Vec<String> = gathers
            .iter()
            .map(|&(n, ..)| f.nodes[n].op.name().to_string())
            .collect();
        part.extend(slices.iter().map(|_| "slice".to_string()));
        part.extend(partial_by);
        part.dedup();
        if part.is_empty() {
            return Counted::Whole;
        }
        return Counted::WholeBecause(format!(
            "read in part by {} but whole by {}",
            part.join(", "),
            whole_by.join(", ")
        ));
    }
    if !partial_by.is_empty() {
        return Counted::WholeBecause(partial_by.join(", "));
    }
    match (gathers.is_empty(), slices.is_empty()) {
        (false, false) => Counted::WholeBecause("both gathered and sliced".into()),
        (false, true) => gathered(f, &gathers, input, layout, distinct),
        _ => sliced(f, &slices, layout),
    }
}

/// The bytes each gather reads from `input`, its table.
fn gathered(
    f: &Fusion,
    gathers: &[(usize, ValueId, Option<&'static str>)],
    input: ValueId,
    layout: &InputShape,
    distinct: &[Option<u64>],
) -> Counted {
    let whole = layout.addressed_bytes() as u128;
    let repeats = (0..layout.shape.len()).any(|d| layout.addressed_extent(d) != layout.shape[d]);
    let mut reads = Vec::new();
    for &(node, table, via) in gathers {
        let op = &f.nodes[node].op;
        let g = gather_of(f, op).expect("a gather read");
        let shape = f.value(table).shape.clone().unwrap_or_default();
        let numel: u128 = shape.iter().map(|&e| e as u128).product();
        let of_rows = shape[g.dim] as u64;
        // A layout that repeats elements (stride 0) breaks the share below:
        // through other ops, which input dim the selected dim is may not be
        // simple to say; on the input itself, a selected dim of stride 0 makes
        // every id read the same row.
        if let Some(via) = via.filter(|_| repeats) {
            return Counted::WholeBecause(format!(
                "{} reads it through {via} and its layout repeats elements (stride 0)",
                op.name()
            ));
        }
        if table == input && layout.strides[g.dim] == 0 {
            return Counted::WholeBecause(format!(
                "every id of {} selects the same row (stride 0)",
                op.name()
            ));
        }
        let known = crate::analysis::source_input(f, g.index)
            .and_then(|j| distinct.get(j).copied().flatten());
        let rows = g.ids.min(of_rows).min(known.unwrap_or(u64::MAX));
        let elements = (g.ids as u128 * g.per_id as u128)
            .min(rows as u128 * slice_elements(&shape, g.dim) as u128);
        // The path from the input gives each of its elements once, so the
        // share of the table's elements read is the share of its bytes read.
        let bytes = if numel == 0 {
            0
        } else {
            (whole * elements).div_ceil(numel)
        };
        reads.push(GatherRead {
            op: op.name(),
            ids: g.ids,
            distinct: known,
            rows,
            of_rows,
            bytes: saturate(bytes.min(whole)),
        });
    }
    Counted::Gathered(reads)
}

/// Cells of the grid the slices' bounds make, beyond which their union is
/// not worked out.
const MAX_CELLS: u128 = 1 << 20;

/// The elements of `layout` the slices `nodes` cover together.
fn sliced(f: &Fusion, nodes: &[usize], layout: &InputShape) -> Counted {
    let rank = layout.shape.len();
    // Per slice and dim: first index, count, step; a stride-0 dim is one element.
    let mut boxes: Vec<Vec<(usize, usize, usize)>> = Vec::new();
    for &n in nodes {
        let Op::Slice {
            start,
            end,
            strides,
            manual_normalization,
            ..
        } = &f.nodes[n].op
        else {
            unreachable!("a slice read");
        };
        let Ok((counts, starts, steps)) = slice_bounds(
            "slice",
            &layout.shape,
            start,
            end,
            strides,
            *manual_normalization,
        ) else {
            return Counted::WholeBecause("a slice's bounds do not fit its layout".into());
        };
        boxes.push(
            (0..rank)
                .map(|d| match layout.strides[d] {
                    0 => (0, counts[d].min(1), 1),
                    _ => (
                        starts[d],
                        counts[d],
                        if counts[d] > 1 { steps[d] } else { 1 },
                    ),
                })
                .collect(),
        );
    }
    boxes.sort();
    boxes.dedup();
    let strided = boxes.iter().flatten().any(|&(_, _, s)| s != 1);
    let elements = if boxes.len() == 1 {
        boxes[0].iter().map(|&(_, c, _)| c as u128).product()
    } else if strided {
        return Counted::WholeBecause("overlaps of strided slices are not counted".into());
    } else {
        match union_volume(&boxes, rank) {
            Some(e) => e,
            None => return Counted::WholeBecause("too many slices to count their overlap".into()),
        }
    };
    Counted::Sliced {
        slices: nodes.len(),
        elements: saturate(elements),
    }
}

/// Elements covered by at least one box (start, count, step 1 per dim): the
/// grid of every box bound, each cell counted when a box holds it.
fn union_volume(boxes: &[Vec<(usize, usize, usize)>], rank: usize) -> Option<u128> {
    let bounds: Vec<Vec<usize>> = (0..rank)
        .map(|d| {
            let mut b: Vec<usize> = boxes
                .iter()
                .flat_map(|bx| [bx[d].0, bx[d].0 + bx[d].1])
                .collect();
            b.sort_unstable();
            b.dedup();
            b
        })
        .collect();
    let cells: u128 = bounds
        .iter()
        .map(|b| b.len().saturating_sub(1) as u128)
        .product();
    if cells > MAX_CELLS {
        return None;
    }
    let mut total = 0u128;
    let mut cell = vec![0usize; rank];
    for _ in 0..cells {
        let covered = boxes.iter().any(|bx| {
            (0..rank).all(|d| {
                bx[d].0 <= bounds[d][cell[d]] && bounds[d][cell[d] + 1] <= bx[d].0 + bx[d].1
            })
        });
        if covered {
            total += (0..rank)
                .map(|d| (bounds[d][cell[d] + 1] - bounds[d][cell[d]]) as u128)
                .product::<u128>();
        }
        // The next cell, last dim fastest.
        for d in (0..rank).rev() {
            cell[d] += 1;
            if cell[d] + 1 < bounds[d].len() {
                break;
            }
            cell[d] = 0;
        }
    }
    Some(total)
}

fn saturate(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}
