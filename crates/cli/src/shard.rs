//! `--shard I/N`: one deterministic slice of the fusions a verb was given, so
//! that a job array (Slurm, a Kubernetes Indexed Job) spreads a sweep over
//! hosts and `diff`/`report` read the shards' result files as one run.
//!
//! Every shard collects the same list, orders it by a stable hash of each
//! file's name (so long and short fusions of one family spread over the
//! shards) and takes every N-th from position I: the shards are disjoint,
//! together they are the whole list, and their sizes differ by one at most.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Shard {
    /// From 0.
    pub index: usize,
    pub count: usize,
}

#[derive(clap::Args, Default)]
pub struct ShardArgs {
    /// Take only shard I of N (I from 0) of the fusions: `I/N`; `auto` for the scheduler's array
    /// index and count (Slurm's SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT); `auto/N` for an
    /// index from Slurm or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) with N shards.
    #[arg(long, value_name = "I/N|auto|auto/N")]
    shard: Option<String>,
}

impl ShardArgs {
    /// The shard asked for, read from the environment where it says `auto`;
    /// or the usage error said and its exit code.
    pub fn shard(&self) -> Result<Option<Shard>, ExitCode> {
        let Some(spec) = &self.shard else { return Ok(None) };
        parse(spec, |k| std::env::var(k).ok()).map(Some).map_err(|e| {
            eprintln!("error: --shard {spec}: {e}");
            ExitCode::from(crate::exit::USAGE)
        })
    }
}

/// Reads `I/N`, `auto` or `auto/N`, taking scheduler variables from `env`.
pub fn parse(spec: &str, env: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
    let (index, count) = spec
        .split_once('/')
        .map_or((spec, None), |(i, n)| (i, Some(n)));
    let count = match count {
        Some(n) => Some(
            n.trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("the count {n:?} is not a whole number of at least 1"))?,
        ),
        None => None,
    };
    if index.trim() == "auto" {
        return from_scheduler(count, env);
    }
    let count = count.ok_or("expected I/N (for example 0/4), auto, or auto/N")?;
    let index = index
        .trim()
        .parse::<usize>()
        .map_err(|_| format!("the index {index:?} is not a whole number"))?;
    checked(index, count)
}

fn checked(index: usize, count: usize) -> Result<Shard, String> {
    if index >= count {
        return Err(format!(
            "shard {index} of {count}: the index counts from 0 and must be below the count (0/{count} to {}/{count})",
            count - 1
        ));
    }
    Ok(Shard { index, count })
}

/// The index (and count) a job array gives its task.
fn from_scheduler(count: Option<usize>, env: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
    let num = |k: &str| -> Result<Option<usize>, String> {
        match env(k) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<usize>()
                .map(Some)
                .map_err(|_| format!("{k}={v:?} is not a whole number")),
        }
    };
    if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
        // An array of 1-4 or 0-6:2 numbers its tasks from its minimum, by its step.
        let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let step = num("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
        let index = id
            .checked_sub(min)
            .ok_or_else(|| format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"))?
            / step;
        let given = num("SLURM_ARRAY_TASK_COUNT")?;
        let count = match (count, given) {
            (Some(n), Some(g)) if n != g => {
                return Err(format!("N is {n} but SLURM_ARRAY_TASK_COUNT is {g}"))
            }
            (Some(n), _) | (None, Some(n)) => n,
            (None, None) => return Err("SLURM_ARRAY_TASK_COUNT is not set: pass auto/N".into()),
        };
        return checked(index, count);
    }
    if let Some(index) = num("JOB_COMPLETION_INDEX")? {
        let count = count.ok_or(
            "JOB_COMPLETION_INDEX gives the index but not the count: pass auto/N, N being the Job's completions",
        )?;
        return checked(index, count);
    }
    Err("no job array index in the environment (SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX): pass I/N".into())
}

