//! Input generation, output statistics, and the parallel paths of the
//! executor (large reductions, thread-count independence).

use fusebench_ir::{DType, Fusion, FusionBuilder, InputRecipe, Literal, ReduceOp, UnaryOp};
use fusebench_reference::{generate_inputs, run, stats, Arg, Tensor};

fn tensor(a: &Arg) -> &Tensor {
    match a {
        Arg::Tensor(t) => t,
        Arg::Scalar(l) => panic!("scalar {l}"),
    }
}

/// An embedding gather like the corpus's: int64 indices [2, 8] into a
/// [100, 16] bf16 table, plus a scalar input.
fn gather_fusion(recipe: Option<Vec<InputRecipe>>) -> Fusion {
    let mut fd = FusionBuilder::new();
    let idx = fd.tensor(&[2, 8], DType::Int).unwrap();
    let table = fd.tensor(&[100, 16], DType::BFloat16).unwrap();
    let s = fd.define_scalar(Some("s"), None, DType::Double);
    let r = fd.reshape(idx, &[16]).unwrap();
    let b = fd.broadcast(r, &[false, true]).unwrap();
    let g = fd.index_select(table, b, 0).unwrap();
    let gf = fd.cast(g, DType::Float).unwrap();
    let y = fd.mul(gf, s).unwrap();
    fd.add_output(y).unwrap();
    let mut f = fd.finish();
    f.recipe = recipe;
    f
}

/// `make_tensor(shape, dtype)` with the default range, as scripts write it.
fn make_tensor(shape: Vec<usize>, dtype: DType) -> InputRecipe {
    InputRecipe::MakeTensor {
        shape,
        dtype,
        low: None,
        high: None,
    }
}
#[test]
fn generated_inputs_are_deterministic_per_seed() {
    let f = gather_fusion(None);
    let a = generate_inputs(&f, 7).unwrap();
    let b = generate_inputs(&f, 7).unwrap();
    let c = generate_inputs(&f, 8).unwrap();
    for i in 0..2 {
        assert_eq!(
            tensor(&a.inputs[i]).to_f64_vec(),
            tensor(&b.inputs[i]).to_f64_vec()
        );
        assert_ne!(
            tensor(&a.inputs[i]).to_f64_vec(),
            tensor(&c.inputs[i]).to_f64_vec()
        );
    }
    // Values follow make_tensor's default ranges, in the declared dtype.
    let table = tensor(&a.inputs[1]);
    assert_eq!(table.dtype(), DType::BFloat16);
    let v = table.to_f64_vec();
    assert!(v.iter().all(|&x| (-9.0..=9.0).contains(&x)));
    assert!(v.iter().any(|&x| x < -4.0) && v.iter().any(|&x| x > 4.0));
    // The outputs of two runs on the same inputs agree.
    let o1 = run(&f, &a.inputs).unwrap();
    let o2 = run(&f, &b.inputs).unwrap();
    assert_eq!(o1[0].to_f64_vec(), o2[0].to_f64_vec());
}

#[test]
fn large_generation_does_not_depend_on_threads() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[300_000], DType::BFloat16).unwrap();
    fd.add_output(x).unwrap();
    let f = fd.finish();
    let a = generate_inputs(&f, 3).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let b = pool.install(|| generate_inputs(&f, 3).unwrap());
    assert_eq!(
        tensor(&a.inputs[0]).to_f64_vec(),
        tensor(&b.inputs[0]).to_f64_vec()
    );
}

