//! End-to-end check of the runtime on a real GPU; on a machine without one it says why and
//! exits 0.
//!
//!     cargo run --release -p fusebench-runtime --example smoke [-- --no-fault]
//!
//! Steps: probe, compile (cold, then from the cache), saxpy on 2^24 floats checked bit for
//! bit, a kernel with more than 48 KiB of dynamic shared memory, timing warm and with L2
//! flushed, error paths (compile error, wrong arguments, unknown kernel), and last, unless
//! `--no-fault`, a kernel that faults, to show how the fault is reported (this leaves the
//! context unusable, which is why it runs last).

use std::process::ExitCode;
use std::time::Instant;

use fusebench_runtime::{probe, Gpu, KernelArg, KernelCache, RuntimeError};

// No #include: NVRTC has no CUDA headers on the GPU machine. __fmaf_rn makes the rounding
// explicit so the host can reproduce it with f32::mul_add.
const SOURCE: &str = r#"
typedef long long i64;

extern "C" __global__ void saxpy(float* __restrict__ out, const float* __restrict__ x,
                                 const float* __restrict__ y, float a, i64 n) {
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = __fmaf_rn(a, x[i], y[i]);
    }
}

// Reverses each block's chunk through dynamic shared memory (sized at launch).
extern "C" __global__ void reverse_chunks(float* out, const float* in, int per_block) {
    extern __shared__ float tile[];
    const float* src = in + (i64)blockIdx.x * per_block;
    float* dst = out + (i64)blockIdx.x * per_block;
    for (int i = threadIdx.x; i < per_block; i += blockDim.x) tile[i] = src[i];
    __syncthreads();
    for (int i = threadIdx.x; i < per_block; i += blockDim.x) dst[i] = tile[per_block - 1 - i];
}

extern "C" __global__ void write_through(float* p) { p[threadIdx.x] = 1.0f; }
"#;

const BROKEN_SOURCE: &str =
    "extern \"C\" __global__ void broken(float* p) {\n    p[0] = undefined_name;\n}\n";

