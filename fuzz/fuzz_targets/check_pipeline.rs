//! Any text through the whole `check` pipeline: read it, type it, plan its
//! GPU kernels (no GPU needed to plan) and run the CPU reference on generated
//! inputs. Nothing may panic, abort or hang; errors are fine. Fusions whose
//! values hold more than `CAP` elements in all are read and planned but not
//! run, as `check` refuses what does not fit in memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

const CAP: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(f) = fusebench_frontend::parse_script("fuzz.py", &text) else {
        return;
    };
    let layouts = vec![None; f.inputs.len()];
    let _ = fusebench_codegen::plan(&f, &layouts, fusebench_codegen::Device::default());
    let elements = f
        .values
        .iter()
        .fold(0usize, |a, v| a.saturating_add(v.numel()));
    if elements > CAP {
        return;
    }
    if let Ok(g) = fusebench_reference::generate_inputs(&f, 0) {
        let _ = fusebench_reference::run(&f, &g.inputs);
    }
});
