"""Writes a JSON file with nvbench itself (cuda-bench, nvbench's Python bindings), for the tests of
fusebench's nvbench reader: a bf16 device copy at two sizes, timed by nvbench's cold measurement.
Run on the GPU machine (scripts/gpu.sh nvbench):

    python3 bench/nvbench_fixture.py --json nvbench_copy.json
"""
import sys

import torch

import cuda.bench as bench


@bench.register
@bench.axis.int64_power_of_two("Elements", [20, 24])
def bf16_copy(state):
    n = state.get_int64("Elements")
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    state.add_global_memory_reads(x.numel() * x.element_size())
    state.add_global_memory_writes(y.numel() * y.element_size())

    def launch(launch):
        # nvbench hands its own stream; the copy goes on it.
        stream = torch.cuda.ExternalStream(launch.get_stream().addressof())
        with torch.cuda.stream(stream):
            y.copy_(x)

    state.exec(launch)


if __name__ == "__main__":
    bench.run_all_benchmarks(sys.argv)
