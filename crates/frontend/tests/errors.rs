//! Malformed scripts give located, readable errors, never panics.

use fusebench_frontend::{parse_file, parse_script, ErrorKind, ParseError};

const BASE: &str = "\
# header
import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[4, 8], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv1 = fd.ops.sum(tv0, dims=[1], dtype=DataType.Float)
    tv2 = fd.ops.mul(tv1, 0.5)
    fd.add_output(tv2)
with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor((4, 8), dtype=torch.float32, device='cuda:0'),
]
fd.execute(inputs)
";

fn err(from: &str, to: &str) -> ParseError {
    assert!(BASE.contains(from), "{from}");
    parse_script("x.py", &BASE.replacen(from, to, 1)).expect_err("should not parse")
}

/// Checks `line:col` and that the message contains `text`.
fn check(e: &ParseError, line: usize, col: usize, text: &str) {
    let shown = e.to_string();
    assert_eq!((e.line, e.col), (line, col), "{shown}");
    assert!(
        shown.contains(text),
        "{shown}\n--- does not contain ---\n{text}"
    );
    assert!(
        shown.starts_with(&format!("x.py:{line}:{col}: ")),
        "{shown}"
    );
}

#[test]
fn base_parses() {
    parse_script("x.py", BASE).unwrap();
}

#[test]
fn unknown_op() {
    let e = err("fd.ops.mul(", "fd.ops.foo(");
    check(&e, 7, 11, "unknown op fd.ops.foo; supported: abs, acos, acosh, add, add_alpha, addcmul, amax, amin, argsort, asin,");
    assert!(e.to_string().contains("welford, where"));
    assert_eq!(e.text, "fd.ops.foo");
    assert!(matches!(&e.kind, ErrorKind::UnknownOp { name, .. } if name == "foo"));
    insta::assert_snapshot!("unknown_op", e.to_string());
}

#[test]
fn wrong_keyword() {
    let e = err("dims=[1]", "dimz=[1]");
    check(&e, 6, 27, "unknown keyword argument `dimz` for fd.ops.sum; supported: arg, dims, keepdim, dtype, axes (= dims)");
    let e = err("contiguity=", "contiguous=");
    check(&e, 5, 42, "unknown keyword argument `contiguous` for fd.define_tensor; supported: shape, contiguity, dtype, is_cpu, stride_order");
    let e = err("device='cuda:0'", "devise='cuda:0'");
    check(&e, 13, 60, "unknown keyword argument `devise` for torch.testing.make_tensor; supported: dtype, device, low, high");
}

#[test]
fn unbalanced_brackets() {
    let e = err("mul(tv1, 0.5)", "mul(tv1, 0.5");
    check(
        &e,
        7,
        21,
        "`(` is never closed: the file ends before its closing bracket",
    );
    let e = err("mul(tv1, 0.5)", "mul(tv1, 0.5))");
    check(&e, 7, 31, "unmatched `)`: no bracket is open here");
    let e = err("dims=[1]", "dims=[1)");
    check(&e, 6, 34, "`)` does not match `[` opened at 6:32");
}

#[test]
fn undefined_name() {
    let e = err("mul(tv1,", "mul(tv9,");
    check(&e, 7, 22, "`tv9` is not defined");
    let e = err("fd.add_output(tv2)", "fd.add_output(tv3)");
    check(&e, 8, 19, "`tv3` is not defined");
}

#[test]
fn truncated_file() {
    let cut = BASE.find("ims=[1]").unwrap();
    let e = parse_script("x.py", &BASE[..cut]).unwrap_err();
    check(
        &e,
        6,
        21,
        "`(` is never closed: the file ends before its closing bracket",
    );
    // Cut after the body: the fusion is never built.
    let cut = BASE.find("with").unwrap();
    let e = parse_script("x.py", &BASE[..cut]).unwrap_err();
    check(&e, 9, 1, "expected `with FusionDefinition() as fd:` and `nvfuser_fusion(fd)`, which build the fusion, found end of file");
    // Cut after the header.
    let cut = BASE.find("def").unwrap();
    let e = parse_script("x.py", &BASE[..cut]).unwrap_err();
    check(
        &e,
        4,
        1,
        "expected `def nvfuser_fusion(fd : FusionDefinition) -> None :`, found end of file",
    );
    // Cut inside a string.
    let cut = BASE.find("uda:0'").unwrap();
    let e = parse_script("x.py", &BASE[..cut]).unwrap_err();
    check(&e, 13, 67, "unterminated string");
}

