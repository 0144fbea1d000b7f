"""The same fusions timed through both front ends, in one call, to find where they disagree:
`fusebench bench` (the CLI, cold, with FUSEBENCH_COLD_SETS=4, the default, and =1) and
`fusebench.kernel_time(fusebench.load(script))` from Python (cold, on the inputs fusebench
generates for the script, one placement). One table: each time and the ratios. Run on the GPU
machine with the wheel installed:

    python3 bench/frontends.py DIR --cli .gpu/fusebench [--json out.json]

The twelfth session found the CLI 1.02x slower at 50-66 us and 1.25x at 3-6 us on the same norms,
from two different calls; this measures it in one.
"""
import argparse
import json
import math
import os
import subprocess
import sys


def cli_times(cli, paths, cold_sets):
    env = dict(os.environ, FUSEBENCH_COLD_SETS=str(cold_sets))
    out = subprocess.run([cli, "bench", *paths, "--json"], env=env, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"{cli} bench failed ({out.returncode}): {out.stderr[-2000:]}")
    doc = json.loads(out.stdout)
    return {r["file"]: r["ours_us"] for r in doc["rows"]}


def python_times(paths):
    import fusebench

    times = {}
    for p in paths:
        name = os.path.basename(p)
        try:
            f = fusebench.load(p)
            times[name] = fusebench.kernel_time(f).median
        except Exception as e:  # one fusion failing must not hide the others
            print(f"{name}: kernel_time FAILED: {e}", file=sys.stderr)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--cli", default="target/release/fusebench")
    ap.add_argument("--json", help="write every time here")
    a = ap.parse_args()
    paths = sorted(os.path.join(a.dir, f) for f in os.listdir(a.dir) if f.endswith(".py"))
    four = cli_times(a.cli, paths, 4)
    one = cli_times(a.cli, paths, 1)
    py = python_times(paths)
    rows = []
    print("| fusion | CLI, 4 placements (us) | CLI, 1 placement | kernel_time | CLI 4 / kernel_time | CLI 1 / kernel_time |")
    print("| --- | --- | --- | --- | --- | --- |")
    for p in paths:
        n = os.path.basename(p)
        if n in four and n in one and n in py:
            rows.append((n, four[n], one[n], py[n]))
            print(f"| {n} | {four[n]:.2f} | {one[n]:.2f} | {py[n]:.2f} | {four[n] / py[n]:.3f} | {one[n] / py[n]:.3f} |")
    if rows:
        gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
        print(f"geometric mean over {len(rows)}: CLI 4 / kernel_time {gm([r[1] / r[3] for r in rows]):.3f}, "
              f"CLI 1 / kernel_time {gm([r[2] / r[3] for r in rows]):.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"file": r[0], "cli_4": r[1], "cli_1": r[2], "kernel_time": r[3]} for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