/// FNV-1a of the file's name: the same on every host, whatever directory
/// the fusions were copied to.
fn name_hash(p: &Path) -> u64 {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The paths of `shard`, in the order given.
pub fn select(paths: &[PathBuf], shard: Shard) -> Vec<PathBuf> {
    let mut order: Vec<usize> = (0..paths.len()).collect();
    order.sort_by_key(|&i| (name_hash(&paths[i]), paths[i].clone()));
    let mut mine: Vec<usize> = order
        .into_iter()
        .enumerate()
        .filter(|(rank, _)| rank % shard.count == shard.index)
        .map(|(_, i)| i)
        .collect();
    mine.sort();
    mine.into_iter().map(|i| paths[i].clone()).collect()
}

/// `paths` narrowed to `shard` (all of them without one), with a note on
/// standard error of what this shard took.
pub fn narrow(paths: Vec<PathBuf>, shard: Option<Shard>) -> Vec<PathBuf> {
    let Some(s) = shard else { return paths };
    let mine = select(&paths, s);
    eprintln!(
        "shard {}/{}: {} of {}",
        s.index,
        s.count,
        mine.len(),
        crate::plural(paths.len(), "fusion")
    );
    mine
}

/// The file a shard's results go to in an output directory.
pub fn file_name(shard: Option<Shard>) -> String {
    match shard {
        Some(s) => format!("shard-{}-of-{}.json", s.index, s.count),
        None => "results.json".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn shards_are_disjoint_cover_everything_and_differ_by_one_at_most() {
        let paths: Vec<PathBuf> = (0..33).map(|i| PathBuf::from(format!("dir/f{i:03}.py"))).collect();
        for n in 1..=7 {
            let parts: Vec<Vec<PathBuf>> = (0..n).map(|i| select(&paths, Shard { index: i, count: n })).collect();
            let mut all: Vec<PathBuf> = parts.iter().flatten().cloned().collect();
            all.sort();
            assert_eq!(all, paths, "{n} shards");
            let sizes: Vec<usize> = parts.iter().map(|p| p.len()).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
        }
        // The same names in another directory make the same shards.
        let moved: Vec<PathBuf> = paths.iter().map(|p| Path::new("/elsewhere").join(p.file_name().unwrap())).collect();
        let names = |v: Vec<PathBuf>| v.iter().map(|p| p.file_name().unwrap().to_owned()).collect::<Vec<_>>();
        let s = Shard { index: 1, count: 3 };
        assert_eq!(names(select(&paths, s)), names(select(&moved, s)));
    }

    #[test]
    fn explicit_and_scheduler_shards() {
        let none = env(&[]);
        assert_eq!(parse("0/4", &none), Ok(Shard { index: 0, count: 4 }));
        assert_eq!(parse("3/4", &none), Ok(Shard { index: 3, count: 4 }));
        for bad in ["4/4", "1/0", "x/2", "2", "-1/3", "1/two"] {
            assert!(parse(bad, &none).is_err(), "{bad}");
        }
        assert!(parse("4/4", &none).unwrap_err().contains("0/4 to 3/4"));
        // Slurm: --array=1-4 numbers tasks 1 to 4.
        let slurm = env(&[("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_MIN", "1"), ("SLURM_ARRAY_TASK_COUNT", "4")]);
        assert_eq!(parse("auto", &slurm), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(parse("auto/4", &slurm), Ok(Shard { index: 2, count: 4 }));
        assert!(parse("auto/5", &slurm).unwrap_err().contains("SLURM_ARRAY_TASK_COUNT is 4"));
        // --array=0-6:2: tasks 0, 2, 4, 6.
        let stepped = env(&[("SLURM_ARRAY_TASK_ID", "4"), ("SLURM_ARRAY_TASK_STEP", "2"), ("SLURM_ARRAY_TASK_COUNT", "4")]);
        assert_eq!(parse("auto", &stepped), Ok(Shard { index: 2, count: 4 }));
        // Kubernetes gives the index only.
        let k8s = env(&[("JOB_COMPLETION_INDEX", "1")]);
        assert_eq!(parse("auto/2", &k8s), Ok(Shard { index: 1, count: 2 }));
        assert!(parse("auto", &k8s).unwrap_err().contains("auto/N"));
        assert!(parse("auto/1", &k8s).is_err());
        assert!(parse("auto", &none).unwrap_err().contains("SLURM_ARRAY_TASK_ID"));
    }
}
