//! Why two measurements of a fusion differ: each mechanism that moves a
//! kernel's measured time is checked in turn, and the report says which
//! differ between the two, which are ruled out and how, and which one most
//! likely accounts for the difference in time.

use crate::record::{CachePolicy, Measurement, Method};
use crate::stats::differ;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// One sample has no interval: noise and a real change look the same.
    SingleSample,
    /// The intervals of the medians overlap: no difference to explain.
    Noise,
    Gpu,
    Kernels,
    InputLayout,
    /// One side reads its working set from L2 (kept between samples and small
    /// enough to fit) and the other from DRAM.
    WorkingSetVsL2,
    CachePolicy,
    Clocks,
    Method,
    /// In a program vs standalone: what ran before it.
    Context,
    Fusion,
}

impl Cause {
    pub fn title(self) -> &'static str {
        match self {
            Cause::SingleSample => "a single sample",
            Cause::Noise => "noise (overlapping intervals)",
            Cause::Gpu => "different GPU or driver",
            Cause::Kernels => "different kernels (code or launch configuration)",
            Cause::InputLayout => "different input layout or alignment",
            Cause::WorkingSetVsL2 => "working set vs L2 size",
            Cause::CachePolicy => "different cache policy",
            Cause::Clocks => "clocks or throttling",
            Cause::Method => "different timing method",
            Cause::Context => "different context (what ran before)",
            Cause::Fusion => "different fusion definition",
        }
    }
}

/// The most likely cause first when several differ: a mechanism that changes
/// what runs comes before one that changes how fast the same thing runs, and
/// a cause before its consequences (another input layout gets other kernels;
/// another definition shows as other layouts and kernels).
const PRIORITY: [Cause; 11] = [
    Cause::SingleSample,
    Cause::Noise,
    Cause::Gpu,
    Cause::InputLayout,
    Cause::Kernels,
    Cause::WorkingSetVsL2,
    Cause::CachePolicy,
    Cause::Clocks,
    Cause::Method,
    Cause::Context,
    Cause::Fusion,
];

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

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub cause: Cause,
    pub verdict: Verdict,
    pub detail: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    pub a_us: f64,
    pub b_us: f64,
    /// B's median over A's, with the range its two intervals allow.
    pub ratio: f64,
    pub ratio_low: f64,
    pub ratio_high: f64,
    pub beyond_noise: bool,
    pub findings: Vec<Finding>,
    /// Causes that differ, most likely first; the first is the answer.
    pub causes: Vec<Cause>,
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn policy(c: CachePolicy) -> &'static str {
    match c {
        CachePolicy::Cold => "cold",
        CachePolicy::Warm => "warm",
        CachePolicy::Rotate => "rotate",
        CachePolicy::InProgram => "in-program",
    }
}

/// Whether the policy leaves earlier data in L2 (no flush, no rotation).
fn keeps_l2(c: CachePolicy) -> bool {
    matches!(c, CachePolicy::Warm | CachePolicy::InProgram)
}

/// `Some(true)` when the measurement re-reads data that fits in L2.
fn fits_l2(m: &Measurement) -> Option<bool> {
    let bytes = m.bytes?;
    (m.environment.l2_bytes > 0).then_some(bytes <= m.environment.l2_bytes)
}

