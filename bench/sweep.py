"""Fusions none of the shared ones are: RMSNorms and embedding+RMSNorms at hidden sizes, row counts,
vocabularies and dtypes the corpus does not have, written as nvFuser repro scripts (legacy syntax for
the RMSNorms, direct for the embeddings), for checking that the harness's figures hold off the corpus.

    python3 bench/sweep.py write DIR          # the scripts
    python3 bench/sweep.py summary OUT        # after scripts/gpu.sh sweep: what held, as a table
"""

import json
import os
import sys

DTYPES = {"bf16": ("BFloat16", "torch.bfloat16"), "f16": ("Half", "torch.float16"), "f32": ("Float", "torch.float32")}


def rmsnorm(b, t, h, dt):
    nv, torch_dt = DTYPES[dt]
    x, w = "T0", "T1"
    lines = []
    if dt != "f32":  # as nvFuser prints it: half types compute in float
        lines += ["T2 = fd.ops.cast(T0, dtype=DataType.Float)", "T3 = fd.ops.cast(T1, dtype=DataType.Float)"]
        x, w = "T2", "T3"
    lines += [
        f"T4 = fd.ops.broadcast_in_dim({w}, shape=[{b}, {t}, {h}], broadcast_dims=[2])",
        f"T5 = fd.ops.mul({x}, {x})",
        "T6 = fd.ops.sum(T5, dims=[2], keepdim=False, dtype=DataType.Null)",
        f"T7 = fd.ops.broadcast_in_dim(T6, shape=[{b}, {t}, 1], broadcast_dims=[0, 1])",
        f"S8 = fd.define_scalar({1.0 / h!r}, dtype=DataType.Double)",
        "T9 = fd.ops.mul(T7, S8)",
        "S10 = fd.define_scalar(1e-06, dtype=DataType.Double)",
        "T11 = fd.ops.add(T9, S10)",
        "T12 = fd.ops.rsqrt(T11)",
        f"T13 = fd.ops.broadcast_in_dim(T12, shape=[{b}, {t}, {h}], broadcast_dims=[0, 1, 2])",
        f"T14 = fd.ops.mul({x}, T13)",
        "T15 = fd.ops.mul(T14, T4)",
    ]
    out = "T15"
    if dt != "f32":
        lines.append(f"T16 = fd.ops.cast(T15, dtype=DataType.{nv})")
        out = "T16"
    lines += ["fd.add_output(T12)", f"fd.add_output({out})"]
    body = "\n".join("    " + l for l in lines)
    return f"""import torch
from nvfuser import FusionDefinition, DataType

def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[{b}, {t}, {h}], contiguity=[True, True, True], dtype=DataType.{nv}, is_cpu=False, stride_order=[2, 1, 0])
    T1 = fd.define_tensor(shape=[{h}], contiguity=[True], dtype=DataType.{nv}, is_cpu=False, stride_order=[0])
{body}

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)

inputs = [
    torch.testing.make_tensor(({b}, {t}, {h}), dtype={torch_dt}, device='cuda:0'),
    torch.testing.make_tensor(({h},), dtype={torch_dt}, device='cuda:0'),
]
fd.execute(inputs)
"""


def embedding(b, t, v, h, dt):
    nv, torch_dt = DTYPES[dt]
    n = b * t
    return f"""import torch
from nvfuser_direct import FusionDefinition, DataType
def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[{b}, {t}], contiguity=[True, True], dtype=DataType.Int, is_cpu=False)
    tv1 = fd.define_tensor(shape=[{v}, {h}], contiguity=[True, True], dtype=DataType.{nv}, is_cpu=False)
    tv2 = fd.define_tensor(shape=[{h}], contiguity=[True], dtype=DataType.{nv}, is_cpu=False)
    tv3 = fd.ops.reshape(tv0, new_shape=[{n}])
    tv4 = fd.ops.broadcast(tv3, is_broadcast_dim=[False, True])
    tv5 = fd.ops.index_select(tv1, tv4, dim=0)
    tv6 = fd.ops.reshape(tv5, new_shape=[{b}, {t}, {h}])
    tv7 = fd.ops.cast(tv6, dtype=DataType.Float)
    tv8 = fd.ops.mul(tv7, tv7)
    tv9 = fd.ops.sum(tv8, dims=[2], dtype=DataType.Float)
    tv10 = fd.ops.broadcast(tv9, is_broadcast_dim=[False, False, True])
    c11 = fd.ops.reciprocal({float(h)})
    tv12 = fd.ops.mul(tv10, c11)
    tv13 = fd.ops.add(tv12, 1.00000e-05)
    tv14 = fd.ops.rsqrt(tv13)
    tv15 = fd.ops.expand(tv14, shape=[{b}, {t}, {h}])
    tv16 = fd.ops.mul(tv7, tv15)
    tv17 = fd.ops.cast(tv2, dtype=DataType.Float)
    tv18 = fd.ops.broadcast(tv17, is_broadcast_dim=[True, True, False])
    tv19 = fd.ops.expand(tv18, shape=[{b}, {t}, {h}])
    tv20 = fd.ops.mul(tv16, tv19)
    tv21 = fd.ops.cast(tv20, dtype=DataType.{nv})
    fd.add_output(tv14)
    fd.add_output(tv21)
with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
    torch.testing.make_tensor(({b}, {t}), dtype=torch.int64, device='cuda:0', low=0, high={v}),
    torch.testing.make_tensor(({v}, {h}), dtype={torch_dt}, device='cuda:0'),
    torch.testing.make_tensor(({h},), dtype={torch_dt}, device='cuda:0'),
]
fd.execute(inputs)
"""


