//! Source to loaded module: NVRTC for the device's own architecture, through the disk cache.
//!
//! The NVRTC calls are made at cudarc's `result`/`sys` level because the safe level returns
//! PTX only and drops the log of a successful compile, and both are wanted here.

use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaModule;
use cudarc::nvrtc::{result as nr, sys as nsys, Ptx};
use serde::{Deserialize, Serialize};

use crate::arch::ImageKind;
use crate::cache::{cache_key, CacheKeyParts};
use crate::error::{guard, DriverContext, RuntimeError};
use crate::gpu::Gpu;
use crate::launch::{Kernel, KernelAttributes};

/// Always passed. No `--use_fast_math`: results are compared bit for bit with a CPU
/// reference, which needs IEEE division, square root and denormals.
pub const BASE_OPTIONS: &[&str] = &["-default-device", "--std=c++17", "-lineinfo", MINIMAL_OPTION];

/// Leaves out of NVRTC's implicit header what generated kernels never use (texture and
/// surface functions, the device runtime, the CUDA runtime's types): the same machine code (20
/// corpus fusions compared, NVRTC 12.9), and on the GPU machine (NVRTC 13.0) the first compile in
/// a process 210 ms instead of 326 (median over 12 corpus fusions, BENCHMARKS.md session 34),
/// where NVRTC's start-up, not the kernels, is most of it. An NVRTC that does not know the
/// option compiles without it (`nvrtc_compile`).
pub const MINIMAL_OPTION: &str = "-minimal";

/// Options an NVRTC too old to know them compiles without.
const OPTIONAL: [&str; 2] = [SPLIT_OPTION, MINIMAL_OPTION];

/// Optimizes a module's kernels on as many threads as there are cores, each on its own: the
/// machine code is the same (the SASS of all 33 corpus fusions compared, NVRTC 12.9), but the
/// threads cost time of their own. On two cores (`bench/compile_time.py`, BENCHMARKS.md) the
/// corpus's modules of three kernels compiled 13-30% faster (637 -> 488 ms the longest) and
/// those of one kernel up to 25% slower, so it is passed for `SPLIT_FROM` kernels or more. On
/// the GPU machine (16 cores, NVRTC 13.0) it helped too: the corpus's geometric mean 0.955 with
/// it on every module, the longest (three kernels) 719 -> 588 ms. An NVRTC that does not know
/// the option compiles without it (`nvrtc_compile`).
pub const SPLIT_OPTION: &str = "--split-compile=0";

/// Kernels a module holds at least for `SPLIT_OPTION`.
pub const SPLIT_FROM: usize = 3;

/// Threads the machine runs at least for a fusion's kernels to compile apart by default.
pub const APART_FROM_THREADS: usize = 4;

/// Whether a fusion's kernels compile as translation units of their own, a thread each
/// (`Plan::units`): `FUSEBENCH_COMPILE_APART`, by default where the machine runs
/// `APART_FROM_THREADS` threads or more. Each unit parses the prelude it names again, which
/// the threads repay only where there are enough of them.
pub fn compile_apart() -> bool {
    let set = fusebench_knobs::get().ok().and_then(|k| k.compile_apart);
    set.unwrap_or_else(|| std::thread::available_parallelism().is_ok_and(|n| n.get() >= APART_FROM_THREADS))
}

/// Options that would trade IEEE semantics for speed.
const FORBIDDEN_OPTIONS: &[&str] = &[
    "--use_fast_math",
    "-use_fast_math",
    "--use-fast-math",
    "-use-fast-math",
    "--ftz=true",
    "-ftz=true",
    "--prec-div=false",
    "-prec-div=false",
    "--prec-sqrt=false",
    "-prec-sqrt=false",
];

/// The name NVRTC uses in its diagnostics ("fusebench_kernel.cu(12): error: ...").
const PROGRAM_NAME: &str = "fusebench_kernel.cu";

/// The full option list for `arch`, refusing anything that breaks IEEE semantics.
pub fn build_options(arch: &str, extra: &[&str]) -> Result<Vec<String>, RuntimeError> {
    if let Some(bad) = extra.iter().find(|o| FORBIDDEN_OPTIONS.contains(&o.trim())) {
        return Err(RuntimeError::Invalid(format!(
            "NVRTC option `{bad}` is not allowed: kernels must keep exact IEEE semantics"
        )));
    }
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    opts.extend(BASE_OPTIONS.iter().map(|s| s.to_string()));
    opts.extend(extra.iter().map(|s| s.to_string()));
    Ok(opts)
}

