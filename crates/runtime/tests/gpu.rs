//! Tests that need a GPU are ignored with the reason when no NVIDIA driver was
//! found as they were built (`fusebench_testdata::needs_gpu!`); run anyway
//! (`--include-ignored`), each still skips itself, with the reason on stderr,
//! where there is no GPU.

use fusebench_runtime::{probe, Gpu, KernelArg, KernelCache, RuntimeError};

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float* out, const float* x, const float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fmaf_rn(a, x[i], y[i]);
}
"#;

/// A GPU with a private cache directory, or None (and the reason printed) where there is none.
fn gpu_or_skip(test: &str) -> Option<(Gpu, tempfile::TempDir)> {
    if let Err(reason) = probe() {
        eprintln!("skipped {test}: {reason}");
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let gpu = Gpu::with_cache(0, KernelCache::at(dir.path()))
        .expect("probe found a GPU, so it must open");
    Some((gpu, dir))
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_ne_bytes()).collect()
}

fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn opening_without_a_gpu_is_an_error_not_a_panic() {
    match (probe(), Gpu::new(0)) {
        (Ok(_), Ok(_)) => {}
        (Err(reason), Err(RuntimeError::Unavailable(r2))) => {
            assert_eq!(reason, r2);
            eprintln!("no GPU here, as reported: {reason}");
        }
        (p, g) => panic!("probe and Gpu::new disagree: {p:?} vs {g:?}"),
    }
}