fn main() -> ExitCode {
    let no_fault = std::env::args().any(|a| a == "--no-fault");
    let t = Instant::now();
    let info = match probe() {
        Ok(info) => info,
        Err(reason) => {
            println!("no GPU: {reason}");
            println!("skipped: nothing to run on this machine");
            return ExitCode::SUCCESS;
        }
    };
    println!("probe: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    println!(
        "device: {}",
        serde_json::to_string_pretty(&info).unwrap_or_default()
    );
    println!(
        "driver {} | NVRTC {}.{}",
        info.driver_version_string(),
        info.nvrtc_version.0,
        info.nvrtc_version.1
    );

    let mut checks = Checks::default();
    if let Err(e) = run(&mut checks, no_fault) {
        println!("FAILED: {e}");
        checks.failed += 1;
    }
    println!("\n{} passed, {} failed", checks.passed, checks.failed);
    if checks.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[derive(Default)]
struct Checks {
    passed: u32,
    failed: u32,
}

impl Checks {
    fn check(&mut self, ok: bool, what: &str) {
        if ok {
            self.passed += 1;
            println!("ok    {what}");
        } else {
            self.failed += 1;
            println!("FAIL  {what}");
        }
    }
}

fn run(checks: &mut Checks, no_fault: bool) -> Result<(), RuntimeError> {
    // A fresh cache directory, so the first compile really runs NVRTC.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let cache_dir =
        std::env::temp_dir().join(format!("fusebench-smoke-{}-{stamp}", std::process::id()));
    let t = Instant::now();
    let gpu = Gpu::with_cache(0, KernelCache::at(&cache_dir))?;
    println!(
        "\nGpu::new: {:.1} ms, target {:?}",
        t.elapsed().as_secs_f64() * 1e3,
        gpu.target()
    );

    // --- compilation and the cache
    let names = ["saxpy", "reverse_chunks", "write_through"];
    let cold = gpu.compile(SOURCE, &names)?;
    let warm = gpu.compile(SOURCE, &names)?;
    println!(
        "\ncompile cold: nvrtc {:.1} ms, load {:.2} ms, total {:.1} ms, from_cache={}, {} bytes of {:?}",
        cold.info.compile_ms,
        cold.info.load_ms,
        cold.info.total_ms,
        cold.from_cache(),
        cold.info.image_bytes,
        cold.info.image
    );
    println!(
        "compile warm: nvrtc {:.1} ms, load {:.2} ms, total {:.1} ms, from_cache={}",
        warm.info.compile_ms,
        warm.info.load_ms,
        warm.info.total_ms,
        warm.from_cache()
    );
    println!(
        "cache entry: {:?} note: {:?}",
        cold.info.cache_path, cold.info.cache_note
    );
    if !cold.info.log.is_empty() {
        println!("NVRTC log:\n{}", cold.info.log);
    }
    checks.check(
        !cold.from_cache() && cold.compile_ms() > 0.0,
        "first compile ran NVRTC",
    );
    checks.check(
        warm.from_cache() && warm.compile_ms() == 0.0,
        "second compile came from the cache",
    );
    for k in warm.kernels() {
        println!(
            "kernel: {}",
            serde_json::to_string(k.attributes()).unwrap_or_default()
        );
    }

    // --- saxpy on 2^24 floats, checked bit for bit
    let n: usize = 1 << 24;
    let a = 1.75f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 977) as f32 * 0.25 - 100.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 613) as f32 * 0.5 + 1e-3).collect();
    let dx = gpu.alloc_from(&to_bytes(&x))?;
    let dy = gpu.alloc_from(&to_bytes(&y))?;
    let out = gpu.alloc(n * 4)?;
    out.fill(0xFF)?; // NaN everywhere: an element the kernel misses stays NaN
    let saxpy = warm.function("saxpy")?;
    let block = 256u32;
    let grid = ((n as u32).div_ceil(block)).min(gpu.info().sm_count * 32);
    let args = [
        dx.arg(),
        dy.arg(),
        KernelArg::F32(a),
        KernelArg::I64(n as i64),
    ];
    let args = [out.arg(), args[0], args[1], args[2], args[3]];
    gpu.launch(&saxpy, (grid, 1, 1), (block, 1, 1), 0, &args)?;
    gpu.synchronize()?;
    let got = from_bytes(&out.download()?);
    let bad: Vec<usize> = (0..n)
        .filter(|&i| got[i].to_bits() != a.mul_add(x[i], y[i]).to_bits())
        .take(5)
        .collect();
    for &i in &bad {
        println!(
            "  mismatch at {i}: got {} want {}",
            got[i],
            a.mul_add(x[i], y[i])
        );
    }
    checks.check(
        bad.is_empty(),
        "saxpy result equals fma(a, x, y) bit for bit on 2^24 elements",
    );

    // --- dynamic shared memory above 48 KiB
    let per_block = 24 * 1024; // floats: 96 KiB of shared memory per block
    let blocks = 64usize;
    let rev = warm.function("reverse_chunks")?;
    let src: Vec<f32> = (0..per_block * blocks).map(|i| i as f32).collect();
    let din = gpu.alloc_from(&to_bytes(&src))?;
    let dout = gpu.alloc(src.len() * 4)?;
    dout.fill(0xFF)?;
    let smem = (per_block * 4) as u32;
    gpu.launch(
        &rev,
        (blocks as u32, 1, 1),
        (512, 1, 1),
        smem,
        &[dout.arg(), din.arg(), KernelArg::I32(per_block as i32)],
    )?;
    let got = from_bytes(&dout.download()?);
    let ok = (0..blocks).all(|b| {
        (0..per_block).all(|i| got[b * per_block + i] == src[b * per_block + per_block - 1 - i])
    });
    checks.check(
        ok,
        &format!("kernel with {} KiB of dynamic shared memory", smem / 1024),
    );

    // --- timing
    let bytes = 3.0 * 4.0 * n as f64;
    let mut warm_ms = Vec::new();
    let mut cold_ms = Vec::new();
    for _ in 0..3 {
        gpu.launch(&saxpy, (grid, 1, 1), (block, 1, 1), 0, &args)?;
    }
    for _ in 0..20 {
        warm_ms.push(gpu.time_ms(|| gpu.launch(&saxpy, (grid, 1, 1), (block, 1, 1), 0, &args))?);
    }
    for _ in 0..20 {
        gpu.flush_l2()?;
        cold_ms.push(gpu.time_ms(|| gpu.launch(&saxpy, (grid, 1, 1), (block, 1, 1), 0, &args))?);
    }
    let batch = gpu.time_ms(|| {
        for _ in 0..10 {
            gpu.launch(&saxpy, (grid, 1, 1), (block, 1, 1), 0, &args)?;
        }
        Ok(())
    })? / 10.0;
    let flush_ms = gpu.time_ms(|| gpu.flush_l2())?;
    let (w, c) = (
        fusebench_measure::median(&warm_ms),
        fusebench_measure::median(&cold_ms),
    );
    println!(
        "\nsaxpy 2^24 floats ({:.0} MB moved), grid {grid} x block {block}:",
        bytes / 1e6
    );
    println!(
        "  warm  median {:.2} us ({:.2} TB/s)",
        w * 1e3,
        bytes / (w * 1e-3) / 1e12
    );
    println!(
        "  cold  median {:.2} us ({:.2} TB/s), L2 flushed before each",
        c * 1e3,
        bytes / (c * 1e-3) / 1e12
    );
    println!("  10 back-to-back: {:.2} us each", batch * 1e3);
    println!(
        "  flush_l2 itself: {:.2} us for {} MiB",
        flush_ms * 1e3,
        gpu.l2_flush_bytes().unwrap_or(0) >> 20
    );
    checks.check(
        w > 0.0 && c > 0.0 && c.is_finite(),
        "event timing returns positive times",
    );

    // --- error paths
    match gpu.compile(BROKEN_SOURCE, &["broken"]) {
        Err(RuntimeError::Compile {
            log,
            source_excerpt,
        }) => {
            println!("\ncompile error, as expected:\n{log}\n{source_excerpt}");
            checks.check(
                log.contains("undefined_name") && source_excerpt.contains(">>"),
                "compile error carries NVRTC's log and the source line",
            );
        }
        other => checks.check(false, &format!("compile error expected, got {other:?}")),
    }
    let wrong = gpu.launch(&saxpy, (1, 1, 1), (32, 1, 1), 0, &args[..3]);
    println!("wrong argument count -> {wrong:?}");
    match &saxpy.attributes().param_sizes {
        Some(sizes) => checks.check(
            matches!(wrong, Err(RuntimeError::Invalid(_))) && sizes == &vec![8, 8, 8, 4, 8],
            "parameter sizes read from the driver and wrong arguments refused",
        ),
        None => println!(
            "note: the driver did not report parameter sizes (cuFuncGetParamInfo); arguments are not checked"
        ),
    }
    gpu.synchronize()?;
    let missing = warm.function("no_such_kernel");
    println!("unknown kernel -> {missing:?}");
    checks.check(
        matches!(missing, Err(RuntimeError::KernelNotFound { .. })),
        "unknown kernel name is an error",
    );
    let _ = std::fs::remove_dir_all(&cache_dir);

    // --- a faulting kernel, last: the context cannot be used afterwards
    if !no_fault {
        let k = warm.function("write_through")?;
        gpu.launch(&k, (1, 1, 1), (32, 1, 1), 0, &[KernelArg::Ptr(0)])?;
        let r = gpu.synchronize();
        println!(
            "\nfaulting kernel -> {}",
            r.as_ref()
                .err()
                .map(|e| e.to_string())
                .unwrap_or("no error".into())
        );
        checks.check(
            matches!(&r, Err(RuntimeError::KernelFailed { kernel, .. }) if kernel.contains("write_through")),
            "a fault is reported with the kernel's name",
        );
    }
    Ok(())
}

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_ne_bytes()).collect()
}

fn from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
