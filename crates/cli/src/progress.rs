//! A count of the work done, `[12/60] FILE`, one line per item on stderr, for
//! runs long enough to wonder about. Quiet with `--json` (a script reads the
//! output) and when stderr is not a terminal (a log file wants results, not
//! a count).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub struct Progress {
    total: usize,
    done: usize,
    shown: bool,
    /// At most one line per this long (zero: every item), and always the last.
    gap: Duration,
    last: Option<Instant>,
}

impl Progress {
    pub fn new(total: usize, json: bool) -> Progress {
        Progress {
            total,
            done: 0,
            shown: shown(json, std::io::stderr().is_terminal(), total),
            gap: Duration::ZERO,
            last: None,
        }
    }

    /// For many quick items (fuzz cases): a line at most once a second.
    pub fn throttled(total: usize, json: bool) -> Progress {
        Progress {
            gap: Duration::from_secs(1),
            ..Progress::new(total, json)
        }
    }

    /// Says that `what` (a file, a fusion) starts.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        let due = self.last.is_none_or(|t| t.elapsed() >= self.gap) || self.done == self.total;
        if self.shown && due {
            self.last = Some(Instant::now());
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