pub fn explain(a: &Measurement, b: &Measurement) -> Explanation {
    let (sa, sb) = (&a.summary, &b.summary);
    let beyond_noise = differ(sa, sb);
    let mut f = Vec::new();
    let mut push = |cause, verdict, detail: String| {
        f.push(Finding {
            cause,
            verdict,
            detail,
        })
    };

    if sa.n < 2 || sb.n < 2 {
        push(
            Cause::SingleSample,
            Verdict::Differs,
            format!(
                "A has {} sample(s), B {}: one sample has no interval, so noise cannot be told from a change",
                sa.n, sb.n
            ),
        );
    } else {
        push(
            Cause::SingleSample,
            Verdict::RuledOut,
            format!("{} and {} samples", sa.n, sb.n),
        );
    }
    push(
        Cause::Noise,
        if beyond_noise {
            Verdict::RuledOut
        } else {
            Verdict::Differs
        },
        format!(
            "95% intervals of the medians: A [{:.2}, {:.2}] us, B [{:.2}, {:.2}] us{}",
            sa.ci_low,
            sa.ci_high,
            sb.ci_low,
            sb.ci_high,
            if beyond_noise {
                ", disjoint"
            } else {
                ", overlapping: the difference is within noise"
            }
        ),
    );

    let (ea, eb) = (&a.environment, &b.environment);
    let mut env = Vec::new();
    if ea.gpu_name != eb.gpu_name {
        env.push(format!("GPU {} vs {}", ea.gpu_name, eb.gpu_name));
    } else if ea.gpu_uuid != eb.gpu_uuid {
        env.push(format!(
            "same model, another card ({} vs {})",
            ea.gpu_uuid, eb.gpu_uuid
        ));
    }
    if ea.driver != eb.driver || ea.cuda != eb.cuda {
        env.push(format!(
            "driver {} / CUDA {} vs {} / {}",
            ea.driver, ea.cuda, eb.driver, eb.cuda
        ));
    }
    if ea.sm_count != eb.sm_count || ea.l2_bytes != eb.l2_bytes {
        env.push(format!(
            "{} SMs, L2 {} vs {} SMs, L2 {}",
            ea.sm_count,
            mb(ea.l2_bytes),
            eb.sm_count,
            mb(eb.l2_bytes)
        ));
    }
    push(
        Cause::Gpu,
        if env.is_empty() {
            Verdict::RuledOut
        } else {
            Verdict::Differs
        },
        if env.is_empty() {
            format!("same GPU ({}) and driver {}", ea.gpu_name, ea.driver)
        } else {
            env.join("; ")
        },
    );

    push_kernels(&mut f, a, b);
    push_layout(&mut f, a, b);
    let mut push = |cause, verdict, detail: String| {
        f.push(Finding {
            cause,
            verdict,
            detail,
        })
    };

    // Working set against L2, for timings that keep L2 between samples.
    let l2 = |m: &Measurement| {
        match (keeps_l2(m.cache), fits_l2(m), m.bytes) {
        (false, _, _) => format!("{} (L2 flushed or rotated)", policy(m.cache)),
        (true, _, _) if m.cache == CachePolicy::InProgram => {
            "in-program (L2 holds what the earlier fusions of the program left)".to_string()
        }
        (true, Some(true), Some(by)) => format!(
            "{} with a working set of {} that fits in the {} L2: reads come from L2 ({:.2} TB/s implied)",
            policy(m.cache),
            mb(by),
            mb(m.environment.l2_bytes),
            by as f64 / m.summary.median / 1e6
        ),
        (true, Some(false), Some(by)) => format!(
            "{} with a working set of {}, more than the {} L2",
            policy(m.cache),
            mb(by),
            mb(m.environment.l2_bytes)
        ),
        _ => format!("{} (working set not recorded)", policy(m.cache)),
    }
    };
    // Reads come from L2 when the fusion runs back to back on a working set
    // that fits. In a program, L2 holds what ran before: not known to be its own.
    let from_l2 = |m: &Measurement| match m.cache {
        CachePolicy::InProgram => None,
        c => fits_l2(m).map(|fits| fits && keeps_l2(c)),
    };
    let ws = match (from_l2(a), from_l2(b)) {
        (Some(x), Some(y)) if x != y => Verdict::Differs,
        (Some(true), None) | (None, Some(true)) => Verdict::Differs,
        (Some(_), Some(_)) => Verdict::RuledOut,
        _ if !keeps_l2(a.cache) && !keeps_l2(b.cache) => Verdict::RuledOut,
        _ => Verdict::Unknown,
    };
    push(
        Cause::WorkingSetVsL2,
        ws,
        format!("A: {}; B: {}", l2(a), l2(b)),
    );
    let setups_differ = a.cache == b.cache
        && matches!((&a.cold_setup, &b.cold_setup), (Some(x), Some(y)) if x != y);
    push(
        Cause::CachePolicy,
        if a.cache == b.cache && !setups_differ {
            Verdict::RuledOut
        } else {
            Verdict::Differs
        },
        if setups_differ {
            format!(
                "both {}, but prepared differently: A {} vs B {} (a read flush leaves no dirty lines, warm instruction caches speed the first blocks)",
                policy(a.cache),
                a.cold_setup.as_deref().unwrap_or(""),
                b.cold_setup.as_deref().unwrap_or("")
            )
        } else if a.cache == b.cache {
            format!("both {}", policy(a.cache))
        } else {
            format!(
                "A {} vs B {}: {}",
                policy(a.cache),
                policy(b.cache),
                if fits_l2(a) == Some(true) || fits_l2(b) == Some(true) {
                    "the working set fits in L2, so the policy that keeps L2 reads from L2"
                } else {
                    "the working set exceeds L2, so the policies differ by what the flush leaves (dirty lines, cold TLBs)"
                }
            )
        },
    );

    let (ca, cb) = (a.median_sm_mhz(), b.median_sm_mhz());
    let throttled = a.throttled_samples > 0 || b.throttled_samples > 0;
    let clock_detail = format!(
        "median SM clock A {}, B {}; throttled samples A {} of {}, B {} of {}",
        ca.map_or("not read".into(), |c| format!("{c:.0} MHz")),
        cb.map_or("not read".into(), |c| format!("{c:.0} MHz")),
        a.throttled_samples,
        sa.n,
        b.throttled_samples,
        sb.n
    );
    let clocks = match (ca, cb) {
        _ if throttled => Verdict::Differs,
        (Some(x), Some(y)) if (x / y - 1.0).abs() > 0.02 => Verdict::Differs,
        (Some(_), Some(_)) => Verdict::RuledOut,
        _ => Verdict::Unknown,
    };
    push(Cause::Clocks, clocks, clock_detail);

    let method = |m: Method| match m {
        Method::Cupti => "CUPTI kernel records",
        Method::CudaEvents => "CUDA events",
    };
    push(
        Cause::Method,
        if a.method == b.method {
            Verdict::RuledOut
        } else {
            Verdict::Differs
        },
        if a.method == b.method {
            format!("both {}", method(a.method))
        } else {
            format!(
                "A {} vs B {}: events add the launch processing and the gaps between kernels, about 2 us per kernel on an H200",
                method(a.method),
                method(b.method)
            )
        },
    );
    let ctx = |m: &Measurement| m.context.clone().unwrap_or_else(|| "standalone".into());
    push(
        Cause::Context,
        if ctx(a) == ctx(b) {
            Verdict::RuledOut
        } else {
            Verdict::Differs
        },
        format!("A {}; B {}", ctx(a), ctx(b)),
    );
    push(
        Cause::Fusion,
        if a.subject.definition_hash == b.subject.definition_hash {
            Verdict::RuledOut
        } else {
            Verdict::Differs
        },
        if a.subject.definition_hash == b.subject.definition_hash {
            format!("same definition ({})", a.subject.definition_hash)
        } else {
            format!(
                "definitions differ ({} vs {}): {} vs {}",
                a.subject.definition_hash,
                b.subject.definition_hash,
                a.subject.name,
                b.subject.name
            )
        },
    );

    let differs = |c: Cause| {
        f.iter()
            .any(|x| x.cause == c && x.verdict == Verdict::Differs)
    };
    let causes: Vec<Cause> = if differs(Cause::SingleSample) {
        vec![Cause::SingleSample]
    } else if !beyond_noise {
        vec![Cause::Noise]
    } else {
        PRIORITY
            .iter()
            .copied()
            .filter(|&c| c != Cause::SingleSample && c != Cause::Noise && differs(c))
            .collect()
    };
    let ratio = sb.median / sa.median;
    Explanation {
        a_us: sa.median,
        b_us: sb.median,
        ratio,
        ratio_low: sb.ci_low / sa.ci_high,
        ratio_high: sb.ci_high / sa.ci_low,
        beyond_noise,
        findings: f,
        causes,
    }
}

