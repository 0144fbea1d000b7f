//! The bytes a fusion must read from its inputs: broadcast inputs once, a
//! gather table by the rows its ids select, a sliced input by what the slices
//! cover, everything else whole.

use fusebench_ir::traffic::{Counted, GatherRead};
use fusebench_ir::{traffic, DType, FusionBuilder, InputShape, Literal, ValueId};

const BF16: u64 = 2;

/// The RMSNorm of the original report: x [4, 1024, 4096] bf16 and a weight
/// [4096] broadcast inside the fusion.
fn rmsnorm(fd: &mut FusionBuilder) {
    let x = fd.tensor(&[4, 1024, 4096], DType::BFloat16).unwrap();
    let w = fd.tensor(&[4096], DType::BFloat16).unwrap();
    let xf = fd.cast(x, DType::Float).unwrap();
    let wf = fd.cast(w, DType::Float).unwrap();
    let wb = fd.broadcast_in_dim(wf, &[4, 1024, 4096], &[2]).unwrap();
    let sq = fd.mul(xf, xf).unwrap();
    let ss = fd.sum(sq, &[2], true, None).unwrap();
    let ssb = fd.expand(ss, &[4, 1024, 4096]).unwrap();
    let y = fd.mul(xf, ssb).unwrap();
    let y = fd.mul(y, wb).unwrap();
    let y = fd.cast(y, DType::BFloat16).unwrap();
    fd.add_output(y).unwrap();
}

/// A table of `rows` x 1024 bf16 gathered along dim 0 by `ids` Int ids
/// that reach the index through a reshape and a broadcast, as Thunder's
/// embedding fusions do; the rows are an output.
fn embedding(rows: i64, ids: i64) -> fusebench_ir::Fusion {
    let mut fd = FusionBuilder::new();
    let idx = fd.tensor(&[2, ids / 2], DType::Int).unwrap();
    let table = fd.tensor(&[rows, 1024], DType::BFloat16).unwrap();
    let flat = fd.reshape(idx, &[ids]).unwrap();
    let col = fd.broadcast(flat, &[false, true]).unwrap();
    let got = fd.index_select(table, col, 0).unwrap();
    let out = fd.reshape(got, &[2, ids / 2, 1024]).unwrap();
    fd.add_output(out).unwrap();
    fd.finish()
}

fn gathered(c: &Counted) -> &[GatherRead] {
    match c {
        Counted::Gathered(g) => g,
        other => panic!("not counted as a gather: {other:?}"),
    }
}

#[test]
fn rmsnorm_counts_what_the_engine_counted() {
    let mut fd = FusionBuilder::new();
    rmsnorm(&mut fd);
    let f = fd.finish();
    let t = traffic(&f, &[], &[]);
    let expected = (4 * 1024 * 4096 + 4096) * BF16;
    assert_eq!(t.read, expected);
    assert_eq!(t.addressed(), expected);
    assert!(t.inputs.iter().all(|i| i.counted == Counted::Whole));
    assert_eq!(
        t.describe(100),
        "inputs as addressed (stride-0 dims once), each once however many ops read it; \
         plus 100 B of outputs written"
    );
}

#[test]
fn an_expanded_input_counts_its_broadcast_dims_once() {
    // The weight handed over already expanded to [4, 1024, 4096] with
    // strides [0, 0, 1]: memory holds 4096 elements, not 16 Mi.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[4, 1024, 4096], DType::BFloat16).unwrap();
    let w = fd
        .define_tensor(
            None,
            &[4, 1024, 4096],
            vec![None, None, Some(true)],
            DType::BFloat16,
            &[],
            false,
        )
        .unwrap();
    let y = fd.mul(x, w).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish();
    let layouts = [
        Some(InputShape::dense(DType::BFloat16, &[4, 1024, 4096])),
        Some(InputShape {
            dtype: DType::BFloat16,
            shape: vec![4, 1024, 4096],
            strides: vec![0, 0, 1],
        }),
    ];
    let t = traffic(&f, &layouts, &[]);
    assert_eq!(t.inputs[1].bytes, 4096 * BF16);
    assert_eq!(t.read, (4 * 1024 * 4096 + 4096) * BF16);
}

#[test]
fn an_input_read_by_several_ops_counts_once() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[256, 512], DType::Float).unwrap();
    let a = fd.mul(x, x).unwrap();
    let b = fd.add(a, x).unwrap();
    let s = fd.sum(x, &[1], false, None).unwrap();
    fd.add_output(b).unwrap();
    fd.add_output(s).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.read, 256 * 512 * 4);
}

