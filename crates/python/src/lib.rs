//! The `fusebench` Python module: fusebench's harness around any Python
//! callable that launches CUDA kernels (nvFuser's `fd.execute`, a
//! torch.compile'd function, a Triton kernel, PyTorch eager code).
//!
//! A sample: flush L2 (cold) or not (warm), wait for the whole context to be
//! idle, call the function, wait again, and sum the durations of the kernels
//! CUPTI recorded in between. The process's primary context is shared with
//! PyTorch, so whatever stream the function uses is covered. A sample whose
//! kernels (names and launch shapes) differ from the warm-up's is rejected.

use fusebench_codegen::OutputSource;
use fusebench_engine::Bound as Given;
use fusebench_harness::{Choice, Harness, HarnessError, Options};
use fusebench_ir::recipe::row_major_strides;
use fusebench_ir::{DType, Literal};
use fusebench_measure::{CachePolicy, Measurement as Record};

mod dlpack;
mod subject;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::{Mutex, OnceLock};

// Named for the package users import (`fusebench.Unavailable`), not the
// extension module it is defined in.
create_exception!(
    fusebench,
    Unavailable,
    PyRuntimeError,
    "No GPU, driver, NVRTC or CUPTI: fusebench cannot measure here (the message says which)."
);

/// The harness for the life of the process: CUPTI takes one session per process.
static HARNESS: OnceLock<Result<Mutex<Harness>, String>> = OnceLock::new();

fn harness() -> PyResult<&'static Mutex<Harness>> {
    let h = HARNESS.get_or_init(|| {
        fusebench_runtime::probe().map_err(|e| e.to_string())?;
        let gpu = fusebench_runtime::Gpu::new(0).map_err(|e| e.to_string())?;
        Harness::new(gpu, Choice::Cupti)
            .map(Mutex::new)
            .map_err(|e| format!("CUPTI: {e}"))
    });
    h.as_ref()
        .map_err(|reason| Unavailable::new_err(format!("fusebench cannot measure here: {reason}")))
}

