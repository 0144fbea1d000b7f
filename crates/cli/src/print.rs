//! `fusebench print`: a fusion back as a script or as JSON.

use crate::files;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Repro scripts (.py), fusions in JSON form (.json), or directories of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print fusebench's JSON form instead of a script.
    #[arg(long)]
    json: bool,
    /// Print the script in this syntax instead of the one it was read in.
    #[arg(long, value_enum)]
    syntax: Option<SyntaxArg>,
}

#[derive(clap::ValueEnum, Clone, Copy)]
enum SyntaxArg {
    /// `from nvfuser import ...`
    Legacy,
    /// `from nvfuser_direct import ...`
    Direct,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let files = match crate::paths_arg(&a.paths) {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    // One file prints as before; several are told apart by a comment line
    // (scripts) or by a "file" key (JSON: one document holding them all).
    let several = files.len() > 1;
    let mut docs = vec![];
    let mut failed = 0;
    for path in &files {
        let mut f = match files::load(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e:#}");
                failed += 1;
                continue;
            }
        };
        if a.json {
            if several {
                let fusion: serde_json::Value = serde_json::from_str(&f.to_json())?;
                docs.push(serde_json::json!({ "file": path.display().to_string(), "fusion": fusion }));
            } else {
                outln!("{}", f.to_json());
            }
            continue;
        }
        if let Some(s) = a.syntax {
            f.script.syntax = match s {
                SyntaxArg::Legacy => fusebench_ir::Syntax::Legacy,
                SyntaxArg::Direct => fusebench_ir::Syntax::Direct,
            };
        }
        if several {
            outln!("# ---- {} ----", path.display());
        }
        out!("{}", fusebench_frontend::print_script(&f));
    }
    if a.json && several {
        outln!("{}", serde_json::to_string_pretty(&serde_json::json!({ "fusions": docs }))?);
    }
    Ok(crate::outcome::exit_code(failed))
}
