//! A fusion made ready to run: planned for its inputs' layouts, compiled,
//! inputs on the device, outputs and temporaries allocated.

use crate::error::EngineError;
use crate::transfer::{buffer_bytes, layout};
use fusebench_codegen::{plan, ColumnSums, Device, FitWaves, GroupedMn, KernelArg as PlanArg, LibraryCall, LoadHint, OutputSource, Plan};
use fusebench_host::{Arg, Tensor};
use fusebench_ir::{DType, Fusion, Literal};
use fusebench_measure::InputLayout;
use fusebench_runtime::{CompiledModule, DeviceBuffer, Gpu, Kernel, KernelArg};
use std::sync::Arc;

/// The fills a check runs with: NaN bytes for floats, and zero bytes for the
/// bools, integers and NaN-valued floats that 0xFF would let pass.
pub const POISONS: [u8; 2] = [0xFF, 0x00];

pub struct Engine {
    pub gpu: Gpu,
}

impl Engine {
    /// The first GPU, or why there is none (never a panic).
    pub fn new() -> Result<Engine, EngineError> {
        if let Err(e) = fusebench_runtime::probe() {
            return Err(EngineError::Unavailable(e.to_string()));
        }
        Ok(Engine { gpu: Gpu::new(0)? })
    }

    /// The device as the planner sees it. The FUSEBENCH_ROW_* and _NORM_* settings are
    /// for tuning experiments; the defaults are the measured choices (BENCHMARKS.md).
    pub fn device(&self) -> Result<Device, EngineError> {
        planner_device(device_of(self.gpu.info()))
    }

    /// Checks that the inputs, outputs and temporaries of `plan` fit in the
    /// device memory free now, naming the largest buffer when they do not.
    fn check_memory(&self, f: &Fusion, inputs: &[Arg], plan: &Plan) -> Result<(), EngineError> {
        use fusebench_host::memory::{bytes, describe};
        let mut buffers: Vec<(String, Option<u64>)> = Vec::new();
        for (a, &v) in inputs.iter().zip(&f.inputs) {
            if let Arg::Tensor(t) = a {
                let name = &f.value(v).name;
                buffers.push((format!("input {name}"), bytes(t.buffer().len(), t.dtype().size_bytes())));
            }
        }
        for (k, o) in plan.outputs.iter().enumerate() {
            if matches!(o.source, OutputSource::Written) {
                let n = o.shape.iter().try_fold(1usize, |a, &e| a.checked_mul(e));
                let what = match f.outputs.get(k) {
                    Some(&v) => format!("output {}", f.value(v).name),
                    None => format!("hidden output {k}"),
                };
                buffers.push((what, n.and_then(|n| bytes(n, o.dtype.size_bytes()))));
            }
        }
        for t in &plan.temps {
            buffers.push((format!("temporary ({})", t.what), bytes(t.elements, t.dtype.size_bytes())));
        }
        let total = buffers.iter().try_fold(0u64, |a, (_, b)| b.and_then(|b| a.checked_add(b)));
        let free = self.gpu.free_memory()?;
        if total.is_some_and(|t| t <= free) {
            return Ok(());
        }
        let (what, largest) = buffers
            .iter()
            .max_by_key(|(_, b)| b.unwrap_or(u64::MAX))
            .cloned()
            .unwrap_or_default();
        let size = |b: Option<u64>| b.map_or("more bytes than can be addressed".into(), describe);
        Err(EngineError::TooLarge(format!(
            "the fusion's buffers need {} of device memory and {} is free; the largest is {what}: {}",
            size(total),
            describe(free),
            size(largest)
        )))
    }

