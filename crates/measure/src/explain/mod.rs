//! Why two measurements of a fusion differ, and by how much each cause.
//!
//! Every mechanism that moves a kernel's measured time is one file here and
//! one line in the list below (`causes!`). Each file checks whether its cause
//! differs between A and B and, where it can, takes its effect on B − A in
//! microseconds from the records' own times: a record's siblings hold its
//! subject timed under the other cache policy and by the other method, so
//! the policy's and the method's effects are measured at A's conditions, and
//! the subject's own change (kernels, layout, definition) is B's sibling at
//! A's conditions less A, which is what a run changing only the subject
//! measures. Where no sibling holds the time (older records, other tools'
//! files, program records) a model estimates it, and the finding says which
//! (`Basis`). `share.rs` then gives every cause its share of the observed
//! difference, adds what the causes do together beyond their effects alone,
//! lets one cause that differs but was not measured take what the others
//! leave, and says how much nothing accounts for. The list's order is the
//! order the checks run in: a check may read the findings of the checks
//! above it (the cache model needs the method's overhead, the subject's
//! change takes out the clocks' effect).

mod check;
mod render;
mod share;

use crate::record::Measurement;
use check::{Check, Ctx};
use serde::Serialize;
use std::borrow::Cow;

/// Declares the causes: for each, its `Cause` variant and the module with its
/// `TITLE` and `check`, in the order the checks run.
macro_rules! causes {
    ($($(#[$doc:meta])* $variant:ident => $module:ident,)*) => {
        $(mod $module;)*

        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Cause {
            $($(#[$doc])* $variant,)*
        }

        impl Cause {
            /// The cause in words, as reports print it.
            pub fn title(self) -> &'static str {
                match self {
                    $(Cause::$variant => $module::TITLE,)*
                }
            }
        }

        /// Every check, in the order they run.
        const CHECKS: &[(Cause, fn(&Ctx) -> Check)] = &[$((Cause::$variant, $module::check),)*];
    };
}

causes! {
    /// One sample has no interval: noise and a real change look the same.
    SingleSample => single_sample,
    /// The intervals of the medians overlap: no difference to explain.
    Noise => noise,
    /// CUPTI kernel durations against CUDA events around the launches (or another tool's clock).
    Method => method,
    /// One side reads its working set from L2 (kept between samples and small
    /// enough to fit) and the other from DRAM.
    WorkingSetVsL2 => working_set,
    /// Cold, warm, rotate or in-program, and how a cold sample was prepared.
    CachePolicy => cache_policy,
    Clocks => clocks,
    Gpu => gpu,
    /// NVRTC's version, or the versions of the libraries that ran part of the fusion.
    Toolchain => toolchain,
    InputLayout => layout,
    /// Another fusion definition.
    Fusion => fusion,
    Kernels => kernels,
    /// In a program vs standalone: what ran before it.
    Context => context,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The two differ here: a possible cause.
    Differs,
    /// Checked and equal: ruled out.
    RuledOut,
    /// The records do not say (e.g. no clock readings).
    Unknown,
}

/// How a cause's effect on B − A was arrived at.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Basis {
    /// Not a cause of this difference: ruled out or unknown.
    None,
    /// Taken from the records' times: `from` names them ("A's sibling
    /// (warm, CUPTI) − A"; the numbers are in the detail).
    Measured { from: String },
    /// Predicted by a model where no time measures it: `model` names the
    /// model and what it is known to get wrong (the numbers are in the detail).
    Model { model: String },
    /// Measured on a consequence of this cause and counted here (the kernels'
    /// own time difference, when they differ because the input layout does).
    Through { cause: Cause },
    /// Counted under another cause: the same mechanism, or this one's source.
    CountedUnder { cause: Cause },
    /// Not measured separately; it is the one cause left that differs, so it
    /// takes what the measured causes leave (`why` says why it was not measured).
    Rest { why: String },
    /// Differs but was not estimated, and no part of the difference was left to it.
    NotEstimated { why: String },
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub cause: Cause,
    pub verdict: Verdict,
    pub detail: String,
    pub basis: Basis,
    /// This cause's effect on B − A in µs (negative: it made B faster).
    pub effect_us: Option<f64>,
    /// `effect_us` over B − A: signed, so a cause that pushed the other way has
    /// a negative share, and the shares plus the remainder's make 1.
    pub share: Option<f64>,
}

/// What causes add acting together beyond the sum of their effects alone
/// (the events method costs less on B's kernels than on A's; other kernels
/// gain more from warm L2).
#[derive(Clone, Debug, Serialize)]
pub struct Together {
    /// The cause whose check measured it; `detail` names the others.
    pub cause: Cause,
    pub effect_us: f64,
    /// `effect_us` over B − A.
    pub share: Option<f64>,
    /// The range the intervals of the medians it comes from allow; none when
    /// a model predicted it.
    pub low_us: Option<f64>,
    pub high_us: Option<f64>,
    pub detail: String,
}

/// What the explanation comes to.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// The same measurement twice: nothing differs.
    Same,
    /// One side has a single sample: noise cannot be told from a change.
    SingleSample,
    /// The intervals of the two medians overlap.
    WithinNoise,
    /// One cause accounts for more than half of the difference.
    Cause { cause: Cause, share: f64 },
    /// No cause accounts for half alone, but the estimated causes together
    /// account for the difference within noise.
    Together,
    /// Nothing accounts for this share of the difference.
    Unexplained { share: f64 },
}

#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    pub a_us: f64,
    pub b_us: f64,
    /// B's median minus A's: the difference the shares are of.
    pub difference_us: f64,
    /// B's median over A's, with the range its two intervals allow.
    pub ratio: f64,
    pub ratio_low: f64,
    pub ratio_high: f64,
    pub beyond_noise: bool,
    pub findings: Vec<Finding>,
    /// Causes that differ, the largest share first (then those without one).
    pub causes: Vec<Cause>,
    /// What the causes add when they act together beyond the sum of their
    /// effects alone, each term with its evidence.
    pub together: Vec<Together>,
    /// The sum of `together`.
    pub together_us: f64,
    /// The part of B − A that no cause accounts for, and its share.
    pub remainder_us: f64,
    pub remainder_share: Option<f64>,
    /// What the remainder is, when the siblings say: B against A's sibling
    /// timed B's way, with the range their intervals allow.
    pub remainder_detail: Option<String>,
    /// The range of remainders the two intervals of the medians allow around
    /// zero: a remainder inside it is within noise.
    pub noise_low_us: f64,
    pub noise_high_us: f64,
    pub remainder_within_noise: bool,
    pub answer: Answer,
}

