//! Pieces every kernel shares: its parameter list, the buffers a lowering
//! reads, wide stores, and the signature line.

use crate::device::LoadHint;
use crate::ctype;
use crate::ix::Ix;
use crate::lower::{Buffer, Lowerer};
use crate::plan::KernelArg;
use fusebench_ir::{recipe::row_major_strides, DType, Fusion, ValueDef, ValueId};
use std::collections::HashMap;
use std::ops::Add;

/// A reduction result stored in a temporary buffer by an earlier kernel.
#[derive(Clone, Debug)]
pub struct Stored {
    pub temp: usize,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// What every kernel of one fusion can read.
pub struct Context<'f> {
    pub f: &'f Fusion,
    /// Strides and offset of each tensor input (by input position), as given at run time.
    pub layouts: Vec<Option<(Vec<i64>, i64)>>,
    pub stored: HashMap<ValueId, Stored>,
    pub temps: Vec<crate::plan::Temp>,
    pub idx_type: &'static str,
    /// The GPU planned for, with the launch settings in force.
    pub dev: crate::device::Device,
}

/// A kernel's parameters, in order, with their C declarations.
#[derive(Default)]
pub struct Params {
    pub args: Vec<KernelArg>,
    pub decls: Vec<String>,
}

impl Params {
    pub fn push(&mut self, arg: KernelArg, decl: String) {
        self.args.push(arg);
        self.decls.push(decl);
    }

    /// Fusion output `pos`, holding value `v`, as a kernel parameter.
    pub fn push_output(&mut self, f: &Fusion, v: ValueId, pos: usize) {
        self.push(
            KernelArg::Output(pos),
            format!(
                "{}* __restrict__ out{pos}",
                ctype::storage(f.value(v).dtype)
            ),
        );
    }
}

/// Declares one aligned array of `width` storage elements per output, which
/// the lanes fill and a wide store writes out.
pub fn lane_arrays(
    lw: &mut Lowerer,
    f: &Fusion,
    outputs: &[(ValueId, usize)],
    width: usize,
) -> Vec<String> {
    outputs
        .iter()
        .map(|&(v, _)| {
            let a = lw.fresh("o");
            lw.line(&format!(
                "__align__(16) {} {a}[{width}];",
                ctype::storage(f.value(v).dtype)
            ));
            a
        })
        .collect()
}

/// Stores of lane values into the arrays of `lane_arrays`. A value rounded
/// to bf16 or fp16 only to be stored is converted once, not rounded and
/// converted again (`Lowerer::unrounded`), and lanes 2i and 2i + 1 of a bf16
/// or fp16 array are converted together (`fb_f2bf2`, `fb_f2h2`): the
/// conversions share a quarter-rate pipe with exp and division.
pub struct LaneStores {
    width: usize,
    /// Per array, the even lane waiting for its odd neighbour.
    waiting: Vec<Option<String>>,
}

impl LaneStores {
    pub fn new(arrays: usize, width: usize) -> Self {
        LaneStores { width, waiting: vec![None; arrays] }
    }

    /// Stores `e`, a register value of dtype `d`, as lane `k` of array `j`
    /// (named `a`); lanes come in order.
    pub fn put(&mut self, lw: &mut Lowerer, d: DType, (a, j): (&str, usize), k: usize, e: &str) {
        let e = lw.unrounded(d, e);
        let pair = match d {
            DType::BFloat16 => "fb_f2bf2",
            DType::Half => "fb_f2h2",
            _ => "",
        };
        if pair.is_empty() || !self.width.is_multiple_of(2) {
            lw.line(&format!("{a}[{k}] = {};", ctype::to_storage(d, &e)));
        } else if k.is_multiple_of(2) {
            // Named now: the odd lane's store comes after its own code.
            let lo = lw.fresh("fb_lo");
            lw.line(&format!("const float {lo} = {e};"));
            self.waiting[j] = Some(lo);
        } else {
            // Written back as two halves rather than through an unsigned
            // pointer into the 16-bit array, which can keep the array out of
            // registers; the compiler packs the halves into the wide store.
            let lo = self.waiting[j].take().expect("lanes are stored in order");
            let p = lw.fresh("fb_pair");
            lw.line(&format!("const unsigned {p} = {pair}({lo}, {e});"));
            lw.line(&format!("{a}[{}] = (unsigned short)({p} & 0xffffu);", k - 1));
            lw.line(&format!("{a}[{k}] = (unsigned short)({p} >> 16);"));
        }
    }
}

