//! The indexing and ordering ops on the CPU against values worked out by hand
//! from PyTorch's definitions (torch.gather, take_along_dim, scatter,
//! index_put(accumulate=True), topk, argsort, embedding).

use fusebench_frontend::parse_script;
use fusebench_ir::DType;
use fusebench_reference::{run, Arg, Tensor};

fn t(dtype: DType, shape: &[usize], v: &[f64]) -> Arg {
    Arg::Tensor(Tensor::from_f64s(dtype, shape, v).unwrap())
}

fn ti(dtype: DType, shape: &[usize], v: &[i64]) -> Arg {
    Arg::Tensor(Tensor::from_i64s(dtype, shape, v).unwrap())
}

/// A direct-syntax script of `defs` (define_tensor lines) and `body`, whose
/// last line's name is the output (or `outs`).
fn script(defs: &[(&str, &str)], body: &str, outs: &[&str]) -> String {
    let mut s = String::from("import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n");
    for (name, def) in defs {
        s.push_str(&format!(
            "    {name} = fd.define_tensor({def}, is_cpu=False)\n"
        ));
    }
    for l in body.lines() {
        s.push_str(&format!("    {}\n", l.trim()));
    }
    for o in outs {
        s.push_str(&format!("    fd.add_output({o})\n"));
    }
    s.push_str("with FusionDefinition() as fd:\n    f(fd)\n");
    s
}

fn exec(
    defs: &[(&str, &str)],
    body: &str,
    outs: &[&str],
    args: &[Arg],
) -> Result<Vec<Tensor>, String> {
    let f = parse_script("t.py", &script(defs, body, outs)).map_err(|e| e.to_string())?;
    run(&f, args).map_err(|e| e.to_string())
}

#[track_caller]
fn eq_f(t: &Tensor, dtype: DType, shape: &[usize], want: &[f64]) {
    assert_eq!((t.dtype(), t.shape()), (dtype, shape));
    let got = t.to_f64_vec();
    assert!(
        got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())),
        "got {got:?}, want {want:?}"
    );
}

#[track_caller]
fn eq_i(t: &Tensor, dtype: DType, shape: &[usize], want: &[i64]) {
    assert_eq!((t.dtype(), t.shape()), (dtype, shape));
    assert_eq!(t.to_i64_vec(), want);
}

const F23: (&str, &str) = (
    "tv0",
    "shape=[2, 3], contiguity=[True, True], dtype=DataType.Float",
);

#[test]
fn iota_int_and_float() {
    let o = exec(
        &[],
        "a = fd.ops.iota(4)\nb = fd.ops.iota(3, 2, -3, dtype=DataType.Int32)\nc = fd.ops.iota(3, 0.5, 0.25, dtype=DataType.BFloat16)",
        &["a", "b", "c"],
        &[],
    )
    .unwrap();
    eq_i(&o[0], DType::Int, &[4], &[0, 1, 2, 3]);
    eq_i(&o[1], DType::Int32, &[3], &[2, -1, -4]);
    eq_f(&o[2], DType::BFloat16, &[3], &[0.5, 0.75, 1.0]);
}