/// One side of a comparison: a record, and the causes its file cannot speak
/// to, each with the reason ("nvbench's file does not record the kernels").
#[derive(Clone, Debug)]
pub struct Side<'a> {
    pub record: Cow<'a, Measurement>,
    pub unknown: Vec<(Cause, String)>,
    /// What the time is, in the words of the tool that took it, when the
    /// record's method says less ("nvbench's cold time: CUDA events around one
    /// launch after its own L2 flush").
    pub timed_by: Option<String>,
}

impl<'a> From<&'a Measurement> for Side<'a> {
    fn from(m: &'a Measurement) -> Side<'a> {
        Side {
            record: Cow::Borrowed(m),
            unknown: Vec::new(),
            timed_by: None,
        }
    }
}

impl Side<'_> {
    /// The side with its own copy of the record.
    pub fn into_owned(self) -> Side<'static> {
        Side {
            record: Cow::Owned(self.record.into_owned()),
            unknown: self.unknown,
            timed_by: self.timed_by,
        }
    }

    fn unknown(&self, c: Cause) -> Option<&str> {
        self.unknown
            .iter()
            .find(|(x, _)| *x == c)
            .map(|(_, why)| why.as_str())
    }
}

/// Two fusebench records explained.
pub fn explain(a: &Measurement, b: &Measurement) -> Explanation {
    explain_sides(&Side::from(a), &Side::from(b))
}

/// Two results explained, where either may come from a tool whose file
/// leaves some causes unknown.
pub fn explain_sides(a: &Side, b: &Side) -> Explanation {
    let mut done = Vec::with_capacity(CHECKS.len());
    for &(cause, run) in CHECKS {
        let ctx = Ctx { a, b, done: &done };
        let mut c = run(&ctx);
        let why: Vec<&str> = [a.unknown(cause), b.unknown(cause)]
            .into_iter()
            .flatten()
            .collect();
        if !why.is_empty() {
            // A difference found in what the file does say stands; an
            // agreement in fields it leaves blank proves nothing.
            if c.verdict == Verdict::Differs {
                c.detail = format!("{}; {}", c.detail, why.join("; "));
            } else {
                c = Check::unknown(format!("unknown: {}", why.join("; ")));
            }
        }
        done.push((cause, c));
    }
    let runs = Ctx { a, b, done: &done }.runs_step();
    share::attribute(&a.record, &b.record, done, runs)
}
