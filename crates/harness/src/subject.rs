//! What the harness measures. A subject says who it is (for the record), what
//! it launches and how to run it once; the harness does everything else.

use crate::HarnessError;
use std::collections::BTreeMap;

/// A kernel launch as CUPTI records it: the kernel's name and its grid then block.
pub type Launch = (String, [u32; 6]);

/// What the record says of a kernel beyond its launch (unknown for a call).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelFacts {
    pub code_hash: String,
    pub shared_bytes: u32,
    pub registers: u32,
}

pub trait Subject {
    /// Who it is: name, definition hash, inputs.
    fn identity(&self) -> fusebench_measure::Subject;

    /// The kernels one run launches on the harness's stream, in order. `None`
    /// for a call that launches whatever it launches on any stream of the
    /// context (a Python callable): its kernels are learned from its last
    /// warm-up run, and every sample must launch the same.
    fn launches(&self) -> Option<Vec<Launch>>;

    /// Enqueues kernel `k` of `launches` on the harness's stream.
    fn launch(&self, k: usize) -> Result<(), HarnessError> {
        Err(HarnessError::Usage(format!(
            "kernel {k}: this subject launches nothing on the harness's stream"
        )))
    }

    /// Runs once (subjects without `launches`): the harness waits for the whole
    /// context before and after.
    fn call(&self) -> Result<(), HarnessError> {
        let n = self.launches().map_or(0, |l| l.len());
        (0..n).try_for_each(|k| self.launch(k))
    }

    /// Per kernel of `launches`, what the record says of it; empty when unknown.
    fn kernel_facts(&self) -> Vec<KernelFacts> {
        Vec::new()
    }

    /// The libraries that run part of it, with their versions (for the
    /// record's environment); empty when it runs only its own kernels.
    fn libraries(&self) -> String {
        String::new()
    }

    /// Bytes it must move, and how they were counted.
    fn bytes(&self) -> Option<(u64, String)> {
        None
    }

    /// Device memory it holds.
    fn device_bytes(&self) -> Option<u64> {
        None
    }

    /// Bytes of its tensor inputs (one placement).
    fn input_bytes(&self) -> u64 {
        0
    }

    /// Makes placements of its inputs until there are `n` (same values, other
    /// allocations) and says how many it has: 1 when its inputs are not its own.
    fn make_placements(&self, n: usize) -> Result<usize, HarnessError> {
        let _ = n;
        Ok(1)
    }

    /// Makes the next runs read placement `i` (modulo the placements made).
    fn use_placement(&self, i: usize) {
        let _ = i;
    }

    /// FUSEBENCH_* settings that changed what it runs (the planner's), for its record.
    fn knobs(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
}