#[test]
fn bad_dtype() {
    let e = err("dtype=DataType.Float)", "dtype=DataType.Flaot)");
    check(&e, 6, 43, "unknown dtype DataType.Flaot; supported: DataType.Bool, DataType.Int32, DataType.Int, DataType.Index,");
    let e = err("torch.float32", "torch.float33");
    check(
        &e,
        13,
        45,
        "unknown dtype torch.float33; supported: torch.bool, torch.int32, torch.int64,",
    );
    let e = err("dtype=DataType.Float)", "dtype=3)");
    check(
        &e,
        6,
        43,
        "expected a dtype such as `DataType.Float`, found `3`",
    );
}

#[test]
fn ir_errors_carry_the_statement() {
    let e = err("mul(tv1, 0.5)", "mul(tv1, tv0)");
    check(
        &e,
        7,
        11,
        "fd.ops.mul: operand shapes [[4], [4, 8]] cannot be broadcast together",
    );
    assert!(matches!(e.kind, ErrorKind::Ir(_)));
    let e = err("dims=[1]", "dims=[2]");
    check(
        &e,
        6,
        11,
        "fd.ops.sum: dim 2 is out of range for a tensor of rank 2",
    );
    let e = err("contiguity=[True, True]", "contiguity=[True]");
    check(
        &e,
        5,
        11,
        "fd.define_tensor: contiguity has 1 entries for shape [4, 8]",
    );
}

/// Extents and widths near i64's limits once overflowed inside the IR's
/// shape inference (a panic with overflow checks, a wrong shape without).
#[test]
fn huge_extents_are_errors() {
    let e = err(
        "mul(tv1, 0.5)",
        "reshape(tv0, new_shape=[4294967296, 4294967296, 2])",
    );
    check(
        &e,
        7,
        11,
        "fd.ops.reshape: cannot reshape [4, 8] (32 elements) to [4294967296, 4294967296, 2]",
    );
    let e = err("mul(tv1, 0.5)", "pad(tv1, [9223372036854775807, 1])");
    check(
        &e,
        7,
        11,
        "fd.ops.pad: pad widths (9223372036854775807, 1) make dim 0 of extent 4 too large",
    );
    let big = "    tv2 = fd.ops.full(shape=[9223372036854775807], fill_value=0.5, dtype=DataType.Float)\n    tv3 = fd.ops.cat([tv2, tv2], dim=0)";
    let e = err("    tv2 = fd.ops.mul(tv1, 0.5)", big);
    check(
        &e,
        8,
        11,
        "fd.ops.cat: the joined extent of dim 0 is too large",
    );
}

#[test]
fn slice_with_a_huge_step_reads() {
    let f = parse_script(
        "x.py",
        &BASE.replacen(
            "mul(tv1, 0.5)",
            "slice(tv0, [0, 0], [4, 8], [1, 9223372036854775807])",
            1,
        ),
    )
    .unwrap();
    assert_eq!(f.value(f.outputs[0]).shape, Some(vec![4, 1]));
}

/// exp of an Index scalar computes in Float, as for any integer (it once
/// computed in Int and reached an unreachable!() while folding).
#[test]
fn unary_float_op_of_an_index_scalar() {
    let body = "    c0 = fd.define_scalar(3, dtype=DataType.Index)\n    c1 = fd.ops.exp(c0)\n    tv2 = fd.ops.mul(tv1, c1)";
    let f = parse_script(
        "x.py",
        &BASE.replacen("    tv2 = fd.ops.mul(tv1, 0.5)", body, 1),
    )
    .unwrap();
    let c1 = f.values.iter().find(|v| v.name == "c1").unwrap();
    assert_eq!(c1.dtype, fusebench_ir::DType::Float);
    assert_eq!(
        c1.constant,
        Some(fusebench_ir::Literal::Float((3f64).exp() as f32 as f64))
    );
}