#[test]
fn index_inputs_are_drawn_in_range_with_a_note() {
    // The script's make_tensor would draw int64 in [-9, 10): invalid indices.
    let recipe = vec![
        make_tensor(vec![2, 8], DType::Int),
        make_tensor(vec![100, 16], DType::BFloat16),
        InputRecipe::Scalar {
            value: Literal::Float(0.5),
        },
    ];
    let f = gather_fusion(Some(recipe));
    let g = generate_inputs(&f, 1).unwrap();
    let idx = tensor(&g.inputs[0]).to_i64_vec();
    assert!(idx.iter().all(|&i| (0..100).contains(&i)), "{idx:?}");
    assert!(
        idx.iter().any(|&i| i >= 10),
        "drawn over the whole range: {idx:?}"
    );
    assert_eq!(g.redrawn.len(), 1);
    assert_eq!(
        (
            g.redrawn[0].input,
            g.redrawn[0].bound,
            g.redrawn[0].script_invalid
        ),
        (0, 100, true)
    );
    assert_eq!(g.redrawn[0].script_range, Some((-9, 10)));
    assert_eq!(
        g.notes,
        vec!["input 0 (tv0): indices for index_select must lie in [0, 100); the script's make_tensor draws [-9, 10), which would give invalid indices; drew [0, 100) instead"]
    );
    assert!(matches!(g.inputs[2], Arg::Scalar(Literal::Float(x)) if x == 0.5));
    run(&f, &g.inputs).unwrap();

    // A recipe already in range is kept as the script wrote it.
    let recipe = vec![
        InputRecipe::Randint {
            low: 0,
            high: 5,
            size: vec![2, 8],
            dtype: DType::Int,
            as_strided: None,
        },
        InputRecipe::MakeTensor {
            shape: vec![100, 16],
            dtype: DType::BFloat16,
            low: Some(-1.0),
            high: Some(1.0),
        },
        InputRecipe::Scalar {
            value: Literal::Float(2.0),
        },
    ];
    let f = gather_fusion(Some(recipe));
    let g = generate_inputs(&f, 1).unwrap();
    assert!(g.redrawn.is_empty() && g.notes.is_empty());
    let idx = tensor(&g.inputs[0]).to_i64_vec();
    assert!(idx.iter().all(|&i| (0..5).contains(&i)));
    assert!(tensor(&g.inputs[1])
        .to_f64_vec()
        .iter()
        .all(|&x| (-1.0..=1.0).contains(&x)));

    // Without a recipe the index input is drawn in range too, and noted.
    let g = generate_inputs(&gather_fusion(None), 1).unwrap();
    assert_eq!(g.redrawn.len(), 1);
    assert!(g.notes[0].contains("drew [0, 100)"), "{}", g.notes[0]);
}

#[test]
fn as_strided_zero_stride_input_is_honoured() {
    // torch.randn(8).as_strided((3, 2, 4), (0, 4, 1)): every [i, :, :] is the same storage.
    let mut fd = FusionBuilder::new();
    let x = fd
        .define_tensor(
            None,
            &[3, 2, 4],
            vec![None, Some(true), Some(true)],
            DType::Float,
            &[],
            false,
        )
        .unwrap();
    let s = fd.sum(x, &[0], false, None).unwrap();
    fd.add_output(s).unwrap();
    let mut f = fd.finish();
    f.recipe = Some(vec![InputRecipe::Randn {
        size: vec![8],
        dtype: DType::Float,
        as_strided: Some((vec![3, 2, 4], vec![0, 4, 1])),
    }]);
    let g = generate_inputs(&f, 5).unwrap();
    let t = tensor(&g.inputs[0]);
    assert_eq!(t.strides(), &[0, 4, 1]);
    assert_eq!(t.buffer().len(), 8);
    let v = t.to_f64_vec();
    assert_eq!(&v[0..8], &v[8..16]);
    assert_eq!(&v[0..8], &v[16..24]);
    // Normal values: not all in a small range, some negative.
    assert!(v.iter().any(|&x| x < 0.0) && v.iter().any(|&x| x > 0.0));
    let out = run(&f, &g.inputs).unwrap();
    let want: Vec<f64> = v[0..8].iter().map(|&x| (3.0 * x) as f32 as f64).collect();
    assert_eq!(out[0].to_f64_vec(), want);

    // Without a recipe, the definition's broadcast dim gets stride 0 too.
    f.recipe = None;
    let g = generate_inputs(&f, 5).unwrap();
    assert_eq!(tensor(&g.inputs[0]).strides(), &[0, 4, 1]);
}