fn runtime_err(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// The function's own exception comes back as it was raised; anything else as a RuntimeError.
fn harness_err(e: HarnessError) -> PyErr {
    match e {
        HarnessError::Subject(inner) => match inner.downcast::<PyErr>() {
            Ok(py) => *py,
            Err(other) => runtime_err(other),
        },
        other => runtime_err(other),
    }
}

/// `(blocks, bound)`: how many blocks of `threads` threads at `registers` registers a thread and
/// `shared_bytes` of shared memory a block one multiprocessor holds at once, and what bounds them
/// ("threads", "blocks", "shared memory" or "registers"), on this machine's GPU, or an H200 where
/// there is none. `sm_count` is given with it: `(blocks, bound, sm_count)`.
#[pyfunction]
#[pyo3(signature = (threads, registers, shared_bytes = 0))]
fn resident(threads: u32, registers: u32, shared_bytes: u32) -> (u32, String, u32) {
    let dev = match fusebench_runtime::probe() {
        Ok(info) => fusebench_engine::device_of(&info),
        Err(_) => fusebench_codegen::Device::default(),
    };
    let (blocks, bound) = fusebench_codegen::launch::resident(&dev, threads, registers, shared_bytes);
    (blocks, bound.to_string(), dev.sm_count)
}

/// `(True, description)` when a GPU can be measured, else `(False, why not)`.
#[pyfunction]
fn gpu_status() -> (bool, String) {
    match fusebench_runtime::probe() {
        Ok(info) => (
            true,
            format!(
                "{} ({} SMs, L2 {} MiB)",
                info.name,
                info.sm_count,
                info.l2_cache_bytes >> 20
            ),
        ),
        Err(e) => (false, e.to_string()),
    }
}

/// Times `func(*args)` on the GPU: median kernel time with its 95% interval,
/// through fusebench's harness (the same one `fusebench bench` uses).
///
/// A sample: the cache set-up, then the whole CUDA context waited for, the
/// call, the context waited for again, and the durations of the kernels CUPTI
/// recorded in between summed; a sample whose kernels (names and launch
/// shapes) differ from those of the last warm-up call is rejected.
///
/// cache: "cold" (before each call, outside the time: the SMs' instruction caches evicted and L2
/// flushed by a read, FUSEBENCH_FLUSH; the record's `cold_setup` says so) or "warm".
/// flush: how a cold sample flushes L2, "read" (clean lines) or "write" (dirty lines, as a kernel
/// that wrote leaves L2); FUSEBENCH_FLUSH's when not given.
/// stop: a stopping rule by name ("noise:1%", "samples:30", "time:2s"); without it,
/// target/max_time give the noise rule and samples a fixed count (samples=1 with warmup=5
/// and cache="warm" is the common "five warm-ups, one profiled call" method).
/// bytes: what the call moves, for bandwidth; with ceiling=True also a copy of those bytes
/// timed the same way (the record's `ceiling`). siblings=True: also 30 samples under the
/// other cache policy (the record's `siblings`, which `explain` uses to tell a policy's share
/// of a difference from the kernels'). name: a label for people (default: the
/// callable's qualified name). definition: what identifies the work measured (default:
/// derived from the callable; a `fusebench.load` fusion's definition hash). context: a label
/// for where it ran.
#[pyfunction]
#[pyo3(signature = (func, *args, cache = "cold", target = 0.01, max_time = 1.0, warmup = 3, samples = None, stop = None, bytes = None, ceiling = false, siblings = false, name = None, definition = None, context = None, flush = None))]
#[allow(clippy::too_many_arguments)]
fn kernel_time(
    func: &Bound<'_, PyAny>,
    args: &Bound<'_, PyTuple>,
    cache: &str,
    target: f64,
    max_time: f64,
    warmup: usize,
    samples: Option<usize>,
    stop: Option<String>,
    bytes: Option<u64>,
    ceiling: bool,
    siblings: bool,
    name: Option<String>,
    definition: Option<String>,
    context: Option<String>,
    flush: Option<&str>,
) -> PyResult<Measurement> {
    let policy = match cache {
        "cold" => CachePolicy::Cold,
        "warm" => CachePolicy::Warm,
        other => {
            return Err(PyValueError::new_err(format!(
                "cache={other:?}: kernel_time supports \"cold\" and \"warm\" (rotate needs fusebench to own the inputs)"
            )))
        }
    };
    let flush = match flush {
        None => None,
        Some("read") => Some(fusebench_harness::Flush::Read),
        Some("write") => Some(fusebench_harness::Flush::Write),
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "flush={other:?}: kernel_time supports \"read\" and \"write\""
            )))
        }
    };
    if flush.is_some() && policy != CachePolicy::Cold {
        return Err(PyValueError::new_err("flush applies to cache=\"cold\" only"));
    }
    if !(target > 0.0 && max_time > 0.0) {
        return Err(PyValueError::new_err(
            "target and max_time must be above zero",
        ));
    }
    if samples == Some(0) {
        return Err(PyValueError::new_err("samples must be at least 1"));
    }
    let spec = match (stop, samples) {
        (Some(s), None) => s,
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err("give stop or samples, not both"));
        }
        (None, Some(n)) => format!("samples:{n}"),
        (None, None) => format!("noise:{target},max-time={max_time}"),
    };
    let rule = fusebench_measure::stopping::parse(&spec).map_err(PyValueError::new_err)?;
    let h = harness()?;
    let h = h
        .lock()
        .map_err(|_| runtime_err("the harness was poisoned by an earlier panic"))?;
    // A fusion fusebench loaded is named by its definition and runs on its own inputs
    // when none are given.
    let loaded = func.cast::<Fusion>().ok();
    let (label, definition_hash, inputs) = match &loaded {
        Some(f) => {
            let f = f.borrow();
            let inputs = if args.is_empty() {
                f.prep.input_layouts().to_vec()
            } else {
                subject::layouts(args)
            };
            let hash = match &definition {
                Some(d) => subject::definition_hash(func, Some(d)),
                None => f.definition_hash.clone(),
            };
            (f.name.clone(), hash, inputs)
        }
        None => (
            subject::qualified_name(func),
            subject::definition_hash(func, definition.as_deref()),
            subject::layouts(args),
        ),
    };
    let id = fusebench_measure::Subject {
        name: name.unwrap_or(label),
        definition_hash,
        inputs_hash: fusebench_harness::fingerprint::inputs(&inputs),
        inputs,
    };
    let measured = h
        .measure(
            &subject::Callable {
                func,
                args,
                id,
                bytes,
            },
            &Options {
                cache: policy,
                warmup,
                rule: rule.as_ref(),
                context,
                ceiling,
                siblings,
                flush,
            },
        )
        .map_err(harness_err)?;
    Ok(Measurement {
        inner: measured.record,
    })
}