fn push_kernels(f: &mut Vec<Finding>, a: &Measurement, b: &Measurement) {
    let mut d = Vec::new();
    if a.kernels.len() != b.kernels.len() {
        d.push(format!(
            "{} kernels vs {}",
            a.kernels.len(),
            b.kernels.len()
        ));
    }
    for (i, (x, y)) in a.kernels.iter().zip(&b.kernels).enumerate() {
        if x.code_hash != y.code_hash {
            d.push(format!(
                "kernel {i} ({}): code {} vs {}",
                x.name, x.code_hash, y.code_hash
            ));
        }
        if x.grid != y.grid || x.block != y.block {
            d.push(format!(
                "kernel {i} ({}): grid {:?} block {:?} vs grid {:?} block {:?}",
                x.name, x.grid, x.block, y.grid, y.block
            ));
        }
        if x.shared_bytes != y.shared_bytes || x.registers != y.registers {
            d.push(format!(
                "kernel {i} ({}): {} B shared, {} registers vs {} B, {}",
                x.name, x.shared_bytes, x.registers, y.shared_bytes, y.registers
            ));
        }
    }
    let known = !a.kernels.is_empty() && !b.kernels.is_empty();
    f.push(Finding {
        cause: Cause::Kernels,
        verdict: match (d.is_empty(), known) {
            (false, _) => Verdict::Differs,
            (true, true) => Verdict::RuledOut,
            (true, false) => Verdict::Unknown,
        },
        detail: if d.is_empty() {
            format!(
                "{} kernel(s), same code hashes and launch configurations",
                a.kernels.len()
            )
        } else {
            d.join("; ")
        },
    });
}