def write(d):
    os.makedirs(d, exist_ok=True)
    n = 0
    for (b, t) in [(2, 700), (8, 1024)]:
        for h in [1000, 1536, 3000, 5120]:
            for dt in DTYPES:
                with open(os.path.join(d, f"rms_{b}x{t}x{h}_{dt}.py"), "w") as f:
                    f.write(rmsnorm(b, t, h, dt))
                n += 1
    for (b, t), v, h, dt in [((1, 512), 32000, 896, "bf16"), ((4, 2048), 50257, 2048, "bf16"),
                             ((4, 2048), 151936, 3584, "bf16"), ((2, 1000), 32000, 4096, "f16"),
                             ((8, 512), 50257, 1536, "f32"), ((1, 4096), 151936, 896, "bf16")]:
        with open(os.path.join(d, f"emb_{b}x{t}_v{v}_h{h}_{dt}.py"), "w") as f:
            f.write(embedding(b, t, v, h, dt))
        n += 1
    print(f"wrote {n} scripts to {d}")


def summary(out):
    rows = json.load(open(os.path.join(out, "bench.json")))["rows"]
    print("| fusion | µs | MB moved | % of copy | siblings | bytes counted |")
    print("| --- | --- | --- | --- | --- | --- |")
    complete = 0
    for r in rows:
        m = r["record"]
        sib = len(m.get("siblings", []))
        complete += bool(m.get("ceiling")) and sib == 3 and bool(m.get("bytes_counted"))
        how = m.get("bytes_counted", "")
        gathered = "rows (" in how or "distinct" in how
        print(f"| {r['file']} | {r['ours_us']:.2f} | {r['bytes'] / 1e6:.1f} | {r['pct_of_copy']:.0f}% | {sib} | {'gather rows' if gathered else 'as addressed'} |")
    emb = [r["pct_of_copy"] for r in rows if r["file"].startswith("emb_")]
    print(f"\n{len(rows)} fusions; {complete} records with a ceiling, 3 siblings and how bytes were counted; "
          f"embedding fusions {min(emb):.0f}% to {max(emb):.0f}% of copy; all fusions {min(r['pct_of_copy'] for r in rows):.0f}% to {max(r['pct_of_copy'] for r in rows):.0f}%")
    # The planted pairs on an unseen fusion: each two-cause estimate against its arms.
    planted = os.path.join(out, "planted")
    if os.path.isdir(planted):
        med = lambda n: json.load(open(os.path.join(planted, n + ".json")))["summary"]["median"]
        arms = {"kernels": "cold-unroll1", "cache_policy": "warm", "method": "cold-events"}
        worst = 0.0
        for name in sorted(os.listdir(planted)):
            if not name.endswith(".explain.json"):
                continue
            f, pair = name[: -len(".explain.json")].split("--")
            e = json.load(open(os.path.join(planted, name)))
            eff = {x["cause"]: x.get("effect_us") for x in e["findings"]}
            for cause, arm_name in arms.items():
                if eff.get(cause) is None and cause == "cache_policy":
                    eff[cause] = eff.get("working_set_vs_l2")
                if arm_name.split("-")[-1] not in pair and not (cause == "cache_policy" and "warm" in pair):
                    continue
                arm = med(f"{f}-{arm_name}") - med(f"{f}-cold")
                est = eff.get(cause)
                off = abs(est / arm - 1) if est is not None and arm else float("inf")
                worst = max(worst, off)
                print(f"| {f} {pair} | {cause} | arm {arm:+.2f} | estimate {est if est is None else round(est, 2)} | {100 * off:.0f}% off |")
        print(f"worst estimate against its arm: {100 * worst:.0f}% off")


if __name__ == "__main__":
    {"write": write, "summary": summary}[sys.argv[1]](sys.argv[2])
