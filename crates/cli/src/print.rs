//! `fusebench print`: a fusion back as a script or as JSON.

use crate::files;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A repro script (.py) or a fusion in JSON form (.json).
    file: PathBuf,
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
    if let Some(code) = crate::missing(&a.file) {
        return Ok(code);
    }
    let mut f = files::load(&a.file)?;
    if a.json {
        println!("{}", f.to_json());
    } else {
        if let Some(s) = a.syntax {
            f.script.syntax = match s {
                SyntaxArg::Legacy => fusebench_ir::Syntax::Legacy,
                SyntaxArg::Direct => fusebench_ir::Syntax::Direct,
            };
        }
        print!("{}", fusebench_frontend::print_script(&f));
    }
    Ok(ExitCode::SUCCESS)
}