#[test]
fn structure_errors() {
    let e = err(
        "from nvfuser_direct import FusionDefinition, DataType\n",
        "",
    );
    check(
        &e,
        3,
        1,
        "expected `from nvfuser import FusionDefinition, DataType` (legacy)",
    );
    let e = err("    tv2 = fd", "      tv2 = fd");
    check(
        &e,
        7,
        1,
        "indentation differs from the first line of the body",
    );
    let e = err("tv2 = fd.ops.mul", "tv2, tv3 = fd.ops.mul");
    check(
        &e,
        7,
        5,
        "fd.ops.mul returns one value; assign it to one name",
    );
    let e = err(
        "tv1 = fd.ops.sum(tv0, dims=[1], dtype=DataType.Float)",
        "tv1 = fd.ops.welford(tv0, dims=[1])",
    );
    check(
        &e,
        6,
        5,
        "fd.ops.welford returns 3 values; assign them as `a, b, c = ...`",
    );
    let e = err("tv2 = fd.ops.mul", "fd = fd.ops.mul");
    check(
        &e,
        7,
        5,
        "assigning to `fd` would hide the FusionDefinition",
    );
    let e = err("    tv2 = fd.ops.mul(tv1, 0.5)", "    tv2 = tv1");
    check(&e, 7, 11, "expected a call of fd.ops.<op>, fd.define_tensor, fd.define_scalar or fd.add_output, found `tv1`");
    let e = err("fd.add_output", "fd.add_outptu");
    check(&e, 8, 8, "unknown method fd.add_outptu; supported: define_tensor, define_scalar, define_constant, define_vector, add_output, ops.<op>");
    let e = err("    nvfuser_fusion(fd)", "    other(fd)");
    check(
        &e,
        10,
        5,
        "expected `nvfuser_fusion(fd)`, found `other(fd)`",
    );
    let e = err("fd.execute(inputs)", "fd.execute(input)");
    check(&e, 15, 12, "`input` is not defined");
    let e = err("0.5)", "0.5 * 2)");
    check(
        &e,
        7,
        31,
        "expected `,` or `)` to close the `(` at 7:21, found `*`",
    );
    let e = err("0.5)", "1.5e)");
    check(&e, 7, 27, "invalid number literal `1.5e`");
    let e = err("0.5)", "99999999999999999999)");
    check(
        &e,
        7,
        27,
        "integer 99999999999999999999 does not fit in 64 bits",
    );
    let e = err("dims=[1]", "dims=[1], dims=[0]");
    check(&e, 6, 37, "keyword argument `dims` is given twice");
    let e = err("tv1, 0.5)", "lhs=tv1, rhs=0.5, x=1)");
    check(
        &e,
        7,
        40,
        "unknown keyword argument `x` for fd.ops.mul; supported: lhs, rhs",
    );
    let e = err("tv1, 0.5)", "tv1, 0.5, 1)");
    check(&e, 7, 32, "fd.ops.mul takes at most 2 positional arguments");
    let e = err("tv1, 0.5)", "tv1)");
    check(&e, 7, 11, "fd.ops.mul is missing the argument `rhs`");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("{}0.5{}", "(".repeat(5000), ")".repeat(5000));
    let e = err("0.5", &deep);
    assert!(
        e.to_string()
            .contains("expression nested more than 100 levels deep"),
        "{e}"
    );
    let e = err("0.5", &"-".repeat(5000));
    assert!(e.to_string().contains("nested more than"), "{e}");
}

#[test]
fn unreadable_file() {
    let e = parse_file(std::path::Path::new("/nonexistent/x.py")).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(matches!(e.kind, ErrorKind::Io(_)));
    assert!(
        e.to_string()
            .starts_with("/nonexistent/x.py: cannot read the file: "),
        "{e}"
    );
}

#[test]
fn display_has_source_and_caret() {
    let e = err("mul(tv1,", "mul(tv9,");
    let shown = e.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "x.py:7:22: `tv9` is not defined");
    assert_eq!(lines[2], "7 |     tv2 = fd.ops.mul(tv9, 0.5)");
    assert_eq!(lines[3], "  |                      ^^^");
}
