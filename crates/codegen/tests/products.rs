//! Fusions with matrix products (crate::gemm): the products run in the BLAS
//! library between stages of kernels, reading their operands where they lie.

use fusebench_codegen::{plan, Device, GroupedMn, KernelArg, OutputSource, Plan};

mod common;

fn planned(body: &str) -> Plan {
    let f = common::script(body);
    plan(&f, &vec![None; f.inputs.len()], Device::default()).unwrap()
}

/// A linear with a bias (the GELU below follows it).
const LINEAR_GELU: &str = "    x = fd.define_tensor(shape=[2, 64, 96], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[160, 96], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    b = fd.define_tensor(shape=[160], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False)
    l = fd.ops.linear(x, w, b)
";

/// The tanh GELU of `l` as `o` in BFloat16, spelled as bench/patterns.py writes it.
const GELU_OF_L: &str = "    lf = fd.ops.cast(l, dtype=DataType.Float)
    c = fd.ops.mul(lf, lf)
    c = fd.ops.mul(c, lf)
    c = fd.ops.mul(c, 0.044715)
    c = fd.ops.add(lf, c)
    c = fd.ops.mul(c, 0.7978845608)
    c = fd.ops.tanh(c)
    c = fd.ops.add(c, 1.0)
    h = fd.ops.mul(lf, 0.5)
    y = fd.ops.mul(h, c)
    o = fd.ops.cast(y, dtype=DataType.BFloat16)
";

/// A linear with a bias, then a tanh GELU on its result (an MLP's first half).
fn linear_gelu() -> String {
    format!("{LINEAR_GELU}{GELU_OF_L}    fd.add_output(o)\n")
}

#[test]
fn a_linear_reads_its_input_and_weight_where_they_lie_and_the_gelu_reads_its_result() {
    // With the GELU in a kernel of ours (FUSEBENCH_PRODUCT_EPILOGUE=0).
    let f = common::script(&linear_gelu());
    let p = plan(&f, &[None, None, None], Device { product_epilogue: false, ..Device::default() }).unwrap();
    assert_eq!(p.products.len(), 1);
    let g = &p.products[0];
    assert_eq!((g.batch, g.m, g.n, g.k), (1, 128, 160, 96), "the input's leading dims are rows");
    assert_eq!(g.a.arg, KernelArg::Input(0));
    assert_eq!(g.a.strides[1..], [96, 1]);
    // The weight [n, k] read as its transpose: columns contiguous, no copy.
    assert_eq!(g.b.arg, KernelArg::Input(1));
    assert_eq!(g.b.strides[1..], [1, 96]);
    assert_eq!(g.bias.as_ref().map(|b| b.arg), Some(KernelArg::Input(2)));
    assert_eq!(g.before, 0, "no kernel runs before the product");
    // Its result is the plan's hidden output, read by the one GELU kernel.
    assert_eq!(p.hidden_outputs, 1);
    assert_eq!(g.out, KernelArg::Output(1));
    assert_eq!(p.kernels.len(), 1);
    assert!(p.kernels[0].args.contains(&KernelArg::Output(1)), "{:?}", p.kernels[0].args);
    assert!(p.kernels[0].args.contains(&KernelArg::Output(0)));
}

#[test]
fn two_linears_in_a_chain_take_two_stages_with_unique_kernel_names() {
    let p = planned(
        "    x = fd.define_tensor(shape=[64, 96], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)
    w1 = fd.define_tensor(shape=[128, 96], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)
    w2 = fd.define_tensor(shape=[96, 128], contiguity=[True, True], dtype=DataType.Half, is_cpu=False)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    x2 = fd.ops.mul(xf, xf)
    xh = fd.ops.cast(x2, dtype=DataType.Half)
    h = fd.ops.linear(xh, w1)
    hf = fd.ops.cast(h, dtype=DataType.Float)
    r = fd.ops.relu(hf)
    rh = fd.ops.cast(r, dtype=DataType.Half)
    y = fd.ops.linear(rh, w2)
    yf = fd.ops.cast(y, dtype=DataType.Float)
    z = fd.ops.add(yf, xf)
    fd.add_output(z)
",
    );
    assert_eq!(p.products.len(), 2);
    assert_eq!(p.kernels.len(), 2, "the square and the residual add; the relu is the first product's epilogue");
    assert_eq!(p.products[0].epilogue, fusebench_codegen::Epilogue::Relu);
    // The first product runs after the kernel that writes its left operand,
    // the second reads the first's result as written.
    assert_eq!(p.products[0].before, 1);
    assert_eq!(p.products[1].before, 1);
    assert_eq!(p.products[1].a.arg, p.products[0].out);
    assert!(matches!(p.products[0].a.arg, KernelArg::Output(_)));
    let mut names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 2, "{names:?}");
    for k in &p.kernels {
        assert_eq!(p.source.matches(&format!(" {}(", k.name)).count(), 1, "{} defined once", k.name);
    }
}

