"""Times nvFuser on repro scripts the way `fusebench bench` times its own kernels: L2 cold before
every sample, kernel time only. Run on the GPU machine after `source .peer/activate.sh`.

    python3 bench/nvfuser_peer.py DIR_OR_FILES... --samples 30 --out nvfuser.json

Each script is executed as written (its `fd.execute(inputs)` is the warm-up), except that integer
inputs used as gather indices drawn from [-9, 10) (as the saved scripts draw them) get valid ids. The result is
one JSON object {"fusions": [{"file", "nvfuser_cold_us", "kernels"}], "method": ...} that
`fusebench bench --nvfuser FILE` reads for its nvFuser column.
"""
import argparse
import json
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def scripts(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".py"))
        else:
            out.append(p)
    return out


def valid_indices(inputs):
    # Gather tables in the corpus have 50304 to 128256 rows: ids drawn from [0, 50304) are valid for
    # all and touch about as many distinct rows as fusebench's draws over the whole table. Only ids
    # drawn from make_tensor's [-9, 10) (negative ones among them) are redrawn: scripts that draw their
    # ids in range themselves (bench/patterns.py: embedding over 32064 rows, cross_entropy targets
    # below the row length) keep them, since [0, 50304) would be out of range there.
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.dtype == torch.int64 and bool((t < 0).any()):
            inputs[i] = torch.randint(0, 50304, t.shape, dtype=torch.int64, device=t.device)


def time_cold(fd, inputs, samples):
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        fd.execute(inputs)
    per_call = []
    kernels = {}
    for _ in range(samples):
        flush.zero_()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fd.execute(inputs)
            torch.cuda.synchronize()
        total = 0.0
        for e in prof.events():
            if e.device_type.name == "CUDA" and "nvfuser" in e.name:
                total += e.device_time
                kernels.setdefault(e.name, []).append(e.device_time)
        per_call.append(total)
    return statistics.median(per_call), {k: statistics.median(v) for k, v in kernels.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--out", default="nvfuser.json")
    a = ap.parse_args()
    rows = []
    for path in scripts(a.paths):
        text = open(path).read()
        # Build the definition and inputs; the script's own execute call is replaced by ours.
        text = text.replace("fd.execute(inputs)", "")
        ns = {}
        try:
            exec(compile(text, path, "exec"), ns)
            fd, inputs = ns["fd"], ns["inputs"]
            valid_indices(inputs)
            us, kernels = time_cold(fd, inputs, a.samples)
            rows.append({"file": os.path.basename(path), "nvfuser_cold_us": us, "kernels": kernels})
            print(f"{os.path.basename(path)}: {us:.2f} us", file=sys.stderr)
        except Exception as e:  # one failing script must not hide the others
            print(f"{os.path.basename(path)}: FAILED: {e}", file=sys.stderr)
    json.dump({"method": "torch.profiler device time of nvFuser's kernels per call, summed; median of "
               f"{a.samples} calls after 3 warm-up calls; a 256 MiB buffer zeroed before each call",
               "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "fusions": rows},
              open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
