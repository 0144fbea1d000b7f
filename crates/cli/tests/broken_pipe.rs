//! A reader that stops early (`fusebench emit examples/ | head -1`) ends the
//! run quietly: exit 0, no panic ("failed printing to stdout: Broken pipe",
//! exit 101, was what every verb did).

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read};

/// `fusebench ARGS` with its stdout a pipe closed after one line was read:
/// its exit code and stderr.
fn read_one_line_then_close(args: &[&str]) -> (Option<i32>, String) {
    let mut child = spawn(args);
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .expect("a line on stdout");
    assert!(!first.is_empty(), "{args:?}: nothing on stdout");
    // The reader (and with it the pipe's only read end) is dropped here.
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn a_closed_stdout_ends_each_verb_quietly() {
    // Each directory given several times: far more than a pipe holds (64 KiB),
    // so the writes after the first line meet the closed pipe.
    let many = |verb: &[&'static str], times: usize| -> Vec<&'static str> {
        let mut v = verb.to_vec();
        v.extend(std::iter::repeat_n("examples/", times));
        v
    };
    for args in [
        many(&["emit"], 40),
        many(&["emit", "--json"], 40),
        many(&["print"], 100),
        many(&["print", "--json"], 40),
        many(&["check"], 40),
        many(&["check", "--json"], 12),
    ] {
        let (code, err) = read_one_line_then_close(&args);
        assert!(!err.contains("panicked"), "{:?}: {err}", &args[..2]);
        assert_ne!(code, Some(101), "{:?}: {err}", &args[..2]);
        assert_eq!(code, Some(0), "{:?}: {err}", &args[..2]);
        assert!(err.is_empty(), "{:?}: said on stderr: {err}", &args[..2]);
    }
}
