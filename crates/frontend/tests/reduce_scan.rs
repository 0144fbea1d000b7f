//! prod, scans, var and batch_norm: read in both syntaxes with nvFuser's
//! keywords and defaults, inferred with nvFuser's dtype rules, printed back.

use fusebench_frontend::{check_any_text, parse_script};
use fusebench_ir::{DType, Op, ScanOp};

fn script(syntax: &str, lines: &[&str]) -> String {
    let mut s = format!("from {syntax} import FusionDefinition, DataType\ndef nvfuser_fusion(fd : FusionDefinition) -> None :\n");
    for l in lines {
        s.push_str(&format!("    {l}\n"));
    }
    s.push_str("with FusionDefinition() as fd:\n    nvfuser_fusion(fd)\n");
    s
}

const X: &str = "tv0 = fd.define_tensor(shape=[4, 5], contiguity=[True, True], dtype=DataType.Int32, is_cpu=False)";
const B: &str = "tv9 = fd.define_tensor(shape=[4, 5], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)";

fn dtype_of(f: &fusebench_ir::Fusion, name: &str) -> (DType, Vec<usize>) {
    let v = f.values.iter().find(|v| v.name == name).unwrap();
    (v.dtype, v.shape.clone().unwrap())
}

#[test]
fn prod_and_all_dim_reductions_read_and_round_trip() {
    let s = script(
        "nvfuser_direct",
        &[
            X,
            B,
            "tv1 = fd.ops.prod(tv0)",
            "tv2 = fd.ops.prod(tv0, dim=1, keepdim=True)",
            "tv3 = fd.ops.prod(tv9, dims=[0, 1])",
            "tv4 = fd.ops.sum(tv0, 0)",
            "tv5 = fd.ops.max(tv9)",
            "tv6 = fd.ops.prod(tv0, dims=[0], dtype=DataType.Float)",
            "fd.add_output(tv1)",
        ],
    );
    let f = check_any_text(&s).unwrap();
    assert_eq!(dtype_of(&f, "tv1"), (DType::Int, vec![]));
    assert_eq!(dtype_of(&f, "tv2"), (DType::Int, vec![4, 1]));
    // A float prod keeps its dtype (no upcast), like sum.
    assert_eq!(dtype_of(&f, "tv3"), (DType::BFloat16, vec![]));
    assert_eq!(dtype_of(&f, "tv4"), (DType::Int, vec![5]));
    assert_eq!(dtype_of(&f, "tv5"), (DType::BFloat16, vec![]));
    assert_eq!(dtype_of(&f, "tv6"), (DType::Float, vec![5]));
    let legacy = script(
        "nvfuser",
        &[X, "tv1 = fd.ops.prod(tv0, dims=[0, 1], keepdim=False, dtype=DataType.Null)", "fd.add_output(tv1)"],
    );
    check_any_text(&legacy).unwrap();
}

