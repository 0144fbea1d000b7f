//! The schedules as a registry. The segmenter (`segment/`) decides what
//! work goes into one kernel (a `Candidate`: rows with reductions kept on
//! chip, one stored reduction, or elementwise outputs of one shape); this
//! module decides how that work is laid out: it walks `SCHEDULES` in order
//! and the first whose `fits` says yes builds the kernel. Each kernel records
//! the schedule, the reason it fits, and why the schedules before it did not
//! (`plan::Choice`; `fusebench emit` prints them).
//!
//! A new schedule is one file here that implements `Schedule` and one line
//! in `SCHEDULES`, placed before the schedules it should win over.

mod contiguous;
mod grid;
mod outer;
mod persistent;
mod pointwise;
mod rowwise;
mod transpose;

pub use rowwise::row_sums;

use crate::device::Device;
use crate::error::CodegenError;
use crate::kernel::Context;
use crate::plan::{Choice, Kernel, Rejected};
use crate::reduction::Reduction;
use fusebench_ir::{DType, Fusion, ValueId};

/// Why a schedule fits or does not, in words with the numbers.
pub type Reason = String;

/// A stored reduction's index in `Candidate::reds` and the outputs (value,
/// output position) its last kernel writes.
pub type StoredWork<'a> = (usize, &'a [(ValueId, usize)]);

/// The schedules, most specific first: the first that fits a candidate builds it.
pub static SCHEDULES: &[&dyn Schedule] = &[
    &contiguous::Contiguous,
    &grid::Grid,
    &rowwise::Rowwise,
    &persistent::Persistent,
    &outer::Outer,
    &transpose::Transpose,
    &pointwise::Pointwise,
];

pub trait Schedule: Sync {
    fn name(&self) -> &'static str;
    /// Whether this schedule lays out this kind of work at all; the others are
    /// not listed among a kernel's rejected schedules.
    fn takes(&self, work: &Work) -> bool;
    /// Ok(why it fits) or Err(why not), both with the numbers that decided.
    /// `cx` holds the inputs' layouts; `Rows` and `Stored` work is chosen
    /// while grouping (nothing stored yet), `Elementwise` work just before it
    /// is built (every stored result it reads is in `cx.stored`).
    fn fits(&self, c: &Candidate, cx: &Context, dev: &Device) -> Result<Reason, Reason>;
    /// Appends the candidate's kernels (in launch order) to `out`.
    fn build(
        &self,
        c: &Candidate,
        dev: &Device,
        cx: &mut Context,
        out: &mut Vec<(String, Kernel)>,
    ) -> Result<(), CodegenError>;
    /// Whether sums over all rows (`Rows::outer`) of the same rows x columns
    /// may join a kernel this schedule builds.
    fn carries_row_sums(&self) -> bool {
        false
    }
}

/// Work one kernel (or one kernel and its combine) does.
pub struct Candidate<'a> {
    pub f: &'a Fusion,
    /// The fusion's reductions that are not computed inline; `Work` refers to
    /// them by index.
    pub reds: &'a [Reduction],
    /// Kernel name.
    pub name: String,
    pub work: Work,
}

pub enum Work {
    /// Rows x columns: reductions over each row kept on chip, sums over all
    /// rows, and outputs over the rows x columns or one per row.
    Rows(Rows),
    /// One reduction whose results are stored for later kernels.
    Stored {
        red: usize,
        /// Read by another stored reduction, whose kernel runs before any
        /// row kernel: it must be computed on its own, first.
        before_rows: bool,
        /// Plain reductions of other values over the same elements, read in
        /// the same order, computed by the same kernels (`grid` and `outer`;
        /// `Device::siblings`).
        siblings: Vec<usize>,
        /// Outputs computed from this reduction's results alone, one element
        /// per result in order (`crate::epilogue`): written by its last kernel.
        epilogue: Vec<(ValueId, usize)>,
        /// A sum over rows with elementwise outputs over the same rows x
        /// columns, which a row kernel computing it would write too.
        joined: bool,
        /// Elementwise outputs over the reduced elements, laid out as the
        /// results (kept dims) by the reduced dims in memory order, written
        /// as the kernel reads those elements (`contiguous` only;
        /// `Device::contiguous_join`).
        full: Vec<(ValueId, usize)>,
    },
    /// Outputs of one shape, each element computed from inputs alone (or
    /// stored reductions).
    Elementwise {
        shape: Vec<usize>,
        outputs: Vec<(ValueId, usize)>,
    },
}