#[test]
fn a_matmul_of_a_permuted_weight_reads_it_transposed_and_an_expanded_one_is_copied() {
    let p = planned(
        "    a = fd.define_tensor(shape=[4, 32, 48], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    w = fd.define_tensor(shape=[64, 48], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    wt = fd.ops.permute(w, dims=[1, 0])
    y = fd.ops.matmul(a, wt)
    fd.add_output(y)
",
    );
    assert!(p.kernels.is_empty(), "{:?}", p.kernels.iter().map(|k| &k.summary).collect::<Vec<_>>());
    let g = &p.products[0];
    // Batch over one weight: one taller product.
    assert_eq!((g.batch, g.m, g.n, g.k), (1, 128, 64, 48));
    assert_eq!(g.b.strides[1..], [1, 48]);
    assert!(matches!(p.outputs[0].source, OutputSource::Written));
    // A weight broadcast along its rows has no unit stride: copied first.
    let p = planned(
        "    a = fd.define_tensor(shape=[32, 48], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    v = fd.define_tensor(shape=[48], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    w = fd.ops.broadcast_in_dim(v, shape=[48, 64], broadcast_dims=[0])
    y = fd.ops.matmul(a, w)
    fd.add_output(y)
",
    );
    assert_eq!(p.kernels.len(), 1, "the dense copy of the broadcast weight");
    assert_eq!(p.products[0].before, 1);
    assert_eq!(p.products[0].b.strides[1..], [64, 1]);
}

#[test]
fn batch_dims_that_do_not_collapse_run_as_one_product_per_outer_index() {
    // [3, 1] batches against [5]: A steps the first and is broadcast over the
    // second, B the reverse; no one stride walks the 15 batches.
    let p = planned(
        "    a = fd.define_tensor(shape=[3, 1, 17, 40], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    b = fd.define_tensor(shape=[5, 40, 23], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    y = fd.ops.matmul(a, b)
    fd.add_output(y)
",
    );
    assert_eq!(p.products.len(), 3);
    for (i, g) in p.products.iter().enumerate() {
        assert_eq!((g.batch, g.m, g.n, g.k), (5, 17, 23, 40));
        assert_eq!(g.a.offset, i as i64 * 17 * 40);
        assert_eq!(g.a.strides[0], 0, "one A for the 5 batches");
        assert_eq!(g.b.strides[0], 40 * 23);
        assert_eq!(g.out_offset, i as i64 * 5 * 17 * 23);
    }
}

#[test]
fn batch_dims_loop_in_the_order_that_makes_fewest_products() {
    // [5, 1] batches against [3]: in order, 5 products of 3; the 3 looped
    // instead, 3 products of 5, D's batches 3 x 17 x 23 apart.
    let p = planned(
        "    a = fd.define_tensor(shape=[5, 1, 17, 40], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    b = fd.define_tensor(shape=[3, 40, 23], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    y = fd.ops.matmul(a, b)
    fd.add_output(y)
",
    );
    assert_eq!(p.products.len(), 3);
    for (i, g) in p.products.iter().enumerate() {
        assert_eq!((g.batch, g.m, g.n, g.k), (5, 17, 23, 40));
        assert_eq!((g.a.offset, g.a.strides[0]), (0, 17 * 40), "A steps the 5 batches");
        assert_eq!((g.b.offset, g.b.strides[0]), (i as i64 * 40 * 23, 0), "one B for them");
        assert_eq!(g.out_offset, i as i64 * 17 * 23);
        assert_eq!(g.out_batch_stride, 3 * 17 * 23);
    }
}

