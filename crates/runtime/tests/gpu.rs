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
