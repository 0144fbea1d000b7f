//! The bytes a fusion reads, on the shared corpus: the seed RMSNorm counts
//! what the engine counted before gathers were counted by rows, and an
//! embedding fusion counts the distinct rows its generated ids select, not
//! its whole table.

use fusebench_ir::traffic::Counted;
use fusebench_ir::{traffic, Fusion, InputShape};
use fusebench_reference::facts::distinct_ids;
use fusebench_reference::{generate_inputs, Arg};
use std::path::{Path, PathBuf};

/// The shared corpus; a test reaching here without it fails naming the path.
fn corpus() -> PathBuf {
    fusebench_testdata::require("corpus")
}

fn parse(dir: &Path, name: &str) -> Fusion {
    fusebench_frontend::parse_file(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The layout of each argument, as the engine sees it.
fn layouts(args: &[Arg]) -> Vec<Option<InputShape>> {
    args.iter()
        .map(|a| match a {
            Arg::Tensor(t) => Some(InputShape {
                dtype: t.dtype(),
                shape: t.shape().to_vec(),
                strides: t.strides().to_vec(),
            }),
            Arg::Scalar(_) => None,
        })
        .collect()
}

/// The engine's count before this one: every element each input addresses.
fn addressed(args: &[Arg]) -> u64 {
    args.iter()
        .map(|a| match a {
            Arg::Tensor(t) => {
                let n: usize = t
                    .shape()
                    .iter()
                    .zip(t.strides())
                    .filter(|(_, &s)| s != 0)
                    .map(|(&e, _)| e)
                    .product();
                (n * t.dtype().size_bytes()) as u64
            }
            Arg::Scalar(_) => 0,
        })
        .sum()
}

fusebench_testdata::needs_corpus! {
#[test]
fn seed_rmsnorm_counts_what_the_engine_counted() {
    let dir = corpus();
    let f = parse(&dir, "seed_rmsnorm_legacy.py");
    let args = generate_inputs(&f, 0).unwrap().inputs;
    let t = traffic(&f, &layouts(&args), &distinct_ids(&f, &args));
    assert_eq!(t.read, (4 * 1024 * 4096 + 4096) * 2);
    assert_eq!(t.read, addressed(&args));
}

#[test]
fn llama_embedding_counts_the_rows_its_ids_select() {
    let dir = corpus();
    // ids [2, 1024] Int into a table [128256, 2048] bf16, through a reshape
    // and a broadcast; two [2048] bf16 weights besides.
    let f = parse(&dir, "000_Llama-3.2-1B_fw_nvFusion0.py");
    let args = generate_inputs(&f, 0).unwrap().inputs;
    let distinct = distinct_ids(&f, &args);
    let d = distinct[0].expect("input 0 feeds the gather's index");
    assert!(d > 1 && d <= 2048, "{d} distinct ids");
    let t = traffic(&f, &layouts(&args), &distinct);
    let row = 2048 * 2;
    assert_eq!(t.inputs[1].bytes, d * row);
    assert!(matches!(t.inputs[1].counted, Counted::Gathered(_)));
    assert_eq!(t.read, 2048 * 8 + d * row + 2048 * 2);
    // The whole table is 128256 rows: the old count was over 50 times this one.
    assert_eq!(addressed(&args), t.addressed());
    assert!(addressed(&args) > 50 * t.read);
    let line = t.describe(0);
    assert!(
        line.contains(&format!(
            "input 1 (tv1 [128256, 2048] BFloat16): index_select reads {d} of 128256 rows ({d} distinct of 2048 ids)"
        )),
        "{line}"
    );
}

#[test]
fn every_corpus_fusion_reads_at_most_what_it_addresses() {
    let dir = corpus();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    let mut gathers = 0;
    for p in files {
        let f = fusebench_frontend::parse_file(&p).unwrap_or_else(|e| panic!("{e}"));
        let t = traffic(&f, &[], &[]);
        for i in &t.inputs {
            assert!(i.bytes <= i.whole, "{}: {i:?}", p.display());
            match &i.counted {
                Counted::Whole | Counted::WholeBecause(_) => assert_eq!(i.bytes, i.whole),
                Counted::Gathered(_) => gathers += 1,
                _ => {}
            }
        }
    }
    // Llama, phi-2 and pythia each begin with an embedding.
    assert_eq!(gathers, 3);
}
}
