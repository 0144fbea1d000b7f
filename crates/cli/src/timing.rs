//! How every timing verb asks for a measurement: the stopping rule (by name,
//! or the --samples/--target shorthands), the method, the seed; and the
//! harness they are handed to.

use crate::exit;
use fusebench_harness::{Choice, Harness};
use fusebench_measure::StoppingRule;
use fusebench_runtime::Gpu;
use std::process::ExitCode;

#[derive(clap::Args, Clone)]
pub struct TimingArgs {
    /// When to stop sampling, by rule: noise:1% (the 95% interval of the median within
    /// +-1%; also min-samples=10, min-time=50ms, max-time=1s, max-samples=100000),
    /// samples:30 (a fixed count), time:2s (a set time). Parameters after the first go
    /// as key=value: noise:0.5%,max-time=3s.
    #[arg(long, conflicts_with_all = ["samples", "target"])]
    pub stop: Option<String>,
    /// Shorthand for --stop samples:N.
    #[arg(long)]
    pub samples: Option<usize>,
    /// Shorthand for --stop noise:TARGET, a percentage such as 1% (with --max-time as its budget).
    #[arg(long, value_parser = parse_percent)]
    pub target: Option<f64>,
    /// Time budget in seconds of the noise rule (per fusion; for a program, per program and policy).
    #[arg(long)]
    pub max_time: Option<f64>,
    /// How a sample is timed: the kernels' own durations from CUPTI activity records
    /// (checked against the launches; the default, falling back to events with a note where
    /// CUPTI cannot start), or CUDA events around the launches (adds the launch gaps, about
    /// 2 us per kernel on an H200).
    #[arg(long, value_enum, default_value = "auto")]
    pub method: MethodArg,
    /// Seed for the generated inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq)]
pub enum MethodArg {
    /// CUPTI where it starts, else events.
    Auto,
    Events,
    Cupti,
}

/// A percentage, written with its sign (`2%`, `0.5%`): a bare `5` could mean
/// 5% or 500%, so it is refused with the spelling that works.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let Some(num) = t.strip_suffix('%') else {
        return Err(match t.parse::<f64>() {
            Ok(v) => format!("{s:?} needs a % sign: write {v}% for {v} percent"),
            Err(_) => format!("{s:?} is not a percentage like 2%"),
        });
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage like 2%"))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(format!("{s:?} must be above zero"));
    }
    Ok(v * 0.01)
}

impl TimingArgs {
    /// The stopping rule asked for; without one, the noise rule at the verb's
    /// default target and budget. A bad rule is said and is a usage error.
    pub fn rule(&self, target: f64, max_time: f64) -> Result<Box<dyn StoppingRule>, ExitCode> {
        let spec = match (&self.stop, self.samples) {
            (Some(s), _) => s.clone(),
            (None, Some(n)) => format!("samples:{n}"),
            (None, None) => format!(
                "noise:{},max-time={}",
                self.target.unwrap_or(target),
                self.max_time.unwrap_or(max_time)
            ),
        };
        let spec = match (&self.stop, self.max_time) {
            (Some(s), Some(t)) if s.starts_with("noise") && !s.contains("max-time") => {
                format!("{spec},max-time={t}")
            }
            _ => spec,
        };
        fusebench_measure::stopping::parse(&spec).map_err(|e| {
            eprintln!("error: --stop {e}");
            ExitCode::from(exit::USAGE)
        })
    }

    /// The harness on `gpu` with the method asked for; its notes said on stderr.
    /// CUPTI asked for and unavailable is a usage error.
    pub fn harness(&self, gpu: Gpu) -> Result<Harness, ExitCode> {
        let choice = match self.method {
            MethodArg::Auto => Choice::Auto,
            MethodArg::Events => Choice::Events,
            MethodArg::Cupti => Choice::Cupti,
        };
        match Harness::new(gpu, choice) {
            Ok(h) => {
                for n in &h.notes {
                    eprintln!("note: {n}");
                }
                Ok(h)
            }
            Err(e) => {
                eprintln!("error: {e}");
                Err(ExitCode::from(exit::USAGE))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        t: TimingArgs,
    }

    fn rule(args: &[&str]) -> Result<fusebench_measure::RuleSpec, ExitCode> {
        let t = T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map_err(|_| ExitCode::from(exit::USAGE))?;
        t.t.rule(0.01, 1.0).map(|r| r.spec())
    }

    #[test]
    fn the_rule_comes_from_stop_or_its_shorthands() {
        assert_eq!(rule(&[]).unwrap().params["target"], 0.01);
        assert_eq!(rule(&["--samples", "7"]).unwrap().name, "samples");
        let s = rule(&["--target", "0.5%", "--max-time", "3"]).unwrap();
        assert_eq!((s.params["target"], s.params["max_time"]), (0.005, 3.0));
        let s = rule(&["--stop", "time:2s"]).unwrap();
        assert_eq!((s.name.as_str(), s.params["seconds"]), ("time", 2.0));
        let s = rule(&["--stop", "noise:2%", "--max-time", "5"]).unwrap();
        assert_eq!(s.params["max_time"], 5.0);
        assert!(rule(&["--stop", "nosie:1%"]).is_err());
        assert!(rule(&["--stop", "samples:3", "--samples", "4"]).is_err());
    }
}