/// The options for a module of `kernels` kernels: `build_options`, split over threads from
/// `SPLIT_FROM` kernels.
fn module_options(arch: &str, extra: &[&str], kernels: usize) -> Result<Vec<String>, RuntimeError> {
    let mut extra = extra.to_vec();
    if kernels >= SPLIT_FROM {
        extra.push(SPLIT_OPTION);
    }
    build_options(arch, &extra)
}

/// Per-kernel resource usage read back from the driver, and how the module came to be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleInfo {
    pub arch: String,
    pub image: ImageKind,
    pub image_bytes: usize,
    pub from_cache: bool,
    /// Time spent in NVRTC; 0 when the image came from the cache.
    pub compile_ms: f64,
    /// Cache read (if any) plus cuModuleLoadData.
    pub load_ms: f64,
    /// The whole `compile` call.
    pub total_ms: f64,
    /// NVRTC's log (warnings); empty for a cache hit.
    pub log: String,
    pub options: Vec<String>,
    pub cache_key: String,
    pub cache_path: Option<PathBuf>,
    /// Why the cache was not used or not written, when that happened.
    pub cache_note: Option<String>,
    pub kernels: Vec<KernelAttributes>,
}

pub struct CompiledModule {
    module: Arc<CudaModule>,
    gpu: Gpu,
    kernels: Vec<Kernel>,
    pub info: ModuleInfo,
}

impl std::fmt::Debug for CompiledModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledModule")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl CompiledModule {
    /// A kernel by its (extern "C") name; those named at compile time are already loaded.
    pub fn function(&self, name: &str) -> Result<Kernel, RuntimeError> {
        if let Some(k) = self.kernels.iter().find(|k| k.name() == name) {
            return Ok(k.clone());
        }
        Kernel::load(&self.gpu, &self.module, name)
    }

    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    pub fn from_cache(&self) -> bool {
        self.info.from_cache
    }

    pub fn compile_ms(&self) -> f64 {
        self.info.compile_ms
    }
}

impl Gpu {
    /// Compiles `source` for this device (or loads the cached image) and loads the named
    /// kernels, which must be `extern "C"`. The source must not `#include` anything: NVRTC has
    /// no CUDA headers here.
    pub fn compile(
        &self,
        source: &str,
        kernel_names: &[&str],
    ) -> Result<Arc<CompiledModule>, RuntimeError> {
        self.compile_with_options(source, kernel_names, &[])
    }

    /// As `compile`, with extra NVRTC options (e.g. "--maxrregcount=64"); they are part of the
    /// cache key.
    pub fn compile_with_options(
        &self,
        source: &str,
        kernel_names: &[&str],
        extra_options: &[&str],
    ) -> Result<Arc<CompiledModule>, RuntimeError> {
        guard("compiling a kernel module", || {
            self.compile_inner(source, kernel_names, extra_options)
        })
    }

    /// Compiles several translation units (each with the kernels it holds), NVRTC running for
    /// each on a thread of its own, then loads them in order: the wait is the longest unit's
    /// compile, not their sum. The first error in unit order is returned.
    pub fn compile_units(&self, units: &[(&str, Vec<&str>)]) -> Result<Vec<Arc<CompiledModule>>, RuntimeError> {
        if units.len() <= 1 {
            return units.iter().map(|(src, names)| self.compile(src, names)).collect();
        }
        guard("compiling kernel modules", || {
            let t0 = Instant::now();
            let built = at_once(units, |src, n| self.build(src, n, &[]));
            let mut out = vec![];
            for (b, (src, names)) in built.into_iter().zip(units) {
                out.push(self.load_built(b?, src, names, &[], t0)?);
            }
            Ok(out)
        })
    }

    fn compile_inner(
        &self,
        source: &str,
        kernel_names: &[&str],
        extra_options: &[&str],
    ) -> Result<Arc<CompiledModule>, RuntimeError> {
        let t0 = Instant::now();
        let built = self.build(source, kernel_names.len(), extra_options)?;
        self.load_built(built, source, kernel_names, extra_options, t0)
    }