#[test]
fn a_gelu_of_the_product_alone_runs_in_the_epilogue_and_a_scaled_relu_does_not() {
    let p = planned(&linear_gelu());
    assert!(p.kernels.is_empty(), "{:?}", p.kernels.iter().map(|k| &k.summary).collect::<Vec<_>>());
    assert_eq!(p.products[0].epilogue, fusebench_codegen::Epilogue::GeluTanh);
    assert_eq!(p.products[0].out, KernelArg::Output(0), "the product writes the fusion's output");
    let off = plan(
        &common::script(&linear_gelu()),
        &[None, None, None],
        Device { product_epilogue: false, ..Device::default() },
    )
    .unwrap();
    assert_eq!((off.kernels.len(), off.products[0].epilogue), (1, fusebench_codegen::Epilogue::None));
    // A ReLU in Float: exact, taken.
    let relu = planned(
        "    a = fd.define_tensor(shape=[32, 48], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    b = fd.define_tensor(shape=[48, 64], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    y = fd.ops.matmul(a, b)
    z = fd.ops.relu(y)
    fd.add_output(z)
",
    );
    assert_eq!(relu.products[0].epilogue, fusebench_codegen::Epilogue::Relu);
    // A ReLU scaled after: not a function the library applies.
    let scaled = planned(
        "    a = fd.define_tensor(shape=[32, 48], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    b = fd.define_tensor(shape=[48, 64], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    y = fd.ops.matmul(a, b)
    z = fd.ops.relu(y)
    w = fd.ops.mul(z, 0.5)
    fd.add_output(w)
",
    );
    assert_eq!((scaled.products[0].epilogue, scaled.kernels.len()), (fusebench_codegen::Epilogue::None, 1));
}

#[test]
fn a_gelu_read_by_a_second_product_stays_a_kernel() {
    let p = planned(
        &format!(
            "    x = fd.define_tensor(shape=[40, 24], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w1 = fd.define_tensor(shape=[72, 24], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w2 = fd.define_tensor(shape=[24, 72], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    l = fd.ops.linear(x, w1)
{GELU_OF_L}    y2 = fd.ops.linear(o, w2)
    fd.add_output(y2)
"
        ),
    );
    assert_eq!(p.products[0].epilogue, fusebench_codegen::Epilogue::None);
    assert_eq!(p.kernels.len(), 1, "the GELU, between the products");
}

#[test]
fn a_constant_scale_of_the_product_alone_is_its_alpha() {
    // Attention's scores: q k^T times 1/sqrt(128), the key read transposed.
    let p = planned(
        "    q = fd.define_tensor(shape=[4, 40, 128], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    k = fd.define_tensor(shape=[4, 40, 128], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    kt = fd.ops.permute(k, dims=[0, 2, 1])
    s = fd.ops.matmul(q, kt)
    sf = fd.ops.cast(s, dtype=DataType.Float)
    sc = fd.ops.mul(sf, 0.08838834764831845)
    o = fd.ops.cast(sc, dtype=DataType.BFloat16)
    fd.add_output(o)
",
    );
    assert!(p.kernels.is_empty());
    let alpha = p.products[0].alpha;
    assert!((alpha - 0.088_388_347_648_318_45).abs() < 1e-8, "{alpha}: the constant itself, not its BFloat16 rounding");
    assert_eq!(p.products[0].epilogue, fusebench_codegen::Epilogue::None);
    // A scale plus a constant is no alpha.
    let q = planned(
        "    a = fd.define_tensor(shape=[32, 48], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    b = fd.define_tensor(shape=[48, 64], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    y = fd.ops.matmul(a, b)
    z = fd.ops.mul(y, 3.0)
    w = fd.ops.add(z, 1.0)
    fd.add_output(w)
",
    );
    assert_eq!((q.products[0].alpha, q.kernels.len()), (1.0, 1));
}

/// `scaled_mm` of FP8 operands as torch._scaled_mm lays them out: mat1
/// row-major, mat2 a column-major view.
const SCALED: &str = "    a = fd.define_tensor(shape=[32, 64], contiguity=[True, True], dtype=DataType.Float8_e4m3fn, is_cpu=False)
    b = fd.define_tensor(shape=[64, 48], contiguity=[True, True], dtype=DataType.Float8_e5m2, is_cpu=False, stride_order=[0, 1])
";

