//! A count of the work done, `[12/60] FILE`, one line per item on stderr, for
//! runs long enough to wonder about. Quiet with `--json` (a script reads the
//! output) and when stderr is not a terminal (a log file wants results, not
//! a count).

use std::io::IsTerminal;

pub struct Progress {
    total: usize,
    done: usize,
    shown: bool,
}

impl Progress {
    pub fn new(total: usize, json: bool) -> Progress {
        Progress {
            total,
            done: 0,
            shown: shown(json, std::io::stderr().is_terminal(), total),
        }
    }

    /// Says that `what` (a file, a fusion) starts.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        if self.shown {
            eprintln!("{}", line(self.done, self.total, what));
        }
    }
}

/// Whether to count: not for machines, not into a file, not for one item.
fn shown(json: bool, terminal: bool, total: usize) -> bool {
    !json && terminal && total > 1
}

fn line(i: usize, total: usize, what: &str) -> String {
    format!("[{i}/{total}] {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_only_on_a_terminal_without_json_and_for_several() {
        assert!(shown(false, true, 60));
        assert!(!shown(true, true, 60));
        assert!(!shown(false, false, 60));
        assert!(!shown(false, true, 1));
        assert_eq!(line(12, 60, "a.py"), "[12/60] a.py");
    }
}