#[derive(Clone, Debug, Default)]
pub struct Rows {
    pub rows_shape: Vec<usize>,
    /// Dims of one row; the innermost is `last()`.
    pub inner_shape: Vec<usize>,
    /// Reductions over the columns of each row (into `Candidate::reds`).
    pub inner: Vec<usize>,
    /// Those of `inner` that later kernels read too: the row kernel also
    /// stores their results, one element per row (`Device::rows_store`).
    pub stored: Vec<usize>,
    /// Sums over all rows (into `Candidate::reds`).
    pub outer: Vec<usize>,
    /// Outputs over rows x columns: (value, output position).
    pub full: Vec<(ValueId, usize)>,
    /// Outputs with one element per row.
    pub per_row: Vec<(ValueId, usize)>,
    /// Outputs with one element per column that read only the sums over
    /// rows: written by the combine kernel.
    pub epilogue: Vec<(ValueId, usize)>,
    /// Reductions to one element of a value with one element per row,
    /// computed from the row reductions (`inner`): each block accumulates
    /// its rows' values and a combine kernel folds the blocks' partials
    /// (into `Candidate::reds`).
    pub totals: Vec<usize>,
    /// Outputs of one element that read only `totals`: written by their
    /// combine kernel.
    pub totals_epilogue: Vec<(ValueId, usize)>,
    /// Sums over the same rows x columns waiting to join (the segmenter
    /// knows before `outer` is filled; 0: none): a row past the registers
    /// may then be re-read in each pass (`rowwise::Shape::reload`), so that
    /// the sums stay in the kernel that reads the row instead of one that
    /// reads it again.
    pub reload: usize,
}

impl Rows {
    pub fn rows(&self) -> usize {
        self.rows_shape.iter().product()
    }
    pub fn cols(&self) -> usize {
        self.inner_shape.iter().product()
    }
    pub fn last(&self) -> usize {
        *self.inner_shape.last().unwrap_or(&1)
    }
}

impl Candidate<'_> {
    /// The stored reduction this candidate computes (its index in `reds`)
    /// and the outputs its last kernel writes, for the schedules that take
    /// only `Work::Stored`; the error names `schedule` and the candidate.
    pub fn stored(&self, schedule: &str) -> Result<StoredWork<'_>, String> {
        match &self.work {
            Work::Stored { full, .. } if !full.is_empty() && schedule != "contiguous" => {
                Err(format!("{schedule}: {} writes elementwise outputs only the contiguous schedule writes", self.name))
            }
            Work::Stored { red, epilogue, .. } => Ok((*red, epilogue)),
            _ => Err(format!("{schedule}: {} is not a stored reduction", self.name)),
        }
    }

    /// The plain reductions computed beside the stored one (`Work::Stored::siblings`).
    pub fn siblings(&self) -> Vec<&Reduction> {
        match &self.work {
            Work::Stored { siblings, .. } => siblings.iter().map(|&q| &self.reds[q]).collect(),
            _ => vec![],
        }
    }

    /// Whether the reduction's reduced dims hold the dim fastest in memory
    /// (`crate::memory::reduces_fastest`), for the inputs' layouts in `cx`.
    pub fn reduces_fastest(&self, cx: &Context, red: usize) -> Option<bool> {
        crate::memory::reduces_fastest(self.f, &cx.layouts, &self.reds[red])
    }

    /// Elements per thread for a row-wise kernel whose innermost extent is
    /// `last`: every tensor of the fusion takes part.
    pub fn row_width(&self, last: usize) -> usize {
        crate::kernel::vector_width(last, self.dtypes())
    }

    /// The narrowest tensor dtype of the fusion (what sets the vector width).
    pub fn narrowest(&self) -> Option<DType> {
        self.dtypes().min_by_key(|d| d.size_bytes())
    }

    fn dtypes(&self) -> impl Iterator<Item = DType> + '_ {
        self.f
            .values
            .iter()
            .filter(|v| v.is_tensor())
            .map(|v| v.dtype)
    }
}

/// The first schedule of `SCHEDULES` that fits `c`, with the choice record.
pub fn choose(
    c: &Candidate,
    cx: &Context,
    dev: &Device,
) -> Result<(&'static dyn Schedule, Choice), CodegenError> {
    choose_from(SCHEDULES, c, cx, dev)
}

pub fn choose_from(
    list: &[&'static dyn Schedule],
    c: &Candidate,
    cx: &Context,
    dev: &Device,
) -> Result<(&'static dyn Schedule, Choice), CodegenError> {
    let mut rejected = Vec::new();
    for &s in list {
        if !s.takes(&c.work) {
            continue;
        }
        match s.fits(c, cx, dev) {
            Ok(reason) => {
                return Ok((
                    s,
                    Choice {
                        schedule: s.name().into(),
                        reason,
                        rejected,
                    },
                ))
            }
            Err(reason) => rejected.push(Rejected {
                schedule: s.name().into(),
                reason,
            }),
        }
    }
    Err(CodegenError::NoFit(format!(
        "no schedule fits {}: {}",
        c.name,
        rejected
            .iter()
            .map(|r| format!("{} ({})", r.schedule, r.reason))
            .collect::<Vec<_>>()
            .join("; ")
    )))
}

/// Builds `c` with `s` and marks every kernel it appends with `choice`.
pub fn build(
    s: &dyn Schedule,
    choice: &Choice,
    c: &Candidate,
    dev: &Device,
    cx: &mut Context,
    out: &mut Vec<(String, Kernel)>,
) -> Result<(), CodegenError> {
    let start = out.len();
    s.build(c, dev, cx, out)?;
    let first = out.get(start).map(|(_, k)| k.name.clone());
    for (i, (_, k)) in out[start..].iter_mut().enumerate() {
        let mut choice = choice.clone();
        if let (true, Some(first)) = (i > 0, &first) {
            // A combine kernel: chosen with the kernel whose partials it folds.
            choice.reason = format!("with {first}: {}", choice.reason);
        }
        k.choice = Some(choice);
    }
    Ok(())
}

/// "1 reduction" / "3 reductions".
fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}