    /// The image of `source`: the cache's, or NVRTC's (then cached). No driver call, so units
    /// can be built on threads of their own.
    fn build(&self, source: &str, kernels: usize, extra_options: &[&str]) -> Result<Built, RuntimeError> {
        let t0 = Instant::now();
        let target = self.target();
        let info = self.info();
        let options = module_options(target.arch, extra_options, kernels)?;
        let key = cache_key(&CacheKeyParts {
            source,
            arch: target.arch,
            driver_version: info.driver_version,
            nvrtc_version: info.nvrtc_version,
            options: &options,
        });
        let cache = self.cache();
        let mut note = cache
            .dir()
            .is_none()
            .then(|| "kernel cache disabled".to_string());
        if let Some(hit) = cache.load(&key) {
            return Ok(Built {
                parts: Parts {
                    key,
                    options,
                    log: String::new(),
                    note,
                    compile_ms: 0.0,
                    // The cache read; loading adds cuModuleLoadData's time.
                    load_ms: ms_since(t0),
                },
                image: hit.bytes,
                kind: hit.kind,
                path: Some(hit.path),
                from_cache: true,
            });
        }
        let out = nvrtc_compile(source, &options, target.image)?;
        let path = if cache.dir().is_some() {
            match cache.store(&key, out.kind, &out.image) {
                Ok(p) => Some(p),
                Err(e) => {
                    note = Some(format!("image not cached: {e}"));
                    None
                }
            }
        } else {
            None
        };
        Ok(Built {
            parts: Parts {
                key,
                options,
                log: out.log,
                note,
                compile_ms: out.ms,
                load_ms: 0.0,
            },
            image: out.image,
            kind: out.kind,
            path,
            from_cache: false,
        })
    }

    /// Loads what `build` gave; a cached image that does not load is removed and compiled
    /// again.
    fn load_built(
        &self,
        built: Built,
        source: &str,
        kernel_names: &[&str],
        extra_options: &[&str],
        t0: Instant,
    ) -> Result<Arc<CompiledModule>, RuntimeError> {
        let t_load = Instant::now();
        match self.load_image(&built.image) {
            Ok(module) => {
                let parts = Parts {
                    load_ms: built.parts.load_ms + ms_since(t_load),
                    ..built.parts
                };
                self.finish(
                    module,
                    kernel_names,
                    built.kind,
                    built.image.len(),
                    built.path,
                    built.from_cache,
                    parts,
                    t0,
                )
            }
            Err(e) if built.from_cache => {
                let cache = self.cache();
                cache.remove(&built.parts.key);
                let why = format!(
                    "cached image {} did not load ({e}); recompiled",
                    built.path.as_ref().map_or(String::new(), |p| p.display().to_string())
                );
                let mut again = self.build(source, kernel_names.len(), extra_options)?;
                if again.from_cache {
                    // The entry could not be removed: no second try from it.
                    return Err(e);
                }
                again.parts.note = Some(why);
                self.load_built(again, source, kernel_names, extra_options, t0)
            }
            Err(e) => Err(e),
        }
    }

    fn load_image(&self, image: &[u8]) -> Result<Arc<CudaModule>, RuntimeError> {
        let ctx = self.cuda_context();
        ctx.bind_to_thread()
            .ctx(|| "binding the CUDA context".into())?;
        // PTX must reach cuModuleLoadData NUL-terminated; a CUBIN is passed as is.
        let mut bytes = image.to_vec();
        if !bytes.starts_with(b"\x7fELF") && bytes.last() != Some(&0) {
            bytes.push(0);
        }
        let module = ctx
            .load_module(Ptx::from_binary(bytes))
            .ctx(|| "loading the module (cuModuleLoadData)".into())?;
        if let Ok(mut kept) = self.inner.modules.lock() {
            kept.push(module.clone());
        }
        Ok(module)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        module: Arc<CudaModule>,
        kernel_names: &[&str],
        kind: ImageKind,
        image_bytes: usize,
        cache_path: Option<PathBuf>,
        from_cache: bool,
        parts: Parts,
        t0: Instant,
    ) -> Result<Arc<CompiledModule>, RuntimeError> {
        let kernels = kernel_names
            .iter()
            .map(|n| Kernel::load(self, &module, n))
            .collect::<Result<Vec<_>, _>>()?;
        let info = ModuleInfo {
            arch: self.target().arch.to_string(),
            image: kind,
            image_bytes,
            from_cache,
            compile_ms: parts.compile_ms,
            load_ms: parts.load_ms,
            total_ms: ms_since(t0),
            log: parts.log,
            options: parts.options,
            cache_key: parts.key,
            cache_path,
            cache_note: parts.note,
            kernels: kernels.iter().map(|k| k.attributes().clone()).collect(),
        };
        Ok(Arc::new(CompiledModule {
            module,
            gpu: self.clone(),
            kernels,
            info,
        }))
    }
}

