//! What each kernel of a module uses, as ptxas reports it under `--ptxas-options=--verbose`:
//! registers per thread, spills, stack and static shared memory. Read from NVRTC's log, so it is
//! known with no GPU (`compile_offline_resources`, `fusebench emit --resources`); on a GPU the
//! driver's attributes say the same (`KernelAttributes`).

use serde::{Deserialize, Serialize};

/// One kernel's resources, from ptxas's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// Stack frame per thread (local memory that is not spills: arrays indexed at run time).
    pub stack_bytes: u32,
    pub static_shared_bytes: u32,
}

/// The kernels ptxas reported in `log`, in its order. A kernel's entry starts at "Compiling entry
/// function 'NAME'"; its lines after that give the stack and spills ("N bytes stack frame, N bytes
/// spill stores, N bytes spill loads") and the registers and shared memory ("Used N registers, ...,
/// N bytes smem"; no smem part where it uses none). Lines of other kinds (warnings) are skipped.
pub fn parse_ptxas_verbose(log: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            if let Some(name) = rest.split('\'').next() {
                out.push(KernelResources {
                    name: name.to_string(),
                    registers: 0,
                    spill_store_bytes: 0,
                    spill_load_bytes: 0,
                    stack_bytes: 0,
                    static_shared_bytes: 0,
                });
            }
            continue;
        }
        let Some(k) = out.last_mut() else { continue };
        if line.contains("bytes stack frame") {
            k.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
            k.spill_store_bytes = number_before(line, "bytes spill stores").unwrap_or(0);
            k.spill_load_bytes = number_before(line, "bytes spill loads").unwrap_or(0);
        } else if line.contains("Used ") && line.contains(" registers") {
            k.registers = number_before(line, "registers").unwrap_or(0);
            k.static_shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
        }
    }
    out
}

/// The number just before `what` in `line` ("..., 24 bytes spill stores" gives 24).
fn number_before(line: &str, what: &str) -> Option<u32> {
    let at = line.find(what)?;
    line[..at].split(|c: char| !c.is_ascii_digit()).rfind(|s| !s.is_empty())?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "k.cu(165): warning #177-D: variable \"fb_sd\" was declared but never referenced
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'fb_n0_c' for 'sm_90'
ptxas info    : Function properties for fb_n0_c
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 8448 bytes smem
ptxas info    : Compile time = 7.163 ms
ptxas info    : Compiling entry function 'fb_n0' for 'sm_90'
ptxas info    : Function properties for fb_n0
ptxas         .     136 bytes stack frame, 132 bytes spill stores, 108 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers
";

    #[test]
    fn each_kernel_with_its_registers_spills_and_shared_memory() {
        let r = parse_ptxas_verbose(LOG);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            KernelResources {
                name: "fb_n0_c".into(),
                registers: 32,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
                stack_bytes: 0,
                static_shared_bytes: 8448,
            }
        );
        assert_eq!((r[1].registers, r[1].spill_store_bytes, r[1].spill_load_bytes), (128, 132, 108));
        assert_eq!((r[1].stack_bytes, r[1].static_shared_bytes), (136, 0));
    }

    #[test]
    fn a_log_without_ptxas_lines_gives_nothing() {
        assert!(parse_ptxas_verbose("k.cu(3): warning: unused").is_empty());
    }
}
