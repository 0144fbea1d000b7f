//! What the printer writes, pinned by snapshots.

use fusebench_frontend::{parse_file, parse_script, print_script};
use std::path::Path;

fn shared(rel: &str) -> Option<std::path::PathBuf> {
    let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared")).join(rel);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("skipping: {} is absent", p.display());
        None
    }
}

#[test]
fn seed_rmsnorm_legacy() {
    let Some(p) = shared("corpus/seed_rmsnorm_legacy.py") else {
        return;
    };
    insta::assert_snapshot!(
        "seed_rmsnorm_legacy",
        print_script(&parse_file(&p).unwrap())
    );
}

#[test]
fn golden_scalar_ops_direct() {
    let Some(p) = shared("golden/define_scalar_and_scalar_ops.py") else {
        return;
    };
    insta::assert_snapshot!(
        "define_scalar_and_scalar_ops",
        print_script(&parse_file(&p).unwrap())
    );
}

#[test]
fn every_op() {
    let f = parse_script("every_op.py", include_str!("every_op.py")).unwrap();
    insta::assert_snapshot!("every_op", print_script(&f));
}