/// Planned with mat2 (input 1) column-major, as the engine sees it.
fn planned_scaled(body: &str) -> Plan {
    let f = common::script(body);
    let mut layouts = vec![None; f.inputs.len()];
    layouts[1] = Some((vec![1, 64], 0));
    plan(&f, &layouts, Device::default()).unwrap()
}

#[test]
fn a_tensorwise_scaled_product_is_one_library_call_with_its_scales() {
    let p = planned_scaled(&format!(
        "{SCALED}    s = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=False)
    t = fd.define_tensor(shape=[1, 1], contiguity=[None, None], dtype=DataType.Float, is_cpu=False)
    y, _, _ = fd.ops.scaled_mm(a, b, s, t, dtype=DataType.Half)
    fd.add_output(y)
"
    ));
    assert!(p.kernels.is_empty(), "no kernel of ours: {:?}", p.kernels);
    assert_eq!(p.products.len(), 1);
    let g = &p.products[0];
    assert_eq!((g.m, g.n, g.k), (32, 48, 64));
    assert_eq!(g.dtype, fusebench_ir::DType::Half);
    assert_eq!(g.operands, Some([fusebench_ir::DType::Float8E4m3fn, fusebench_ir::DType::Float8E5m2]));
    assert_eq!(g.a.strides[1..], [64, 1]);
    assert_eq!(g.b.strides[1..], [1, 64], "mat2 read where it lies, k contiguous");
    let s = g.scales.as_ref().expect("tensorwise scales go to the library");
    assert_eq!((s[0].arg, s[1].arg), (KernelArg::Input(2), KernelArg::Input(3)));
    assert_eq!(g.out, KernelArg::Output(0));
    assert!(g.describe().iter().any(|l| l.contains("scaled by A's scale")), "{:?}", g.describe());
}

#[test]
fn a_rowwise_scaled_product_is_the_plain_product_then_one_kernel_of_scales() {
    let p = planned_scaled(&format!(
        "{SCALED}    s = fd.define_tensor(shape=[32, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)
    t = fd.define_tensor(shape=[1, 48], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)
    y, _, _ = fd.ops.scaled_mm(a, b, s, t, dtype=DataType.BFloat16)
    fd.add_output(y)
"
    ));
    assert_eq!(p.products.len(), 1);
    let g = &p.products[0];
    assert!(g.scales.is_none(), "the library multiplies by no scale");
    assert_eq!(g.dtype, fusebench_ir::DType::Float, "the product is kept in Float for the scales");
    assert_eq!(p.hidden_outputs, 1);
    assert_eq!(g.out, KernelArg::Output(1));
    assert_eq!(p.kernels.len(), 1, "one kernel scales the rows and columns and rounds");
    let args = &p.kernels[0].args;
    for a in [KernelArg::Output(1), KernelArg::Input(2), KernelArg::Input(3), KernelArg::Output(0)] {
        assert!(args.contains(&a), "{a:?} not in {args:?}");
    }
    assert!(matches!(p.outputs[0].source, OutputSource::Written));
}