    /// `plan` compiled, with its kernels: its translation units at once
    /// (`Plan::units`), each kernel taken from the unit holding it.
    fn compiled(&self, plan: Plan) -> Result<Compiled, EngineError> {
        let units = plan.units(fusebench_runtime::compile_apart());
        let modules = self.gpu.compile_units(&units)?;
        let kernels = plan
            .kernels
            .iter()
            .map(|k| {
                let at = units.iter().position(|(_, names)| names.contains(&k.name.as_str()));
                modules[at.expect("every kernel is in a unit")].function(&k.name)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((plan, modules, kernels))
    }

    /// Plans, compiles, uploads inputs and allocates outputs.
    pub fn prepare(&self, f: &Fusion, inputs: &[Arg]) -> Result<Prepared, EngineError> {
        if inputs.len() != f.inputs.len() {
            return Err(EngineError::Inputs(format!(
                "{} inputs for a fusion of {}",
                inputs.len(),
                f.inputs.len()
            )));
        }
        for (a, &v) in inputs.iter().zip(&f.inputs) {
            if let Arg::Scalar(l) = a {
                f.check_bound_scalar(v, *l).map_err(EngineError::Inputs)?;
            }
        }
        let layouts: Vec<Option<(Vec<i64>, i64)>> = inputs
            .iter()
            .map(|a| match a {
                Arg::Tensor(t) => Some(layout(t)),
                Arg::Scalar(_) => None,
            })
            .collect();
        let dev = self.device()?;
        // Grids sized by blocks per multiprocessor where a different number
        // compiles to be resident: planned again for what is, and compiled
        // again (`Device::fit_waves`).
        let (mut plan, mut modules, mut kernels) = self.compiled(plan(f, &layouts, dev)?)?;
        let mut compile_ms = longest_compile(&modules);
        let used: Vec<(u32, u32)> = kernels
            .iter()
            .map(|k| (k.attributes().registers_per_thread, k.attributes().static_shared_bytes))
            .collect();
        if let Some(fit) = fusebench_codegen::launch::refit(&dev, &plan, &used) {
            (plan, modules, kernels) = self.compiled(fusebench_codegen::plan(f, &layouts, fit)?)?;
            compile_ms += longest_compile(&modules);
        }
        let in_place = crate::inplace::plan(f, &plan, inputs)?;
        self.check_memory(f, inputs, &plan)?;
        let mut dev_inputs = Vec::new();
        for a in inputs {
            dev_inputs.push(match a {
                Arg::Tensor(t) => Some(self.gpu.alloc_from(&buffer_bytes(t.buffer()))?),
                Arg::Scalar(_) => None,
            });
        }
        let mut outputs = Vec::new();
        for o in &plan.outputs {
            outputs.push(match o.source {
                OutputSource::Written => Some(
                    self.gpu
                        .alloc(o.shape.iter().product::<usize>() * o.dtype.size_bytes())?,
                ),
                _ => None,
            });
        }
        let temps = plan
            .temps
            .iter()
            .map(|t| {
                let b = self.gpu.alloc(t.elements * t.dtype.size_bytes())?;
                // Counters the kernels leave zero must start zero.
                if t.zeroed {
                    b.fill(0)?;
                }
                Ok(b)
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        // Outputs the plan returns as views: no kernel reads for them.
        let views: Vec<_> = f
            .outputs
            .iter()
            .zip(&plan.outputs)
            .filter(|(_, o)| !matches!(o.source, OutputSource::Written))
            .map(|(&v, _)| v)
            .collect();
        let bytes = bytes_moved(f, inputs, plan.written_bytes(), &views);
        let mut prep = Prepared {
            gpu: self.gpu.clone(),
            input_layouts: input_layouts(inputs),
            bytes,
            plan,
            modules,
            compile_ms,
            library_ms: 0.0,
            kernels,
            inputs: dev_inputs,
            rotation: Default::default(),
            input_set: Default::default(),
            bound: Default::default(),
            scalars: inputs
                .iter()
                .map(|a| match a {
                    Arg::Scalar(l) => Some(*l),
                    _ => None,
                })
                .collect(),
            outputs,
            temps,
            in_place,
            products: vec![],
            attention: vec![],
        };
        let libraries = std::time::Instant::now();
        // Each product's algorithm is chosen once, for the alignment of the
        // addresses it reads and writes.
        if !prep.plan.products.is_empty() {
            fusebench_runtime::blas_available().map_err(|why| {
                EngineError::Library(format!(
                    "the fusion's matrix products run in cuBLASLt, which could not be loaded: {why}"
                ))
            })?;
        }
        for p in &prep.plan.products {
            let (a, b, bias, d) = prep.product_addresses(p);
            let mm = crate::products::prepare(&self.gpu, p, a, b, bias, d)?;
            prep.products.push(mm);
        }
        if !prep.plan.attention.is_empty() {
            fusebench_runtime::dnn_available().map_err(|why| {
                EngineError::Library(format!(
                    "the fusion's attention runs in cuDNN, which could not be loaded: {why} \
                     (FUSEBENCH_ATTENTION=own runs it in kernels of fusebench's own)"
                ))
            })?;
        }
        for (i, a) in prep.plan.attention.iter().enumerate() {
            let name = format!("cudnn_sdpa_{}_{i}", if a.backward { "bwd" } else { "fwd" });
            let plan = self.gpu.attention_plan(&crate::products::attention_spec(a)?, &name)?;
            prep.attention.push(plan);
        }
        prep.library_ms = libraries.elapsed().as_secs_f64() * 1e3;
        Ok(prep)
    }
}

/// The planner's device with the FUSEBENCH_ROW_* and _NORM_* settings applied
/// (for `emit` without a GPU as for a run).
pub fn planner_device(d: Device) -> Result<Device, EngineError> {
    let k = fusebench_knobs::get().map_err(|e| EngineError::Settings(e.to_string()))?;
    Ok(Device {
        row_blocks_per_sm: k.row_blocks_per_sm.unwrap_or(d.row_blocks_per_sm),
        norm_blocks_per_sm: k.norm_blocks_per_sm.unwrap_or(d.norm_blocks_per_sm),
        row_unroll: k.row_unroll.unwrap_or(d.row_unroll),
        pointwise_block: k.pointwise_block.unwrap_or(d.pointwise_block),
        pointwise_unroll: k.pointwise_unroll.unwrap_or(d.pointwise_unroll),
        pointwise_blocks_per_sm: k.pointwise_blocks_per_sm.unwrap_or(d.pointwise_blocks_per_sm),
        grid_blocks_per_sm: k.grid_blocks_per_sm.unwrap_or(d.grid_blocks_per_sm),
        outer_blocks_per_sm: k.outer_blocks_per_sm.unwrap_or(d.outer_blocks_per_sm),
        outer_narrow: k.outer_narrow.unwrap_or(d.outer_narrow),
        outer_alone: k.outer_alone.unwrap_or(d.outer_alone),
        reload_threads: k.reload_threads.unwrap_or(d.reload_threads),
        row_prefetch: k.row_prefetch.unwrap_or(d.row_prefetch),
        column_sums: match k.column_sums {
            Some("rowwise") => ColumnSums::Rowwise,
            Some("outer") => ColumnSums::Outer,
            Some(_) => ColumnSums::Joined,
            None => d.column_sums,
        },
        loads_in_flight: k.loads_in_flight.unwrap_or(d.loads_in_flight),
        last_block_combine: k.last_block_combine.unwrap_or(d.last_block_combine),
        contiguous_per_lane: k.contiguous_per_lane.unwrap_or(d.contiguous_per_lane),
        contiguous_fill: k.contiguous_fill.unwrap_or(d.contiguous_fill),
        contiguous_join: k.contiguous_join.unwrap_or(d.contiguous_join),
        row_cache: k.row_cache.unwrap_or(d.row_cache),
        next_row: k.next_row.unwrap_or(d.next_row),
        row_accumulators: k.row_accumulators.unwrap_or(d.row_accumulators),
        block_held: k.block_held.map_or(d.block_held, |n| n as usize),
        row_vectors: k.row_vectors.map_or(d.row_vectors, |n| n as usize),
        row_slack: k.row_slack.unwrap_or(d.row_slack),
        row_reread: k.row_reread.unwrap_or(d.row_reread),
        block_pairs: k.block_pairs.unwrap_or(d.block_pairs),
        reread_one_buffer: k.reread_one_buffer.unwrap_or(d.reread_one_buffer),
        index_margin: k.index_margin.map_or(d.index_margin, u64::from),
        row_once: k.row_once.unwrap_or(d.row_once),
        row_fit_grid: k.row_fit_grid.unwrap_or(d.row_fit_grid),
        fit_waves: match k.fit_waves {
            Some("off") => FitWaves::Off,
            Some("outer") => FitWaves::Outer,
            Some(_) => FitWaves::All,
            None => d.fit_waves,
        },
        row_min_blocks: k.row_min_blocks.unwrap_or(d.row_min_blocks),
        row_packed: k.row_packed.unwrap_or(d.row_packed),
        row_packed_norms: k.row_packed_norms.map_or(d.row_packed_norms, |n| n as usize),
        walk_fill: k.walk_fill.unwrap_or(d.walk_fill),
        product_epilogue: k.product_epilogue.unwrap_or(d.product_epilogue),
        attention_warps: k.attention_warps.unwrap_or(d.attention_warps),
        grouped_stages: k.grouped_stages.unwrap_or(d.grouped_stages),
        grouped_wgmma: k.grouped_wgmma.unwrap_or(d.grouped_wgmma),
        grouped_ws: k.grouped_ws.unwrap_or(d.grouped_ws),
        grouped_ws_cuts: k.grouped_ws_cuts.unwrap_or(d.grouped_ws_cuts),
        grouped_ws_mn: k.grouped_ws_mn.unwrap_or(d.grouped_ws_mn),
        grouped_mn: match k.grouped_mn {
            Some(0) => GroupedMn::Off,
            Some(1) => GroupedMn::MmaSync,
            Some(_) => GroupedMn::Wgmma,
            None => d.grouped_mn,
        },
        attention_keys: k.attention_keys.unwrap_or(d.attention_keys),
        attention_tiles: k.attention_tiles.unwrap_or(d.attention_tiles),
        attention_library: k.attention_library.unwrap_or(d.attention_library),
        row_fill: k.row_fill.unwrap_or(d.row_fill),
        row_sum_vectors: k.row_sum_vectors.map_or(d.row_sum_vectors, |n| n as usize),
        pointwise_walk: k.pointwise_walk.unwrap_or(d.pointwise_walk),
        walk_loads_first: k.walk_loads_first.unwrap_or(d.walk_loads_first),
        column_sum_rows: k.column_sum_rows.unwrap_or(d.column_sum_rows),
        column_sum_blocks_per_sm: k.column_sum_blocks_per_sm.unwrap_or(d.column_sum_blocks_per_sm),
        scan_blocks: k.scan_blocks.unwrap_or(d.scan_blocks),
        scan_lines: k.scan_lines.unwrap_or(d.scan_lines),
        scan_items: k.scan_items.unwrap_or(d.scan_items),
        scan_split: k.scan_split.unwrap_or(d.scan_split),
        scan_epilogue: k.scan_epilogue.unwrap_or(d.scan_epilogue),
        scan_tiles: k.scan_tiles.unwrap_or(d.scan_tiles),
        reshaped_outputs: k.reshaped_outputs.unwrap_or(d.reshaped_outputs),
        stat_epilogue: k.stat_epilogue.unwrap_or(d.stat_epilogue),
        rows_store: k.rows_store.unwrap_or(d.rows_store),
        grid_moments: k.grid_moments.unwrap_or(d.grid_moments),
        siblings: k.siblings.unwrap_or(d.siblings),
        transpose_tile: k.transpose_tile.unwrap_or(d.transpose_tile),
        transpose_bytes: k.transpose_bytes.unwrap_or(d.transpose_bytes),
        transpose_threads: k.transpose_threads.unwrap_or(d.transpose_threads),
        load_hint: match k.loads {
            Some("cs") => Some(LoadHint::Streaming),
            Some("plain") => Some(LoadHint::Plain),
            Some(_) => Some(LoadHint::ReadOnly),
            None => d.load_hint,
        },
        ..d
    })
}

/// The planner's view of a GPU: its properties as the driver reports them,
/// with the measured launch settings.
pub fn device_of(info: &fusebench_runtime::DeviceInfo) -> Device {
    Device {
        sm_count: info.sm_count,
        max_threads_per_block: info.max_threads_per_block,
        max_threads_per_sm: info.max_threads_per_sm,
        max_grid: info.max_grid,
        shared_memory_per_block: info.max_shared_memory_per_block,
        shared_memory_per_sm: info.max_shared_memory_per_sm,
        registers_per_sm: info.registers_per_sm,
        l2_bytes: info.l2_cache_bytes,
        // cuDNN's fused attention runs on Ampere and later.
        attention_library: info.compute_capability.0 >= 8 && fusebench_runtime::dnn_available().is_ok(),
        // Hopper's wgmma: the runtime compiles for sm_90a there (arch.rs).
        grouped_wgmma: info.compute_capability == (9, 0),
        ..Device::default()
    }
}

/// How each input lies in memory, as records say it.
pub fn input_layouts(inputs: &[Arg]) -> Vec<InputLayout> {
    inputs.iter().map(input_layout).collect()
}

/// The layout record of one input: dtype, shape, strides, alignment; a scalar by value.
fn input_layout(a: &Arg) -> InputLayout {
    match a {
        Arg::Tensor(t) => InputLayout {
            dtype: t.dtype().torch_name().into(),
            shape: t.shape().to_vec(),
            strides: t.strides().to_vec(),
            byte_offset: t.offset() * t.dtype().size_bytes(),
        },
        Arg::Scalar(l) => InputLayout {
            dtype: format!("scalar {l}"),
            shape: vec![],
            strides: vec![],
            byte_offset: 0,
        },
    }
}

/// Bytes the fusion must move: what it must read of each input (a gather
/// table only the rows its ids select, counted from the ids' distinct values
/// here, where they are known) and every output a kernel writes; with the
/// line that says how they were counted. What only the outputs `views` (the
/// plan's aliases) read is not counted.
fn bytes_moved(f: &Fusion, inputs: &[Arg], written: usize, views: &[fusebench_ir::ValueId]) -> (usize, String) {
    let shapes: Vec<Option<fusebench_ir::InputShape>> = inputs
        .iter()
        .map(|a| match a {
            Arg::Tensor(t) => Some(fusebench_ir::InputShape {
                dtype: t.dtype(),
                shape: t.shape().to_vec(),
                strides: t.strides().to_vec(),
            }),
            Arg::Scalar(_) => None,
        })
        .collect();
    let distinct = fusebench_host::facts::distinct_ids(f, inputs);
    let t = fusebench_ir::traffic_with_views(f, &shapes, &distinct, views);
    (t.read as usize + written, t.describe(written as u64))
}

/// An input given from outside for the next launches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// Device address of a tensor of exactly the layout the plan was made for.
    Ptr(u64),
    Scalar(Literal),
}

/// A plan with its compiled units and, in launch order, its kernels.
type Compiled = (Plan, Vec<Arc<CompiledModule>>, Vec<Kernel>);

/// The longest NVRTC run of units compiled at once (0 when all came from the cache).
fn longest_compile(modules: &[Arc<CompiledModule>]) -> f64 {
    modules.iter().map(|m| m.compile_ms()).fold(0.0, f64::max)
}

pub struct Prepared {
    pub gpu: Gpu,
    pub plan: Plan,
    /// How each input lay in memory when prepared (scalars by value).
    input_layouts: Vec<InputLayout>,
    /// Bytes the fusion must move, and how they were counted.
    bytes: (usize, String),
    /// The plan's translation units (`Plan::units`), compiled.
    pub modules: Vec<Arc<CompiledModule>>,
    /// NVRTC time of compiling the fusion: the longest unit's (they compile
    /// at once), and before it the first plan's where `launch::refit`
    /// planned it again (0 for images from the kernel cache).
    pub compile_ms: f64,
    /// Time the libraries took to plan the products and attention calls
    /// (cuBLASLt's heuristic, cuDNN's graph and execution plan), their
    /// counterpart of compiling.
    pub library_ms: f64,
    pub kernels: Vec<Kernel>,
    inputs: Vec<Option<DeviceBuffer>>,
    /// Extra copies of the tensor inputs for the rotate policy: `rotation[c][i]`.
    rotation: std::cell::RefCell<Vec<Vec<Option<DeviceBuffer>>>>,
    /// Which set of inputs the next launches read: 0 is `inputs`, c > 0 is `rotation[c - 1]`.
    input_set: std::cell::Cell<usize>,
    /// Inputs someone else owns (PyTorch tensors through DLPack), bound in
    /// place of the prepared ones: device addresses and scalar values.
    bound: std::cell::RefCell<Vec<Option<Bound>>>,
    scalars: Vec<Option<Literal>>,
    outputs: Vec<Option<DeviceBuffer>>,
    temps: Vec<DeviceBuffer>,
    /// Outputs written into their input's buffer after the kernels (add_output alias).
    pub in_place: Vec<crate::InPlace>,
    /// The plan's matrix products, prepared for the BLAS library.
    products: Vec<fusebench_runtime::Matmul>,
    /// The plan's attention calls, prepared for cuDNN.
    attention: Vec<fusebench_runtime::Attention>,
}

impl Prepared {
    /// Fills every written output and temporary with 0xFF bytes (NaN for
    /// floats), so that an element no kernel wrote cannot pass a comparison.
    pub fn poison(&self) -> Result<(), EngineError> {
        self.poison_with(0xFF)
    }

    /// Fills every written output with `byte` and every temporary with 0xFF,
    /// but for the zeroed counters: every launch must leave them zero, so a
    /// check that runs a fusion again finds a launch that did not. One fill
    /// is not enough: 0xFF reads back as `true` for a bool and as -1 for an
    /// integer, so a check runs with each of [`POISONS`].
    pub fn poison_with(&self, byte: u8) -> Result<(), EngineError> {
        for b in self.outputs.iter().flatten() {
            b.fill(byte)?;
        }
        for (b, t) in self.temps.iter().zip(&self.plan.temps) {
            if !t.zeroed {
                b.fill(0xFF)?;
            }
        }
        Ok(())
    }

    fn args(&self, k: usize) -> Result<Vec<KernelArg>, EngineError> {
        let mut args = self.buffer_args(k);
        // Tensor maps over the buffers as these launches see them.
        for m in &self.plan.kernels[k].tensor_maps {
            let ptr = crate::products::address(self.ptr(&m.of), m.offset, 2);
            let strides: Vec<u64> = m.strides.iter().map(|s| s * 2).collect();
            let map = fusebench_runtime::encode_tensor_map(ptr, m.bf16, &m.dims, &strides, &m.boxes)?;
            args.push(KernelArg::Map(map));
        }
        Ok(args)
    }

    fn buffer_args(&self, k: usize) -> Vec<KernelArg> {
        let set = self.input_set.get();
        let rotation = self.rotation.borrow();
        let bound = self.bound.borrow();
        let given = |i: usize| bound.get(i).copied().flatten();
        self.plan.kernels[k]
            .args
            .iter()
            .map(|a| match *a {
                PlanArg::Input(i) => match given(i) {
                    Some(Bound::Ptr(p)) => KernelArg::Ptr(p),
                    _ if set > 0 => rotation[set - 1][i].as_ref().expect("tensor input").arg(),
                    _ => self.inputs[i].as_ref().expect("tensor input").arg(),
                },
                PlanArg::Scalar(i) => match given(i) {
                    Some(Bound::Scalar(l)) => KernelArg::F64(l.as_f64()),
                    _ => KernelArg::F64(self.scalars[i].expect("scalar input").as_f64()),
                },
                PlanArg::Output(i) => self.outputs[i].as_ref().expect("written output").arg(),
                PlanArg::Temp(i) => self.temps[i].arg(),
            })
            .collect()
    }

    /// Device address of a buffer of the plan, as the next launches see it.
    fn ptr(&self, a: &PlanArg) -> u64 {
        match *a {
            PlanArg::Input(i) => self.input_ptr_in_set(i).expect("tensor input"),
            PlanArg::Output(i) => self.outputs[i].as_ref().expect("written output").device_ptr(),
            PlanArg::Temp(i) => self.temps[i].device_ptr(),
            PlanArg::Scalar(_) => unreachable!("products read tensors"),
        }
    }

    /// Addresses of a product's A, B, bias and D as the next launches see them.
    fn product_addresses(&self, p: &fusebench_codegen::Product) -> (u64, u64, Option<u64>, u64) {
        let elem = p.dtype.size_bytes();
        let [ea, eb] = p.operands.map_or([elem; 2], |t| t.map(|d| d.size_bytes()));
        let at = |o: &fusebench_codegen::Operand, e: usize| crate::products::address(self.ptr(&o.arg), o.offset, e);
        (
            at(&p.a, ea),
            at(&p.b, eb),
            p.bias.as_ref().map(|o| at(o, elem)),
            crate::products::address(self.ptr(&p.out), p.out_offset, elem),
        )
    }

    /// Enqueues matrix product `i` of the plan.
    fn run_product(&self, i: usize) -> Result<(), EngineError> {
        let p = &self.plan.products[i];
        let (a, b, bias, d) = self.product_addresses(p);
        // Scales are Float.
        let scales = p.scales.as_ref().map(|s| s.each_ref().map(|o| crate::products::address(self.ptr(&o.arg), o.offset, 4)));
        self.gpu.matmul(&self.products[i], a, b, scales, bias, d)?;
        Ok(())
    }

    /// Enqueues attention call `i` of the plan (zeroing the outputs it
    /// leaves zero first).
    fn run_attention(&self, i: usize) -> Result<(), EngineError> {
        let a = &self.plan.attention[i];
        for z in &a.zeroed {
            if let PlanArg::Output(o) = z {
                self.outputs[*o].as_ref().expect("written output").fill(0)?;
            }
        }
        let elem = |t: &fusebench_codegen::AttentionOperand| {
            use fusebench_codegen::AttentionRole as R;
            match t.role {
                R::Stats | R::SoftmaxSum | R::DqAccum => 4,
                _ => a.dtype.size_bytes(),
            }
        };
        let ptrs: Vec<_> = a
            .tensors
            .iter()
            .map(|t| (crate::products::attention_role(t.role), crate::products::address(self.ptr(&t.arg), t.offset, elem(t))))
            .collect();
        self.gpu.attention(&self.attention[i], &ptrs, a.scale as f32)?;
        Ok(())
    }

    /// Makes the next launches read these inputs instead of the prepared
    /// ones (`None` keeps an input's prepared value). A bound tensor must have
    /// the dtype, shape and strides the plan was made for: the caller checks.
    pub fn bind(&self, inputs: Vec<Option<Bound>>) {
        *self.bound.borrow_mut() = inputs;
    }

    /// Device address of input `i` as the next launch reads it.
    pub fn input_ptr(&self, i: usize) -> Option<u64> {
        match self.bound.borrow().get(i).copied().flatten() {
            Some(Bound::Ptr(p)) => Some(p),
            _ => self.inputs.get(i)?.as_ref().map(|b| b.device_ptr()),
        }
    }

    /// Device address of input `i` as fusebench generated it (not a bound tensor).
    pub fn own_input_ptr(&self, i: usize) -> Option<u64> {
        self.inputs.get(i)?.as_ref().map(|b| b.device_ptr())
    }

    /// Device address of written output `i`.
    pub fn output_ptr(&self, i: usize) -> Option<u64> {
        self.outputs.get(i)?.as_ref().map(|b| b.device_ptr())
    }

    /// Prepares `copies` sets of inputs in all (the original and copies - 1
    /// more) for the rotate policy; keeps sets already made.
    pub fn make_input_copies(&self, copies: usize) -> Result<(), EngineError> {
        let mut rotation = self.rotation.borrow_mut();
        while rotation.len() + 1 < copies {
            let mut set = Vec::new();
            for b in &self.inputs {
                set.push(match b {
                    Some(b) => Some(self.gpu.alloc_from(&b.download()?)?),
                    None => None,
                });
            }
            rotation.push(set);
        }
        Ok(())
    }

    /// Bytes of all tensor inputs on the device.
    pub fn input_bytes(&self) -> usize {
        self.inputs.iter().flatten().map(|b| b.len()).sum()
    }

    /// Bytes the fusion must move, and how they were counted.
    pub fn bytes_moved(&self) -> (usize, String) {
        self.bytes.clone()
    }

    /// How each input lay in memory when prepared.
    pub fn input_layouts(&self) -> &[InputLayout] {
        &self.input_layouts
    }

    /// Name and launch shape (grid then block) of each kernel, in launch order:
    /// what CUPTI must record for one run. `None` where the plan has matrix
    /// products, whose kernels the library picks: the harness learns them
    /// from a warm-up run and holds every sample to them.
    pub fn launch_list(&self) -> Option<Vec<(String, [u32; 6])>> {
        if self.plan.runs_library() {
            return None;
        }
        Some(
            self.plan
                .kernels
                .iter()
                .map(|k| {
                    let (g, b) = (k.grid, k.block);
                    (k.name.clone(), [g[0], g[1], g[2], b[0], b[1], b[2]])
                })
                .collect(),
        )
    }

    /// Sets of inputs made: the prepared one and its copies.
    pub fn input_sets(&self) -> usize {
        self.rotation.borrow().len() + 1
    }

    /// Device memory this fusion holds: inputs (with any rotation copies),
    /// outputs and temporaries.
    pub fn device_bytes(&self) -> usize {
        let copies: usize = self
            .rotation
            .borrow()
            .iter()
            .flatten()
            .flatten()
            .map(|b| b.len())
            .sum();
        self.input_bytes()
            + copies
            + self
                .outputs
                .iter()
                .flatten()
                .map(|b| b.len())
                .sum::<usize>()
            + self.temps.iter().map(|b| b.len()).sum::<usize>()
    }

    /// Makes the next launches read input set `set` (modulo the sets made).
    pub fn use_input_set(&self, set: usize) {
        let n = self.rotation.borrow().len() + 1;
        self.input_set.set(set % n);
    }

    /// Enqueues kernel `k`.
    pub fn launch(&self, k: usize) -> Result<(), EngineError> {
        let pk = &self.plan.kernels[k];
        let g = pk.grid;
        let b = pk.block;
        self.gpu.launch(
            &self.kernels[k],
            (g[0], g[1], g[2]),
            (b[0], b[1], b[2]),
            pk.shared_bytes,
            &self.args(k)?,
        )?;
        Ok(())
    }

    /// Enqueues every kernel in order, then writes each aliased output into
    /// its input's buffer (the one these launches read).
    pub fn launch_all(&self) -> Result<(), EngineError> {
        // Library calls run before the kernel they name (after them all at the count).
        for k in 0..=self.kernels.len() {
            for call in self.plan.calls_before(k) {
                match call {
                    LibraryCall::Product(i) => self.run_product(i)?,
                    LibraryCall::Attention(i) => self.run_attention(i)?,
                }
            }
            if k < self.kernels.len() {
                self.launch(k)?;
            }
        }
        // Updates of strided inputs were written by the plan's last kernels.
        for a in self.in_place.iter().filter(|a| !a.by_kernel) {
            let src = self.outputs[a.output]
                .as_ref()
                .expect("in-place outputs are written");
            let dst = self
                .input_ptr_in_set(a.input)
                .expect("in-place inputs are tensors");
            // SAFETY: dst is the tensor input's buffer (prepared, a rotation copy
            // or one bound by the caller), which holds the input's `bytes`.
            unsafe { src.copy_to_ptr(dst, a.bytes)? };
        }
        Ok(())
    }

    /// Device address of tensor input `i` in the input set the next launches read.
    fn input_ptr_in_set(&self, i: usize) -> Option<u64> {
        if let Some(Bound::Ptr(p)) = self.bound.borrow().get(i).copied().flatten() {
            return Some(p);
        }
        let set = self.input_set.get();
        if set > 0 {
            return self.rotation.borrow()[set - 1][i]
                .as_ref()
                .map(|b| b.device_ptr());
        }
        self.inputs.get(i)?.as_ref().map(|b| b.device_ptr())
    }

    /// Uploads `inputs` again into the prepared input buffers (an in-place
    /// update changed them; a check runs each poison from the same inputs).
    pub fn reset_inputs(&self, inputs: &[Arg]) -> Result<(), EngineError> {
        for (a, b) in inputs.iter().zip(&self.inputs) {
            if let (Arg::Tensor(t), Some(b)) = (a, b) {
                b.upload(&buffer_bytes(t.buffer()))?;
            }
        }
        Ok(())
    }

    /// The inputs updated in place, as they are on the device now: (output
    /// position, the input's value).
    pub fn updated_inputs(&self, inputs: &[Arg]) -> Result<Vec<(usize, Tensor)>, EngineError> {
        let mut out = vec![];
        for a in &self.in_place {
            let Arg::Tensor(t) = &inputs[a.input] else {
                continue;
            };
            let b = self.inputs[a.input].as_ref().expect("tensor input");
            let bytes = b.download()?;
            if !a.by_kernel {
                out.push((
                    a.output,
                    Tensor::from_le_bytes(t.dtype(), t.shape(), &bytes[..a.bytes])?,
                ));
                continue;
            }
            // A strided input: its elements through its own strides; the
            // storage between them must be as it was given.
            let given = crate::transfer::buffer_bytes(t.buffer());
            if let Some(at) = crate::inplace::touched_gap(t, &given, &bytes) {
                return Err(EngineError::Inputs(format!(
                    "the in-place update of input {} changed storage element {at}, which is not one of its elements",
                    a.input
                )));
            }
            let flat = Tensor::from_le_bytes(t.dtype(), &[t.buffer().len()], &bytes)?;
            out.push((
                a.output,
                Tensor::new(
                    t.dtype(),
                    t.shape().to_vec(),
                    t.strides().to_vec(),
                    t.offset(),
                    flat.buffer_arc().clone(),
                )?,
            ));
        }
        Ok(out)
    }

    /// Poisons the outputs, runs every kernel and waits.
    pub fn run(&self) -> Result<(), EngineError> {
        self.run_poisoned(0xFF)
    }

    /// Fills the outputs with `byte` (see `poison_with`), runs every kernel and waits.
    pub fn run_poisoned(&self, byte: u8) -> Result<(), EngineError> {
        self.poison_with(byte)?;
        self.launch_all()?;
        self.gpu.synchronize()?;
        Ok(())
    }

    /// Copies the outputs back; views of inputs or of other outputs come back
    /// as views, as the plan says they are.
    pub fn outputs(&self, f: &Fusion, inputs: &[Arg]) -> Result<Vec<Tensor>, EngineError> {
        let mut out: Vec<Option<Tensor>> = vec![None; self.plan.outputs.len()];
        for (i, o) in self.plan.outputs.iter().enumerate() {
            if let (OutputSource::Written, Some(b)) = (&o.source, &self.outputs[i]) {
                let bytes = b.download()?;
                out[i] = Some(match &o.strides {
                    // A stride order: the buffer holds the elements in that layout.
                    Some(st) => {
                        let flat =
                            Tensor::from_le_bytes(o.dtype, &[o.shape.iter().product()], &bytes)?;
                        Tensor::new(
                            o.dtype,
                            o.shape.clone(),
                            st.clone(),
                            0,
                            flat.buffer_arc().clone(),
                        )?
                    }
                    None => Tensor::from_le_bytes(o.dtype, &o.shape, &bytes)?,
                });
            }
        }
        for (i, o) in self.plan.outputs.iter().enumerate() {
            let view = |base: &Tensor, strides: &[i64], offset: i64| {
                Tensor::new(
                    o.dtype,
                    o.shape.clone(),
                    strides.to_vec(),
                    offset as usize,
                    base.buffer_arc().clone(),
                )
            };
            match &o.source {
                OutputSource::Written => {}
                OutputSource::InputView {
                    input,
                    strides,
                    offset,
                } => {
                    let Arg::Tensor(t) = &inputs[*input] else {
                        unreachable!("planned as a tensor")
                    };
                    out[i] = Some(view(t, strides, *offset)?);
                }
                OutputSource::OutputView {
                    output,
                    strides,
                    offset,
                } => {
                    let base = out[*output].clone().expect("base output downloaded first");
                    out[i] = Some(view(&base, strides, *offset)?);
                }
            }
        }
        let index32 = f.index_is_32bit();
        // Hidden outputs (bases of broadcast views) are the plan's own.
        out.truncate(self.plan.outputs.len() - self.plan.hidden_outputs);
        Ok(out
            .into_iter()
            .map(|t| {
                let t = t.expect("every output resolved");
                // Report Index as nvFuser and the reference do.
                if t.dtype() == DType::Index && index32 {
                    let v = t.to_i64_vec();
                    Tensor::from_i64s(DType::Int32, t.shape(), &v).unwrap_or(t)
                } else {
                    t
                }
            })
            .collect())
    }
}