/// `(name, definition hash)` a record of `func` would carry: for tests of how
/// callables are named, where there is no GPU to time them.
#[pyfunction]
#[pyo3(signature = (func, definition = None))]
fn _subject_of(func: &Bound<'_, PyAny>, definition: Option<String>) -> (String, String) {
    (
        subject::qualified_name(func),
        subject::definition_hash(func, definition.as_deref()),
    )
}

/// A measurement: the median kernel time with its interval, every sample,
/// the kernels, and the fingerprints of where and how it was taken.
#[pyclass(module = "fusebench", frozen)]
struct Measurement {
    inner: Record,
}

#[pymethods]
impl Measurement {
    /// Median kernel time in microseconds.
    #[getter]
    fn median(&self) -> f64 {
        self.inner.summary.median
    }
    /// The 95% interval of the median, (low, high) in microseconds.
    #[getter]
    fn ci(&self) -> (f64, f64) {
        (self.inner.summary.ci_low, self.inner.summary.ci_high)
    }
    #[getter]
    fn min(&self) -> f64 {
        self.inner.summary.min
    }
    #[getter]
    fn p90(&self) -> f64 {
        self.inner.summary.p90
    }
    #[getter]
    fn n(&self) -> usize {
        self.inner.summary.n
    }
    /// Every sample's time in microseconds.
    #[getter]
    fn samples(&self) -> Vec<f64> {
        self.inner.samples.iter().map(|s| s.time_us).collect()
    }
    #[getter]
    fn cache(&self) -> String {
        serde_json::to_value(self.inner.cache)
            .map(|v| v.as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    }
    #[getter]
    fn method(&self) -> String {
        serde_json::to_value(self.inner.method)
            .map(|v| v.as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    }
    #[getter]
    fn throttled_samples(&self) -> usize {
        self.inner.throttled_samples
    }
    #[getter]
    fn bytes(&self) -> Option<u64> {
        self.inner.bytes
    }
    /// The copy of the same bytes timed the same way, in microseconds (ceiling=True).
    #[getter]
    fn ceiling_us(&self) -> Option<f64> {
        self.inner.ceiling.as_ref().map(|c| c.median_us)
    }
    /// The copy's time over this time, in percent (ceiling=True).
    #[getter]
    fn pct_of_copy(&self) -> Option<f64> {
        self.inner.pct_of_ceiling()
    }
    /// Who was measured: (name, definition hash).
    #[getter]
    fn subject(&self) -> (String, String) {
        (
            self.inner.subject.name.clone(),
            self.inner.subject.definition_hash.clone(),
        )
    }
    /// GB/s when the bytes moved were given.
    #[getter]
    fn gbps(&self) -> Option<f64> {
        self.inner
            .bytes
            .map(|b| b as f64 / self.inner.summary.median / 1e3)
    }
    /// Each kernel: name, grid, block, median_us.
    #[getter]
    fn kernels<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .kernels
            .iter()
            .map(|k| {
                let d = PyDict::new(py);
                d.set_item("name", &k.name)?;
                d.set_item("grid", k.grid.to_vec())?;
                d.set_item("block", k.block.to_vec())?;
                d.set_item("median_us", k.median_us)?;
                Ok(d)
            })
            .collect()
    }
    /// The whole record as JSON (docs/result-schema.md), readable by `fusebench explain`.
    fn to_json(&self) -> String {
        self.inner.to_json()
    }
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Measurement> {
        Record::from_json(text)
            .map(|inner| Measurement { inner })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }
    fn __repr__(&self) -> String {
        let s = &self.inner.summary;
        let names: Vec<&str> = self.inner.kernels.iter().map(|k| k.name.as_str()).collect();
        format!(
            "<Measurement {}: {:.2} us [{:.2}, {:.2}] median of {} {} samples, min {:.2}, {} {:?}, {}>",
            self.inner.subject.name,
            s.median,
            s.ci_low,
            s.ci_high,
            s.n,
            self.cache(),
            s.min,
            fusebench_measure::plural(names.len(), "kernel"),
            names,
            self.method()
        )
    }
}

/// Why two measurements differ: every cause checked, the likely one first.
#[pyclass(module = "fusebench", frozen)]
struct Explanation {
    #[pyo3(get)]
    ratio: f64,
    #[pyo3(get)]
    beyond_noise: bool,
    /// The causes that differ, the largest share first.
    #[pyo3(get)]
    causes: Vec<String>,
    /// Each differing cause's estimated share of B - A (1.0 = all of it), where estimated.
    #[pyo3(get)]
    shares: Vec<(String, f64)>,
    /// B - A in microseconds.
    #[pyo3(get)]
    difference_us: f64,
    /// The one-line answer ("Most likely cause: ...", "unexplained: ...", "Same: ...").
    #[pyo3(get)]
    answer: String,
    #[pyo3(get)]
    text: String,
}

#[pymethods]
impl Explanation {
    fn __str__(&self) -> String {
        self.text.clone()
    }
    fn __repr__(&self) -> String {
        self.text.clone()
    }
}

#[pyfunction]
fn explain(a: &Measurement, b: &Measurement) -> Explanation {
    let e = fusebench_measure::explain(&a.inner, &b.inner);
    let shares = e
        .causes
        .iter()
        .filter_map(|c| {
            e.findings
                .iter()
                .find(|f| f.cause == *c)
                .and_then(|f| f.share)
                .map(|s| (c.title().to_string(), s))
        })
        .collect();
    Explanation {
        ratio: e.ratio,
        beyond_noise: e.beyond_noise,
        causes: e.causes.iter().map(|c| c.title().to_string()).collect(),
        shares,
        difference_us: e.difference_us,
        answer: e.answer_text(),
        text: e.render(&a.inner, &b.inner),
    }
}

/// A repro script run by fusebench's own engine: planned for this GPU and
/// compiled, with inputs generated from the script's recipe (gather indices
/// in range) uploaded once. `f()` launches its kernels on those inputs;
/// `f(*tensors)` launches them on the caller's tensors (DLPack, no copy; the
/// layouts must be the ones the script defines), so the same inputs can be
/// timed under nvFuser's `fd.execute(inputs)` and `fusebench.kernel_time(f,
/// *inputs)`. `f.outputs()` gives the outputs back through DLPack
/// (`torch.from_dlpack`), valid until the next call.
#[pyclass(module = "fusebench", unsendable)]
struct Fusion {
    prep: fusebench_engine::Prepared,
    /// Per input: the dtype, shape and strides the plan was made for (None: a scalar).
    layouts: Vec<Option<Planned>>,
    #[pyo3(get)]
    name: String,
    /// The hash of the fusion's definition, as fusebench's records name it.
    #[pyo3(get)]
    definition_hash: String,
    /// Bytes the fusion moves (inputs it addresses, outputs it writes).
    #[pyo3(get)]
    bytes: u64,
}

/// The dtype, shape and strides a tensor input was planned for.
type Planned = (DType, Vec<usize>, Vec<i64>);
/// Device type, device id, dtype name, shape, strides.
type DlpackLayout = (i32, i32, Option<String>, Vec<usize>, Vec<i64>);

/// Strides of dims with one element do not matter.
fn same_layout(shape: &[usize], a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len()
        && shape
            .iter()
            .zip(a.iter().zip(b))
            .all(|(&e, (x, y))| e <= 1 || x == y)
}

#[pymethods]
impl Fusion {
    #[pyo3(signature = (*args))]
    fn __call__(&self, args: &Bound<'_, PyTuple>) -> PyResult<()> {
        if args.is_empty() {
            self.prep.bind(Vec::new());
            return self.prep.launch_all().map_err(runtime_err);
        }
        if args.len() != self.layouts.len() {
            return Err(PyValueError::new_err(format!(
                "{} takes {} inputs, got {}",
                self.name,
                self.layouts.len(),
                args.len()
            )));
        }
        let mut bound = Vec::with_capacity(args.len());
        for (i, (a, want)) in args.iter().zip(&self.layouts).enumerate() {
            match want {
                None => {
                    let lit = if let Ok(b) = a.extract::<bool>() {
                        Literal::Bool(b)
                    } else if let Ok(v) = a.extract::<i64>() {
                        Literal::Int(v)
                    } else {
                        Literal::Float(a.extract::<f64>()?)
                    };
                    bound.push(Some(Given::Scalar(lit)));
                }
                Some((dt, shape, strides)) => {
                    let l = dlpack::read(&a)?;
                    let device_ok =
                        l.device_type == dlpack::CUDA || l.device_type == dlpack::CUDA_MANAGED;
                    let dtype_ok = l.dtype == Some(*dt)
                        || (l.dtype == Some(DType::Int) && *dt == DType::Index);
                    if !device_ok
                        || !dtype_ok
                        || l.shape != *shape
                        || !same_layout(shape, &l.strides, strides)
                    {
                        return Err(PyValueError::new_err(format!(
                            "input {i}: {} was planned for a CUDA tensor of {} {:?} with strides {:?}; got DLPack device type {}, dtype (code, bits, lanes) {:?}, shape {:?}, strides {:?}",
                            self.name,
                            dt.torch_name(),
                            shape,
                            strides,
                            l.device_type,
                            l.dl_dtype,
                            l.shape,
                            l.strides
                        )));
                    }
                    bound.push(Some(Given::Ptr(l.ptr)));
                }
            }
        }
        // The tensors may have been written on another stream: wait for them.
        self.prep
            .gpu
            .cuda_context()
            .synchronize()
            .map_err(runtime_err)?;
        self.prep.bind(bound);
        self.prep.launch_all().map_err(runtime_err)
    }