impl<'f> Context<'f> {
    /// Makes `lw`'s global loads streaming (evict first): for kernels that
    /// read their inputs for the last time, the partials of a grid or outer
    /// reduction. Over 106 fusions of the default grid on the H200 this took
    /// sum_all bf16 2048x16384 from 24.5 to 21.3 us and sum_outer 2048x11008
    /// from 20.3 to 17.9; as the hint of every kernel it cost the rows that
    /// later passes re-read up to 33% (FUSEBENCH_LOADS=cs, BENCHMARKS.md).
    /// Only where no other part of the fusion reads `r`'s inputs
    /// (`sole_reader`): column-major norms, whose later kernels read the
    /// input again, were up to 10% slower with it.
    pub fn read_once(&self, lw: &mut Lowerer, r: &crate::reduction::Reduction, epilogue: &[(ValueId, usize)]) {
        if self.dev.load_hint.is_some() || sole_reader(self.f, r, epilogue) {
            lw.load_fn = self.dev.load_hint.unwrap_or(LoadHint::Streaming).intrinsic();
        }
    }

    /// A lowerer that can read every input, scalar input and stored result,
    /// with the parameters that makes the kernel take.
    pub fn lowerer(&self) -> (Lowerer<'f>, Params) {
        let f = self.f;
        let mut lw = Lowerer::new(f, self.idx_type);
        lw.load_fn = self.dev.load_hint.unwrap_or(LoadHint::ReadOnly).intrinsic();
        let mut p = Params::default();
        for (pos, &v) in f.inputs.iter().enumerate() {
            let val = f.value(v);
            match &val.def {
                ValueDef::TensorInput(_) => {
                    let name = format!("in{pos}");
                    let (strides, offset) = self.layouts[pos]
                        .clone()
                        .unwrap_or_else(|| (row_major_strides(val.shape.as_ref().unwrap()), 0));
                    lw.buffers.insert(
                        v,
                        Buffer {
                            param: name.clone(),
                            dtype: val.dtype,
                            strides,
                            offset,
                            shared: false,
                        },
                    );
                    p.push(
                        KernelArg::Input(pos),
                        format!("const {}* __restrict__ {name}", ctype::storage(val.dtype)),
                    );
                }
                _ => {
                    let name = format!("s{pos}");
                    lw.scalar_params
                        .insert(v, format!("(({}){name})", ctype::reg(val.dtype)));
                    p.push(KernelArg::Scalar(pos), format!("double {name}"));
                }
            }
        }
        let mut stored: Vec<_> = self.stored.iter().collect();
        stored.sort_by_key(|(v, _)| **v);
        for (&v, s) in stored {
            let name = format!("tmp{}", s.temp);
            lw.buffers.insert(
                v,
                Buffer {
                    param: name,
                    dtype: s.dtype,
                    strides: row_major_strides(&s.shape),
                    offset: 0,
                    shared: false,
                },
            );
        }
        for t in 0..self.temps.len() {
            p.push(
                KernelArg::Temp(t),
                format!("{}* tmp{t}", ctype::storage(self.temps[t].dtype)),
            );
        }
        (lw, p)
    }

    pub fn add_temp(&mut self, dtype: DType, elements: usize, what: String) -> usize {
        self.temps.push(crate::plan::Temp {
            dtype,
            elements,
            what,
            zeroed: false,
        });
        self.temps.len() - 1
    }

    /// Records that value `v` is stored, whole and row-major, in temp `temp`.
    pub fn store_in(&mut self, v: ValueId, temp: usize) {
        let val = self.f.value(v);
        let stored = Stored {
            temp,
            dtype: val.dtype,
            shape: val.shape.clone().unwrap_or_default(),
        };
        self.stored.insert(v, stored);
    }

    /// A temporary zeroed when allocated that every launch leaves zero.
    pub fn add_zeroed_temp(&mut self, dtype: DType, elements: usize, what: String) -> usize {
        let t = self.add_temp(dtype, elements, what);
        self.temps[t].zeroed = true;
        t
    }
}