#[test]
fn triu_with_diagonals_and_batch() {
    let x: Vec<f64> = (1..=6).map(|v| v as f64).collect();
    let o = exec(
        &[F23],
        "a = fd.ops.triu(tv0)\nb = fd.ops.triu(tv0, diagonal=-1)\nc = fd.ops.triu(tv0, diagonal=2)",
        &["a", "b", "c"],
        &[t(DType::Float, &[2, 3], &x)],
    )
    .unwrap();
    eq_f(&o[0], DType::Float, &[2, 3], &[1., 2., 3., 0., 5., 6.]);
    eq_f(&o[1], DType::Float, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    eq_f(&o[2], DType::Float, &[2, 3], &[0., 0., 3., 0., 0., 0.]);
    // Batched: the mask repeats over leading dims; ints keep their dtype.
    let o = exec(
        &[(
            "tv0",
            "shape=[2, 2, 2], contiguity=[True, True, True], dtype=DataType.Int",
        )],
        "a = fd.ops.triu(tv0)",
        &["a"],
        &[ti(DType::Int, &[2, 2, 2], &[1, 2, 3, 4, 5, 6, 7, 8])],
    )
    .unwrap();
    eq_i(&o[0], DType::Int, &[2, 2, 2], &[1, 2, 0, 4, 5, 6, 0, 8]);
}

#[test]
fn gather_and_take_along_axis() {
    // x = [[1,2,3],[4,5,6]]
    let x = t(DType::Float, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let idx = (
        "tv1",
        "shape=[2, 2], contiguity=[True, True], dtype=DataType.Int",
    );
    // torch.gather(x, 1, [[2,0],[1,1]]) = [[3,1],[5,5]]; along dim 0 with [[1,0],[0,1]] = [[4,2],[1,5]].
    let o = exec(
        &[F23, idx],
        "a = fd.ops.gather(tv0, tv1, 1)\nb = fd.ops.take_along_axis(tv0, tv1, dim=-1)",
        &["a", "b"],
        &[x.clone(), ti(DType::Int, &[2, 2], &[2, 0, 1, 1])],
    )
    .unwrap();
    eq_f(&o[0], DType::Float, &[2, 2], &[3., 1., 5., 5.]);
    eq_f(&o[1], DType::Float, &[2, 2], &[3., 1., 5., 5.]);
    let o = exec(
        &[F23, idx],
        "a = fd.ops.gather(tv0, tv1, 0)",
        &["a"],
        &[x.clone(), ti(DType::Int, &[2, 2], &[1, 0, 0, 1])],
    )
    .unwrap();
    eq_f(&o[0], DType::Float, &[2, 2], &[4., 2., 1., 5.]);
    // Int32 index of extent 1 broadcast over the rows: take_along_dim(x, [[2]], 1) = [[3],[6]].
    let idx1 = (
        "tv1",
        "shape=[1, 1], contiguity=[None, None], dtype=DataType.Int32",
    );
    let o = exec(
        &[F23, idx1],
        "a = fd.ops.take_along_axis(tv0, tv1, 1)",
        &["a"],
        &[x.clone(), ti(DType::Int32, &[1, 1], &[2])],
    )
    .unwrap();
    eq_f(&o[0], DType::Float, &[2, 1], &[3., 6.]);
    // Out of range: a clear error naming the op and the position.
    let e = exec(
        &[F23, idx],
        "a = fd.ops.gather(tv0, tv1, 1)",
        &["a"],
        &[x, ti(DType::Int, &[2, 2], &[0, 3, 1, 1])],
    )
    .unwrap_err();
    assert!(
        e.contains("gather") && e.contains("holds 3 at position 1") && e.contains("[0, 3)"),
        "{e}"
    );
}

#[test]
fn cross_entropy_pattern_picks_label_logits() {
    // logits [3, 4], labels [3]: loss_i = logsumexp(x_i) - x_i[label_i]; here
    // just the picked logits through broadcast_in_dim + take_along_axis.
    let o = exec(
        &[("tv0", "shape=[3, 4], contiguity=[True, True], dtype=DataType.BFloat16"), ("tv1", "shape=[3], contiguity=[True], dtype=DataType.Int")],
        "tv2 = fd.ops.broadcast_in_dim(tv1, shape=[3, 1], broadcast_dims=[0])\ntv3 = fd.ops.take_along_axis(tv0, tv2, 1)\ntv4 = fd.ops.squeeze(tv3, dims=[1])",
        &["tv4"],
        &[t(DType::BFloat16, &[3, 4], &(0..12).map(|v| v as f64).collect::<Vec<_>>()), ti(DType::Int, &[3], &[3, 0, 2])],
    )
    .unwrap();
    eq_f(&o[0], DType::BFloat16, &[3], &[3., 4., 10.]);
}

#[test]
fn select_with_constant_and_input_index() {
    let x = t(DType::Float, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let o = exec(
        &[F23],
        "a = fd.ops.select(tv0, 1, dim=0)\nb = fd.ops.select(tv0, 2, dim=-1)",
        &["a", "b"],
        std::slice::from_ref(&x),
    )
    .unwrap();
    eq_f(&o[0], DType::Float, &[3], &[4., 5., 6.]);
    eq_f(&o[1], DType::Float, &[2], &[3., 6.]);
    let src = "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n    tv0 = fd.define_tensor(shape=[2, 3], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    s0 = fd.define_scalar(dtype=DataType.Int)\n    a = fd.ops.select(tv0, s0, dim=1)\n    fd.add_output(a)\nwith FusionDefinition() as fd:\n    f(fd)\n";
    let f = parse_script("t.py", src).unwrap();
    let o = run(&f, &[x.clone(), Arg::Scalar(fusebench_ir::Literal::Int(1))]).unwrap();
    eq_f(&o[0], DType::Float, &[2], &[2., 5.]);
    let e = run(&f, &[x, Arg::Scalar(fusebench_ir::Literal::Int(3))])
        .unwrap_err()
        .to_string();
    assert!(e.contains("select") && e.contains("holds 3"), "{e}");
}

#[test]
fn scatter_tensor_and_scalar_src_last_duplicate_wins() {
    let x = t(DType::Float, &[2, 3], &[0.; 6]);
    let idx = (
        "tv1",
        "shape=[2, 2], contiguity=[True, True], dtype=DataType.Int",
    );
    let src = (
        "tv2",
        "shape=[2, 3], contiguity=[True, True], dtype=DataType.Float",
    );
    // Row 0 writes src[0][0]=1 at col 2 and src[0][1]=2 at col 0; row 1 writes
    // 4 then 5 at col 1: the later duplicate (5) wins.
    let o = exec(
        &[F23, idx, src],
        "a = fd.ops.scatter(tv0, tv1, tv2, 1)\nb = fd.ops.scatter(tv0, tv1, 9.0, dim=1)",
        &["a", "b"],
        &[
            x,
            ti(DType::Int, &[2, 2], &[2, 0, 1, 1]),
            t(DType::Float, &[2, 3], &[1., 2., 3., 4., 5., 6.]),
        ],
    )
    .unwrap();
    eq_f(&o[0], DType::Float, &[2, 3], &[2., 0., 1., 0., 5., 0.]);
    eq_f(&o[1], DType::Float, &[2, 3], &[9., 0., 9., 0., 9., 0.]);
}

#[test]
fn index_put_accumulate_adds_duplicates_and_negative_indices() {
    let src = "import torch\nfrom nvfuser import FusionDefinition, DataType\n\ndef f(fd : FusionDefinition) -> None :\n    T0 = fd.define_tensor(shape=[3, 2], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    T1 = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int, is_cpu=False)\n    T2 = fd.define_tensor(shape=[4, 2], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    T3 = fd.ops.index_put_accumulate(T0, T1, T2)\n    fd.add_output(T3)\n\nwith FusionDefinition() as fd:\n    f(fd)\n";
    let f = parse_script("t.py", src).unwrap();
    // acc = ones; rows 0, 2, 0, -1(=2) get [1,2], [3,4], [5,6], [7,8].
    let o = run(
        &f,
        &[
            t(DType::Float, &[3, 2], &[1.; 6]),
            ti(DType::Int, &[4], &[0, 2, 0, -1]),
            t(DType::Float, &[4, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]),
        ],
    )
    .unwrap();
    eq_f(&o[0], DType::Float, &[3, 2], &[7., 9., 1., 1., 11., 13.]);
    let e = run(
        &f,
        &[
            t(DType::Float, &[3, 2], &[1.; 6]),
            ti(DType::Int, &[4], &[0, 3, 0, 0]),
            t(DType::Float, &[4, 2], &[0.; 8]),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("index_put_accumulate") && e.contains("holds 3"),
        "{e}"
    );
}

#[test]
fn topk_largest_smallest_ties_nan_and_dims() {
    // Row 0 has a tie (3 at 1 and 3) and row 1 a NaN, which PyTorch ranks largest.
    let x = t(
        DType::Float,
        &[2, 4],
        &[1., 3., 2., 3., 0., f64::NAN, -1., 5.],
    );
    let def = (
        "tv0",
        "shape=[2, 4], contiguity=[True, True], dtype=DataType.Float",
    );
    let o = exec(
        &[def],
        "a, b = fd.ops.topk(tv0, 2, sorted=True)\nc, d = fd.ops.topk(tv0, 3, dim=1, largest=False, sorted=True)\ne, g = fd.ops.topk(tv0, 1, dim=0)",
        &["a", "b", "c", "d", "e", "g"],
        &[x],
    )
    .unwrap();
    eq_f(&o[0], DType::Float, &[2, 2], &[3., 3., f64::NAN, 5.]);
    eq_i(&o[1], DType::Int, &[2, 2], &[1, 3, 1, 3]);
    eq_f(&o[2], DType::Float, &[2, 3], &[1., 2., 3., -1., 0., 5.]);
    eq_i(&o[3], DType::Int, &[2, 3], &[0, 2, 1, 2, 0, 3]);
    eq_f(&o[4], DType::Float, &[1, 4], &[1., f64::NAN, 2., 5.]);
    eq_i(&o[5], DType::Int, &[1, 4], &[0, 1, 0, 1]);
}

#[test]
fn topk_router_on_bf16_and_int() {
    // An MoE router: top-2 of 5 experts per token, bf16 scores.
    let def = (
        "tv0",
        "shape=[3, 5], contiguity=[True, True], dtype=DataType.BFloat16",
    );
    let s = [
        0.1, 0.5, 0.25, 0.75, 0.0, 1.0, 1.0, 0.5, 0.5, 1.0, -2., -1., -3., -0.5, -4.,
    ];
    let o = exec(
        &[def],
        "a, b = fd.ops.topk(tv0, 2, dim=-1, largest=True, sorted=True)",
        &["a", "b"],
        &[t(DType::BFloat16, &[3, 5], &s)],
    )
    .unwrap();
    let r = |x: f64| half_bf16(x);
    eq_f(
        &o[0],
        DType::BFloat16,
        &[3, 2],
        &[r(0.75), 0.5, 1., 1., -0.5, -1.],
    );
    eq_i(&o[1], DType::Int, &[3, 2], &[3, 1, 0, 1, 3, 1]);
    let def = ("tv0", "shape=[4], contiguity=[True], dtype=DataType.Int");
    let o = exec(
        &[def],
        "a, b = fd.ops.topk(tv0, 2, dim=0, largest=False, sorted=True)",
        &["a", "b"],
        &[ti(DType::Int, &[4], &[5, -7, 5, -7])],
    )
    .unwrap();
    eq_i(&o[0], DType::Int, &[2], &[-7, -7]);
    eq_i(&o[1], DType::Int, &[2], &[1, 3]);
}

/// The bf16 value nearest to x (x here is exact in bf16 or close to it).
fn half_bf16(x: f64) -> f64 {
    let b = (x as f32).to_bits();
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(r) as f64
}

#[test]
fn argsort_ascending_descending_stable_nan() {
    let def = (
        "tv0",
        "shape=[2, 4], contiguity=[True, True], dtype=DataType.Float",
    );
    let x = t(
        DType::Float,
        &[2, 4],
        &[2., 1., 2., f64::NAN, 0., -0., 3., -1.],
    );
    let o = exec(&[def], "a = fd.ops.argsort(tv0, dim=1)\nb = fd.ops.argsort(tv0, 1, descending=True, stable=True)\nc = fd.ops.argsort(tv0, dim=0)", &["a", "b", "c"], &[x]).unwrap();
    // Ascending: NaN last; equal values (2 and 2, 0 and -0) keep their order.
    eq_i(&o[0], DType::Int, &[2, 4], &[1, 0, 2, 3, 3, 0, 1, 2]);
    // Descending: NaN first; ties still in original order.
    eq_i(&o[1], DType::Int, &[2, 4], &[3, 0, 2, 1, 2, 0, 1, 3]);
    // Along dim 0, per column: (2,0) (1,-0) (2,3) (NaN,-1).
    eq_i(&o[2], DType::Int, &[2, 4], &[1, 1, 0, 1, 0, 0, 1, 0]);
}

#[test]
fn embedding_rows_and_max_norm() {
    let w = t(DType::Float, &[3, 2], &[3., 4., 0.3, 0.4, 1., 0.]);
    let defs = [
        (
            "tv0",
            "shape=[2, 2], contiguity=[True, True], dtype=DataType.Int",
        ),
        (
            "tv1",
            "shape=[3, 2], contiguity=[True, True], dtype=DataType.Float",
        ),
    ];
    let idx = ti(DType::Int, &[2, 2], &[0, 1, 2, 0]);
    let o = exec(
        &defs,
        "a = fd.ops.embedding_fwd(tv0, tv1, padding_idx=1)",
        &["a"],
        &[idx.clone(), w.clone()],
    )
    .unwrap();
    eq_f(
        &o[0],
        DType::Float,
        &[2, 2, 2],
        &[3., 4., 0.3f32 as f64, 0.4f32 as f64, 1., 0., 3., 4.],
    );
    // max_norm=1: row 0 has norm 5 and is scaled by 1/(5+1e-7); the others are within.
    let o = exec(
        &defs,
        "a = fd.ops.embedding_fwd(tv0, tv1, max_norm=1.0)",
        &["a"],
        &[idx.clone(), w.clone()],
    )
    .unwrap();
    let s = 1.0 / (5.0 + 1e-7);
    let r = |x: f64| x as f32 as f64;
    eq_f(
        &o[0],
        DType::Float,
        &[2, 2, 2],
        &[
            r(3. * s),
            r(4. * s),
            r(0.3f32 as f64),
            r(0.4f32 as f64),
            1.,
            0.,
            r(3. * s),
            r(4. * s),
        ],
    );
    // norm_type=1: row 1's norm is 0.7 > 0.5.
    let o = exec(
        &defs,
        "a = fd.ops.embedding_fwd(tv0, tv1, max_norm=0.5, norm_type=1.0)",
        &["a"],
        &[idx, w],
    )
    .unwrap();
    let n1 = 0.3f32 as f64 + 0.4f32 as f64;
    let s1 = 0.5 / (n1 + 1e-7);
    let got = o[0].to_f64_vec();
    assert_eq!(got[2], r(0.3f32 as f64 * s1));
    assert_eq!(got[4], r(0.5 / (1.0 + 1e-7)));
}

#[test]
fn generated_indices_are_in_range_for_every_index_op() {
    // Without a recipe, index inputs (tensors and select's scalar) are drawn
    // within the extent they index, so the reference runs.
    let src = script(
        &[
            ("tv0", "shape=[3, 50], contiguity=[True, True], dtype=DataType.Float"),
            ("tv1", "shape=[3, 40], contiguity=[True, True], dtype=DataType.Int"),
            ("tv2", "shape=[7], contiguity=[True], dtype=DataType.Int32"),
            ("tv3", "shape=[6, 50], contiguity=[True, True], dtype=DataType.Float"),
        ],
        "s0 = fd.define_scalar(dtype=DataType.Int)\na = fd.ops.take_along_axis(tv0, tv1, 1)\nb = fd.ops.scatter(tv0, tv1, 2.0, dim=1)\nc = fd.ops.embedding_fwd(tv2, tv3)\nd = fd.ops.index_put_accumulate(tv3, tv2, c)\ne = fd.ops.select(tv3, s0, dim=0)",
        &["a", "b", "c", "d", "e"],
    );
    let f = parse_script("t.py", &src).unwrap();
    for seed in 0..5 {
        let g = fusebench_reference::generate_inputs(&f, seed).unwrap();
        run(&f, &g.inputs).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
