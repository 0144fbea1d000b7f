//! The random ops' GPU code: every rng fixture plans, each random op becomes
//! a call of the prelude's `fb_rng_*` at the element's linear logical index,
//! or, for lanes of a vector, the word of a Philox block they share (checked
//! bit for bit against nvFuser on the GPU by `fusebench check`).

use fusebench_codegen::{plan, Device};

mod common;
use std::path::Path;

fn kernels_of(case: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/fixtures/ops/rng")
        .join(format!("{case}.py"));
    let f = fusebench_frontend::parse_file(&p).unwrap_or_else(|e| panic!("{case}: {e}"));
    let layouts = vec![None; f.inputs.len()];
    let p = plan(&f, &layouts, Device::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
    common::kernels(&p).to_string()
}

#[test]
fn every_rng_fixture_plans() {
    let want = [
        ("uniform_f32", &["fb_rng_uniformf(", "1099511627781"][..]),
        ("uniform_reduced", &["fb_rng_uniform_reduced(", ", true)", ", false)"]),
        ("uniform_f64", &["fb_rng_uniformd("]),
        ("normal_f32", &["fb_rng_normalf("]),
        ("normal_reduced", &["fb_rbf(fb_rng_normalf(", "fb_rh(fb_rng_normalf("]),
        ("normal_f64", &["fb_rng_normald("]),
        // Unseeded ops: seed 0, offsets 0, 1, 2, ... in definition order.
        ("rand_like", &["fb_rng_uniformf(0ull, 0ull", "(0ull, 1ull", "fb_rng_normald(0ull, 2ull", "(0ull, 3ull"]),
        ("dropout", &["fb_rng_uniformf(0ull, 0ull", "fb_rng_uniform_reduced(0ull, 1ull"]),
        // Lanes of a vector share each Philox block of four elements.
        ("rng_in_reduction", &["fb_philox(0ull, (unsigned long long)(", "fb_rng_uniformf_r(", "fb_rng_normalf("]),
    ];
    for (case, needles) in want {
        let k = kernels_of(case);
        for n in needles {
            assert!(k.contains(n), "{case}: no `{n}` in\n{k}");
        }
    }
}

#[test]
fn vector_lanes_draw_each_philox_block_once() {
    let k = kernels_of("rng_in_reduction");
    let blocks = k.matches("fb_philox(").count();
    let words = k.matches("fb_rng_uniformf_r(").count();
    assert!(blocks > 0 && words == 4 * blocks, "{blocks} blocks for {words} words:\n{k}");
}
