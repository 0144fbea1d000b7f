//! The generated CUDA of a few fusions, kept as snapshots: a change to the
//! code generator shows up here as a diff to read, not silently on the GPU.
//! (Correctness and speed of the code itself are checked on the GPU by
//! `fusebench check --device gpu` and `fusebench bench`.)

use fusebench_codegen::{plan, Device};

mod common;
use std::path::Path;

fn cuda_of(path: &Path) -> String {
    let f = fusebench_frontend::parse_file(path).unwrap();
    let layouts: Vec<_> = match &f.recipe {
        Some(r) => r.iter().map(|r| r.strides().map(|s| (s, 0))).collect(),
        None => vec![None; f.inputs.len()],
    };
    let p = plan(&f, &layouts, Device::default()).unwrap();
    let mut out = String::new();
    for k in &p.kernels {
        out.push_str(&format!(
            "// {} grid {:?} block {:?}: {}\n",
            k.name, k.grid, k.block, k.summary
        ));
    }
    // The prelude is the same for every fusion; keep only the kernels.
    out + common::kernels(&p)
}

#[test]
fn seed_rmsnorm() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed_rmsnorm_legacy.py");
    insta::assert_snapshot!(cuda_of(&p));
}

#[test]
fn rmsnorm_backward_with_a_column_sum() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/005_Llama-3.2-1B_bw_nvFusion9.py");
    insta::assert_snapshot!(cuda_of(&p));
}

#[test]
fn rope_slices_pads_and_cats() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/001_Llama-3.2-1B_fw_nvFusion1.py");
    insta::assert_snapshot!(cuda_of(&p));
}