#[test]
fn scans_read_with_defaults_and_keep_dtype() {
    let s = script(
        "nvfuser_direct",
        &[
            X,
            B,
            "tv1 = fd.ops.cumsum(tv0, dim=1)",
            "tv2 = fd.ops.cumprod(tv9, 0)",
            "tv3 = fd.ops.cummin(tv0, dim=-1, init=None)",
            "tv4 = fd.ops.cummax(arg=tv9, dim=1, init=2.0)",
            "fd.add_output(tv4)",
        ],
    );
    let f = check_any_text(&s).unwrap();
    assert_eq!(dtype_of(&f, "tv1"), (DType::Int32, vec![4, 5]));
    assert_eq!(dtype_of(&f, "tv2"), (DType::BFloat16, vec![4, 5]));
    let kinds: Vec<ScanOp> = f
        .nodes
        .iter()
        .filter_map(|n| match n.op {
            Op::Scan { kind, .. } => Some(kind),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, [ScanOp::Cumsum, ScanOp::Cumprod, ScanOp::Cummin, ScanOp::Cummax]);
    let legacy = script("nvfuser", &[X, "tv1 = fd.ops.cumsum(tv0, dim=0)", "fd.add_output(tv1)"]);
    check_any_text(&legacy).unwrap();
    let bad = script("nvfuser_direct", &[X, "tv1 = fd.ops.cumsum(tv0, dim=2)", "fd.add_output(tv1)"]);
    let e = parse_script("bad.py", &bad).unwrap_err().to_string();
    assert!(e.contains("cumsum") && e.contains("out of range"), "{e}");
}

#[test]
fn var_reads_as_nvfusers_composition_and_round_trips() {
    let s = script(
        "nvfuser_direct",
        &[X, B, "tv1 = fd.ops.var(tv9, dims=[1])", "tv2 = fd.ops.var(tv0, [0, 1], 0, True)", "fd.add_output(tv1)", "fd.add_output(tv2)"],
    );
    let f = check_any_text(&s).unwrap();
    // bf16 in, Float out (the mean's division computes in float); an int
    // input's mean divides by a Double count, so its variance is Double.
    assert_eq!(dtype_of(&f, "tv1"), (DType::Float, vec![4]));
    assert_eq!(dtype_of(&f, "tv2").1, vec![1, 1]);
    let bad = script("nvfuser_direct", &[B, "tv1 = fd.ops.var(tv9, dims=[1], correction=-1)", "fd.add_output(tv1)"]);
    assert!(parse_script("bad.py", &bad).unwrap_err().to_string().contains("correction"));
}

#[test]
fn batch_norm_reads_and_refuses_running_stat_updates() {
    let decl = [
        "T0 = fd.define_tensor(shape=[2, 3, 4], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)",
        "T1 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Float, is_cpu=False)",
        "S2 = fd.define_scalar(0.1, dtype=DataType.Double)",
        "S3 = fd.define_scalar(1e-05, dtype=DataType.Double)",
    ];
    let mut lines = decl.to_vec();
    lines.extend([
        "T4, T5, T6 = fd.ops.batch_norm(T0, T1, T1, None, None, S2, S3, True)",
        "T7, T8, T9 = fd.ops.batch_norm(T0, None, None, None, None, S2, S3, False, channels_last=True)",
        "T10, T11, T12 = fd.ops.batch_norm(T0, None, None, T1, T1, S2, S3, False)",
        "fd.add_output(T4)",
        "fd.add_output(T6)",
    ]);
    let f = check_any_text(&script("nvfuser", &lines)).unwrap();
    assert_eq!(dtype_of(&f, "T4"), (DType::Float, vec![2, 3, 4]));
    assert_eq!(dtype_of(&f, "T5"), (DType::Float, vec![3]));
    assert_eq!(dtype_of(&f, "T6"), (DType::Float, vec![3]));
    assert_eq!(dtype_of(&f, "T8"), (DType::Float, vec![4]));
    // A name given twice binds the last value, as in Python (found by
    // fuzzing: the decomposition emitted the mean, named T5, before the
    // output it shadows, so the printed script used T5 after rebinding it).
    let mut lines = decl.to_vec();
    lines.extend(["T5, T5, T6 = fd.ops.batch_norm(T0, T1, T1, None, None, S2, S3, True)", "T7 = fd.ops.neg(T5)", "fd.add_output(T7)"]);
    let f = check_any_text(&script("nvfuser", &lines)).unwrap();
    assert_eq!(f.value(f.outputs[0]).shape.as_deref(), Some(&[3][..]), "the mean's, bound last");
    // So does a target that rebinds an operand of the call (the weight T1,
    // read by the decomposition after it defines the mean).
    let mut lines = decl.to_vec();
    lines.extend(["T4, T1, T6 = fd.ops.batch_norm(T0, T1, T1, None, None, S2, S3, True)", "T7 = fd.ops.neg(T1)", "fd.add_output(T7)"]);
    let f = check_any_text(&script("nvfuser", &lines)).unwrap();
    assert_eq!(f.value(f.outputs[0]).shape.as_deref(), Some(&[3][..]), "the mean's");
    // Training with running stats would update them in place: refused.
    let mut lines = decl.to_vec();
    lines.extend(["T4, T5, T6 = fd.ops.batch_norm(T0, None, None, T1, T1, S2, S3, True)", "fd.add_output(T4)"]);
    let e = parse_script("bad.py", &script("nvfuser", &lines)).unwrap_err().to_string();
    assert!(e.contains("batch_norm") && e.contains("in place"), "{e}");
}