    /// The kernels, as (name, grid, block).
    #[getter]
    fn kernels(&self) -> Vec<(String, [u32; 3], [u32; 3])> {
        self.prep
            .plan
            .kernels
            .iter()
            .map(|k| (k.name.clone(), k.grid, k.block))
            .collect()
    }

    /// The tensor inputs fusebench generated for the script, as DLPack arrays
    /// (`torch.from_dlpack(i)`), in the script's input order (scalars left
    /// out); valid while the fusion lives. `f(*[torch.from_dlpack(i).clone()
    /// for i in f.inputs()])` runs on the same values in memory torch allocated.
    fn inputs(slf: &Bound<'_, Self>) -> PyResult<Vec<DeviceArray>> {
        let this = slf.borrow();
        let mut out = Vec::new();
        for (i, l) in this.layouts.iter().enumerate() {
            let Some((dtype, shape, strides)) = l else { continue };
            let ptr = this
                .prep
                .own_input_ptr(i)
                .ok_or_else(|| runtime_err(format!("input {i} has no device memory")))?;
            out.push(DeviceArray {
                owner: slf.clone().into_any().unbind(),
                ptr,
                device: (dlpack::CUDA, 0),
                dtype: *dtype,
                shape: shape.clone(),
                strides: strides.clone(),
            });
        }
        Ok(out)
    }

