"""Does where a fusion's inputs live change its kernel time? The same fusebench kernels, under
`fusebench.kernel_time` (cold L2, CUPTI), in one process, on:

  own     the inputs fusebench generated, in memory fusebench allocated (`kernel_time(f)`);
  clone   the same values copied into memory PyTorch's caching allocator gave
          (`torch.from_dlpack(i).clone()` for each of `f.inputs()`);
  script  the tensors the repro script itself makes (other values, PyTorch's memory), as the
          peers' table times fusebench beside nvFuser (needs the script's imports: nvFuser).

own/clone isolates the allocation; clone/script the values. The thirteenth session found the seed
RMSNorm at 18.66 us on its own inputs and 17.34 on the script's tensors. Run on the GPU machine with
the wheel installed (set FUSEBENCH_TLB_GIB=N to also evict address translations before each sample):

    python3 bench/placement.py DIR_OR_SCRIPTS... [--json out.json]
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def script_tensors(path):
    """The script's own inputs (executed up to, not including, fd.execute), or None."""
    try:
        from nvfuser_peer import valid_indices

        text = open(path).read().replace("fd.execute(inputs)", "")
        ns = {}
        exec(compile(text, path, "exec"), ns)
        valid_indices(ns["inputs"])
        return ns["inputs"]
    except Exception as e:  # the column is optional: say why it is empty
        print(f"{os.path.basename(path)}: no script inputs ({e})", file=sys.stderr)
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--max-time", type=float, default=0.5)
    ap.add_argument("--json", help="write every time here")
    a = ap.parse_args()
    import torch
    import fusebench

    paths = []
    for p in a.paths:
        paths += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".py")) if os.path.isdir(p) else [p]
    rows = []
    print("| fusion | own (us) | clone | script | own / clone | clone / script |")
    print("| --- | --- | --- | --- | --- | --- |")
    for path in paths:
        name = os.path.basename(path)
        t = {}
        try:
            f = fusebench.load(path)
            t["own"] = fusebench.kernel_time(f, max_time=a.max_time).median
            clones = [torch.from_dlpack(i).clone() for i in f.inputs()]
            t["clone"] = fusebench.kernel_time(f, *clones, max_time=a.max_time).median
            ins = script_tensors(path)
            if ins is not None:
                t["script"] = fusebench.kernel_time(f, *ins, max_time=a.max_time).median
        except Exception as e:  # one fusion failing must not hide the others
            print(f"{name}: FAILED: {e}", file=sys.stderr)
        if "own" in t and "clone" in t:
            rows.append({"file": name, **t})
            s = t.get("script")
            print(f"| {name} | {t['own']:.2f} | {t['clone']:.2f} | {s:.2f} | {t['own'] / t['clone']:.3f} | "
                  f"{t['clone'] / s:.3f} |" if s else
                  f"| {name} | {t['own']:.2f} | {t['clone']:.2f} | | {t['own'] / t['clone']:.3f} | |")
    if rows:
        gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
        print(f"geometric mean over {len(rows)}: own / clone {gm([r['own'] / r['clone'] for r in rows]):.3f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