#[test]
fn a_gather_reads_the_rows_its_ids_select() {
    let f = embedding(50_000, 512);
    let t = traffic(&f, &[], &[]);
    let table = &t.inputs[1];
    assert_eq!(table.whole, 50_000 * 1024 * BF16);
    assert_eq!(table.bytes, 512 * 1024 * BF16);
    let g = gathered(&table.counted);
    assert_eq!((g[0].ids, g[0].rows, g[0].of_rows), (512, 512, 50_000));
    // The ids themselves are read whole.
    assert_eq!(t.inputs[0].bytes, 512 * 8);
    assert_eq!(t.read, 512 * 1024 * BF16 + 512 * 8);
    // Counting the whole table, as before, gives about 98 times as much.
    assert!(t.addressed() > 90 * t.read);
    let line = t.describe(0);
    assert!(
        line.contains(
            "input 1 (tv1 [50000, 1024] BFloat16): index_select reads 512 of 50000 rows (512 ids)"
        ),
        "{line}"
    );
}

#[test]
fn distinct_ids_read_fewer_rows() {
    let f = embedding(50_000, 512);
    let t = traffic(&f, &[], &[Some(300), None]);
    let table = &t.inputs[1];
    assert_eq!(table.bytes, 300 * 1024 * BF16);
    let g = gathered(&table.counted);
    assert_eq!((g[0].distinct, g[0].rows), (Some(300), 300));
    assert!(t
        .describe(0)
        .contains("300 of 50000 rows (300 distinct of 512 ids)"));
    // A distinct count for the table (not an index) changes nothing.
    assert_eq!(
        traffic(&f, &[], &[None, Some(7)]).read,
        traffic(&f, &[], &[]).read
    );
}

#[test]
fn a_gather_never_counts_more_than_the_table() {
    // 4096 ids into a table of 1000 rows read at most the 1000 rows.
    let f = embedding(1000, 4096);
    let t = traffic(&f, &[], &[]);
    assert_eq!(t.inputs[1].bytes, 1000 * 1024 * BF16);
    assert_eq!(gathered(&t.inputs[1].counted)[0].rows, 1000);
}

#[test]
fn a_computed_index_counts_its_ids() {
    // ids + 1 is not an input: its distinct values are unknown, so every id
    // counts a row, whatever is known of the input it came from.
    let mut fd = FusionBuilder::new();
    let ids = fd.tensor(&[512], DType::Int).unwrap();
    let table = fd.tensor(&[50_000, 1024], DType::BFloat16).unwrap();
    let one = fd.literal(Literal::Int(1));
    let shifted = fd.add(ids, one).unwrap();
    let got = fd.index_select(table, shifted, 0).unwrap();
    fd.add_output(got).unwrap();
    let f = fd.finish();
    let t = traffic(&f, &[], &[Some(3), None]);
    assert_eq!(t.inputs[1].bytes, 512 * 1024 * BF16);
    assert_eq!(gathered(&t.inputs[1].counted)[0].distinct, None);
}

#[test]
fn an_index_made_inside_the_fusion_counts_its_ids() {
    // No input feeds the index at all.
    let mut fd = FusionBuilder::new();
    let table = fd.tensor(&[50_000, 64], DType::Float).unwrap();
    let zeros = fd.full(&[256], Literal::Int(0), DType::Int).unwrap();
    let got = fd.index_select(table, zeros, 0).unwrap();
    fd.add_output(got).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.read, 256 * 64 * 4);
}

