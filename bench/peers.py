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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# torch, fusebench and the peers are imported where fusions are timed: --table needs none of them.
torch = fusebench = scripts = valid_indices = build = None


def import_peers():
    global torch, fusebench, scripts, valid_indices, build
    import torch
    import fusebench
    from nvfuser_peer import scripts, valid_indices
    from torch_fusion import build


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


def as_json(row):
    return {k: (json.loads(v.to_json()) if hasattr(v, "to_json") else v) for k, v in row.items() if v is not None}


def print_table(rows, device):
    """`rows`: dicts of file name and each peer's record (fusebench's JSON form)."""
    peers = ["nvfuser", "eager", "compile", "fusebench"]
    print(f"kernel time, µs: median (95% interval half-width) under fusebench.kernel_time, cold L2, CUPTI; {device}")
    print("| fusion | " + " | ".join(peers) + " | nvFuser / fusebench |")
    print("| --- |" + " --- |" * (len(peers) + 1))
    ratios = []
    for r in rows:
        cells = []
        for p in peers:
            s = r[p]["summary"] if p in r else None
            cells.append(f"{s['median']:.2f} (±{100 * s['rel_ci']:.1f}%)" if s else "–")
        nv, fb = r.get("nvfuser"), r.get("fusebench")
        ratio = nv["summary"]["median"] / fb["summary"]["median"] if nv and fb else None
        if ratio:
            ratios.append(ratio)
        print(f"| {r['file']} | " + " | ".join(cells) + (f" | {ratio:.2f} |" if ratio else " | – |"))
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\ngeometric mean nvFuser / fusebench over {len(ratios)} fusions: {geo:.3f}")
    for p in ("eager", "compile"):
        r = [x[p]["summary"]["median"] / x["fusebench"]["summary"]["median"] for x in rows if p in x and "fusebench" in x]
        if r:
            geo = math.exp(sum(math.log(x) for x in r) / len(r))
            print(f"geometric mean {p} / fusebench over {len(r)} fusions: {geo:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--compile", default="", help="comma-separated file-name prefixes, or 'all'")
    ap.add_argument("--json", default=None, help="rewritten after each fusion, so a cut-short run keeps what it measured")
    ap.add_argument("--table", nargs="+", default=None, help="only print the table of these --json files, merged")
    ap.add_argument("--max-time", type=float, default=1.0)
    a = ap.parse_args()
    if a.table:
        rows = [r for path in a.table for r in json.load(open(path))]
        rows.sort(key=lambda r: r["file"])
        dev = next((r[p]["environment"]["gpu_name"] for r in rows for p in r if isinstance(r[p], dict)), "?")
        print_table(rows, dev)
        return
    import_peers()
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
        row["nvfuser"] = timed("nvFuser", fd.execute, inputs, name=name, max_time=a.max_time)
        try:
            fn = build(fusebench.fusion_json(path))
            with torch.no_grad():
                row["eager"] = timed("eager", fn, *inputs, name=name, max_time=a.max_time)
                if "all" in want_compile or any(name.startswith(p) for p in want_compile):
                    # Every fusion's function shares one code object: without a reset, dynamo
                    # stops recompiling after its cache limit and silently runs eager.
                    torch._dynamo.reset()
                    cfn = torch.compile(fn, dynamic=False)
                    m = timed("torch.compile", cfn, *inputs, name=name, max_time=a.max_time)
                    if m and not any(k["name"].startswith("triton") for k in m.kernels):
                        print("  torch.compile: FAILED: no Triton kernel ran (it fell back to eager)", file=sys.stderr)
                        m = None
                    row["compile"] = m
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
        rows.append(as_json(row))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f)
    print_table(rows, torch.cuda.get_device_name())


if __name__ == "__main__":
    main()
