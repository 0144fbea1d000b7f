"""Times each fusion of a directory with nvFuser, PyTorch eager, torch.compile and fusebench's own
engine, all with `fusebench.kernel_time` under the same policy (cold L2, CUPTI kernel time, median
until its 95% interval is within +-1%), and prints one table. Run on the GPU machine:

    source .peer/activate.sh && pip install --no-deps .gpu/fusebench-*.whl
    python3 bench/peers.py .gpu/shared/corpus [--compile 000,002,...] [--json peers.json]

nvFuser runs the script's own definition and inputs (gather ids redrawn in range, as
bench/nvfuser_peer.py does); eager and torch.compile run bench/torch_fusion.py's PyTorch version of
the same fusion on the same inputs; fusebench runs `fusebench.load(script)` on the same tensors too
(DLPack, no copy), or on inputs it generates from the script's recipe where a layout differs. torch.compile takes seconds per fusion to compile, so it runs on the fusions
`--compile` names (file-name prefixes; `all` for every one).
"""
import argparse
import json
import math
import os
import sys

import torch

import fusebench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvfuser_peer import scripts, valid_indices  # noqa: E402
from torch_fusion import build  # noqa: E402


def script_parts(path):
    text = open(path).read().replace("fd.execute(inputs)", "")
    ns = {}
    exec(compile(text, path, "exec"), ns)
    inputs = ns["inputs"]
    valid_indices(inputs)
    return ns["fd"], inputs


def timed(label, fn, *args, **kw):
    try:
        return fusebench.kernel_time(fn, *args, **kw)
    except Exception as e:  # one peer failing must not hide the others
        print(f"  {label}: FAILED: {e}", file=sys.stderr)
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--compile", default="", help="comma-separated file-name prefixes, or 'all'")
    ap.add_argument("--json", default=None)
    ap.add_argument("--max-time", type=float, default=1.0)
    a = ap.parse_args()
    want_compile = a.compile.split(",") if a.compile else []
    rows = []
    for path in scripts(a.paths):
        name = os.path.basename(path)
        print(name, file=sys.stderr)
        row = {"file": name}
        try:
            fd, inputs = script_parts(path)
        except Exception as e:
            print(f"  script: FAILED: {e}", file=sys.stderr)
            continue
        m = timed("nvFuser", fd.execute, inputs, name=name, max_time=a.max_time)
        row["nvfuser"] = m
        try:
            fn = build(fusebench.fusion_json(path))
            with torch.no_grad():
                row["eager"] = timed("eager", fn, *inputs, name=name, max_time=a.max_time)
                if "all" in want_compile or any(name.startswith(p) for p in want_compile):
                    cfn = torch.compile(fn, dynamic=False)
                    row["compile"] = timed("torch.compile", cfn, *inputs, name=name, max_time=a.max_time)
        except Exception as e:
            print(f"  eager/compile: FAILED: {e}", file=sys.stderr)
        try:
            f = fusebench.load(path)
            try:
                # The very tensors nvFuser ran on, through DLPack.
                f(*inputs)
                args = inputs
            except ValueError as e:
                print(f"  fusebench: its own inputs ({e})", file=sys.stderr)
                args = []
            row["fusebench"] = timed("fusebench", f, *args, name=name, bytes=f.bytes, max_time=a.max_time)
        except Exception as e:
            print(f"  fusebench: FAILED: {e}", file=sys.stderr)
        rows.append(row)
    peers = ["nvfuser", "eager", "compile", "fusebench"]
    print(f"kernel time, µs: median (95% interval half-width) under fusebench.kernel_time, cold L2, CUPTI; {torch.cuda.get_device_name()}")
    print("| fusion | " + " | ".join(peers) + " | nvFuser / fusebench |")
    print("| --- |" + " --- |" * (len(peers) + 1))
    ratios = []
    for r in rows:
        cells = []
        for p in peers:
            m = r.get(p)
            cells.append(f"{m.median:.2f} (±{100 * (m.ci[1] - m.ci[0]) / 2 / m.median:.1f}%)" if m else "–")
        nv, fb = r.get("nvfuser"), r.get("fusebench")
        ratio = nv.median / fb.median if nv and fb else None
        if ratio:
            ratios.append(ratio)
        print(f"| {r['file']} | " + " | ".join(cells) + f" | {ratio:.2f} |" if ratio else f"| {r['file']} | " + " | ".join(cells) + " | – |")
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\ngeometric mean nvFuser / fusebench over {len(ratios)} fusions: {geo:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{k: (json.loads(v.to_json()) if hasattr(v, "to_json") else v) for k, v in r.items()} for r in rows], f)


if __name__ == "__main__":
    main()
