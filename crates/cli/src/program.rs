//! A program: the fusions of one step of a model, in the order they run.
//! Given as a directory of repro scripts (in name order; `--by-model` splits
//! it by the model and pass in the names, as the corpus is named), as
//! single scripts, or as a manifest: a text file of `PATH [xN]` lines
//! (paths relative to the manifest, `xN` repeats the fusion N times in a row,
//! `#` starts a comment).

use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub name: String,
    /// Each fusion's file, once per time it runs in a step.
    pub steps: Vec<PathBuf>,
}

impl Program {
    /// Each file once, in the order it first runs, and for every step the
    /// index of its file: a fusion that runs several times in a step is
    /// read and prepared once.
    pub fn files(&self) -> (Vec<&Path>, Vec<usize>) {
        let mut files: Vec<&Path> = Vec::new();
        let at = self
            .steps
            .iter()
            .map(|p| match files.iter().position(|f| *f == p.as_path()) {
                Some(k) => k,
                None => {
                    files.push(p);
                    files.len() - 1
                }
            })
            .collect();
        (files, at)
    }
}

/// The model-and-pass part of a corpus name: `000_Llama-3.2-1B_fw_nvFusion0`
/// gives `Llama-3.2-1B_fw`; other names are their own program.
pub fn model_key(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest = match stem.split_once('_') {
        Some((num, rest)) if !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => return stem,
    };
    match rest.rfind("_nvFusion") {
        Some(i) => rest[..i].to_string(),
        None => rest.to_string(),
    }
}

fn parse_manifest(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim_end();
        let col = line.len() - line.trim_start().len() + 1;
        let line = line.trim_start();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let file = parts.next().expect("a non-empty line has a word");
        let repeat = match parts.next() {
            None => 1,
            Some(r) => match r.strip_prefix('x').and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n >= 1 => n,
                _ => bail!(
                    "{}:{}:{}: expected a repeat count like x3 after the file, found {r:?}",
                    path.display(),
                    i + 1,
                    col + file.len() + 1
                ),
            },
        };
        if let Some(extra) = parts.next() {
            bail!(
                "{}:{}: unexpected {extra:?}; a line is PATH [xN]",
                path.display(),
                i + 1
            );
        }
        let p = dir.join(file);
        if !p.is_file() {
            bail!(
                "{}:{}:{col}: {} is not a file (paths are relative to the manifest)",
                path.display(),
                i + 1,
                p.display()
            );
        }
        out.extend(std::iter::repeat_n(p, repeat));
    }
    if out.is_empty() {
        bail!("{}: the manifest lists no fusions", path.display());
    }
    Ok(out)
}

/// The programs the arguments name.
pub fn load(args: &[PathBuf], by_model: bool) -> anyhow::Result<Vec<Program>> {
    let mut out = Vec::new();
    for a in args {
        let name = a
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| a.display().to_string());
        if a.is_file() && a.extension().and_then(|e| e.to_str()) == Some("txt") {
            out.push(Program {
                name,
                steps: parse_manifest(a)?,
            });
            continue;
        }
        let files = crate::files::collect(std::slice::from_ref(a))?;
        if by_model {
            let mut groups: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
            for f in files {
                groups.entry(model_key(&f)).or_default().push(f);
            }
            out.extend(
                groups
                    .into_iter()
                    .map(|(name, steps)| Program { name, steps }),
            );
        } else {
            out.push(Program { name, steps: files });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_names_group_by_model_and_pass() {
        let k = |s: &str| model_key(Path::new(s));
        assert_eq!(k("dir/000_Llama-3.2-1B_fw_nvFusion0.py"), "Llama-3.2-1B_fw");
        assert_eq!(k("041_Qwen2.5-1.5B_bw_nvFusion13.py"), "Qwen2.5-1.5B_bw");
        assert_eq!(k("seed_rmsnorm_legacy.py"), "seed_rmsnorm_legacy");
    }

    #[test]
    fn manifests_repeat_and_report_bad_lines() {
        let dir = std::env::temp_dir().join(format!("fusebench-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.py"), "").unwrap();
        std::fs::write(dir.join("b.py"), "").unwrap();
        let m = dir.join("step.txt");
        std::fs::write(&m, "# one step\na.py x2\n  b.py   # the norm\n").unwrap();
        let p = load(std::slice::from_ref(&m), false).unwrap();
        assert_eq!(p[0].name, "step");
        let names: Vec<_> = p[0]
            .steps
            .iter()
            .map(|s| s.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["a.py", "a.py", "b.py"]);
        std::fs::write(&m, "a.py\nb.py twice\n").unwrap();
        let e = load(std::slice::from_ref(&m), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("step.txt:2:6: expected a repeat count like x3"),
            "{e}"
        );
        std::fs::write(&m, "c.py\n").unwrap();
        let e = load(std::slice::from_ref(&m), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("step.txt:1:1:") && e.contains("is not a file"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
