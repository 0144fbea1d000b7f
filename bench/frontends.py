"""The same fusions timed through both front ends, in one call, to find where they disagree:
`fusebench bench` (the CLI, cold: as is, with FUSEBENCH_COLD_SETS=1, and with the settings of each
--cli-with) and
`fusebench.kernel_time(fusebench.load(script))` from Python (cold, on the inputs fusebench
generates for the script, one placement). One table: each time and the ratios. Run on the GPU
machine with the wheel installed:

    python3 bench/frontends.py DIR --cli .gpu/fusebench [--cli-with FUSEBENCH_COLD_WAIT=1] [--json out.json]

The twelfth session found the CLI 1.02x slower at 50-66 us and 1.25x at 3-6 us on the same norms,
from two different calls; this measures it in one.
"""
import argparse
import json
import math
import os
import subprocess
import sys


def cli_times(cli, paths, settings):
    env = dict(os.environ, **settings)
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
    ap.add_argument("--cli-with", action="append", default=[], metavar="K=V[,K=V]",
                    help="another CLI column with these settings (repeatable); default columns: the CLI as is "
                         "and with FUSEBENCH_COLD_SETS=1")
    a = ap.parse_args()
    paths = sorted(os.path.join(a.dir, f) for f in os.listdir(a.dir) if f.endswith(".py"))
    variants = [("CLI", {}), ("CLI FUSEBENCH_COLD_SETS=1", {"FUSEBENCH_COLD_SETS": "1"})]
    for spec in a.cli_with:
        settings = dict(kv.split("=", 1) for kv in spec.split(","))
        variants.append(("CLI " + spec, settings))
    cli = [(label, cli_times(a.cli, paths, s)) for label, s in variants]
    py = python_times(paths)
    rows = []
    print("| fusion | " + " | ".join(f"{l} (us)" for l, _ in cli) + " | kernel_time | "
          + " | ".join(f"{l} / kernel_time" for l, _ in cli) + " |")
    print("| --- " * (2 * len(cli) + 2) + "|")
    for p in paths:
        n = os.path.basename(p)
        if n in py and all(n in t for _, t in cli):
            ts = [t[n] for _, t in cli]
            rows.append((n, ts, py[n]))
            print(f"| {n} | " + " | ".join(f"{t:.2f}" for t in ts) + f" | {py[n]:.2f} | "
                  + " | ".join(f"{t / py[n]:.3f}" for t in ts) + " |")
    if rows:
        gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
        print(f"geometric mean over {len(rows)}: " + ", ".join(
            f"{l} / kernel_time {gm([r[1][i] / r[2] for r in rows]):.3f}" for i, (l, _) in enumerate(cli)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"file": r[0], "cli": {l: t for (l, _), t in zip(cli, r[1])}, "kernel_time": r[2]}
                       for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