/// The `extern "C" __global__` line of a kernel.
pub fn signature(name: &str, block: u32, params: &Params) -> String {
    signature_fitting(name, block, 0, params)
}

/// `signature` asking the compiler to fit `min_blocks` blocks per
/// multiprocessor (0: no such bound), registers capped to match.
pub fn signature_fitting(name: &str, block: u32, min_blocks: u32, params: &Params) -> String {
    let bounds = match min_blocks {
        0 => block.to_string(),
        n => format!("{block}, {n}"),
    };
    format!(
        "extern \"C\" __global__ void __launch_bounds__({bounds}) {name}({})",
        params.decls.join(", ")
    )
}

/// Stores `width` elements of array `src` (storage type of `d`) to
/// `dst[at]`, using 16-byte (or narrower) words where the size allows.
pub fn wide_store(lw: &mut Lowerer, d: DType, dst: &str, at: &Ix, src: &str, width: usize) {
    let bytes = d.size_bytes() * width;
    let word = match bytes {
        b if b >= 16 && b % 16 == 0 => Some(("uint4", 16)),
        8 => Some(("uint2", 8)),
        4 => Some(("unsigned int", 4)),
        2 => Some(("unsigned short", 2)),
        _ => None,
    };
    match word {
        Some((w, wb)) if width > 1 => {
            let per = wb / d.size_bytes();
            for c in 0..bytes / wb {
                let off = at.clone().add(Ix::c((c * per) as i64));
                lw.line(&format!(
                    "*reinterpret_cast<{w}*>(&{dst}[{off}]) = *reinterpret_cast<const {w}*>(&{src}[{}]);",
                    c * per
                ));
            }
        }
        _ => {
            for k in 0..width {
                let off = at.clone().add(Ix::c(k as i64));
                lw.line(&format!("{dst}[{off}] = {src}[{k}];"));
            }
        }
    }
}

/// Writes each output's lane array (from `lane_arrays`) at element `at`.
pub fn store_lane_arrays(
    lw: &mut Lowerer,
    f: &Fusion,
    outputs: &[(ValueId, usize)],
    arrays: &[String],
    at: &Ix,
    width: usize,
) {
    for (&(v, pos), arr) in outputs.iter().zip(arrays) {
        wide_store(lw, f.value(v).dtype, &format!("out{pos}"), at, arr, width);
    }
}

/// Elements per thread along the innermost dim: as many as make a 16-byte
/// access of the narrowest type involved, and divide the innermost extent.
pub fn vector_width(inner: usize, dtypes: impl Iterator<Item = DType>) -> usize {
    let min = dtypes.map(|d| d.size_bytes()).min().unwrap_or(4);
    let mut v = (16 / min).min(8);
    while v > 1 && !inner.is_multiple_of(v) {
        v /= 2;
    }
    v
}

/// Accumulator type of a reduction into dtype `d`.
pub fn acc_dtype(d: DType) -> DType {
    match d {
        DType::Double => DType::Double,
        DType::Int | DType::Int32 | DType::Index | DType::Bool => DType::Int,
        _ => DType::Float,
    }
}

pub fn round_up(x: usize, m: usize) -> usize {
    x.div_ceil(m) * m
}

/// Whether the tensor inputs `r` reads are read by nothing else of the
/// fusion than `r` and the outputs computed from its results (`epilogue`).
pub fn sole_reader(f: &Fusion, r: &crate::reduction::Reduction, epilogue: &[(ValueId, usize)]) -> bool {
    let mut mine = std::collections::HashSet::new();
    f.walk_up([r.x], |v| {
        if matches!(f.value(v).def, ValueDef::TensorInput(_)) {
            mine.insert(v);
        }
        true
    });
    let others = f
        .outputs
        .iter()
        .copied()
        .filter(|o| !epilogue.iter().any(|&(v, _)| v == *o));
    let mut shared = false;
    f.walk_up(others, |v| {
        if matches!(f.value(v).def, ValueDef::Node { node, .. } if node == r.node) {
            return false;
        }
        shared |= mine.contains(&v);
        !shared
    });
    !shared
}