fusebench_testdata::needs_gpu! {
#[test]
fn second_compile_comes_from_the_cache() {
    let Some((gpu, dir)) = gpu_or_skip("second_compile_comes_from_the_cache") else {
        return;
    };
    let first = gpu.compile(SAXPY, &["saxpy"]).unwrap();
    assert!(!first.from_cache());
    assert!(first.compile_ms() > 0.0);
    let path = first.info.cache_path.clone().expect("written to the cache");
    assert!(path.starts_with(dir.path()));
    let second = gpu.compile(SAXPY, &["saxpy"]).unwrap();
    assert!(second.from_cache());
    assert_eq!(second.compile_ms(), 0.0);
    assert_eq!(second.info.cache_key, first.info.cache_key);
    // Options are part of the key.
    let third = gpu
        .compile_with_options(SAXPY, &["saxpy"], &["--maxrregcount=32"])
        .unwrap();
    assert!(!third.from_cache());
    let a = first.kernels()[0].attributes();
    assert_eq!(a.name, "saxpy");
    assert!(a.registers_per_thread > 0 && a.max_threads_per_block > 0);
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn a_cache_entry_the_driver_rejects_is_recompiled() {
    let Some((gpu, _dir)) = gpu_or_skip("a_cache_entry_the_driver_rejects_is_recompiled") else {
        return;
    };
    let first = gpu.compile(SAXPY, &["saxpy"]).unwrap();
    let path = first.info.cache_path.clone().unwrap();
    let mut junk = b"\x7fELF".to_vec();
    junk.extend(std::iter::repeat_n(0xABu8, 4096));
    std::fs::write(&path, junk).unwrap();
    let again = gpu.compile(SAXPY, &["saxpy"]).unwrap();
    assert!(!again.from_cache());
    assert!(
        again
            .info
            .cache_note
            .as_deref()
            .unwrap_or("")
            .contains("recompiled"),
        "{:?}",
        again.info.cache_note
    );
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn units_compile_at_once_and_come_from_the_cache_after() {
    let Some((gpu, _dir)) = gpu_or_skip("units_compile_at_once_and_come_from_the_cache_after") else {
        return;
    };
    let scale = r#"
extern "C" __global__ void scale(float* out, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i];
}
"#;
    let units = vec![(SAXPY, vec!["saxpy"]), (scale, vec!["scale"])];
    let first = gpu.compile_units(&units).unwrap();
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|m| !m.from_cache() && m.compile_ms() > 0.0));
    assert_eq!(first[1].kernels()[0].attributes().name, "scale");
    assert_ne!(first[0].info.cache_key, first[1].info.cache_key);
    // Each unit its own cache entry: the second unit alone beside a new one.
    let other = "extern \"C\" __global__ void other(int* o) { o[0] = 1; }\n";
    let again = gpu.compile_units(&[(scale, vec!["scale"]), (other, vec!["other"])]).unwrap();
    assert!(again[0].from_cache() && !again[1].from_cache());
    // A unit that does not compile fails the whole call with NVRTC's log.
    let broken = "extern \"C\" __global__ void broken(float* o) { o[0] = undefined_name; }\n";
    match gpu.compile_units(&[(scale, vec!["scale"]), (broken, vec!["broken"])]) {
        Err(RuntimeError::Compile { log, .. }) => assert!(log.contains("undefined_name"), "{log}"),
        Err(e) => panic!("expected a compile error, got {e}"),
        Ok(_) => panic!("a broken unit compiled"),
    }
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn saxpy_matches_the_host_bit_for_bit() {
    let Some((gpu, _dir)) = gpu_or_skip("saxpy_matches_the_host_bit_for_bit") else {
        return;
    };
    let m = gpu.compile(SAXPY, &["saxpy"]).unwrap();
    let k = m.function("saxpy").unwrap();
    let n = 100_003usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 5.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 91) as f32 / 7.0).collect();
    let (dx, dy) = (
        gpu.alloc_from(&f32_bytes(&x)).unwrap(),
        gpu.alloc_from(&f32_bytes(&y)).unwrap(),
    );
    let out = gpu.alloc(n * 4).unwrap();
    out.fill(0xFF).unwrap();
    let args = [
        out.arg(),
        dx.arg(),
        dy.arg(),
        KernelArg::F32(3.0),
        KernelArg::I32(n as i32),
    ];
    gpu.launch(&k, ((n as u32).div_ceil(128), 1, 1), (128, 1, 1), 0, &args)
        .unwrap();
    gpu.synchronize().unwrap();
    let got = bytes_f32(&out.download().unwrap());
    for i in 0..n {
        assert_eq!(
            got[i].to_bits(),
            3.0f32.mul_add(x[i], y[i]).to_bits(),
            "element {i}"
        );
    }
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn compile_errors_carry_the_log_and_the_line() {
    let Some((gpu, _dir)) = gpu_or_skip("compile_errors_carry_the_log_and_the_line") else {
        return;
    };
    let src = "extern \"C\" __global__ void k(float* p) {\n  p[0] = nope;\n}\n";
    match gpu.compile(src, &["k"]) {
        Err(RuntimeError::Compile {
            log,
            source_excerpt,
        }) => {
            assert!(log.contains("nope"), "{log}");
            assert!(source_excerpt.contains(">>    2 |"), "{source_excerpt}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    // A C++ (mangled) name is not found under its plain name.
    let m = gpu
        .compile("__global__ void mangled(float* p) { p[0] = 1.0f; }", &[])
        .unwrap();
    assert!(matches!(
        m.function("mangled"),
        Err(RuntimeError::KernelNotFound { .. })
    ));
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn bad_launches_and_sizes_are_refused() {
    let Some((gpu, _dir)) = gpu_or_skip("bad_launches_and_sizes_are_refused") else {
        return;
    };
    let m = gpu.compile(SAXPY, &["saxpy"]).unwrap();
    let k = m.function("saxpy").unwrap();
    let buf = gpu.alloc(64).unwrap();
    assert!(matches!(
        buf.upload(&[0u8; 63]),
        Err(RuntimeError::Invalid(_))
    ));
    assert!(matches!(
        gpu.launch(&k, (1, 1, 1), (2048, 1, 1), 0, &[]),
        Err(RuntimeError::Invalid(_))
    ));
    if let Some(sizes) = &k.attributes().param_sizes {
        assert_eq!(sizes, &vec![8, 8, 8, 4, 4]);
        let r = gpu.launch(&k, (1, 1, 1), (32, 1, 1), 0, &[buf.arg()]);
        assert!(matches!(r, Err(RuntimeError::Invalid(_))), "{r:?}");
    } else {
        eprintln!("note: driver reports no parameter sizes; argument check not exercised");
    }
    gpu.synchronize().unwrap();
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn buffers_round_trip_and_fill() {
    let Some((gpu, _dir)) = gpu_or_skip("buffers_round_trip_and_fill") else {
        return;
    };
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let b = gpu.alloc_from(&data).unwrap();
    assert_eq!(b.download().unwrap(), data);
    b.fill(0xA5).unwrap();
    assert!(b.download().unwrap().iter().all(|&x| x == 0xA5));
    let z = gpu.alloc_zeroed(4096).unwrap();
    assert!(z.download().unwrap().iter().all(|&x| x == 0));
    let empty = gpu.alloc(0).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.download().unwrap(), Vec::<u8>::new());
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn timing_and_l2_flush() {
    let Some((gpu, _dir)) = gpu_or_skip("timing_and_l2_flush") else {
        return;
    };
    assert!(gpu.l2_flush_bytes().unwrap() as u64 >= 2 * gpu.info().l2_cache_bytes);
    // The first flush allocates its buffer and compiles its kernel (1.6 s on
    // the H200 with an empty kernel cache): not the flush's time.
    gpu.flush_l2().unwrap();
    let ms = gpu.time_ms(|| gpu.flush_l2()).unwrap();
    assert!(ms > 0.0 && ms < 1000.0, "{ms}");
    // Nothing enqueued still times (close to zero).
    let idle = gpu.time_ms(|| Ok(())).unwrap();
    assert!((0.0..10.0).contains(&idle), "{idle}");
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn dynamic_shared_memory_above_48k() {
    let Some((gpu, _dir)) = gpu_or_skip("dynamic_shared_memory_above_48k") else {
        return;
    };
    let src = r#"
extern "C" __global__ void last_of_tile(float* out, int n) {
    extern __shared__ float tile[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = (float)i;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = tile[n - 1];
}
"#;
    let m = gpu.compile(src, &["last_of_tile"]).unwrap();
    let k = m.function("last_of_tile").unwrap();
    let n = 20_000i32; // 80,000 bytes
    let out = gpu.alloc(4 * 4).unwrap();
    gpu.launch(
        &k,
        (4, 1, 1),
        (256, 1, 1),
        (n * 4) as u32,
        &[out.arg(), KernelArg::I32(n)],
    )
    .unwrap();
    let got = bytes_f32(&out.download().unwrap());
    assert_eq!(got, vec![(n - 1) as f32; 4]);
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn device_info_serializes() {
    let Some((gpu, _dir)) = gpu_or_skip("device_info_serializes") else {
        return;
    };
    let info = gpu.info();
    let json = serde_json::to_string(info).unwrap();
    assert!(json.contains(&info.uuid));
    assert!(info.uuid.starts_with("GPU-"));
    assert!(info.sm_count > 0 && info.l2_cache_bytes > 0 && info.total_memory_bytes > 0);
    assert_eq!(info.arch, gpu.target().arch);
}
}

/// f32 to bf16 bits, rounded to nearest even (the inputs below are finite).
fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

fn bf16_value(bits: u16) -> f64 {
    f32::from_bits((bits as u32) << 16) as f64
}

/// One product checked against an f64 loop on the host.
struct Product {
    dtype: fusebench_runtime::BlasType,
    batch: u64,
    m: u64,
    n: u64,
    k: u64,
    a: fusebench_runtime::MatrixStrides,
    a_len: usize,
    b: fusebench_runtime::MatrixStrides,
    b_len: usize,
    /// The bias's batch stride and its length in elements.
    bias: Option<(i64, usize)>,
    /// Every operand starts this many elements into its buffer, to test lower alignments.
    offset: usize,
}

/// Values in about [-scale, scale], exactly representable in every type tested.
fn values(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((s >> 40) as i64 - (1 << 23)) as f64 / (1u64 << 23) as f64;
            bf16_value(bf16_bits((u * scale) as f32))
        })
        .collect()
}

fn encode(dtype: fusebench_runtime::BlasType, v: &[f64]) -> Vec<u8> {
    use fusebench_runtime::BlasType::*;
    match dtype {
        BF16 => v
            .iter()
            .flat_map(|x| bf16_bits(*x as f32).to_ne_bytes())
            .collect(),
        F32 => v.iter().flat_map(|x| (*x as f32).to_ne_bytes()).collect(),
        F64 => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
        F16 | E4M3 | E5M2 => unimplemented!("no {dtype:?} case: FP8 products are checked through the engine"),
    }
}

fn decode(dtype: fusebench_runtime::BlasType, b: &[u8]) -> Vec<f64> {
    use fusebench_runtime::BlasType::*;
    match dtype {
        BF16 => b
            .chunks_exact(2)
            .map(|c| bf16_value(u16::from_ne_bytes([c[0], c[1]])))
            .collect(),
        F32 => bytes_f32(b).into_iter().map(f64::from).collect(),
        F64 => b
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
        F16 | E4M3 | E5M2 => unimplemented!("no {dtype:?} case: FP8 products are checked through the engine"),
    }
}

/// The largest power of two (at most 256) dividing the address.
fn alignment(addr: u64) -> u32 {
    1u32 << addr.trailing_zeros().min(8)
}

fn check_product(gpu: &Gpu, p: &Product) {
    use fusebench_runtime::{BlasType, MatmulSpec};
    let size = p.dtype.size();
    let (batch, m, n, k) = (p.batch as usize, p.m as usize, p.n as usize, p.k as usize);
    let av = values(p.a_len, 1, 1.0);
    let bv = values(p.b_len, 2, 1.0);
    // Bias values of 2 to 4 in size, so that a missing bias is far outside the tolerance.
    let biasv: Vec<f64> = values(p.bias.map_or(0, |b| b.1), 3, 1.0)
        .iter()
        .map(|x| x + 3.0 * x.signum())
        .collect();
    let upload = |v: &[f64]| {
        let mut bytes = vec![0u8; p.offset * size];
        bytes.extend(encode(p.dtype, v));
        gpu.alloc_from(&bytes).unwrap()
    };
    let (da, db, dbias) = (upload(&av), upload(&bv), upload(&biasv));
    let dd = gpu.alloc((p.offset + batch * m * n) * size).unwrap();
    // NaN (0xFF..) where the product writes nothing.
    dd.fill(0xFF).unwrap();
    let at = |b: &fusebench_runtime::DeviceBuffer| b.device_ptr() + (p.offset * size) as u64;
    let (pa, pb, pbias, pd) = (at(&da), at(&db), at(&dbias), at(&dd));
    let spec = MatmulSpec {
        d_batch: None,
        dtype: p.dtype,
        batch: p.batch,
        m: p.m,
        n: p.n,
        k: p.k,
        a: p.a,
        b: p.b,
        bias: p.bias.map(|b| b.0),
        epilogue: fusebench_runtime::BlasEpilogue::None,
        alpha: 1.0,
        align: [
            alignment(pa),
            alignment(pb),
            alignment(pbias),
            alignment(pd),
        ],
        operands: None,
        scales: fusebench_runtime::BlasScales::None,
    };
    let mm = gpu
        .matmul_plan(&spec)
        .unwrap_or_else(|e| panic!("{}: {e}", spec.describe()));
    eprintln!("{}: {}", spec.describe(), mm.describe());
    assert!(mm.workspace_bytes() <= 32 << 20);
    assert_eq!(mm.spec(), &spec);
    let bias = p.bias.map(|_| pbias);
    gpu.matmul(&mm, pa, pb, None, bias, pd).unwrap();
    gpu.synchronize().unwrap();
    let got = decode(p.dtype, &dd.download().unwrap()[p.offset * size..]);
    let idx = |s: &fusebench_runtime::MatrixStrides, bt: usize, r: usize, c: usize| {
        (bt as i64 * s.batch + r as i64 * s.row + c as i64 * s.col) as usize
    };
    let mut worst = 0f64;
    for bt in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let (mut sum, mut abs) = (0f64, 0f64);
                for q in 0..k {
                    let x = av[idx(&p.a, bt, i, q)] * bv[idx(&p.b, bt, q, j)];
                    sum += x;
                    abs += x.abs();
                }
                if let Some((stride, _)) = p.bias {
                    let b = biasv[bt * stride as usize + j];
                    sum += b;
                    abs += b.abs();
                }
                // bf16: the output's rounding (2^-8 relative, doubled) and f32 sums whose
                // partials may be rounded to bf16; f32 must be full f32, well short of TF32's
                // 2^-11; f64 to near its precision.
                let tol = match p.dtype {
                    BlasType::BF16 => 2f64.powi(-7) * sum.abs() + 2f64.powi(-8) * abs,
                    BlasType::F32 => 1e-5 * sum.abs() + 1e-6 * abs,
                    _ => 1e-12 * abs,
                };
                let g = got[(bt * m + i) * n + j];
                let err = (g - sum).abs();
                assert!(
                    err <= tol,
                    "{}: D[{bt}, {i}, {j}] = {g}, expected {sum} (tolerance {tol})",
                    spec.describe()
                );
                worst = worst.max(err / tol.max(f64::MIN_POSITIVE));
            }
        }
    }
    eprintln!("  worst error / tolerance: {worst:.3}");
}

fusebench_testdata::needs_gpu! {
#[test]
fn cublaslt_products_match_the_host() {
    use fusebench_runtime::{BlasType, MatrixStrides as S};
    let Some((gpu, _dir)) = gpu_or_skip("cublaslt_products_match_the_host") else {
        return;
    };
    if let Err(why) = fusebench_runtime::blas_available() {
        eprintln!("skipped cublaslt_products_match_the_host: {why}");
        return;
    }
    let s = |batch, row, col| S { batch, row, col };
    let cases = [
        // A linear layer: batched activations, one weight [n, k] (B transposed, batch
        // stride 0), a bias per batch.
        Product {
            dtype: BlasType::BF16,
            batch: 3, m: 37, n: 24, k: 40,
            a: s(37 * 40, 40, 1), a_len: 3 * 37 * 40,
            b: s(0, 1, 40), b_len: 24 * 40,
            bias: Some((24, 3 * 24)),
            offset: 0,
        },
        // Larger, A column-major, one bias for all.
        Product {
            dtype: BlasType::BF16,
            batch: 2, m: 256, n: 192, k: 320,
            a: s(256 * 320, 1, 256), a_len: 2 * 256 * 320,
            b: s(320 * 192, 192, 1), b_len: 2 * 320 * 192,
            bias: Some((0, 192)),
            offset: 0,
        },
        // f32, row-major batched operands, 4-byte alignment everywhere.
        Product {
            dtype: BlasType::F32,
            batch: 2, m: 33, n: 17, k: 29,
            a: s(33 * 29, 29, 1), a_len: 2 * 33 * 29,
            b: s(29 * 17, 17, 1), b_len: 2 * 29 * 17,
            bias: Some((0, 17)),
            offset: 1,
        },
        // f32, one row (m = 1, its row stride meaningless), a transposed broadcast B.
        Product {
            dtype: BlasType::F32,
            batch: 2, m: 1, n: 64, k: 128,
            a: s(128, 999, 1), a_len: 2 * 128,
            b: s(0, 1, 128), b_len: 64 * 128,
            bias: None,
            offset: 0,
        },
        Product {
            dtype: BlasType::F64,
            batch: 2, m: 20, n: 12, k: 16,
            a: s(20 * 16, 1, 20), a_len: 2 * 20 * 16,
            b: s(16 * 12, 12, 1), b_len: 2 * 16 * 12,
            bias: Some((12, 2 * 12)),
            offset: 0,
        },
    ];
    for p in &cases {
        check_product(&gpu, p);
    }
}
}

fusebench_testdata::needs_gpu! {
#[test]
fn cublaslt_refuses_what_it_cannot_run() {
    use fusebench_runtime::{BlasType, MatmulSpec, MatrixStrides as S};
    let Some((gpu, _dir)) = gpu_or_skip("cublaslt_refuses_what_it_cannot_run") else {
        return;
    };
    if let Err(why) = fusebench_runtime::blas_available() {
        eprintln!("skipped cublaslt_refuses_what_it_cannot_run: {why}");
        return;
    }
    let spec = MatmulSpec {
        d_batch: None,
        dtype: BlasType::BF16,
        batch: 1, m: 64, n: 64, k: 64,
        a: S { batch: 0, row: 64, col: 1 },
        b: S { batch: 0, row: 64, col: 1 },
        bias: None,
        epilogue: fusebench_runtime::BlasEpilogue::None,
        alpha: 1.0,
        align: [256; 4],
        operands: None,
        scales: fusebench_runtime::BlasScales::None,
    };
    let mm = gpu.matmul_plan(&spec).unwrap();
    let buf = gpu.alloc(4 * 64 * 64 * 2).unwrap();
    let p = buf.device_ptr();
    let (a, b, d) = (p, p + 8192, p + 16384);
    // Lower alignment than planned, a bias the plan has not: errors, nothing enqueued.
    let e = gpu.matmul(&mm, a + 2, b, None, None, d).unwrap_err();
    assert!(matches!(e, RuntimeError::Invalid(_)) && e.to_string().contains("aligned"), "{e}");
    assert!(gpu.matmul(&mm, a, b, None, Some(p + 24576), d).is_err());
    gpu.matmul(&mm, a, b, None, None, d).unwrap();
    gpu.synchronize().unwrap();
    // No unit stride: refused at planning, naming the copy it needs.
    let bad = MatmulSpec { a: S { batch: 0, row: 128, col: 2 }, ..spec };
    let e = gpu.matmul_plan(&bad).unwrap_err();
    assert!(e.to_string().contains("needs a copy"), "{e}");
}
}

/// bf16 bytes of `v` (exact for the small multiples of 1/8 used here).
fn bf16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|&x| bf16_bits(x).to_ne_bytes()).collect()
}