    /// The outputs of the last call as DLPack arrays (`torch.from_dlpack(o)`),
    /// views where the fusion defines views; valid until the next call.
    fn outputs(slf: &Bound<'_, Self>) -> PyResult<Vec<DeviceArray>> {
        let this = slf.borrow();
        let prep = &this.prep;
        prep.gpu.cuda_context().synchronize().map_err(runtime_err)?;
        let plan = &prep.plan.outputs;
        let mut out = Vec::with_capacity(plan.len());
        // Hidden outputs (bases of broadcast views) are the plan's own.
        let returned = plan.len() - prep.plan.hidden_outputs;
        for (i, o) in plan.iter().enumerate().take(returned) {
            let elem = o.dtype.size_bytes() as i64;
            let (ptr, strides) = match &o.source {
                OutputSource::Written => (
                    prep.output_ptr(i),
                    o.strides
                        .clone()
                        .unwrap_or_else(|| row_major_strides(&o.shape)),
                ),
                OutputSource::InputView {
                    input,
                    strides,
                    offset,
                } => (
                    prep.input_ptr(*input)
                        .map(|p| (p as i64 + offset * elem) as u64),
                    strides.clone(),
                ),
                OutputSource::OutputView {
                    output,
                    strides,
                    offset,
                } => (
                    prep.output_ptr(*output)
                        .map(|p| (p as i64 + offset * elem) as u64),
                    strides.clone(),
                ),
            };
            let ptr = ptr.ok_or_else(|| runtime_err(format!("output {i} has no device memory")))?;
            out.push(DeviceArray {
                owner: slf.clone().into_any().unbind(),
                ptr,
                device: (dlpack::CUDA, 0),
                dtype: o.dtype,
                shape: o.shape.clone(),
                strides,
            });
        }
        Ok(out)
    }