#[test]
fn a_table_also_read_elsewhere_counts_whole() {
    let mut fd = FusionBuilder::new();
    let ids = fd.tensor(&[512], DType::Int).unwrap();
    let table = fd.tensor(&[50_000, 1024], DType::BFloat16).unwrap();
    let got = fd.index_select(table, ids, 0).unwrap();
    let total = fd.sum(table, &[0, 1], false, None).unwrap();
    fd.add_output(got).unwrap();
    fd.add_output(total).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.inputs[1].bytes, 50_000 * 1024 * BF16);
    match &t.inputs[1].counted {
        Counted::WholeBecause(why) => {
            assert_eq!(why, "read in part by index_select but whole by sum")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_table_returned_as_an_output_is_read_whole() {
    let mut fd = FusionBuilder::new();
    let ids = fd.tensor(&[512], DType::Int).unwrap();
    let table = fd.tensor(&[50_000, 1024], DType::BFloat16).unwrap();
    let f32_table = fd.cast(table, DType::Float).unwrap();
    let got = fd.index_select(f32_table, ids, 0).unwrap();
    fd.add_output(got).unwrap();
    fd.add_output(f32_table).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.inputs[1].bytes, 50_000 * 1024 * BF16);
}

#[test]
fn a_table_cast_and_permuted_before_the_gather_counts_rows_of_the_input() {
    // table [1024, 50000] bf16, permuted to [50000, 1024] and cast to float:
    // 512 rows of the permuted table are 512 columns of the input, read in
    // its own dtype.
    let mut fd = FusionBuilder::new();
    let ids = fd.tensor(&[512], DType::Int).unwrap();
    let table = fd.tensor(&[1024, 50_000], DType::BFloat16).unwrap();
    let p = fd.permute(table, &[1, 0]).unwrap();
    let c = fd.cast(p, DType::Float).unwrap();
    let got = fd.index_select(c, ids, 0).unwrap();
    fd.add_output(got).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.inputs[1].bytes, 512 * 1024 * BF16);
}

#[test]
fn a_table_expanded_before_the_gather_counts_whole() {
    // The gather selects along a dim the expand made: every id reads the
    // whole input, which the rows of the expanded value would undercount.
    let mut fd = FusionBuilder::new();
    let ids = fd.tensor(&[8], DType::Int).unwrap();
    let row = fd.tensor(&[1, 4096], DType::Float).unwrap();
    let wide = fd.expand(row, &[1000, 4096]).unwrap();
    let got = fd.index_select(wide, ids, 0).unwrap();
    fd.add_output(got).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.inputs[1].bytes, 4096 * 4);
    assert!(matches!(&t.inputs[1].counted, Counted::WholeBecause(w) if w.contains("expand")));
}

#[test]
fn a_table_whose_selected_dim_has_stride_0_counts_one_row() {
    let f = embedding(50_000, 512);
    let layouts = [
        None,
        Some(InputShape {
            dtype: DType::BFloat16,
            shape: vec![50_000, 1024],
            strides: vec![0, 1],
        }),
    ];
    let t = traffic(&f, &layouts, &[]);
    assert_eq!(t.inputs[1].bytes, 1024 * BF16);
}

#[test]
fn slices_count_what_they_cover() {
    // A fused qkv [2, 1024, 3072] read as q, k and v: all of it, once.
    let mut fd = FusionBuilder::new();
    let qkv = fd.tensor(&[2, 1024, 3072], DType::BFloat16).unwrap();
    let half = fd.tensor(&[2, 1024, 3072], DType::BFloat16).unwrap();
    for (a, b) in [(0, 2048), (2048, 2560), (2560, 3072)] {
        let s = fd.slice(qkv, &[0, 0, a], &[2, 1024, b]).unwrap();
        neg_output(&mut fd, s);
    }
    // Two overlapping slices of the first half of the last dim: 1536 columns.
    for (a, b) in [(0, 1024), (512, 1536)] {
        let s = fd.slice(half, &[0, 0, a], &[2, 1024, b]).unwrap();
        neg_output(&mut fd, s);
    }
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.inputs[0].bytes, 2 * 1024 * 3072 * BF16);
    assert_eq!(
        t.inputs[0].counted,
        Counted::Sliced {
            slices: 3,
            elements: 2 * 1024 * 3072
        }
    );
    assert_eq!(t.inputs[1].bytes, 2 * 1024 * 1536 * BF16);
    // Only the input read in part is worth a word.
    let line = t.describe(0);
    assert!(!line.contains("input 0"), "{line}");
    assert!(
        line.contains("3145728 elements under 2 slice(s) = 6291456 B, not the whole 12582912 B")
    );
}

/// Adds -v as an output: an op that reads all of `v`.
fn neg_output(fd: &mut FusionBuilder, v: ValueId) {
    let n = fd.unary(fusebench_ir::UnaryOp::Neg, v).unwrap();
    fd.add_output(n).unwrap();
}

#[test]
fn a_strided_slice_counts_its_elements() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[1000, 64], DType::Float).unwrap();
    let s = fd
        .op(
            fusebench_ir::Op::Slice {
                x,
                start: vec![0, 0],
                end: vec![1000, 64],
                strides: vec![10, 1],
                manual_normalization: false,
            },
            &[],
        )
        .unwrap()[0];
    neg_output(&mut fd, s);
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.read, 100 * 64 * 4);
}