/// A unit's image before it is loaded (`build`).
struct Built {
    parts: Parts,
    image: Vec<u8>,
    kind: ImageKind,
    path: Option<PathBuf>,
    from_cache: bool,
}

struct Parts {
    key: String,
    options: Vec<String>,
    log: String,
    note: Option<String>,
    compile_ms: f64,
    load_ms: f64,
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

pub(crate) struct NvrtcOutput {
    pub image: Vec<u8>,
    pub kind: ImageKind,
    pub log: String,
    pub ms: f64,
}

/// Destroys the program on every path out of `nvrtc_compile`.
struct Program(nsys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here.
        let _ = unsafe { nr::destroy_program(self.0) };
    }
}

/// A module compiled with no GPU (`compile_offline`).
#[derive(Debug, Clone)]
pub struct OfflineCompile {
    pub nvrtc_version: (u32, u32),
    pub options: Vec<String>,
    pub ms: f64,
    pub cubin_bytes: usize,
    /// NVRTC's warnings, if any (without ptxas's report).
    pub log: String,
    /// Each kernel's registers, spills and shared memory, where asked for
    /// (`compile_offline_resources`); empty otherwise.
    pub resources: Vec<crate::KernelResources>,
}

/// Compiles `source` (a module of `kernels` kernels) for `arch` (e.g. "sm_90") as the runtime
/// would, with NVRTC only: no driver or GPU is needed, so a plan's CUDA can be checked, and its
/// compile time read, on any machine with the library. Errors name the missing library or
/// give NVRTC's log with an excerpt of the source.
pub fn compile_offline(source: &str, arch: &str, kernels: usize) -> Result<OfflineCompile, RuntimeError> {
    offline(source, arch, kernels, false)
}

/// `compile_offline` with ptxas's report of each kernel's resources (`OfflineCompile::resources`):
/// the same compile with `--ptxas-options=--verbose`.
pub fn compile_offline_resources(source: &str, arch: &str, kernels: usize) -> Result<OfflineCompile, RuntimeError> {
    offline(source, arch, kernels, true)
}

fn offline(source: &str, arch: &str, kernels: usize, report: bool) -> Result<OfflineCompile, RuntimeError> {
    guard("compiling a kernel module with NVRTC", || {
        crate::device::check_nvrtc()
            .map_err(|e| RuntimeError::Invalid(format!("NVRTC could not be loaded: {e}")))?;
        let extra: &[&str] = if report { &[VERBOSE_OPTION] } else { &[] };
        let options = module_options(arch, extra, kernels)?;
        let out = nvrtc_compile(source, &options, ImageKind::Cubin)?;
        let resources = if report { crate::parse_ptxas_verbose(&out.log) } else { Vec::new() };
        let log = out.log.lines().filter(|l| !l.starts_with("ptxas")).collect::<Vec<_>>().join("\n");
        Ok(OfflineCompile {
            nvrtc_version: crate::device::nvrtc_version()?,
            options,
            ms: out.ms,
            cubin_bytes: out.image.len(),
            log,
            resources,
        })
    })
}

/// `compile_offline` (`compile_offline_resources` with `report`) of several translation units
/// (each with the kernels it holds), each on a thread of its own as the runtime compiles them
/// (`Gpu::compile_units`): `ms` is the longest unit's, the rest added up or joined.
pub fn compile_offline_units(units: &[(&str, Vec<&str>)], arch: &str, report: bool) -> Result<OfflineCompile, RuntimeError> {
    if units.is_empty() {
        // No kernel (every output a view): nothing is compiled, here or on a GPU.
        return guard("reading the NVRTC version", || {
            crate::device::check_nvrtc()
                .map_err(|e| RuntimeError::Invalid(format!("NVRTC could not be loaded: {e}")))?;
            Ok(OfflineCompile {
                nvrtc_version: crate::device::nvrtc_version()?,
                options: build_options(arch, &[])?,
                ms: 0.0,
                cubin_bytes: 0,
                log: String::new(),
                resources: vec![],
            })
        });
    }
    let each = at_once(units, |src, n| offline(src, arch, n, report));
    let mut all = each.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter();
    let mut out = all
        .next()
        .ok_or_else(|| RuntimeError::Invalid("no translation unit to compile".into()))?;
    for o in all {
        out.ms = out.ms.max(o.ms);
        out.cubin_bytes += o.cubin_bytes;
        if !o.log.is_empty() {
            out.log = if out.log.is_empty() { o.log } else { format!("{}\n{}", out.log, o.log) };
        }
        out.resources.extend(o.resources);
    }
    Ok(out)
}