    /// Runs once on its own inputs and compares every output with the CPU reference: (ok, report).
    fn check(&self, path: &str) -> PyResult<(bool, String)> {
        let f = fusebench_frontend::parse_file(std::path::Path::new(path))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let g = fusebench_reference::generate_inputs(&f, 0).map_err(runtime_err)?;
        let want = fusebench_reference::run(&f, &g.inputs).map_err(runtime_err)?;
        self.prep.bind(Vec::new());
        self.prep.run().map_err(runtime_err)?;
        let got = self.prep.outputs(&f, &g.inputs).map_err(runtime_err)?;
        let mut ok = true;
        let mut report = Vec::new();
        for (i, (w, o)) in want.iter().zip(&got).enumerate() {
            let c = fusebench_reference::compare::compare(o, w);
            ok &= c.ok;
            report.push(format!(
                "output {i}: {}, {} of {} outside tolerance, max abs err {:.3e}{}",
                if c.ok { "ok" } else { "MISMATCH" },
                c.mismatches,
                c.elements,
                c.max_abs_err,
                c.problem.map(|p| format!(" ({p})")).unwrap_or_default()
            ));
        }
        Ok((ok, report.join("\n")))
    }
}

/// Device memory of a fusion's output, exported through DLPack.
#[pyclass(module = "fusebench", unsendable)]
struct DeviceArray {
    owner: Py<PyAny>,
    ptr: u64,
    device: dlpack::Device,
    dtype: DType,
    #[pyo3(get)]
    shape: Vec<usize>,
    #[pyo3(get)]
    strides: Vec<i64>,
}

#[pymethods]
impl DeviceArray {
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.torch_name()
    }

