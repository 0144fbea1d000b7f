"""Summarises `scripts/gpu.sh flush`: the L2 flushed by a write (memset) against one flushed by a
read, in the copy ceilings and in the cold comparison of every program with its saved repros.

    python3 bench/flush_summary.py OUT_DIR [A B]

With A and B, compares compare-A.json with compare-B.json instead (another experiment's two arms).
"""
import json
import math
import sys

out = sys.argv[1]
arms = tuple(sys.argv[2:4]) if len(sys.argv) >= 4 else ("write", "read")


def load(name):
    try:
        with open(f"{out}/{name}") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"{name}: {e}")
        return None


peaks = {k: load(f"peak-{k}.json") for k in ("write", "read")} if arms == ("write", "read") else {}
if peaks and all(peaks.values()):
    print("| copy MiB | cold us, write flush | cold us, read flush | read / write |")
    print("| --- | --- | --- | --- |")
    for w, r in zip(peaks["write"]["copies"], peaks["read"]["copies"]):
        print(f"| {w['bytes'] >> 20} | {w['cold_us']:.2f} | {r['cold_us']:.2f} | {r['cold_us'] / w['cold_us']:.3f} |")

cold = {}
for kind in arms:
    c = load(f"compare-{kind}.json")
    if not c:
        continue
    rows = []
    for p in c["programs"]:
        for s in p["steps"]:
            if "cold_vs_standalone" not in s:
                continue
            rows.append((s["file"], s["cold"]["summary"]["median"], s["standalone_cold"]["summary"]["median"],
                         s["cold_vs_standalone"]["ratio"]))
    cold[kind] = {f: (a, b) for f, a, b, _ in rows}
    ok = sum(abs(r - 1) <= 0.02 for *_, r in rows)
    worst = max(rows, key=lambda t: abs(t[3] - 1))
    print(f"{kind}: {ok} of {len(rows)} fusions agree within 2% cold in the program and standalone; "
          f"worst {worst[0]} {worst[3]:.3f}")
if len(cold) == 2:
    A, B = arms
    common = sorted(set(cold[A]) & set(cold[B]))
    g = [math.log(cold[B][f][1] / cold[A][f][1]) for f in common]
    print(f"standalone cold, {B} / {A}: geomean {math.exp(sum(g) / len(g)):.3f} over {len(g)}, "
          f"range {math.exp(min(g)):.3f}..{math.exp(max(g)):.3f}")
    print(f"| fusion | program cold us, {A} | standalone cold us, {A} | program cold us, {B} | standalone cold us, {B} |")
    print("| --- | --- | --- | --- | --- |")
    for f in common:
        (a, b), (c, d) = cold[A][f], cold[B][f]
        print(f"| {f} | {a:.2f} | {b:.2f} ({b / a:.3f}) | {c:.2f} | {d:.2f} ({d / c:.3f}) |")