#[test]
fn a_slice_and_a_whole_read_count_whole() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[1000, 64], DType::Float).unwrap();
    let s = fd.slice(x, &[0, 0], &[10, 64]).unwrap();
    let y = fd.cast(x, DType::BFloat16).unwrap();
    neg_output(&mut fd, s);
    fd.add_output(y).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.read, 1000 * 64 * 4);
}

#[test]
fn inputs_no_op_reads_count_nothing() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[1000, 64], DType::Float).unwrap();
    let _unused = fd.tensor(&[1 << 20], DType::Float).unwrap();
    let passed = fd.tensor(&[1 << 20], DType::Float).unwrap();
    neg_output(&mut fd, x);
    fd.add_output(passed).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.read, 1000 * 64 * 4);
    assert_eq!(t.inputs[1].counted, Counted::NotRead);
    assert_eq!(t.inputs[2].counted, Counted::NotRead);
    assert!(t
        .describe(0)
        .contains("input 2 (tv2 [1048576] Float): not read"));
}

#[test]
fn scalar_inputs_are_skipped() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[64], DType::Float).unwrap();
    let s = fd.define_scalar(None, None, DType::Double);
    let y = fd.mul(x, s).unwrap();
    fd.add_output(y).unwrap();
    let t = traffic(&fd.finish(), &[], &[]);
    assert_eq!(t.inputs.len(), 1);
    assert_eq!(t.read, 256);
}

/// embedding_fwd reads one weight row per id, like index_select along dim 0.
#[test]
fn embedding_fwd_reads_the_rows_its_ids_select() {
    use fusebench_ir::{IndexOp, Op};
    let mut fd = FusionBuilder::new();
    let ids = fd.tensor(&[2, 8], DType::Int).unwrap();
    let w = fd.tensor(&[50000, 64], DType::BFloat16).unwrap();
    let out = fd
        .op(
            Op::Index(IndexOp::EmbeddingFwd {
                input: ids,
                weight: w,
                padding_idx: None,
                max_norm: None,
                norm_type: None,
                scale_grad_by_freq: None,
                sparse: None,
            }),
            &[],
        )
        .unwrap()[0];
    fd.add_output(out).unwrap();
    let f = fd.finish();
    let t = traffic(&f, &[], &[]);
    // 16 ids of 64 bf16 each, plus the ids themselves.
    assert_eq!(t.read, 16 * 64 * BF16 + 16 * 8);
    assert_eq!(gathered(&t.inputs[1].counted).len(), 1);
}

#[test]
fn what_only_views_return_is_not_read() {
    // A fused qkv [2, 1024, 3072]: q and k computed on, v returned as a view
    // (slice, reshape, permute): the GPU plan's alias, read by no kernel.
    let mut fd = FusionBuilder::new();
    let qkv = fd.tensor(&[2, 1024, 3072], DType::BFloat16).unwrap();
    for (a, b) in [(0, 2048), (2048, 2560)] {
        let s = fd.slice(qkv, &[0, 0, a], &[2, 1024, b]).unwrap();
        neg_output(&mut fd, s);
    }
    let v = fd.slice(qkv, &[0, 0, 2560], &[2, 1024, 3072]).unwrap();
    let v = fd.reshape(v, &[2, 1024, 8, 64]).unwrap();
    let v = fd.permute(v, &[0, 2, 1, 3]).unwrap();
    fd.add_output(v).unwrap();
    let f = fd.finish();
    assert_eq!(traffic(&f, &[], &[]).read, 2 * 1024 * 3072 * BF16);
    let t = fusebench_ir::traffic_with_views(&f, &[], &[], &[v]);
    assert_eq!(t.read, 2 * 1024 * 2560 * BF16);
    assert_eq!(t.inputs[0].counted, Counted::Sliced { slices: 2, elements: 2 * 1024 * 2560 });
    // An input returned whole as a view is not read at all.
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[4, 6], DType::Float).unwrap();
    let y = fd.permute(x, &[1, 0]).unwrap();
    fd.add_output(y).unwrap();
    let f = fd.finish();
    assert_eq!(traffic(&f, &[], &[]).inputs[0].counted, Counted::Whole);
    let t = fusebench_ir::traffic_with_views(&f, &[], &[], &[y]);
    assert_eq!((t.read, &t.inputs[0].counted), (0, &Counted::NotRead));
}
