//! What the printer writes, pinned by snapshots.

use fusebench_frontend::{parse_file, parse_script, print_script};

/// `rel` under the shared directory; a test reaching here without it fails naming the path.
fn shared(rel: &str) -> std::path::PathBuf {
    fusebench_testdata::require(rel)
}

fusebench_testdata::needs_corpus! {
#[test]
fn seed_rmsnorm_legacy() {
    let p = shared("corpus/seed_rmsnorm_legacy.py");
    insta::assert_snapshot!(
        "seed_rmsnorm_legacy",
        print_script(&parse_file(&p).unwrap())
    );
}
}

fusebench_testdata::needs_golden! {
#[test]
fn golden_scalar_ops_direct() {
    let p = shared("golden/define_scalar_and_scalar_ops.py");
    insta::assert_snapshot!(
        "define_scalar_and_scalar_ops",
        print_script(&parse_file(&p).unwrap())
    );
}
}

#[test]
fn every_op() {
    let f = parse_script("every_op.py", include_str!("every_op.py")).unwrap();
    insta::assert_snapshot!("every_op", print_script(&f));
}