fn bytes_bf16(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(2).map(|c| bf16_value(u16::from_ne_bytes([c[0], c[1]]))).collect()
}

fusebench_testdata::needs_gpu! {
/// cuDNN's attention (runtime/dnn.rs) where every query sees two equal keys:
/// each weighs 1/2, so O is the mean of the two value rows, the log-sum-exp
/// the scaled q.k plus ln 2; backward, dV_j = sum_i dO_i / 2 and dQ = 0.
#[test]
fn cudnn_attention_over_two_equal_keys() {
    use fusebench_runtime::{dnn_available, AttentionSpec, AttentionTensor as T, BlasType};
    let Some((gpu, _dir)) = gpu_or_skip("cudnn_attention_over_two_equal_keys") else {
        return;
    };
    if let Err(why) = dnn_available() {
        eprintln!("skipped cudnn_attention_over_two_equal_keys: {why}");
        return;
    }
    let (h, sq, skv, d) = (2usize, 16usize, 2usize, 64usize);
    let dense = |s: usize, d: usize| [(h * s * d) as i64, (s * d) as i64, d as i64, 1];
    let small = |i: usize, m: usize| ((i * 7 + m) % 9) as f32 / 8.0 - 0.5;
    let q: Vec<f32> = (0..h * sq * d).map(|i| small(i, 1)).collect();
    let key: Vec<f32> = (0..d).map(|i| small(i, 3)).collect();
    let k: Vec<f32> = (0..h * skv).flat_map(|_| key.clone()).collect();
    let v: Vec<f32> = (0..h * skv * d).map(|i| small(i, 5)).collect();
    let d_o: Vec<f32> = (0..h * sq * d).map(|i| small(i, 2)).collect();
    let up = |x: &[f32]| gpu.alloc_from(&bf16_bytes(x)).unwrap();
    let (qb, kb, vb, dob) = (up(&q), up(&k), up(&v), up(&d_o));
    let zeros = |n: usize| gpu.alloc_from(&vec![0u8; n]).unwrap();
    let (o, stats) = (zeros(2 * h * sq * d), zeros(4 * h * sq));
    let scale = 0.125f32;
    let spec = |backward: bool, strides: Vec<(T, [i64; 4])>| AttentionSpec {
        backward,
        dtype: BlasType::BF16,
        b: 1,
        h: h as i64,
        s_q: sq as i64,
        s_kv: skv as i64,
        d: d as i64,
        d_v: d as i64,
        causal: false,
        strides,
    };
    let mut st = vec![(T::Q, dense(sq, d)), (T::K, dense(skv, d)), (T::V, dense(skv, d)), (T::O, dense(sq, d)), (T::Stats, [(h * sq) as i64, sq as i64, 1, 1])];
    let fwd = gpu.attention_plan(&spec(false, st.clone()), "test_fwd").expect("cuDNN plans the forward");
    let ptr = |b: &fusebench_runtime::DeviceBuffer| b.device_ptr();
    let mut ptrs = vec![(T::Q, ptr(&qb)), (T::K, ptr(&kb)), (T::V, ptr(&vb)), (T::O, ptr(&o)), (T::Stats, ptr(&stats))];
    gpu.attention(&fwd, &ptrs, scale).unwrap();
    let (got_o, got_lse) = (bytes_bf16(&o.download().unwrap()), bytes_f32(&stats.download().unwrap()));
    for hh in 0..h {
        for i in 0..sq {
            let qk: f64 = (0..d).map(|c| q[(hh * sq + i) * d + c] as f64 * key[c] as f64).sum();
            let want = scale as f64 * qk + std::f64::consts::LN_2;
            let lse = got_lse[hh * sq + i] as f64;
            assert!((lse - want).abs() <= 1e-5 * want.abs().max(1.0), "lse [{hh}, {i}]: {lse} vs {want}");
            for c in 0..d {
                let mean = (v[(hh * skv) * d + c] as f64 + v[(hh * skv + 1) * d + c] as f64) / 2.0;
                let got = got_o[(hh * sq + i) * d + c];
                assert!((got - mean).abs() <= 2f64.powi(-8) * mean.abs() + 1e-6, "o [{hh}, {i}, {c}]: {got} vs {mean}");
            }
        }
    }
    // The backward, from the forward's own O and statistics.
    let (dq, dk, dv) = (zeros(2 * h * sq * d), zeros(2 * h * skv * d), zeros(2 * h * skv * d));
    let (ssum, acc) = (zeros(4 * h * sq), zeros(4 * h * sq * d));
    st.extend([(T::DO, dense(sq, d)), (T::DQ, dense(sq, d)), (T::DK, dense(skv, d)), (T::DV, dense(skv, d))]);
    let bwd = gpu.attention_plan(&spec(true, st), "test_bwd").expect("cuDNN plans the backward");
    ptrs.extend([(T::DO, ptr(&dob)), (T::DQ, ptr(&dq)), (T::DK, ptr(&dk)), (T::DV, ptr(&dv)), (T::SoftmaxSum, ptr(&ssum)), (T::DqAccum, ptr(&acc))]);
    gpu.attention(&bwd, &ptrs, scale).unwrap();
    let (got_dq, got_dv) = (bytes_bf16(&dq.download().unwrap()), bytes_bf16(&dv.download().unwrap()));
    for hh in 0..h {
        for c in 0..d {
            let half: f64 = (0..sq).map(|i| d_o[(hh * sq + i) * d + c] as f64).sum::<f64>() / 2.0;
            for j in 0..skv {
                let got = got_dv[(hh * skv + j) * d + c];
                assert!((got - half).abs() <= 2f64.powi(-7) * half.abs() + 1e-3, "dv [{hh}, {j}, {c}]: {got} vs {half}");
            }
        }
    }
    let worst = got_dq.iter().fold(0f64, |m, x| m.max(x.abs()));
    assert!(worst <= 1e-2, "dq of equal keys is 0, got up to {worst}");
}
}