/// `compile(source, kernel count)` of every unit, each on a thread of its own, the results in
/// unit order (a thread that panicked an error).
fn at_once<T: Send>(
    units: &[(&str, Vec<&str>)],
    compile: impl Fn(&str, usize) -> Result<T, RuntimeError> + Sync,
) -> Vec<Result<T, RuntimeError>> {
    std::thread::scope(|s| {
        let compile = &compile;
        let handles: Vec<_> = units
            .iter()
            .map(|(src, names)| {
                let n = names.len();
                s.spawn(move || compile(src, n))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(RuntimeError::Invalid("a compiling thread panicked".into()))))
            .collect()
    })
}

/// ptxas's report of each kernel's registers, spills and shared memory, in NVRTC's log.
const VERBOSE_OPTION: &str = "--ptxas-options=--verbose";

/// One NVRTC run. Asks for a CUBIN when `want` is Cubin and falls back to PTX if NVRTC cannot
/// give one. The library must have been checked to load.
pub(crate) fn nvrtc_compile(
    source: &str,
    options: &[String],
    want: ImageKind,
) -> Result<NvrtcOutput, RuntimeError> {
    let t0 = Instant::now();
    let src = CString::new(source)
        .map_err(|_| RuntimeError::Invalid("kernel source contains a NUL byte".into()))?;
    let name = CString::new(PROGRAM_NAME).expect("static name has no NUL");
    let create = || -> Result<Program, RuntimeError> {
        Ok(Program(
            nr::create_program(&src, Some(name.as_c_str())).ctx(|| "nvrtcCreateProgram".into())?,
        ))
    };
    let mut prog = create()?;
    // SAFETY: `prog` is live until `Program` drops at the end of this function.
    let mut compiled = unsafe { nr::compile_program(prog.0, options) };
    if matches!(&compiled, Err(e) if e.0 == nsys::nvrtcResult::NVRTC_ERROR_INVALID_OPTION)
        && options.iter().any(|o| OPTIONAL.contains(&o.as_str()))
    {
        // An NVRTC older than the options: the same compile without them.
        let fewer: Vec<String> = options.iter().filter(|o| !OPTIONAL.contains(&o.as_str())).cloned().collect();
        prog = create()?;
        // SAFETY: as above, for the new program.
        compiled = unsafe { nr::compile_program(prog.0, &fewer) };
    }
    let log = program_log(&prog);
    if let Err(e) = compiled {
        let log = if log.trim().is_empty() {
            format!("{:?} (NVRTC gave no log)", e.0)
        } else {
            log
        };
        return Err(RuntimeError::Compile {
            source_excerpt: source_excerpt(source, &log),
            log,
        });
    }
    let (image, kind) = match (want, cubin(&prog)) {
        (ImageKind::Cubin, Some(c)) => (c, ImageKind::Cubin),
        _ => {
            // SAFETY: `prog` compiled successfully above.
            let ptx = unsafe { nr::get_ptx(prog.0) }.ctx(|| "nvrtcGetPTX".into())?;
            let mut bytes: Vec<u8> = ptx.into_iter().map(|c| c as u8).collect();
            if bytes.last() != Some(&0) {
                bytes.push(0);
            }
            (bytes, ImageKind::Ptx)
        }
    };
    Ok(NvrtcOutput {
        image,
        kind,
        log,
        ms: ms_since(t0),
    })
}

fn cubin(prog: &Program) -> Option<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: `prog` is a compiled program; the buffer has the size NVRTC reported.
    unsafe {
        nsys::nvrtcGetCUBINSize(prog.0, &mut size).result().ok()?;
        if size == 0 {
            return None;
        }
        let mut buf = vec![0u8; size];
        nsys::nvrtcGetCUBIN(prog.0, buf.as_mut_ptr() as *mut c_char)
            .result()
            .ok()?;
        Some(buf)
    }
}