#[test]
fn recipe_mismatches_are_errors() {
    let mut f = gather_fusion(None);
    f.recipe = Some(vec![make_tensor(vec![2, 8], DType::Int)]);
    assert!(generate_inputs(&f, 0).is_err());
    f.recipe = Some(vec![
        make_tensor(vec![2, 9], DType::Int),
        make_tensor(vec![100, 16], DType::BFloat16),
        InputRecipe::Scalar {
            value: Literal::Float(0.5),
        },
    ]);
    let e = generate_inputs(&f, 0).unwrap_err();
    assert!(e.to_string().contains("shape"), "{e}");
}

#[test]
fn stats_summarize_values() {
    let t = Tensor::from_f64s(
        DType::Float,
        &[2, 3],
        &[1.0, -4.0, f64::NAN, 3.0, f64::INFINITY, 0.0],
    )
    .unwrap();
    let s = stats(&t);
    assert_eq!(
        (s.mean, s.abs_max, s.nan_count, s.inf_count),
        (0.0, 4.0, 1, 1)
    );
    // On a strided view (a transpose of a stride-0 expand).
    let t = Tensor::full(DType::BFloat16, &[3, 4], Literal::Float(-2.5)).permute(&[1, 0]);
    let s = stats(&t);
    assert_eq!(
        (s.mean, s.abs_max, s.nan_count, s.inf_count),
        (-2.5, 2.5, 0, 0)
    );
    let t = Tensor::from_i64s(DType::Int, &[3], &[1, 2, 6]).unwrap();
    assert_eq!(stats(&t).mean, 3.0);
}

/// x[i] = (i * 7919) % 19 - 9 as f32: integers, so every sum is exact in f64.
fn pattern(n: usize) -> Vec<f64> {
    (0..n).map(|i| ((i * 7919) % 19) as f64 - 9.0).collect()
}

fn naive_sum(v: &[f64], shape: &[usize], dims: &[usize]) -> Vec<f64> {
    let rank = shape.len();
    let out_shape: Vec<usize> = (0..rank)
        .filter(|d| !dims.contains(d))
        .map(|d| shape[d])
        .collect();
    let mut out = vec![0.0; out_shape.iter().product()];
    let mut idx = vec![0usize; rank];
    for &x in v {
        let mut o = 0;
        for d in 0..rank {
            if !dims.contains(&d) {
                o = o * shape[d] + idx[d];
            }
        }
        out[o] += x;
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

#[test]
fn large_reductions_match_a_naive_sum_on_any_thread_count() {
    // inner with rows split across tasks; outer with the kept extent split;
    // outer with many reduced rows; a middle dim; a whole-tensor sum.
    let cases: &[(&[usize], &[usize])] = &[
        (&[2, 1 << 20], &[1]),
        (&[40, 20000], &[0]),
        (&[3000, 300], &[0]),
        (&[30, 500, 40], &[1]),
        (&[4, 600, 900], &[0, 1, 2]),
        (&[64, 33, 100], &[0, 2]),
    ];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for &(shape, dims) in cases {
        let n: usize = shape.iter().product();
        let v = pattern(n);
        let mut fd = FusionBuilder::new();
        let x = fd
            .tensor(
                &shape.iter().map(|&e| e as i64).collect::<Vec<_>>(),
                DType::BFloat16,
            )
            .unwrap();
        let d: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        // Through a lazy expression: sum(cast(x) * 2).
        let xf = fd.cast(x, DType::Float).unwrap();
        let two = fd.literal(Literal::Float(2.0));
        let y = fd.mul(xf, two).unwrap();
        let s = fd.sum(y, &d, false, None).unwrap();
        let m = fd.reduce(ReduceOp::Max, x, &d, false).unwrap();
        let (mean, m2, _) = fd.welford(xf, &d).unwrap();
        for o in [s, m, mean, m2] {
            fd.add_output(o).unwrap();
        }
        let f = fd.finish();
        let input = [Arg::Tensor(
            Tensor::from_f64s(DType::BFloat16, shape, &v).unwrap(),
        )];
        let out = run(&f, &input).unwrap();
        let want: Vec<f64> = naive_sum(&v, shape, dims)
            .iter()
            .map(|&s| (2.0 * s) as f32 as f64)
            .collect();
        assert_eq!(out[0].to_f64_vec(), want, "sum over {dims:?} of {shape:?}");
        assert!(
            out[1].to_f64_vec().iter().all(|&m| m == 9.0),
            "max over {dims:?} of {shape:?}"
        );
        let lr: usize = dims.iter().map(|&d| shape[d]).product();
        let sums = naive_sum(&v, shape, dims);
        let means: Vec<f64> = sums
            .iter()
            .map(|&s| (s / lr as f64) as f32 as f64)
            .collect();
        let got_mean = out[2].to_f64_vec();
        for (g, w) in got_mean.iter().zip(&means) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "mean {g} vs {w}");
        }
        // Identical on one thread.
        let single = pool.install(|| run(&f, &input).unwrap());
        for (a, b) in out.iter().zip(&single) {
            assert_eq!(
                a.to_f64_vec(),
                b.to_f64_vec(),
                "thread count changed a result over {dims:?} of {shape:?}"
            );
        }
    }
}