#[test]
fn a_scaled_product_the_fp8_kernels_cannot_read_runs_in_float() {
    // mat2 row-major (n contiguous), and k = 40 (not a multiple of 16): each
    // alone keeps cuBLASLt's FP8 kernels out.
    for (defs, layouts) in [
        (SCALED, vec![None; 4]),
        (
            "    a = fd.define_tensor(shape=[32, 40], contiguity=[True, True], dtype=DataType.Float8_e4m3fn, is_cpu=False)
    b = fd.define_tensor(shape=[40, 48], contiguity=[True, True], dtype=DataType.Float8_e5m2, is_cpu=False, stride_order=[0, 1])
",
            vec![None, Some((vec![1, 40], 0)), None, None],
        ),
    ] {
        let f = common::script(&format!(
            "{defs}    s = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=False)
    y, _, _ = fd.ops.scaled_mm(a, b, s, s, dtype=DataType.BFloat16)
    fd.add_output(y)
"
        ));
        let p = plan(&f, &layouts, Device::default()).unwrap();
        assert_eq!(p.products.len(), 1);
        let g = &p.products[0];
        assert_eq!((g.dtype, g.operands, g.scales.is_some()), (fusebench_ir::DType::Float, None, false));
        assert!(g.summary.starts_with("matmul y_in_float = "), "{}", g.summary);
        // The operands' casts (one kernel per shape) before it, the scales
        // and rounding in one kernel after it.
        assert_eq!(p.kernels.len(), 3, "{:?}", p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
        assert_eq!(g.before, 2);
    }
}

#[test]
fn a_grouped_product_is_one_kernel_of_ours_for_each_way_its_groups_cut() {
    let t = |name: &str, shape: &[usize], dtype: &str| {
        let c = vec!["True"; shape.len()].join(", ");
        format!("    {name} = fd.define_tensor(shape={shape:?}, contiguity=[{c}], dtype=DataType.{dtype}, is_cpu=False)\n")
    };
    for (a, b, grid, cut, rows_copied) in [
        // Tiles at most: whole ones of the extent cut, plus one partial a group.
        // Under grouped_mn mat2's tiles are copied along its contiguous n,
        // except where the groups cut n (its tiles would start anywhere).
        (&[160, 64][..], &[3, 64, 80][..], 2 + 3, "m (rows of mat1)", "FB_GMM_K, FB_GMM_MN"),
        (&[3, 96, 64][..], &[64, 160][..], 2 + 3, "n (columns of mat2)", "FB_GMM_K, FB_GMM_ELEMENT"),
        (&[160, 64][..], &[64, 144][..], 3 * 2 * 2, "k (each group", "FB_GMM_K, FB_GMM_MN"),
    ] {
        let body = format!(
            "{}{}{}    y = fd.ops.grouped_mm(a, b, o)\n    fd.add_output(y)\n",
            t("a", a, "BFloat16"),
            t("b", b, "BFloat16"),
            t("o", &[3], "Int32")
        );
        let f = common::script(&body);
        let p = plan(&f, &vec![None; 3], Device { grouped_mn: GroupedMn::Off, ..Device::default() }).unwrap();
        assert!(p.products.is_empty());
        assert_eq!(p.kernels.len(), 1);
        let k = &p.kernels[0];
        assert_eq!(k.schedule, fusebench_codegen::Schedule::Grouped);
        assert_eq!(k.grid, [grid, 1, 1], "{}", k.summary);
        assert!(k.summary.contains(cut), "{}", k.summary);
        assert_eq!(k.args, [KernelArg::Input(0), KernelArg::Input(1), KernelArg::Input(2), KernelArg::Output(0)]);
        assert!(p.source.contains("fb_grouped_mm<true,"), "the section is taken");
        // With grouped_mn off, row-major mat2 (n contiguous, not k) is read
        // element by element, and then mat1 too (both alike).
        assert!(p.source.contains(", FB_GMM_ELEMENT, FB_GMM_ELEMENT, 2>(a + 0"), "{}", p.source);
        let p = plan(&f, &vec![None; 3], Device { grouped_mn: GroupedMn::MmaSync, ..Device::default() }).unwrap();
        assert!(p.source.contains(&format!("fb_grouped_mm<true, {}, {rows_copied}, 2>(a + 0", cut_index(cut))), "{}", p.source);
        let reason = &p.kernels[0].choice.as_ref().unwrap().reason;
        assert!(reason.contains("mat1's tiles copied 16 bytes a thread along k"), "{reason}");
    }
}

fn cut_index(says: &str) -> usize {
    ["m (", "n (", "k ("].iter().position(|c| says.starts_with(c)).unwrap()
}

#[test]
fn a_weight_gradient_in_autograds_layout_copies_both_operands_along_their_rows() {
    // x^T [64, 160] of x [160, 64] and dy [160, 96], the groups cutting the
    // 160 tokens (k): both operands have their rows (m, n) contiguous.
    let body = "    x = fd.define_tensor(shape=[160, 64], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    dy = fd.define_tensor(shape=[160, 96], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    xt = fd.ops.permute(x, dims=[1, 0])
    y = fd.ops.grouped_mm(xt, dy, o)
    fd.add_output(y)
";
    let f = common::script(body);
    let p = plan(&f, &vec![None; 3], Device { grouped_mn: GroupedMn::MmaSync, ..Device::default() }).unwrap();
    // A: rows (m) stride 1, k stride 64; B: n stride 1, k stride 96.
    assert!(p.source.contains("fb_grouped_mm<true, 2, FB_GMM_MN, FB_GMM_MN, 2>(a + 0, b + 0, offs + 0, d, 4, 64, 96, 160, 0, 1, 64, 0, 96, 1)"), "{}", p.source);
    let reason = &p.kernels[0].choice.as_ref().unwrap().reason;
    assert!(reason.contains("mma.sync") && reason.contains("both operands' tiles copied 16 bytes a thread along their contiguous rows"), "{reason}");
    // On Hopper under MmaSync the MN-major operands stay with mma.sync ...
    let p = plan(&f, &vec![None; 3], Device { grouped_mn: GroupedMn::MmaSync, grouped_wgmma: true, ..Device::default() }).unwrap();
    assert!(p.source.contains("fb_grouped_mm<true, 2, FB_GMM_MN, FB_GMM_MN, 2>"), "{}", p.source);
    // ... and under Wgmma wgmma reads both MN-major, mat2 64 columns at a time.
    let p = plan(&f, &vec![None; 3], Device { grouped_mn: GroupedMn::Wgmma, grouped_wgmma: true, ..Device::default() }).unwrap();
    assert!(p.source.contains("fb_grouped_mm_wg<true, 2, 2, FB_GMM_MN, FB_GMM_MN>(a + 0, b + 0"), "{}", p.source);
    let reason = &p.kernels[0].choice.as_ref().unwrap().reason;
    assert!(reason.contains("wgmma") && reason.contains("N-major 64 columns at a time"), "{reason}");
    // With grouped_mn off: element by element, and so mma.sync, saying why.
    let p = plan(&f, &vec![None; 3], Device { grouped_mn: GroupedMn::Off, grouped_wgmma: true, ..Device::default() }).unwrap();
    assert!(p.source.contains("fb_grouped_mm<true, 2, FB_GMM_ELEMENT, FB_GMM_ELEMENT, 2>"), "{}", p.source);
    let reason = &p.kernels[0].choice.as_ref().unwrap().reason;
    assert!(reason.contains("FUSEBENCH_GROUPED_MN=1"), "{reason}");
    // A k stride that is not a multiple of 8 elements leaves chunks unaligned:
    // element by element.
    let odd = body.replace("[160, 64]", "[160, 60]");
    let f = common::script(&odd);
    let p = plan(&f, &vec![None; 3], Device { grouped_mn: GroupedMn::MmaSync, ..Device::default() }).unwrap();
    assert!(p.source.contains("fb_grouped_mm<true, 2, FB_GMM_ELEMENT, FB_GMM_MN, 2>"), "{}", p.source);
}

#[test]
fn a_grouped_product_of_k_contiguous_operands_copies_its_tiles_16_bytes_a_thread() {
    let p = planned(
        "    x = fd.define_tensor(shape=[160, 64], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[4, 96, 64], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    wt = fd.ops.permute(w, dims=[0, 2, 1])
    y = fd.ops.grouped_mm(x, wt, o)
    fd.add_output(y)
",
    );
    assert!(p.source.contains("fb_grouped_mm<true, 0, FB_GMM_K, FB_GMM_K, 2>(a + 0, b + 0, offs + 0, d, 4, 160, 96, 64, 0, 64, 1, 6144, 1, 64)"), "{}", p.source);
    assert!(p.kernels[0].choice.as_ref().unwrap().reason.contains("cp.async"), "{:?}", p.kernels[0].choice);
}

#[test]
fn on_hopper_a_grouped_product_of_k_contiguous_operands_multiplies_with_wgmma() {
    let f = common::script(
        "    x = fd.define_tensor(shape=[160, 64], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[4, 300, 64], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    wt = fd.ops.permute(w, dims=[0, 2, 1])
    y = fd.ops.grouped_mm(x, wt, o)
    fd.add_output(y)
",
    );
    let layouts = vec![None; 3];
    // The kernel whose every thread copies and multiplies (the warp-specialized one is below).
    let p = plan(&f, &layouts, Device { grouped_wgmma: true, grouped_ws: 0, ..Device::default() }).unwrap();
    let k = &p.kernels[0];
    assert!(p.source.contains("fb_grouped_mm_wg<true, 0, 2>(a + 0, b + 0, offs + 0, d, 4, 160, 300, 64,"), "{}", p.source);
    // Tiles of 128 x 128: whole ones of m plus a partial one a group, times n's.
    assert_eq!(k.grid, [(2 + 4) * 3, 1, 1], "{}", k.summary);
    // A 1024-byte boundary past the stages (sized for either kernel's layout).
    assert_eq!(k.shared_bytes, 2 * 36864 + 1024);
    assert!(k.choice.as_ref().unwrap().reason.contains("wgmma"), "{:?}", k.choice);
    // Operands without k contiguous keep mma.sync: wgmma reads swizzled K-major tiles here.
    let row_major = common::script(
        "    x = fd.define_tensor(shape=[160, 64], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[4, 64, 300], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    y = fd.ops.grouped_mm(x, w, o)
    fd.add_output(y)
",
    );
    let p = plan(&row_major, &layouts, Device { grouped_mn: GroupedMn::Off, grouped_wgmma: true, ..Device::default() }).unwrap();
    assert!(p.source.contains("fb_grouped_mm<true, 0, FB_GMM_ELEMENT, FB_GMM_ELEMENT, 2>"), "{}", p.source);
    // By default (grouped_mn 2) x's tiles are copied 16 bytes a thread along
    // k; w's rows of 300 leave its chunks unaligned: element by element.
    let p = plan(&row_major, &layouts, Device { grouped_wgmma: true, ..Device::default() }).unwrap();
    assert!(p.source.contains("fb_grouped_mm<true, 0, FB_GMM_K, FB_GMM_ELEMENT, 2>"), "{}", p.source);
}

#[test]
fn the_warp_specialized_grouped_product_reads_its_operands_through_tensor_maps() {
    let layouts = vec![None; 3];
    let dev = |ws| Device { grouped_wgmma: true, grouped_ws: ws, grouped_ws_cuts: [true; 3], sm_count: 132, ..Device::default() };
    // Groups cutting m: x [160, 64] by rows, w [4, 300, 64] read as [group][column][k].
    let f = common::script(
        "    x = fd.define_tensor(shape=[160, 64], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[4, 300, 64], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    wt = fd.ops.permute(w, dims=[0, 2, 1])
    y = fd.ops.grouped_mm(x, wt, o)
    fd.add_output(y)
",
    );
    let p = plan(&f, &layouts, dev(256)).unwrap();
    let k = &p.kernels[0];
    assert!(p.source.contains("fb_grouped_mm_ws<true, 0, 4, 256>(ma, mb, offs + 0, d, 4, 160, 300, 64);"), "{}", p.source);
    assert!(p.source.contains("const __grid_constant__ fb_tmap ma, const __grid_constant__ fb_tmap mb"), "{}", p.source);
    assert_eq!((k.block, k.grid), ([384, 1, 1], [((2 + 4) * 2) as u32, 1, 1]), "tiles of 128 x 256, fewer than the multiprocessors");
    // Four stages of 128 + 256 rows of 64, a 1024-byte boundary, eight barriers.
    assert_eq!(k.shared_bytes, 4 * 384 * 128 + 1024 + 64);
    let (a, b) = (&k.tensor_maps[0], &k.tensor_maps[1]);
    assert_eq!((a.of, a.dims.clone(), a.strides.clone(), a.boxes.clone()), (KernelArg::Input(0), vec![64, 160], vec![64], vec![64, 128]));
    assert_eq!((b.of, b.dims.clone(), b.strides.clone(), b.boxes.clone()), (KernelArg::Input(1), vec![64, 300, 4], vec![64, 19200], vec![64, 256, 1]));
    assert!(k.choice.as_ref().unwrap().reason.contains("tensor memory accelerator"), "{:?}", k.choice);
    // 128 columns: six stages; with it off, the kernel whose every thread copies.
    let p = plan(&f, &layouts, dev(128)).unwrap();
    assert!(p.source.contains("fb_grouped_mm_ws<true, 0, 6, 128>"), "{}", p.source);
    assert_eq!(p.kernels[0].tensor_maps[1].boxes, vec![64, 128, 1]);
    let p = plan(&f, &layouts, dev(0)).unwrap();
    assert!(p.source.contains("fb_grouped_mm_wg<true, 0, 2>") && p.kernels[0].tensor_maps.is_empty(), "{}", p.source);
    // Without wgmma (not compiled for sm_90a) the knob changes nothing.
    let p = plan(&f, &layouts, Device { grouped_ws: 256, ..Device::default() }).unwrap();
    assert!(p.source.contains("fb_grouped_mm<true, 0, FB_GMM_K, FB_GMM_K, 2>"), "{}", p.source);
    // Groups cutting k (a weight gradient, both operands with the tokens
    // contiguous): 2-D maps over [rows][tokens], the grid capped at the
    // multiprocessors (4 groups x 8 x 2 tiles of 1024 x 300... here 4 x 2 x 2).
    let g = common::script(
        "    xt = fd.define_tensor(shape=[160, 512], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    dy = fd.define_tensor(shape=[300, 512], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    dyt = fd.ops.permute(dy, dims=[1, 0])
    y = fd.ops.grouped_mm(xt, dyt, o)
    fd.add_output(y)
",
    );
    let p = plan(&g, &layouts, dev(256)).unwrap();
    let k = &p.kernels[0];
    assert!(p.source.contains("fb_grouped_mm_ws<true, 2, 4, 256>(ma, mb, offs + 0, d, 4, 160, 300, 512);"), "{}", p.source);
    assert_eq!(k.grid, [4 * 2 * 2, 1, 1]);
    assert_eq!((k.tensor_maps[0].dims.clone(), k.tensor_maps[1].dims.clone()), (vec![512, 160], vec![512, 300]));
    assert_eq!((k.tensor_maps[0].strides.clone(), k.tensor_maps[1].strides.clone()), (vec![512], vec![512]));
    // Operands whose rows are contiguous (a weight gradient in autograd's
    // layout: x [512, 160] and dy [512, 304], the tokens strided) under
    // grouped_ws_mn: MN-major boxes of 64 rows by 64 of k over [k][rows].
    let h = common::script(
        "    x = fd.define_tensor(shape=[512, 160], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    dy = fd.define_tensor(shape=[512, 304], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    o = fd.define_tensor(shape=[4], contiguity=[True], dtype=DataType.Int32, is_cpu=False)
    xt = fd.ops.permute(x, dims=[1, 0])
    y = fd.ops.grouped_mm(xt, dy, o)
    fd.add_output(y)
",
    );
    let p = plan(&h, &layouts, dev(256)).unwrap();
    assert!(p.source.contains("fb_grouped_mm_wg<true, 2, 2, FB_GMM_MN, FB_GMM_MN>"), "off by default: {}", p.source);
    let p = plan(&h, &layouts, Device { grouped_ws_mn: true, ..dev(256) }).unwrap();
    let k = &p.kernels[0];
    assert!(p.source.contains("fb_grouped_mm_ws<true, 2, 4, 256, FB_GMM_MN, FB_GMM_MN>(ma, mb, offs + 0, d, 4, 160, 304, 512);"), "{}", p.source);
    assert_eq!((k.tensor_maps[0].dims.clone(), k.tensor_maps[0].strides.clone(), k.tensor_maps[0].boxes.clone()), (vec![160, 512], vec![160], vec![64, 64]));
    assert_eq!((k.tensor_maps[1].dims.clone(), k.tensor_maps[1].strides.clone(), k.tensor_maps[1].boxes.clone()), (vec![304, 512], vec![304], vec![64, 64]));
    assert!(k.choice.as_ref().unwrap().reason.contains("both with their rows contiguous"), "{:?}", k.choice);
    // By default only groups cutting m take it (the cuts checked on a GPU).
    let hopper = Device { grouped_wgmma: true, ..Device::default() };
    assert!(plan(&f, &layouts, hopper).unwrap().source.contains("fb_grouped_mm_ws<true, 0, 4, 256>"));
    assert!(plan(&g, &layouts, hopper).unwrap().source.contains("fb_grouped_mm_wg<true, 2, 2>"));
}

#[test]
fn an_unseeded_random_op_after_a_product_keeps_its_number_in_the_whole_fusion() {
    // The dead uniform is unseeded op 0, so randn_like (in the stage after
    // the product, which holds no uniform) draws from Philox offset 1, as
    // the CPU reference numbers it (seed 1, fusion 236: every element differed).
    let p = planned(
        "    a = fd.define_tensor(shape=[4, 8], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    b = fd.define_tensor(shape=[8, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    u = fd.ops.uniform(0.5, 0.75, shape=[1, 8], dtype=DataType.Float)
    y = fd.ops.matmul(a, b)
    z = fd.ops.randn_like(y)
    fd.add_output(z)
",
    );
    assert!(p.source.contains("fb_rng_normalf(0ull, 1ull,"), "{}", p.source);
}
