//! Random edits of real scripts never make the reader panic, and whatever
//! still reads prints to a script that reads back to the same fusion.

use fusebench_frontend::check_any_text;
use proptest::prelude::*;

/// Seeds: the shared scripts if present, and a small script of every op.
fn seeds() -> &'static [String] {
    static SEEDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(read_seeds)
}

fn read_seeds() -> Vec<String> {
    let mut out = vec![include_str!("every_op.py").to_string()];
    let shared = fusebench_testdata::shared_dir();
    for dir in ["corpus", "golden"] {
        let Ok(rd) = std::fs::read_dir(shared.join(dir)) else {
            eprintln!(
                "{}: absent; mutating only the built-in seed",
                shared.join(dir).display()
            );
            continue;
        };
        let mut files: Vec<_> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "py"))
            .collect();
        files.sort();
        out.extend(files.iter().map(|p| std::fs::read_to_string(p).unwrap()));
    }
    out
}

/// Text that is likely to matter where it lands.
const SNIPPETS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    "-",
    ".",
    ":",
    "\n",
    "\r\n",
    "\r",
    "    ",
    "\t",
    "#",
    "\\\n",
    "'",
    "\"",
    "0",
    "1",
    "-1",
    "2",
    "1.5",
    "1e-05",
    "1e999",
    "0x10",
    "1_000",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999999",
    "4294967296",
    "True",
    "False",
    "None",
    "float(\"inf\")",
    "float('-inf')",
    "float(\"nan\")",
    "-float(\"nan\")",
    "tv0",
    "tv1",
    "T0",
    "c5",
    "fd",
    "fd.ops.",
    "fd.ops.add(",
    "DataType.",
    "DataType.Index",
    "DataType.Null",
    "DataType.Bool",
    "dims=",
    "keepdim=True",
    "dtype=",
    "shape=",
    "axes=[0]",
    ", ",
    "é",
    "\u{feff}",
    "\0",
    "pass",
    "def ",
    "with ",
    "import ",
    "from nvfuser import FusionDefinition\n",
    "fd.add_output(",
    "inputs",
    "torch.randn(",
    ".as_strided(",
    "torch.randint(",
    "manual_padding=True",
    "manual_normalization=True",
    "[0, 0]",
    "fd.define_scalar(3, dtype=DataType.Index)",
    "fd.ops.exp(",
    "fd.ops.neg(",
    "fd.ops.reshape(tv0, new_shape=[-1])",
    "fd.ops.pad(tv0, [9223372036854775807, 1])",
    "fd.ops.slice(tv0, [0], [1], [9223372036854775807])",
];

#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, usize),
    Delete(usize, usize),
    Replace(usize, usize, usize),
    /// Replaces a run of digits with a random integer.
    Number(usize, i64),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0..SNIPPETS.len()).prop_map(|(a, b)| Edit::Insert(a, b)),
        (any::<usize>(), 1usize..40).prop_map(|(a, b)| Edit::Delete(a, b)),
        (any::<usize>(), 1usize..10, 0..SNIPPETS.len())
            .prop_map(|(a, b, c)| Edit::Replace(a, b, c)),
        (
            any::<usize>(),
            prop_oneof![
                -3i64..70,
                any::<i64>(),
                Just(i64::MAX),
                Just(i64::MIN),
                Just(1 << 32)
            ]
        )
            .prop_map(|(a, b)| Edit::Number(a, b)),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

/// The char boundary at or before `at % (len + 1)`.
fn boundary(s: &str, at: usize) -> usize {
    let mut i = at % (s.len() + 1);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(mut s: String, e: &Edit) -> String {
    match *e {
        Edit::Insert(at, k) => {
            let i = boundary(&s, at);
            s.insert_str(i, SNIPPETS[k]);
        }
        Edit::Delete(at, n) | Edit::Replace(at, n, _) => {
            let i = boundary(&s, at);
            let j = boundary(&s, i + n.min(s.len() - i));
            let with = if let Edit::Replace(_, _, k) = *e {
                SNIPPETS[k]
            } else {
                ""
            };
            s.replace_range(i..j.max(i), with);
        }
        Edit::Number(at, v) => {
            let digits: Vec<usize> = s
                .char_indices()
                .filter(|(_, c)| c.is_ascii_digit())
                .map(|(i, _)| i)
                .collect();
            if let Some(&i) = digits.get(at % digits.len().max(1)) {
                let j = s[i..]
                    .find(|c: char| !c.is_ascii_digit())
                    .map_or(s.len(), |k| i + k);
                s.replace_range(i..j, &v.to_string());
            }
        }
        Edit::DuplicateLine(at) | Edit::SwapLines(at, _) => {
            let mut lines: Vec<String> = s.split_inclusive('\n').map(String::from).collect();
            if !lines.is_empty() {
                let (a, n) = (at % lines.len(), lines.len());
                match *e {
                    Edit::SwapLines(_, b) => lines.swap(a, b % n),
                    _ => lines.insert(a, lines[a].clone()),
                }
            }
            s = lines.concat();
        }
        Edit::Truncate(at) => {
            let i = boundary(&s, at);
            s.truncate(i);
        }
    }
    s
}

fn cases() -> u32 {
    std::env::var("MUTATION_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn edited_scripts_never_panic(seed in any::<usize>(), edits in prop::collection::vec(edit(), 1..6)) {
        let seeds = seeds();
        let mut s = seeds[seed % seeds.len()].clone();
        for e in &edits {
            s = apply(s, e);
        }
        let _ = check_any_text(&s);
    }

    /// Arbitrary short text, mostly made of script pieces.
    #[test]
    fn arbitrary_text_never_panics(parts in prop::collection::vec(prop_oneof![
        (0..SNIPPETS.len()).prop_map(|k| SNIPPETS[k].to_string()),
        "\\PC{0,8}",
    ], 0..40)) {
        let _ = check_any_text(&parts.concat());
    }
}
