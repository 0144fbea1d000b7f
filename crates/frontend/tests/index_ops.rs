//! The indexing and ordering ops: both syntaxes parse with nvFuser's keyword
//! names and defaults, infer nvFuser's shapes and dtypes, and print back to a
//! script that parses to the same fusion.

use fusebench_frontend::{parse_script, print_script};
use fusebench_ir::{DType, Fusion, IndexOp, Op};

const DIRECT: &str = r#"
import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[4, 6], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv1 = fd.define_tensor(shape=[4, 2], contiguity=[True, True], dtype=DataType.Int, is_cpu=False)
    tv2 = fd.define_tensor(shape=[3], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    tv3 = fd.define_tensor(shape=[10, 6], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    tv4 = fd.define_tensor(shape=[3, 6], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    s0 = fd.define_scalar(2, dtype=DataType.Int)
    tv5 = fd.ops.iota(6)
    tv6 = fd.ops.iota(5, 1.5, 0.5, dtype=DataType.Float)
    tv7 = fd.ops.triu(tv0)
    tv8 = fd.ops.triu(tv0, diagonal=-1)
    tv9 = fd.ops.take_along_axis(tv0, tv1, dim=1)
    tv10 = fd.ops.gather(tv0, tv1, -1)
    tv11 = fd.ops.select(tv0, s0, dim=0)
    tv12 = fd.ops.scatter(tv0, tv1, tv9, 1)
    tv13 = fd.ops.scatter(tv0, tv1, 7.0, dim=1)
    tv22 = fd.ops.cast(tv4, DataType.BFloat16)
    tv14 = fd.ops.index_put_accumulate(tv3, tv2, tv22)
    tv15, tv16 = fd.ops.topk(tv0, s0)
    tv17, tv18 = fd.ops.topk(tv0, 3, dim=0, largest=False, sorted=True)
    tv19 = fd.ops.argsort(tv0, dim=-1, descending=True, stable=True)
    tv20 = fd.ops.embedding_fwd(tv2, tv3)
    tv21 = fd.ops.embedding_fwd(tv2, tv3, padding_idx=0, max_norm=1.0, norm_type=2.0)
    fd.add_output(tv5)
    fd.add_output(tv6)
    fd.add_output(tv7)
    fd.add_output(tv8)
    fd.add_output(tv9)
    fd.add_output(tv10)
    fd.add_output(tv11)
    fd.add_output(tv12)
    fd.add_output(tv13)
    fd.add_output(tv14)
    fd.add_output(tv15)
    fd.add_output(tv16)
    fd.add_output(tv17)
    fd.add_output(tv18)
    fd.add_output(tv19)
    fd.add_output(tv20)
    fd.add_output(tv21)
with FusionDefinition() as fd:
    nvfuser_fusion(fd)
"#;

const LEGACY: &str = r#"
import torch
from nvfuser import FusionDefinition, DataType

def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[5, 7], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)
    T1 = fd.define_tensor(shape=[1, 3], contiguity=[None, True], dtype=DataType.Int, is_cpu=False)
    S2 = fd.define_scalar(7, dtype=DataType.Int)
    S3 = fd.define_scalar(0, dtype=DataType.Int)
    S4 = fd.define_scalar(1, dtype=DataType.Int)
    T5 = fd.ops.iota(S2, S3, S4, dtype=DataType.Int)
    T6 = fd.ops.triu(input=T0, diagonal=1)
    T7 = fd.ops.take_along_axis(arg1=T0, index=T1, dim=1)
    T8 = fd.ops.gather(T0, T1, 1)
    T9 = fd.ops.scatter(arg1=T0, index=T1, src=T8, dim=1)
    T10 = fd.ops.argsort(T0, 1)
    T11, T12 = fd.ops.topk(T0, S4, -1, True, False)
    fd.add_output(T5)
    fd.add_output(T6)
    fd.add_output(T7)
    fd.add_output(T9)
    fd.add_output(T10)
    fd.add_output(T11)
    fd.add_output(T12)

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)
"#;

fn shape_dtype(f: &Fusion, name: &str) -> (Vec<usize>, DType) {
    let v = f.values.iter().find(|v| v.name == name).expect(name);
    (v.shape.clone().unwrap(), v.dtype)
}

fn index_ops(f: &Fusion) -> Vec<&IndexOp> {
    f.nodes
        .iter()
        .filter_map(|n| match &n.op {
            Op::Index(o) => Some(o),
            _ => None,
        })
        .collect()
}

#[track_caller]
fn round_trip(src: &str) {
    let f = parse_script("t.py", src).unwrap();
    let text = print_script(&f);
    let g = parse_script("printed.py", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(f.nodes, g.nodes, "{text}");
    assert_eq!(f.outputs, g.outputs);
    let types = |f: &Fusion| {
        f.values
            .iter()
            .map(|v| (v.shape.clone(), v.dtype))
            .collect::<Vec<_>>()
    };
    assert_eq!(types(&f), types(&g));
    assert_eq!(print_script(&g), text);
    // The JSON form keeps the family's ops too.
    let j = Fusion::from_json(&f.to_json()).unwrap();
    assert_eq!(j.nodes, f.nodes);
}

#[test]
fn direct_syntax_parses_with_defaults_and_infers_shapes() {
    let f = parse_script("t.py", DIRECT).unwrap();
    assert_eq!(shape_dtype(&f, "tv5"), (vec![6], DType::Int));
    assert_eq!(shape_dtype(&f, "tv6"), (vec![5], DType::Float));
    assert_eq!(shape_dtype(&f, "tv7"), (vec![4, 6], DType::Float));
    assert_eq!(shape_dtype(&f, "tv9"), (vec![4, 2], DType::Float));
    assert_eq!(shape_dtype(&f, "tv10"), (vec![4, 2], DType::Float));
    assert_eq!(shape_dtype(&f, "tv11"), (vec![6], DType::Float));
    assert_eq!(shape_dtype(&f, "tv12"), (vec![4, 6], DType::Float));
    assert_eq!(shape_dtype(&f, "tv14"), (vec![10, 6], DType::BFloat16));
    assert_eq!(shape_dtype(&f, "tv15"), (vec![4, 2], DType::Float));
    assert_eq!(shape_dtype(&f, "tv16"), (vec![4, 2], DType::Int));
    assert_eq!(shape_dtype(&f, "tv17"), (vec![3, 6], DType::Float));
    assert_eq!(shape_dtype(&f, "tv19"), (vec![4, 6], DType::Int));
    assert_eq!(shape_dtype(&f, "tv20"), (vec![3, 6], DType::BFloat16));
    let ops = index_ops(&f);
    // Defaults: triu diagonal 0, topk dim -1 largest sorted=False.
    assert!(matches!(ops[2], IndexOp::Triu { diagonal: 0, .. }));
    assert!(matches!(ops[3], IndexOp::Triu { diagonal: -1, .. }));
    assert!(matches!(
        ops[10],
        IndexOp::Topk {
            dim: -1,
            largest: true,
            sorted: false,
            ..
        }
    ));
    assert!(matches!(
        ops[11],
        IndexOp::Topk {
            dim: 0,
            largest: false,
            sorted: true,
            ..
        }
    ));
    assert!(matches!(
        ops[12],
        IndexOp::Argsort {
            dim: -1,
            descending: true,
            stable: true,
            ..
        }
    ));
    match ops[14] {
        IndexOp::EmbeddingFwd {
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
            ..
        } => {
            assert!(padding_idx.is_some() && max_norm.is_some() && norm_type.is_some());
            assert!(scale_grad_by_freq.is_none() && sparse.is_none());
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn legacy_syntax_parses_arg1_and_input_keywords() {
    let f = parse_script("t.py", LEGACY).unwrap();
    assert_eq!(shape_dtype(&f, "T5"), (vec![7], DType::Int));
    // take_along_axis broadcasts the index's extent-1 dim against the input.
    assert_eq!(shape_dtype(&f, "T7"), (vec![5, 3], DType::Half));
    // gather takes the index's shape.
    assert_eq!(shape_dtype(&f, "T8"), (vec![1, 3], DType::Half));
    assert_eq!(shape_dtype(&f, "T10"), (vec![5, 7], DType::Int));
    assert_eq!(shape_dtype(&f, "T11"), (vec![5, 1], DType::Half));
    assert_eq!(shape_dtype(&f, "T12"), (vec![5, 1], DType::Int));
}

#[test]
fn both_syntaxes_round_trip() {
    round_trip(DIRECT);
    round_trip(LEGACY);
    let legacy = print_script(&parse_script("t.py", LEGACY).unwrap());
    assert!(
        legacy.contains("fd.ops.take_along_axis(T0, T1, dim=1)"),
        "{legacy}"
    );
    let direct = print_script(&parse_script("t.py", DIRECT).unwrap());
    assert!(
        direct.contains("fd.ops.topk(tv0, s0, dim=-1, largest=True, sorted=False)"),
        "{direct}"
    );
}

#[track_caller]
fn refused(body: &str, want: &str) {
    let src = format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n    tv0 = fd.define_tensor(shape=[4, 6], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    tv1 = fd.define_tensor(shape=[4, 2], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    s0 = fd.define_scalar(dtype=DataType.Int)\n    {body}\nwith FusionDefinition() as fd:\n    f(fd)\n"
    );
    let e = parse_script("t.py", &src).unwrap_err().to_string();
    assert!(e.contains(want), "{e}");
    assert!(e.contains("t.py:7:") || e.contains("t.py:8:"), "{e}");
}

#[test]
fn bad_uses_are_refused_with_the_reason() {
    refused(
        "tv2 = fd.ops.gather(tv0, tv1, 1)",
        "must be an integer tensor",
    );
    refused("tv2, tv3 = fd.ops.topk(tv0, s0)", "must be a constant");
    refused("tv2, tv3 = fd.ops.topk(tv0, 7)", "k 7 is outside [0, 6]");
    refused("tv2 = fd.ops.select(tv0, 4, dim=0)", "outside [0, 4)");
    refused("tv2 = fd.ops.iota(s0)", "must be a constant");
    refused("tv2 = fd.ops.iota(3, 0.5)", "start");
    refused(
        "tv2 = fd.ops.iota(3)\n    tv3 = fd.ops.triu(tv2)",
        "2 or more dims",
    );
    refused("tv2 = fd.ops.argsort(tv0, dim=2)", "out of range");
    refused("tv2, tv3 = fd.ops.topk(tv0, 1, bogus=3)", "bogus");
}
