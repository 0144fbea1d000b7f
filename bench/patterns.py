"""The generated sweep of the schedules: nvFuser repro scripts (direct syntax) for the op patterns of
nvFuser's own benchmark suite, across row lengths, row counts, dtypes and input layouts, so that the
engine is measured on shapes it was never tuned on. Every script computes in Float, as nvFuser's
benchmarks do for half types, and is named PATTERN-DTYPE-ROWSxCOLS-LAYOUT.py.

    python3 bench/patterns.py DIR               # the full grid
    python3 bench/patterns.py DIR --small       # a few of each pattern at small shapes (the CPU test)
    python3 bench/patterns.py DIR --only gelu,softmax --cols 768,1000 --rows 1,4096 --dtypes bf16
"""

import argparse
import os

DTYPES = {"bf16": ("BFloat16", "torch.bfloat16"), "f16": ("Half", "torch.float16"), "f32": ("Float", "torch.float32")}
COLS = [768, 1000, 1536, 2048, 2560, 3072, 3200, 4096, 5120, 6144, 8192, 11008, 14336, 16384]
ROWS = [1, 8, 256, 2048, 32768]


def gelu(v):  # tanh approximation, as nvFuser's benchmark writes it
    return [
        f"t1 = fd.ops.mul({v}, {v})", f"t2 = fd.ops.mul(t1, {v})", "t3 = fd.ops.mul(t2, 0.044715)",
        f"t4 = fd.ops.add({v}, t3)", "t5 = fd.ops.mul(t4, 0.7978845608)", "t6 = fd.ops.tanh(t5)",
        "t7 = fd.ops.add(t6, 1.0)", f"t8 = fd.ops.mul({v}, 0.5)", "y = fd.ops.mul(t8, t7)",
    ], ["y"]


def silu_mul(v, w):
    return ["s = fd.ops.silu(%s)" % v, f"y = fd.ops.mul(s, {w})"], ["y"]


def rmsnorm(v, w, r, c):
    return [
        f"q = fd.ops.mul({v}, {v})", "ss = fd.ops.sum(q, dims=[1], keepdim=True)",
        f"ms = fd.ops.mul(ss, {1.0 / c!r})", "me = fd.ops.add(ms, 1e-06)", "rs = fd.ops.rsqrt(me)",
        f"rb = fd.ops.expand(rs, shape=[{r}, {c}])", f"n = fd.ops.mul({v}, rb)",
        f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", "y = fd.ops.mul(n, wb)",
    ], ["y", "rs"]


def layernorm(v, w, r, c):
    return [
        f"var, mean = fd.ops.var_mean({v}, dims=[1], correction=0, keepdim=True)",
        "ve = fd.ops.add(var, 1e-05)", "rs = fd.ops.rsqrt(ve)",
        f"mb = fd.ops.expand(mean, shape=[{r}, {c}])", f"d = fd.ops.sub({v}, mb)",
        f"rb = fd.ops.expand(rs, shape=[{r}, {c}])", "n = fd.ops.mul(d, rb)",
        f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", "y = fd.ops.mul(n, wb)",
    ], ["y", "mean", "rs"]


def softmax(v, r, c):
    return [
        f"m = fd.ops.max({v}, dims=[1], keepdim=True)", f"mb = fd.ops.expand(m, shape=[{r}, {c}])",
        f"d = fd.ops.sub({v}, mb)", "e = fd.ops.exp(d)", "s = fd.ops.sum(e, dims=[1], keepdim=True)",
        f"sb = fd.ops.expand(s, shape=[{r}, {c}])", "y = fd.ops.div(e, sb)",
    ], ["y"]