fn push_layout(f: &mut Vec<Finding>, a: &Measurement, b: &Measurement) {
    let (ia, ib) = (&a.subject.inputs, &b.subject.inputs);
    let mut d = Vec::new();
    if ia.len() != ib.len() {
        d.push(format!("{} inputs vs {}", ia.len(), ib.len()));
    }
    for (i, (x, y)) in ia.iter().zip(ib).enumerate() {
        if x.dtype != y.dtype {
            d.push(format!("input {i}: {} vs {}", x.dtype, y.dtype));
        }
        if x.shape != y.shape {
            d.push(format!("input {i}: shape {:?} vs {:?}", x.shape, y.shape));
        } else if x.strides != y.strides {
            let mut xs = x.strides.clone();
            let mut ys = y.strides.clone();
            xs.sort_unstable();
            ys.sort_unstable();
            let kind = if xs == ys {
                "the same strides in another order (a transposed layout)"
            } else {
                "another layout"
            };
            d.push(format!(
                "input {i}: strides {:?} vs {:?}, {kind}",
                x.strides, y.strides
            ));
        }
        if x.byte_offset != y.byte_offset {
            d.push(format!(
                "input {i}: starts {} vs {} bytes past a 256-byte boundary (alignment)",
                x.byte_offset, y.byte_offset
            ));
        }
    }
    f.push(Finding {
        cause: Cause::InputLayout,
        verdict: if d.is_empty() {
            Verdict::RuledOut
        } else {
            Verdict::Differs
        },
        detail: if d.is_empty() {
            format!(
                "{} inputs with the same dtypes, shapes, strides and alignment",
                ia.len()
            )
        } else {
            d.join("; ")
        },
    });
}

impl Explanation {
    /// The report as text: the two times, then every check, then the answer.
    pub fn render(&self, a: &Measurement, b: &Measurement) -> String {
        let line = |tag: &str, m: &Measurement| {
            format!(
                "{tag}: {}  {}  {}  median {:.2} us [{:.2}, {:.2}], n={}\n",
                m.subject.name,
                policy(m.cache),
                match m.method {
                    Method::Cupti => "cupti",
                    Method::CudaEvents => "events",
                },
                m.summary.median,
                m.summary.ci_low,
                m.summary.ci_high,
                m.summary.n
            )
        };
        let mut s = line("A", a) + &line("B", b);
        s += &format!(
            "B/A = {:.3} (the intervals allow {:.3} to {:.3}): {}\n\n",
            self.ratio,
            self.ratio_low,
            self.ratio_high,
            if self.beyond_noise {
                "a difference beyond noise"
            } else {
                "within noise"
            }
        );
        for x in &self.findings {
            let v = match x.verdict {
                Verdict::Differs => "DIFFERS  ",
                Verdict::RuledOut => "ruled out",
                Verdict::Unknown => "unknown  ",
            };
            s += &format!("  {v}  {}: {}\n", x.cause.title(), x.detail);
        }
        s += "\n";
        match self.causes.split_first() {
            None => s += "No checked cause differs: the difference is unexplained by what the records hold.\n",
            Some((first, rest)) => {
                s += &format!("Most likely cause: {}.\n", first.title());
                if !rest.is_empty() {
                    let others: Vec<&str> = rest.iter().map(|c| c.title()).collect();
                    s += &format!("Also differing: {}.\n", others.join("; "));
                }
            }
        }
        s
    }
}
