//! In-program: the subjects of a program run step after step with nothing in
//! between; each finds in L2 (and in the SMs' caches) what the earlier ones
//! left, as in one step of a model. Nothing runs before a step either (what
//! the step before left is part of the program), so with CUDA events the
//! first subject's window can include the host's launch latency: CUPTI's
//! kernel times do not.

use super::Policy;
use fusebench_measure::CachePolicy;

pub struct InProgram;

impl Policy for InProgram {
    fn kind(&self) -> CachePolicy {
        CachePolicy::InProgram
    }
}
