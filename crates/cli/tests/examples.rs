//! The README's "Try it without a GPU" commands, run as written on
//! `examples/results/` (with `/tmp/` replaced by a fresh directory), each
//! checked for its exit code and a telling piece of output, not its numbers:
//! the recorded results will be replaced by a fresh run. A command added to or
//! changed in the README fails here until it is listed below.

mod common;
use common::*;

/// The commands of the README's section, in order.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("\n## Try it without a GPU\n")
        .nth(1)
        .expect("README has a 'Try it without a GPU' section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has a sh block");
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// What each command must do: the exit codes it may end with, and what its
/// output (stdout and stderr) must contain.
struct Expect {
    command: &'static str,
    codes: &'static [i32],
    says: &'static [&'static str],
}

const EXPECTED: &[Expect] = &[
    Expect {
        command: "fusebench diff examples/results/seed-cold-a.json examples/results/seed-cold-b.json",
        // 1 would be a regression between the two runs: not expected, but a verdict too.
        codes: &[0, 1],
        says: &["seed_rmsnorm_legacy.py", "new / old [range]", "(1 compared)"],
    },
    Expect {
        command: "fusebench explain examples/results/seed-cold-a.json examples/results/seed-warm.json",
        codes: &[0],
        says: &[
            "A: seed_rmsnorm_legacy.py  cold",
            "B: seed_rmsnorm_legacy.py  warm",
            "DIFFERS    different cache policy",
            "Shares of B − A:",
        ],
    },
    Expect {
        command: "fusebench report examples/results/ --out /tmp/fusebench-report",
        codes: &[0],
        says: &["fusebench-report/report.md"],
    },
    Expect {
        command: "fusebench export examples/results/seed-cold-a.json --format nvbench --out /tmp/seed-cold-a.nvbench.json",
        codes: &[0],
        says: &[],
    },
    Expect {
        command: "fusebench diff /tmp/seed-cold-a.nvbench.json examples/results/seed-cold-b.json",
        codes: &[0, 1],
        says: &["seed_rmsnorm_legacy.py", "(1 compared)"],
    },
];

#[test]
fn the_readme_commands_run_on_the_recorded_results() {
    let commands = readme_commands();
    let listed: Vec<&str> = EXPECTED.iter().map(|e| e.command).collect();
    assert_eq!(
        commands, listed,
        "the README's commands and this test's list differ"
    );
    let tmp = tmp_dir("examples", "readme");
    let tmp_prefix = format!("{}/", tmp.display());
    for e in EXPECTED {
        let line = e.command.replace("/tmp/", &tmp_prefix);
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        let o = fusebench(&args);
        let t = text(&o);
        let code = o.status.code().unwrap_or(-1);
        assert!(
            e.codes.contains(&code),
            "{line}: exit {code}, expected one of {:?}:\n{t}",
            e.codes
        );
        for s in e.says {
            assert!(t.contains(s), "{line}: does not say {s:?}:\n{t}");
        }
    }
    // What report wrote: every result of the folder, whichever tool wrote it.
    let report = std::fs::read_to_string(tmp.join("fusebench-report/report.md")).unwrap();
    for name in ["seed_rmsnorm_legacy.py", "bf16_copy", "test_rmsnorm_small"] {
        assert!(report.contains(name), "report.md lacks {name}:\n{report}");
    }
    assert!(tmp.join("fusebench-report/times.svg").is_file());
    // What export wrote: nvbench's JSON.
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.join("seed-cold-a.nvbench.json")).unwrap())
            .expect("export writes JSON");
    assert!(
        v.get("benchmarks").is_some() && v.get("devices").is_some(),
        "not nvbench's form: {v}"
    );
    std::fs::remove_dir_all(tmp).ok();
}

/// `check`, `print` and `emit` on `examples/` read its scripts, not the
/// recorded results in `examples/results/` (a directory's own files only).
#[test]
fn the_results_folder_does_not_disturb_the_verbs_on_examples() {
    assert!(root().join("examples/results").is_dir());
    let o = fusebench(&["check", "examples/"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("4 fusions: 4 ok, 0 failed"), "{t}");
    assert!(!t.contains("results"), "{t}");
    for verb in ["print", "emit"] {
        let o = fusebench(&[verb, "examples/"]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{verb}: {t}");
        assert!(!t.contains("examples/results"), "{verb}: {t}");
    }
}
