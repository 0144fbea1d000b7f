//! Any text through the whole of `fusebench check` but the printing: read,
//! infer (the reader does), plan for the GPU (no GPU needed) and run on the
//! CPU reference with generated inputs. None of it may panic, abort or hang;
//! errors are answers. Fusions are capped in size so each run stays short:
//! the memory check of real runs is tested elsewhere (crates/cli/tests/too_large.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Elements of any one tensor value, and of all of them, that a case may have.
const MAX_VALUE: usize = 1 << 12;
const MAX_TOTAL: usize = 1 << 15;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(f) = fusebench_frontend::parse_script("fuzz.py", &text) else {
        return;
    };
    let recipe = f.recipe.iter().flatten().map(|r| r.storage_len());
    let sizes: Vec<usize> = f.values.iter().map(|v| v.numel()).chain(recipe).collect();
    if sizes.iter().any(|&n| n > MAX_VALUE)
        || sizes.iter().fold(0usize, |a, &n| a.saturating_add(n)) > MAX_TOTAL
    {
        return;
    }
    let layouts = vec![None; f.inputs.len()];
    let _ = fusebench_codegen::plan(&f, &layouts, fusebench_codegen::Device::default());
    // Hopper's grouped products (wgmma, MN-major operands) and attention
    // through the library are planned apart: other code paths.
    let hopper = fusebench_codegen::Device {
        grouped_wgmma: true,
        grouped_mn: fusebench_codegen::GroupedMn::Wgmma,
        attention_library: true,
        ..Default::default()
    };
    let _ = fusebench_codegen::plan(&f, &layouts, hopper);
    if let Ok(g) = fusebench_reference::generate_inputs(&f, 0) {
        let _ = fusebench_reference::run(&f, &g.inputs);
    }
});