    #[pyo3(signature = (stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // The outputs are complete once `outputs()` synchronized; any stream may read them.
        let _ = (stream, max_version, dl_device, copy);
        dlpack::export(
            py,
            self.owner.clone_ref(py),
            self.ptr,
            self.dtype,
            &self.shape,
            &self.strides,
            self.device,
        )
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        self.device
    }

    fn __repr__(&self) -> String {
        format!(
            "<fusebench.DeviceArray {} {:?} strides {:?}>",
            self.dtype.torch_name(),
            self.shape,
            self.strides
        )
    }
}

/// How `obj` lies as DLPack describes it: (device type, device id, dtype
/// name or None, shape, strides). For tests of the DLPack reader.
#[pyfunction]
fn _dlpack_layout(obj: &Bound<'_, PyAny>) -> PyResult<DlpackLayout> {
    let l = dlpack::read(obj)?;
    Ok((
        l.device_type,
        l.device_id,
        l.dtype.map(|d| d.torch_name().to_string()),
        l.shape,
        l.strides,
    ))
}

/// `obj`'s memory exported again through fusebench's DLPack writer (kept
/// alive by `obj`): what `Fusion.outputs()` does for device memory, here for
/// any producer, so that the writer is tested where there is no GPU.
#[pyfunction]
fn _dlpack_reexport(obj: &Bound<'_, PyAny>) -> PyResult<DeviceArray> {
    let l = dlpack::read(obj)?;
    let dtype = l.dtype.ok_or_else(|| {
        PyValueError::new_err(format!(
            "DLPack dtype {:?} is not one fusebench knows",
            l.dl_dtype
        ))
    })?;
    Ok(DeviceArray {
        owner: obj.clone().unbind(),
        ptr: l.ptr,
        device: (l.device_type, l.device_id),
        dtype,
        shape: l.shape,
        strides: l.strides,
    })
}

#[pyfunction]
#[pyo3(signature = (path, seed = 0))]
fn load(path: &str, seed: u64) -> PyResult<Fusion> {
    let f = fusebench_frontend::parse_file(std::path::Path::new(path))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let g = fusebench_reference::generate_inputs(&f, seed).map_err(runtime_err)?;
    let engine = fusebench_engine::Engine::new()
        .map_err(|e| Unavailable::new_err(format!("fusebench cannot run fusions here: {e}")))?;
    let prep = engine.prepare(&f, &g.inputs).map_err(runtime_err)?;
    let layouts = g
        .inputs
        .iter()
        .map(|a| match a {
            fusebench_reference::Arg::Tensor(t) => {
                Some((t.dtype(), t.shape().to_vec(), t.strides().to_vec()))
            }
            fusebench_reference::Arg::Scalar(_) => None,
        })
        .collect();
    Ok(Fusion {
        bytes: prep.bytes_moved().0 as u64,
        definition_hash: fusebench_harness::fingerprint::definition(&f),
        prep,
        layouts,
        name: std::path::Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    })
}

/// A repro script in fusebench's JSON form (values with resolved shapes and
/// dtypes, nodes in order): what `bench/torch_fusion.py` turns into PyTorch code.
#[pyfunction]
fn fusion_json(path: &str) -> PyResult<String> {
    fusebench_frontend::parse_file(std::path::Path::new(path))
        .map(|f| f.to_json())
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("Unavailable", m.py().get_type::<Unavailable>())?;
    m.add_class::<Measurement>()?;
    m.add_class::<Explanation>()?;
    m.add_class::<Fusion>()?;
    m.add_class::<DeviceArray>()?;
    m.add_function(wrap_pyfunction!(_dlpack_layout, m)?)?;
    m.add_function(wrap_pyfunction!(_dlpack_reexport, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_time, m)?)?;
    m.add_function(wrap_pyfunction!(_subject_of, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_status, m)?)?;
    m.add_function(wrap_pyfunction!(resident, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(fusion_json, m)?)?;
    Ok(())
}