#[test]
fn large_pointwise_chains_match_op_by_op() {
    // A chain with a broadcast operand, a shared subexpression used by two
    // outputs, and an output that is reshaped: fused evaluation must give the
    // values of evaluating each op separately.
    let (rows, cols) = (300usize, 1000usize);
    let v = pattern(rows * cols);
    let w = pattern(cols);
    let mut fd = FusionBuilder::new();
    let x = fd
        .tensor(&[rows as i64, cols as i64], DType::BFloat16)
        .unwrap();
    let b = fd.tensor(&[cols as i64], DType::BFloat16).unwrap();
    let xf = fd.cast(x, DType::Float).unwrap();
    let bf = fd.cast(b, DType::Float).unwrap();
    let t = fd.unary(UnaryOp::Tanh, xf).unwrap();
    let p = fd.mul(t, bf).unwrap();
    let q = fd.add(p, xf).unwrap();
    let qb = fd.cast(q, DType::BFloat16).unwrap();
    let r = fd.reshape(qb, &[(rows * cols) as i64]).unwrap();
    let e = fd.unary(UnaryOp::Exp, p).unwrap();
    fd.add_output(r).unwrap();
    fd.add_output(e).unwrap();
    let f = fd.finish();
    let out = run(
        &f,
        &[
            Arg::Tensor(Tensor::from_f64s(DType::BFloat16, &[rows, cols], &v).unwrap()),
            Arg::Tensor(Tensor::from_f64s(DType::BFloat16, &[cols], &w).unwrap()),
        ],
    )
    .unwrap();
    let (r, e) = (out[0].to_f64_vec(), out[1].to_f64_vec());
    for i in 0..rows {
        for j in 0..cols {
            let x = v[i * cols + j];
            let p = ((x.tanh() as f32 as f64) * w[j]) as f32 as f64;
            let q = (p + x) as f32 as f64;
            assert_eq!(r[i * cols + j], fusebench_ir::round::to_bf16(q));
            assert_eq!(e[i * cols + j], p.exp() as f32 as f64);
        }
    }
}

#[test]
fn empty_tensors() {
    let mut fd = FusionBuilder::new();
    let x = fd.tensor(&[0, 3], DType::Float).unwrap();
    let y = fd.unary(UnaryOp::Exp, x).unwrap();
    let s = fd.sum(x, &[0], false, None).unwrap();
    let m = fd.sum(x, &[1], false, None).unwrap();
    for o in [y, s, m] {
        fd.add_output(o).unwrap();
    }
    let f = fd.finish();
    let g = generate_inputs(&f, 0).unwrap();
    let out = run(&f, &g.inputs).unwrap();
    assert_eq!(out[0].shape(), &[0, 3]);
    assert_eq!(out[1].to_f64_vec(), vec![0.0; 3]);
    assert_eq!(out[2].shape(), &[0]);
}
