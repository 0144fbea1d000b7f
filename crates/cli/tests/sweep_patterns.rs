//! The generated sweep (`bench/patterns.py`, issue 14's shapes and layouts):
//! every script of its small grid is a valid nvFuser repro script that
//! `check --strict` parses and runs on the CPU reference (its inputs agree
//! with its definitions), every pattern and layout is in it, and the default
//! grid stays a few hundred scripts. Needs python3; under CI (`CI=true`) its
//! absence is a failure, elsewhere a skip said on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// nvFuser's benchmark patterns (forward and backward) the sweep must cover.
const PATTERNS: &[&str] = &[
    "gelu", "gelu_bwd", "gelu_bwd_bias", "silu_mul", "silu_mul_bwd", "add_bias", "scale_shift", "rmsnorm",
    "rmsnorm_bwd", "layernorm", "layernorm_bwd", "softmax", "softmax_bwd", "cross_entropy", "logsumexp",
    "dropout_residual_norm", "rope", "transpose", "embedding", "sum_inner", "sum_outer", "sum_all",
];
const LAYOUTS: &[&str] = &["rowmajor", "colmajor", "sliced", "broadcast"];

/// Runs the generator into a fresh directory; None when python3 is missing outside CI.
fn generate(tag: &str, args: &[&str]) -> Option<(PathBuf, usize, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("fusebench-patterns-{tag}-{}", std::process::id()));
    let gen: std::io::Result<Output> = Command::new("python3")
        .arg(root.join("bench/patterns.py"))
        .arg(&dir)
        .args(args)
        .output();
    let gen = match gen {
        Ok(o) => o,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("python3 is needed: {e}"),
        Err(e) => {
            eprintln!("skipped: python3 not found ({e})");
            return None;
        }
    };
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    let n: usize = String::from_utf8_lossy(&gen.stdout)
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.parse().ok())
        .expect("the generator says how many scripts it wrote");
    let names = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    Some((dir, n, names))
}

#[test]
fn every_generated_pattern_script_checks_on_the_cpu() {
    let Some((dir, n, names)) = generate("small", &["--grid", "small"]) else {
        return;
    };
    assert_eq!(names.len(), n, "one file per script");
    for p in PATTERNS {
        assert!(names.iter().any(|f| f.starts_with(&format!("{p}-"))), "no {p} script");
    }
    for l in LAYOUTS {
        assert!(names.iter().any(|f| f.ends_with(&format!("-{l}.py"))), "no {l} script");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fusebench"))
        .arg("check")
        .arg("--strict")
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("{n} fusions: {n} ok")), "{text}");
}

/// The matrix products (`--family gemm`, issue 17) are drawn only when asked
/// for, and check on the CPU like the rest.
#[test]
fn the_gemm_family_checks_on_the_cpu_and_stays_out_of_the_default_grid() {
    let Some((dir, n, names)) = generate("gemm", &["--grid", "small", "--family", "gemm"]) else {
        return;
    };
    for p in ["linear", "linear_gelu", "matmul"] {
        for l in ["rowmajor", "colmajor"] {
            assert!(names.iter().any(|f| f.starts_with(&format!("{p}-")) && f.ends_with(&format!("-{l}.py"))), "no {p} {l} script");
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fusebench")).arg("check").arg("--strict").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("{n} fusions: {n} ok")), "{text}");
    let Some((dir, _, names)) = generate("nogemm", &["--grid", "small"]) else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!names.iter().any(|f| f.starts_with("linear") || f.starts_with("matmul")), "{names:?}");
}

/// The default grid is the structured subset: a few hundred scripts, each
/// pattern in it, every name PATTERN-DTYPE-ROWSxCOLS-LAYOUT.py.
#[test]
fn the_default_sweep_is_a_few_hundred_scripts_of_every_pattern() {
    let Some((dir, n, names)) = generate("sweep", &[]) else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert!((200..=600).contains(&n), "{n} scripts");
    for p in PATTERNS {
        assert!(names.iter().any(|f| f.starts_with(&format!("{p}-"))), "no {p} script");
    }
    for f in &names {
        let parts: Vec<&str> = f.trim_end_matches(".py").rsplitn(4, '-').collect();
        assert_eq!(parts.len(), 4, "{f}");
        let (layout, shape, dtype) = (parts[0], parts[1], parts[2]);
        assert!(LAYOUTS.contains(&layout), "{f}");
        assert!(["bf16", "f16", "f32"].contains(&dtype), "{f}");
        assert!(shape.split_once('x').is_some_and(|(r, c)| r.parse::<u64>().is_ok() && c.parse::<u64>().is_ok()), "{f}");
        assert!(PATTERNS.contains(&parts[3]), "{f}");
    }
}

/// `--sample N --seed S`: N scripts drawn from the product, every pattern (22)
/// getting its share, the same N for the same seed (a fresh set of shapes
/// to measure on, named in BENCHMARKS.md by its command).
#[test]
fn a_sample_is_spread_over_the_patterns_and_fixed_by_its_seed() {
    let args = ["--cols", "1536,2304,6144", "--rows", "512,4096", "--sample", "44", "--seed", "19"];
    let Some((a, n, mut first)) = generate("sample-a", &args) else {
        return;
    };
    let Some((b, _, mut again)) = generate("sample-b", &args) else {
        return;
    };
    let mut other_args = args;
    other_args[7] = "20";
    let Some((c, _, mut other)) = generate("sample-c", &other_args) else {
        return;
    };
    for d in [a, b, c] {
        let _ = std::fs::remove_dir_all(&d);
    }
    assert_eq!(n, 44);
    first.sort();
    again.sort();
    other.sort();
    assert_eq!(first, again, "the same seed draws the same scripts");
    assert_ne!(first, other, "another seed draws others");
    for p in PATTERNS {
        let k = first.iter().filter(|f| f.starts_with(&format!("{p}-"))).count();
        assert_eq!(k, 2, "{p}: {k} of 44");
    }
}

/// Norms over channels (`--family channels`: batch, instance and group
/// norms of [N, C, H, W] images, channels first and last) are drawn only
/// when asked for, named N x CxHxW, and check on the CPU like the rest.
#[test]
fn the_channels_family_checks_on_the_cpu_and_stays_out_of_the_default_grid() {
    let Some((dir, n, names)) = generate("channels", &["--grid", "small", "--family", "channels"]) else {
        return;
    };
    for p in ["batchnorm", "batchnorm_bwd", "instancenorm", "instancenorm_bwd", "groupnorm"] {
        for l in ["nchw", "nhwc"] {
            assert!(names.iter().any(|f| f.starts_with(&format!("{p}-")) && f.ends_with(&format!("-{l}.py"))), "no {p} {l} script");
        }
    }
    for f in &names {
        let shape = f.trim_end_matches(".py").rsplit('-').nth(1).unwrap();
        assert_eq!(shape.split('x').filter(|e| e.parse::<u64>().is_ok()).count(), 4, "{f}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fusebench")).arg("check").arg("--strict").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("{n} fusions: {n} ok")), "{text}");
    let Some((dir, _, names)) = generate("nochannels", &["--grid", "small"]) else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!names.iter().any(|f| f.contains("norm-") && (f.ends_with("nchw.py") || f.ends_with("nhwc.py"))), "{names:?}");
}
