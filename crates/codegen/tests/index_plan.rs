//! The index family's GPU fixtures all plan: every kernel in the source, a
//! kernel of its own for each sort/scatter/accumulate before the kernels that
//! read its result, and too-long sort rows refused with the reason.

use fusebench_codegen::{plan, Device, Schedule};
use std::path::PathBuf;

fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cli/tests/fixtures/ops/index"
    ));
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_index_fixture_plans() {
    let all = fixtures();
    assert!(all.len() >= 10);
    for path in all {
        let f = fusebench_frontend::parse_file(&path).unwrap();
        let p = plan(&f, &vec![None; f.inputs.len()], Device::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for k in &p.kernels {
            assert!(p.source.contains(&format!(" {}(", k.name)), "{}", k.name);
            let threads: u32 = k.block.iter().product();
            assert!(
                (32..=1024).contains(&threads) && threads.is_multiple_of(32),
                "{}: {:?}",
                k.name,
                k.block
            );
        }
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let special = p
            .kernels
            .iter()
            .filter(|k| k.schedule == Schedule::Index)
            .count();
        let want = match name.as_str() {
            "topk.py" | "argsort.py" => 3,
            "sort_long_rows.py" => 4,
            // Chunks, merge passes (2, 4, 3, 3), the first k taken: per sort.
            "sort_longer_rows.py" => 20,
            "scatter_3d.py" => 9,
            "topk_router.py" | "topk_router64.py" => 1,
            // copy, winners, writes: per scatter.
            "scatter.py" => 6,
            // init and adds, plus rounding where the dtype is narrower (none here).
            "index_put_accumulate.py" => 4,
            _ => 0,
        };
        assert_eq!(
            special,
            want,
            "{name}: {:#?}",
            p.kernels.iter().map(|k| &k.summary).collect::<Vec<_>>()
        );
        // Every kernel that reads a temporary comes after the one that writes it
        // (the writer is the first kernel naming it).
        if special > 0 {
            let last_special = p
                .kernels
                .iter()
                .rposition(|k| k.schedule == Schedule::Index)
                .unwrap();
            assert!(
                last_special < p.kernels.len() - 1,
                "{name}: the outputs are copied after the sorts"
            );
        }
    }
}

/// Rows longer than one block sorts: chunks of 4096 sorted a block each,
/// ceil(log2(n / 4096)) passes merging runs in pairs, then the first k taken.
#[test]
fn sort_rows_longer_than_a_block_are_sorted_in_chunks_and_merged() {
    for (n, passes) in [(5000usize, 1usize), (8192, 1), (8193, 2), (100_003, 5)] {
        let src = format!("import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n    tv0 = fd.define_tensor(shape=[2, {n}], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.ops.argsort(tv0, dim=1)\n    tv2, tv3 = fd.ops.topk(tv0, 7, dim=1)\n    fd.add_output(tv1)\n    fd.add_output(tv2)\n    fd.add_output(tv3)\nwith FusionDefinition() as fd:\n    f(fd)\n");
        let f = fusebench_frontend::parse_script("t.py", &src).unwrap();
        let p = plan(&f, &[None], Device::default()).unwrap_or_else(|e| panic!("{n}: {e}"));
        let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
        for node in [0, 1] {
            let of = |s: &str| names.iter().filter(|k| k.starts_with(&format!("fb_x{node}_{s}"))).count();
            assert_eq!((of("chunks"), of("merge"), of("take")), (1, passes, 1), "{n}: {names:?}");
        }
        let chunks = p.kernels.iter().find(|k| k.name == "fb_x0_chunks").unwrap();
        assert_eq!(chunks.grid[0] as usize, 2 * n.div_ceil(4096), "a block per chunk of each row");
    }
}