fn program_log(prog: &Program) -> String {
    // SAFETY: `prog` is live.
    match unsafe { nr::get_program_log(prog.0) } {
        Ok(raw) => {
            let bytes: Vec<u8> = raw
                .into_iter()
                .take_while(|c| *c != 0)
                .map(|c| c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).trim_end().to_string()
        }
        Err(e) => format!("(could not read the NVRTC log: {:?})", e.0),
    }
}

/// The source lines around the first error the log points at, numbered, so a failure in a
/// generated kernel can be read without the whole file. Falls back to the first lines.
pub fn source_excerpt(source: &str, log: &str) -> String {
    const CONTEXT: usize = 3;
    let lines: Vec<&str> = source.lines().collect();
    let first_error = log
        .lines()
        .find_map(error_line)
        .filter(|n| *n >= 1 && *n <= lines.len());
    let (from, to, mark) = match first_error {
        Some(n) => (
            n.saturating_sub(CONTEXT + 1),
            (n + CONTEXT).min(lines.len()),
            Some(n),
        ),
        None => (0, lines.len().min(20), None),
    };
    (from..to)
        .map(|i| {
            let arrow = if mark == Some(i + 1) { ">>" } else { "  " };
            format!("{arrow}{:5} | {}", i + 1, lines[i])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The line number in "fusebench_kernel.cu(12): error: ...".
fn error_line(log_line: &str) -> Option<usize> {
    let rest = log_line.strip_prefix(PROGRAM_NAME)?.strip_prefix('(')?;
    let (num, tail) = rest.split_once(')')?;
    tail.trim_start_matches(':')
        .trim_start()
        .starts_with("error")
        .then_some(())?;
    num.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_for_the_device_arch() {
        let o = build_options("sm_90", &[]).unwrap();
        assert_eq!(
            o,
            vec![
                "--gpu-architecture=sm_90",
                "-default-device",
                "--std=c++17",
                "-lineinfo",
                "-minimal"
            ]
        );
        let o = build_options("sm_90", &["--maxrregcount=64"]).unwrap();
        assert_eq!(o.last().unwrap(), "--maxrregcount=64");
    }

    /// Needs NVRTC only (no GPU): run with `--include-ignored` where the library loads.
    #[test]
    #[ignore = "needs NVRTC, the CUDA runtime compiler library (no GPU needed)"]
    fn a_module_compiles_with_its_kernels_split_over_threads() {
        let src = "extern \"C\" __global__ void a(float* x) { x[threadIdx.x] *= 2.0f; }\n\
                   extern \"C\" __global__ void b(float* x) { x[threadIdx.x] += 1.0f; }\n";
        let opts = build_options("sm_90", &[SPLIT_OPTION]).unwrap();
        let out = nvrtc_compile(src, &opts, ImageKind::Cubin).unwrap();
        assert_eq!(out.kind, ImageKind::Cubin);
        assert!(out.image.len() > 100);
    }

    #[test]
    fn fast_math_is_refused() {
        for bad in [
            "--use_fast_math",
            "-use_fast_math",
            "--ftz=true",
            "--prec-div=false",
        ] {
            let e = build_options("sm_90", &[bad]).unwrap_err();
            assert!(e.to_string().contains("IEEE"), "{e}");
        }
    }

    #[test]
    fn excerpt_points_at_the_first_error() {
        let src = (1..=20)
            .map(|i| format!("line{i};"))
            .collect::<Vec<_>>()
            .join("\n");
        let log = "fusebench_kernel.cu(9): warning #177-D: unused\n\
                   fusebench_kernel.cu(12): error: identifier \"x\" is undefined\n\
                   fusebench_kernel.cu(15): error: another\n2 errors detected";
        let ex = source_excerpt(&src, log);
        assert!(ex.contains(">>   12 | line12;"), "{ex}");
        assert!(ex.contains("    9 | line9;"), "{ex}");
        assert!(ex.contains("   15 | line15;"), "{ex}");
        assert!(!ex.contains("line16"), "{ex}");
        // No line reference: the start of the source.
        let ex = source_excerpt(&src, "internal error");
        assert!(ex.starts_with("      1 | line1;"), "{ex}");
        assert_eq!(ex.lines().count(), 20);
    }

    #[test]
    fn error_lines_are_parsed() {
        assert_eq!(error_line("fusebench_kernel.cu(3): error: x"), Some(3));
        assert_eq!(error_line("fusebench_kernel.cu(3): warning: x"), None);
        assert_eq!(error_line("other.cu(3): error: x"), None);
    }
}
