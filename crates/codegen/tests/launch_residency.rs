//! `launch::resident`: blocks per multiprocessor from a compiled kernel's
//! registers and shared memory, on the default (H200) device: 64K registers,
//! 2048 threads and 228 KiB of shared memory per multiprocessor.

use fusebench_codegen::{launch::resident, Device};

#[test]
fn registers_threads_shared_memory_or_the_block_limit_bound_it() {
    let d = Device::default();
    // A backward LayerNorm's row kernel: 123 registers (128 a thread as
    // given) at 288 threads: one block.
    assert_eq!(resident(&d, 288, 123, 41600), (1, "registers"));
    // 38 registers (40 as given) at 256 threads: 6 blocks.
    assert_eq!(resident(&d, 256, 38, 8192), (6, "registers"));
    // Few registers: the threads bound it.
    assert_eq!(resident(&d, 1024, 16, 4224), (2, "threads"));
    // A large dynamic buffer: shared memory.
    assert_eq!(resident(&d, 256, 32, 100_000), (2, "shared memory"));
    // Tiny blocks: the hardware's limit.
    assert_eq!(resident(&d, 32, 16, 0), (32, "blocks"));
}

#[test]
fn a_tie_names_the_threads() {
    // 32 registers at 1024 threads: both registers and threads allow two.
    assert_eq!(resident(&Device::default(), 1024, 32, 0), (2, "threads"));
}