# name: (number of [rows, cols] inputs, has a [cols] weight, body, layouts it is swept over)
PATTERNS = {
    "gelu": (1, False, lambda v, w, r, c: gelu(v[0]), ["rowmajor", "colmajor"]),
    "silu_mul": (2, False, lambda v, w, r, c: silu_mul(v[0], v[1]), ["rowmajor", "colmajor"]),
    "add_bias": (1, True, lambda v, w, r, c: ([f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", f"y = fd.ops.add({v[0]}, wb)"], ["y"]), ["rowmajor"]),
    "rmsnorm": (1, True, lambda v, w, r, c: rmsnorm(v[0], w, r, c), ["rowmajor"]),
    "layernorm": (1, True, lambda v, w, r, c: layernorm(v[0], w, r, c), ["rowmajor"]),
    "softmax": (1, False, lambda v, w, r, c: softmax(v[0], r, c), ["rowmajor"]),
    "sum_inner": (1, False, lambda v, w, r, c: ([f"y = fd.ops.sum({v[0]}, dims=[1])"], ["y"]), ["rowmajor", "colmajor"]),
    "sum_outer": (1, False, lambda v, w, r, c: ([f"y = fd.ops.sum({v[0]}, dims=[0])"], ["y"]), ["rowmajor", "colmajor"]),
    "sum_all": (1, False, lambda v, w, r, c: ([f"y = fd.ops.sum({v[0]}, dims=[0, 1])"], ["y"]), ["rowmajor"]),
}


def script(name, dt, r, c, layout):
    n_in, weight, body, _ = PATTERNS[name]
    nv, torch_dt = DTYPES[dt]
    order = ", stride_order=[0, 1]" if layout == "colmajor" else ""
    lines = [f"x{k} = fd.define_tensor(shape=[{r}, {c}], contiguity=[True, True], dtype=DataType.{nv}, is_cpu=False{order})"
             for k in range(n_in)]
    if weight:
        lines.append(f"w0 = fd.define_tensor(shape=[{c}], contiguity=[True], dtype=DataType.{nv}, is_cpu=False)")
    vs, w = [f"x{k}" for k in range(n_in)], "w0"
    if dt != "f32":
        lines += [f"f{k} = fd.ops.cast(x{k}, dtype=DataType.Float)" for k in range(n_in)]
        vs = [f"f{k}" for k in range(n_in)]
        if weight:
            lines.append("fw = fd.ops.cast(w0, dtype=DataType.Float)")
            w = "fw"
    ops, outs = body(vs, w, r, c)
    lines += ops
    for k, o in enumerate(outs):
        if dt != "f32" and k == 0:
            lines.append(f"o{k} = fd.ops.cast({o}, dtype=DataType.{nv})")
            o = f"o{k}"
        lines.append(f"fd.add_output({o})")
    if layout == "colmajor":
        make = f"torch.randn({r * c}, dtype={torch_dt}, device='cuda:0').as_strided(({r}, {c}), (1, {r}))"
    else:
        make = f"torch.testing.make_tensor(({r}, {c}), dtype={torch_dt}, device='cuda:0')"
    inputs = [make] * n_in + ([f"torch.testing.make_tensor(({c},), dtype={torch_dt}, device='cuda:0')"] if weight else [])
    body = "\n".join("    " + l for l in lines)
    args = "\n".join(f"    {i}," for i in inputs)
    return f"""import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
{body}

with FusionDefinition() as fd:
    nvfuser_fusion(fd)

inputs = [
{args}
]
fd.execute(inputs)
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--small", action="store_true", help="a few small shapes of every pattern (the CPU test)")
    p.add_argument("--only", help="patterns, comma-separated (default: all)")
    p.add_argument("--cols", help="row lengths, comma-separated")
    p.add_argument("--rows", help="row counts, comma-separated")
    p.add_argument("--dtypes", help="of bf16,f16,f32")
    a = p.parse_args()
    ints = lambda s, d: [int(x) for x in s.split(",")] if s else d
    cols = ints(a.cols, [7, 1000] if a.small else COLS)
    rows = ints(a.rows, [1, 33] if a.small else ROWS)
    dtypes = a.dtypes.split(",") if a.dtypes else list(DTYPES)
    names = a.only.split(",") if a.only else list(PATTERNS)
    for n in names:
        if n not in PATTERNS:
            p.error(f"unknown pattern {n!r}; the patterns are {', '.join(PATTERNS)}")
    for d in dtypes:
        if d not in DTYPES:
            p.error(f"unknown dtype {d!r}; the dtypes are {', '.join(DTYPES)}")
    os.makedirs(a.dir, exist_ok=True)
    n = 0
    for name in names:
        for layout in PATTERNS[name][3]:
            for dt in dtypes:
                for r in rows:
                    for c in cols:
                        with open(os.path.join(a.dir, f"{name}-{dt}-{r}x{c}-{layout}.py"), "w") as f:
                            f.write(script(name, dt, r, c, layout))
                        n += 1
    print(f"wrote {n} scripts to {a.dir}")


if __name__ == "__main__":
    main()
