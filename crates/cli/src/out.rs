//! Standard output for every verb, in one place. A reader that goes away
//! before the end (`fusebench emit examples/ | head -1`) ends the run quietly
//! with exit code 0, as `ripgrep` does: what was asked for was read, and a
//! shell pipeline under `set -o pipefail` does not fail for it. Any other
//! write error (a full disk) is said on stderr and exits 1. `println!` and
//! `print!` panic instead ("failed printing to stdout: Broken pipe", exit
//! 101), so the crate denies them (`clippy::print_stdout` in main.rs) and
//! writes through [`outln!`] and [`out!`].

use std::io::{ErrorKind, Write};

/// Writes `args` to standard output, or ends the process as said above.
pub fn write(args: std::fmt::Arguments) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        gone(e)
    }
}

/// The end of a run whose standard output cannot be written.
fn gone(e: std::io::Error) -> ! {
    if e.kind() == ErrorKind::BrokenPipe {
        std::process::exit(i32::from(crate::exit::OK));
    }
    eprintln!("error: writing to standard output: {e}");
    std::process::exit(i32::from(crate::exit::FAILED))
}

/// `println!` that ends the run quietly when the reader is gone (see `out.rs`).
macro_rules! outln {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that ends the run quietly when the reader is gone (see `out.rs`).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}
