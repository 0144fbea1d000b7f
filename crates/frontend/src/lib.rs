//! Reads nvFuser repro scripts into fusions, and writes fusions back as
//! scripts. No Python runs: the scripts are read by a hand-written
//! recursive-descent parser that knows the shape of what
//! `FusionDefinition.repro_script_for` prints, in both the legacy
//! (`from nvfuser import ...`) and the direct (`from nvfuser_direct import ...`)
//! syntax.
//!
//! Reading then printing then reading gives the same [`Fusion`].

// A ParseError carries its source line and suggestions; errors are rare, and
// boxing it would only make matching on `kind` clumsier.
#![allow(clippy::result_large_err)]

mod error;
mod expr;
mod inputs;
mod lex;
mod ops;
mod ops_index;
mod ops_elem;
mod ops_composite;
mod ops_defn;
mod ops_gemm;
mod parse;
mod print;

pub use error::{ErrorKind, ParseError};
pub use print::print_script;

use fusebench_ir::Fusion;
use std::path::Path;

/// Reads a repro script; `path` is only used in error messages.
pub fn parse_script(path: &str, text: &str) -> Result<Fusion, ParseError> {
    let src = error::Source::new(path, text);
    parse::parse(&src, None).map_err(|d| src.error(d))
}

/// Reads a repro script whose inputs have the shapes `given` (by input
/// position; `None` for scalars): symbolic (-1) extents are bound from them
/// rather than from the script's inputs list.
pub fn parse_script_with_shapes(
    path: &str,
    text: &str,
    given: &[Option<Vec<usize>>],
) -> Result<Fusion, ParseError> {
    let src = error::Source::new(path, text);
    parse::parse(&src, Some(given)).map_err(|d| src.error(d))
}

/// Reads the repro script at `path`.
pub fn parse_file(path: &Path) -> Result<Fusion, ParseError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ParseError {
        path: shown.clone(),
        line: 0,
        col: 0,
        source_line: String::new(),
        text: String::new(),
        kind: ErrorKind::Io(e.to_string()),
    })?;
    parse_script(&shown, &text)
}

/// The body of the fuzz target and the mutation tests: reading any text must
/// not panic, and what reads must print to a script that reads back equal.
/// Panics if that property fails.
#[doc(hidden)]
pub fn check_any_text(text: &str) -> Result<Fusion, ParseError> {
    let f = parse_script("fuzz.py", text)?;
    let printed = print_script(&f);
    match parse_script("printed.py", &printed) {
        Ok(g) => assert!(
            g == f,
            "printed script reads back to a different fusion:\n{printed}\n--- from ---\n{text}"
        ),
        Err(e) => panic!("printed script does not read back: {e}\n{printed}\n--- from ---\n{text}"),
    }
    Ok(f)
}
