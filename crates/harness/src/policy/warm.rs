//! Warm: back to back, a spinning kernel in front of each sample; data that
//! fits in L2 is read from L2.

use super::Policy;
use crate::HarnessError;
use fusebench_measure::CachePolicy;
use fusebench_runtime::Gpu;

pub struct Warm;

impl Policy for Warm {
    fn kind(&self) -> CachePolicy {
        CachePolicy::Warm
    }

    fn before_step(&self, gpu: &Gpu) -> Result<(), HarnessError> {
        super::spin(gpu)
    }
}
