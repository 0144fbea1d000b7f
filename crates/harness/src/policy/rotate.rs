//! Rotate: back to back over placements of the inputs that together exceed
//! twice the L2, so each sample reads inputs the L2 no longer holds, without
//! a flush (no dirty lines, warm instruction caches).

use super::Policy;
use crate::subject::Subject;
use crate::HarnessError;
use fusebench_measure::CachePolicy;
use fusebench_runtime::Gpu;

pub struct Rotate;

/// Placements that together are at least twice the L2, so a placement is evicted
/// before it is read again; at most 4096 (tiny inputs then stay partly cached,
/// and say so by being fast).
pub fn rotation_copies(input_bytes: usize, l2_bytes: usize) -> usize {
    if input_bytes == 0 {
        return 1;
    }
    (2 * l2_bytes).div_ceil(input_bytes).clamp(2, 4096)
}

impl Policy for Rotate {
    fn kind(&self) -> CachePolicy {
        CachePolicy::Rotate
    }

    fn placements(&self, gpu: &Gpu, subject: &dyn Subject) -> Result<usize, HarnessError> {
        let n = rotation_copies(
            subject.input_bytes() as usize,
            gpu.info().l2_cache_bytes as usize,
        );
        subject.make_placements(n)
    }

    fn before_step(&self, gpu: &Gpu) -> Result<(), HarnessError> {
        super::spin(gpu)
    }

    fn before_subject(
        &self,
        _: &Gpu,
        subject: &dyn Subject,
        step: usize,
    ) -> Result<(), HarnessError> {
        subject.use_placement(step);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rotation_exceeds_twice_the_l2() {
        let l2 = 60 << 20;
        assert_eq!(super::rotation_copies(525 << 20, l2), 2);
        assert_eq!(super::rotation_copies(32 << 20, l2), 4);
        assert!(super::rotation_copies(24 << 20, l2) * (24 << 20) >= 2 * l2);
        assert_eq!(super::rotation_copies(16 << 10, l2), 4096);
        assert_eq!(super::rotation_copies(0, l2), 1);
    }
}
