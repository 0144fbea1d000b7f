"""Times a saved nvFuser repro script in this process, as a fresh process meets it (`fusebench.thunder`).

    python -m fusebench._saved SCRIPT [--name NAME] [--max-time S] [--caches cold,warm,cold-write]

Runs the script's definition without its closing `fd.execute(inputs)`, puts the integer inputs saved beside
it (SCRIPT.ints.pt, if there) in place of the script's random ones, times `fd.execute(inputs)` cold and warm
with `fusebench.kernel_time` under the policies `--caches` names ("cold", "warm", and "cold-write": cold after a
write flush, which leaves L2 full of dirty lines), and prints one JSON object: the records (as JSON text, keyed by
policy, "cold-write" as "cold_write") and the peak device memory of one call in MiB.
"""

import argparse
import json


def definition(text):
    """The script without the lines that execute the fusion (`fd.execute(...)` at the top level)."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("fd.execute(")) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fusebench._saved")
    ap.add_argument("script")
    ap.add_argument("--name", default=None)
    ap.add_argument("--max-time", type=float, default=1.0)
    ap.add_argument("--caches", default="cold,warm", help="the cache policies to time, comma-separated: cold, warm, cold-write")
    a = ap.parse_args(argv)

    import os

    import torch

    import fusebench

    with open(a.script) as f:
        text = definition(f.read())
    ns = {"__name__": "__fusebench_saved__"}
    exec(compile(text, a.script, "exec"), ns)
    fd, inputs = ns["fd"], list(ns["inputs"])
    if os.path.exists(a.script + ".ints.pt"):
        for i, t in torch.load(a.script + ".ints.pt").items():
            inputs[i] = t.to(inputs[i].device) if isinstance(inputs[i], torch.Tensor) else t
    out = {}
    for cache in a.caches.split(","):
        kw = {"cache": "cold", "flush": "write"} if cache == "cold-write" else {"cache": cache}
        m = fusebench.kernel_time(fd.execute, inputs, max_time=a.max_time, name=a.name, context="saved", **kw)
        out[cache.replace("-", "_")] = m.to_json()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fd.execute(inputs)
    torch.cuda.synchronize()
    out["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(out))


if __name__ == "__main__":
    main()
