"""Records golden cases from nvFuser itself: one tiny fusion per op and dtype.

Run on the GPU machine with nvFuser 0.2.36 as a peer (../shared/tools/nvfuser-peer):

    source .peer/activate.sh && python3 bench/record_goldens.py --out $OUT/golden-ops

Each case is defined with `nvfuser_direct`, executed on seeded random inputs (index inputs valid, function
domains valid except for a few injected edge values: 0, -0, +-inf, nan, +-1) and saved as
`CASE.py` (nvFuser's own repro script, `repro_script_for`) + `CASE.safetensors` (`in0..` inputs before the run,
`out0..` outputs, `post_in<i>` for an input an alias output updated in place; all stored contiguous in logical
order; complex tensors as their real view with a trailing dimension of 2, the manifest names the dtype) and an
entry of `manifest.json` (op, dtypes, input shapes and strides, outputs, nvFuser version, date, GPU). A case
nvFuser refused (at definition or execution) or crashed on keeps the error text in the manifest instead of files.
For topk/argsort that nvFuser fails on, PyTorch's outputs for the same definition are recorded
(`reference: torch`).

Cases run in several worker processes (NVRTC compiles are CPU-bound); a worker that dies (abort, segfault,
CUDA error) is restarted after its case is recorded as crashed, so one crash loses nothing else.
"""

import argparse
import datetime
import json
import math
import os
import struct
import subprocess
import sys
import tarfile
import time
import zlib

import torch

DTYPES = {
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "f32": torch.float32,
    "f64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
    "uint64": torch.uint64,
    "e4m3": torch.float8_e4m3fn,
    "e5m2": torch.float8_e5m2,
    "e8m0": torch.float8_e8m0fnu,
    "c64": torch.complex64,
    "c128": torch.complex128,
}
ALL = list(DTYPES)
FLOATS = ["bf16", "f16", "f32", "f64"]
NV_NAME = {
    torch.bfloat16: "BFloat16",
    torch.float16: "Half",
    torch.float32: "Float",
    torch.float64: "Double",
    torch.int32: "Int32",
    torch.int64: "Int",
    torch.bool: "Bool",
    torch.uint64: "UInt64",
    torch.float8_e4m3fn: "Float8_e4m3fn",
    torch.float8_e5m2: "Float8_e5m2",
    torch.float8_e8m0fnu: "Float8_e8m0fnu",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
}
EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5]


def tname(dt):
    return str(dt).replace("torch.", "")


# ---------------------------------------------------------------- inputs


def rand(g, dt, shape, kind="normal", edges=False, layout=None):
    """A seeded random CUDA tensor of `dt`, values of `kind`, in `layout`.

    kind: normal | pos (0.05..4) | unit (-0.95..0.95) | ge1 (1..5) | erfc (0.05..1.95) | near1 (0.6..1.4) |
    nz (integers without 0) | small (integers -4..4) | shift (0..7) | perm (distinct values).
    layout: None (contiguous) | "T" (dims reversed in memory) | ("B", dims) (stride 0 on dims, given size 1).
    """
    shape = tuple(shape)
    n = math.prod(shape)
    if kind == "perm":
        v = torch.randperm(max(n, 1), generator=g)[:n].double() - n // 2
    elif dt.is_floating_point or dt.is_complex:
        if kind == "pos":
            v = torch.rand(n, generator=g, dtype=torch.float64) * 3.95 + 0.05
        elif kind == "unit":
            v = torch.rand(n, generator=g, dtype=torch.float64) * 1.9 - 0.95
        elif kind == "ge1":
            v = torch.rand(n, generator=g, dtype=torch.float64) * 4 + 1
        elif kind == "erfc":
            v = torch.rand(n, generator=g, dtype=torch.float64) * 1.9 + 0.05
        elif kind == "near1":
            v = torch.rand(n, generator=g, dtype=torch.float64) * 0.8 + 0.6
        elif kind in ("nz", "small", "shift"):
            v = torch.randint(0 if kind == "shift" else -4, 8 if kind == "shift" else 5, (n,), generator=g).double()
            if kind == "nz":
                v[v == 0] = 3
        else:
            v = torch.randn(n, generator=g, dtype=torch.float64) * 2
        if dt == torch.float8_e8m0fnu:
            v = torch.exp2(torch.randint(-6, 7, (n,), generator=g).double())
        if edges and not dt.is_complex and dt != torch.float8_e8m0fnu:
            k = min(len(EDGES), n // 3)
            v[:k] = torch.tensor(EDGES[:k], dtype=torch.float64)
        if dt.is_complex:
            im = torch.randn(n, generator=g, dtype=torch.float64)
            v = torch.complex(v, im)
    elif dt == torch.bool:
        v = torch.randint(0, 2, (n,), generator=g).bool()
    else:
        lo, hi = {"pos": (1, 10), "nz": (-9, 10), "small": (-4, 5), "shift": (0, 8)}.get(kind, (-20, 21))
        if dt == torch.uint64:
            lo = max(lo, 0)
        v = torch.randint(lo, hi, (n,), generator=g)
        if kind == "nz":
            v[v == 0] = 7
    t = v.to(dt).reshape(shape).cuda()
    if layout == "T":
        t = t.permute(*reversed(range(t.dim()))).contiguous().permute(*reversed(range(t.dim())))
    elif isinstance(layout, tuple) and layout[0] == "B":
        full = list(shape)
        for d, size in layout[1].items():
            full[d] = size
        t = t.expand(*full)
    return t


def index(g, high, shape, dt=torch.int64):
    return torch.randint(0, high, tuple(shape), generator=g).to(dt).cuda()


# ---------------------------------------------------------------- cases


class Case:
    def __init__(self, name, op, dtypes, make, build, torch_ref=None, alias=(), note=None, rng=None):
        self.name = name
        self.op = op
        self.dtypes = dtypes
        self.make = make  # g -> list of inputs (CUDA tensors, python scalars)
        self.build = build  # (fd, *defined inputs) -> outputs (or None when it adds them itself)
        self.torch_ref = torch_ref  # inputs -> outputs, for ops nvFuser may fail on
        self.alias = alias  # input indices an alias output updates
        self.note = note
        self.rng = rng


CASES = []


def case(*a, **k):
    CASES.append(Case(*a, **k))


def nv(dt):
    from nvfuser_direct import DataType

    return getattr(DataType, NV_NAME[dt])


def ops():
    from nvfuser_direct import FusionDefinition  # noqa: F401

    import nvfuser_direct

    return nvfuser_direct.ops


UNARY_KIND = {
    "acos": "unit",
    "asin": "unit",
    "atanh": "unit",
    "erfinv": "unit",
    "acosh": "ge1",
    "erfcinv": "erfc",
    "log": "pos",
    "log10": "pos",
    "log1p": "pos",
    "log2": "pos",
    "sqrt": "pos",
    "rsqrt": "pos",
    "lgamma": "pos",
    "reciprocal": "nz",
}
UNARY = (
    "abs acos acosh asin asinh atan atanh ceil cos cosh exp exp2 expm1 erf erfc erfinv erfcinv floor frac "
    "lgamma log log10 log1p log2 neg reciprocal relu round rsqrt sigmoid sign silu sin sinh sqrt tan tanh trunc "
    "isfinite isinf isnan isneginf isposinf isreal signbit logical_not bitwise_not real imag set segment_set"
).split()
BINARY = (
    "add atan2 div truediv fmod mul nextafter pow remainder sub minimum maximum mod eq ge gt le lt ne "
    "logical_and logical_or bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift "
    "logical_right_shift gcd"
).split()
DIVLIKE = {"div", "truediv", "fmod", "remainder", "mod", "gcd"}
SHIFTS = {"bitwise_left_shift", "bitwise_right_shift", "logical_right_shift"}
# Shapes and layouts by dtype so the set covers odd extents, a size-1 dim, a transposed and a 1-D input.
UNARY_SHAPE = {"f32": ((5, 7), "T"), "f16": ((3, 1, 7), None), "bf16": ((33,), None)}


def add_unary():
    for op in UNARY:
        for d in ALL:
            dt = DTYPES[d]
            shape, layout = UNARY_SHAPE.get(d, ((5, 7), None))
            kind = UNARY_KIND.get(op, "normal")
            edges = dt.is_floating_point and op not in ("set", "segment_set")

            def make(g, dt=dt, shape=shape, layout=layout, kind=kind, edges=edges):
                return [rand(g, dt, shape, kind, edges, layout)]

            case(f"unary_{op}_{d}", op, [d], make, lambda fd, a, op=op: getattr(fd.ops, op)(a))


def add_binary():
    for op in BINARY:
        for d in ALL:
            dt = DTYPES[d]
            kb = "nz" if op in DIVLIKE else "shift" if op in SHIFTS else "small" if op == "pow" else "normal"
            ka = "pos" if op == "pow" and dt.is_floating_point else "normal"
            edges = dt.is_floating_point

            if d == "f32":  # a transposed, b broadcast along dim 0 with stride 0

                def make(g, dt=dt, ka=ka, kb=kb, edges=edges):
                    return [rand(g, dt, (5, 7), ka, edges, "T"), rand(g, dt, (1, 7), kb, False, ("B", {0: 5}))]

                build = lambda fd, a, b, op=op: getattr(fd.ops, op)(a, b)
            elif d == "f16":  # b 1-D, broadcast with broadcast_in_dim

                def make(g, dt=dt, ka=ka, kb=kb, edges=edges):
                    return [rand(g, dt, (5, 7), ka, edges), rand(g, dt, (7,), kb)]

                build = lambda fd, a, b, op=op: getattr(fd.ops, op)(a, fd.ops.broadcast_in_dim(b, [5, 7], [1]))
            else:

                def make(g, dt=dt, ka=ka, kb=kb, edges=edges):
                    return [rand(g, dt, (5, 7), ka, edges), rand(g, dt, (5, 7), kb)]

                build = lambda fd, a, b, op=op: getattr(fd.ops, op)(a, b)
            case(f"binary_{op}_{d}", op, [d, d], make, build)
    # A tensor with a constant and with a scalar input, and mixed dtypes (nvFuser's type promotion).
    for op in ["add", "sub", "mul", "div", "pow", "maximum", "fmod", "remainder", "eq", "lt", "atan2"]:
        case(
            f"binary_{op}_f32_const",
            op,
            ["f32", "f64 scalar"],
            lambda g: [rand(g, torch.float32, (5, 7), "pos" if True else "normal", True)],
            lambda fd, a, op=op: getattr(fd.ops, op)(a, fd.define_scalar(0.75)),
        )
        case(
            f"binary_{op}_int64_scalar_in",
            op,
            ["int64", "int64 scalar"],
            lambda g: [rand(g, torch.int64, (5, 7), "pos"), 3],
            lambda fd, a, s, op=op: getattr(fd.ops, op)(a, s),
        )
        case(
            f"binary_{op}_const_lhs_bf16",
            op,
            ["f64 scalar", "bf16"],
            lambda g: [rand(g, torch.bfloat16, (5, 7), "pos")],
            lambda fd, a, op=op: getattr(fd.ops, op)(fd.define_scalar(2.5), a),
        )
    mixed = [("f16", "f32"), ("int32", "f32"), ("bool", "int64"), ("int32", "int64"), ("bf16", "f16"), ("int64", "bf16"), ("bool", "f32"), ("int32", "f64")]
    for op in ["add", "mul", "div", "truediv", "eq", "maximum", "bitwise_and", "atan2", "pow"]:
        for da, db in mixed:

            def make(g, da=da, db=db, op=op):
                kb = "nz" if op in DIVLIKE else "small" if op == "pow" else "normal"
                return [rand(g, DTYPES[da], (5, 7), "normal"), rand(g, DTYPES[db], (5, 7), kb)]

            case(f"mixed_{op}_{da}_{db}", op, [da, db], make, lambda fd, a, b, op=op: getattr(fd.ops, op)(a, b))
    for op, dts in [("add", ["f32", "int64"]), ("sub", ["f32", "int64"]), ("mul", ["f32", "bf16"]), ("truediv", ["f32", "int64"]),
                    ("pow", ["f32"]), ("mod", ["int64", "f32"]), ("and", ["bool", "int64"]), ("or", ["bool", "int32"]),
                    ("xor", ["bool", "int64"]), ("lshift", ["int64"]), ("rshift", ["int64"]), ("eq", ["f32", "int64"]),
                    ("ne", ["f32"]), ("lt", ["f32", "int32"]), ("le", ["f32"]), ("gt", ["f32"]), ("ge", ["int64"])]:
        dunder = f"__{op}__"
        for d in dts:
            kb = "nz" if op in ("truediv", "mod") else "shift" if "shift" in op else "small" if op == "pow" else "normal"

            def make(g, d=d, kb=kb, op=op):
                return [rand(g, DTYPES[d], (5, 7), "pos" if op == "pow" else "normal"), rand(g, DTYPES[d], (5, 7), kb)]

            case(f"dunder_{op}_{d}", dunder, [d, d], make, lambda fd, a, b, dunder=dunder: dunder_call(a, dunder, b))


def dunder_call(a, dunder, b):
    if not any(dunder in k.__dict__ for k in type(a).__mro__ if k is not object):
        raise AttributeError(f"{type(a).__name__} defines no {dunder} (Python operators are not bound by nvfuser_direct)")
    return getattr(a, dunder)(b)


def add_via_f32():
    """nvFuser 0.2.36 emits some ops on half/bf16/fp8 values directly and NVRTC finds no overload; frontends
    (Thunder) cast those to float first. These variants record that form too."""
    up = lambda fd, a: fd.ops.cast(a, nv(torch.float32))
    for d in ["bf16", "f16", "e4m3"]:
        dt = DTYPES[d]
        down = lambda fd, t, dt=dt: fd.ops.cast(t, nv(dt))
        for op in ["ceil", "floor", "round", "trunc", "relu", "silu", "abs", "frac", "sign", "neg", "lgamma"]:
            case(f"unary_{op}_{d}_via_f32", op, [d], lambda g, dt=dt, op=op: [rand(g, dt, (5, 7), UNARY_KIND.get(op, "normal"), True)],
                 lambda fd, a, op=op, down=down: down(fd, getattr(fd.ops, op)(up(fd, a))))
        for op in ["mod", "maximum", "minimum", "add", "mul", "fmod", "remainder"]:
            case(f"binary_{op}_{d}_via_f32", op, [d, d], lambda g, dt=dt, op=op: [rand(g, dt, (5, 7), "normal", True), rand(g, dt, (5, 7), "nz" if op in DIVLIKE else "normal")],
                 lambda fd, a, b, op=op, down=down: down(fd, getattr(fd.ops, op)(up(fd, a), up(fd, b))))
        for op in ["sum", "prod", "max", "min"]:
            case(f"{op}_dim1_{d}_via_f32", op, [d], lambda g, dt=dt, op=op: [rand(g, dt, (5, 7), "near1")],
                 lambda fd, a, op=op, down=down: down(fd, getattr(fd.ops, op)(up(fd, a), [1])))
        case(f"clamp_{d}_via_f32", "clamp", [d], lambda g, dt=dt: [rand(g, dt, (5, 7), "normal", True)],
             lambda fd, a, down=down: down(fd, fd.ops.clamp(up(fd, a), fd.define_scalar(-1.5), fd.define_scalar(2.0))))
        case(f"threshold_{d}_via_f32", "threshold", [d], lambda g, dt=dt: [rand(g, dt, (5, 7), "normal", True)],
             lambda fd, a, down=down: down(fd, fd.ops.threshold(up(fd, a), fd.define_scalar(0.5), fd.define_scalar(-3.0))))
        case(f"var_{d}_via_f32", "var", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a, down=down: down(fd, fd.ops.var(up(fd, a), [1])))
        case(f"welford_{d}_via_f32", "welford", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a: list(fd.ops.welford(up(fd, a), [1])))
        case(f"var_mean_{d}_via_f32", "var_mean", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a: list(fd.ops.var_mean(up(fd, a), [0], correction=0)))
        case(f"cumsum_{d}_via_f32", "cumsum", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a, down=down: down(fd, fd.ops.cumsum(up(fd, a), 1)))


def add_ternary():
    for d in ["bf16", "f16", "f32", "f64", "int32", "int64", "c64"]:
        dt = DTYPES[d]
        case(f"lerp_{d}", "lerp", [d] * 3, lambda g, dt=dt: [rand(g, dt, (5, 7)), rand(g, dt, (5, 7)), rand(g, dt, (5, 7), "unit")],
             lambda fd, a, b, w: fd.ops.lerp(a, b, w))
        case(f"addcmul_{d}", "addcmul", [d] * 3, lambda g, dt=dt: [rand(g, dt, (5, 7)), rand(g, dt, (5, 7)), rand(g, dt, (5, 7))],
             lambda fd, a, b, c: fd.ops.addcmul(a, b, c, fd.define_scalar(0.5)))
        case(f"clamp_{d}", "clamp", [d], lambda g, dt=dt: [rand(g, dt, (5, 7), "normal", True)],
             lambda fd, a: fd.ops.clamp(a, fd.define_scalar(-1.5), fd.define_scalar(2.0)))
        case(f"threshold_{d}", "threshold", [d], lambda g, dt=dt: [rand(g, dt, (5, 7), "normal", True)],
             lambda fd, a: fd.ops.threshold(a, fd.define_scalar(0.5), fd.define_scalar(-3.0)))
    case("lerp_f32_scalar_weight", "lerp", ["f32", "f32", "f64 scalar"],
         lambda g: [rand(g, torch.float32, (5, 7), layout="T"), rand(g, torch.float32, (5, 7))],
         lambda fd, a, b: fd.ops.lerp(a, b, fd.define_scalar(0.25)))
    case("clamp_int64_int_bounds", "clamp", ["int64"], lambda g: [rand(g, torch.int64, (5, 7))],
         lambda fd, a: fd.ops.clamp(a, fd.define_scalar(-5), fd.define_scalar(6)))
    for d in ALL:
        dt = DTYPES[d]
        case(f"where_{d}", "where", ["bool", d, d],
             lambda g, dt=dt: [rand(g, torch.bool, (5, 7)), rand(g, dt, (5, 7)), rand(g, dt, (5, 7))],
             lambda fd, c, a, b: fd.ops.where(c, a, b))
    case("where_f32_scalar_branch", "where", ["bool", "f32", "f64 scalar"],
         lambda g: [rand(g, torch.bool, (5, 7), layout="T"), rand(g, torch.float32, (1, 7), layout=("B", {0: 5}))],
         lambda fd, c, a: fd.ops.where(c, a, fd.define_scalar(-2.0)))
    case("where_int_scalars", "where", ["bool", "int64 scalar", "int64 scalar"], lambda g: [rand(g, torch.bool, (5, 7))],
         lambda fd, c: fd.ops.where(c, fd.define_scalar(3), fd.define_scalar(-4)))
    for d in ["f32", "f64", "bf16", "f16"]:
        dt = DTYPES[d]
        case(f"complex_{d}", "complex", [d, d], lambda g, dt=dt: [rand(g, dt, (5, 7)), rand(g, dt, (5, 7))],
             lambda fd, a, b: fd.ops.complex(a, b))


def add_reductions():
    for op in ["sum", "prod", "max", "min"]:
        for d in ["bf16", "f16", "f32", "f64", "int32", "int64", "bool", "c64", "e4m3", "uint64"]:
            dt = DTYPES[d]
            kind = "near1" if op == "prod" else "normal"
            case(f"{op}_all_{d}", op, [d], lambda g, dt=dt, kind=kind: [rand(g, dt, (5, 7), kind)],
                 lambda fd, a, op=op: getattr(fd.ops, op)(a, [0, 1]))
        case(f"{op}_dim1_keep_f32", op, ["f32"], lambda g, op=op: [rand(g, torch.float32, (3, 5, 7), "near1" if op == "prod" else "normal", layout="T")],
             lambda fd, a, op=op: getattr(fd.ops, op)(a, [1], keepdim=True))
        case(f"{op}_dim0_f32_edges", op, ["f32"], lambda g, op=op: [rand(g, torch.float32, (9, 5), "normal", True)],
             lambda fd, a, op=op: getattr(fd.ops, op)(a, [0]))
        case(f"{op}_dims02_f64", op, ["f64"], lambda g, op=op: [rand(g, torch.float64, (3, 5, 7), "near1" if op == "prod" else "normal")],
             lambda fd, a, op=op: getattr(fd.ops, op)(a, [0, 2]))
        case(f"{op}_neg_dim_int64", op, ["int64"], lambda g: [rand(g, torch.int64, (5, 7), "small")],
             lambda fd, a, op=op: getattr(fd.ops, op)(a, [-1]))
        case(f"{op}_broadcast_input_f32", op, ["f32"], lambda g, op=op: [rand(g, torch.float32, (1, 7), "near1", layout=("B", {0: 5}))],
             lambda fd, a, op=op: getattr(fd.ops, op)(a, [0]))
    for op in ["sum", "prod", "max", "min"]:
        case(f"{op}_nodims_f32", op, ["f32"], lambda g: [rand(g, torch.float32, (3, 5, 7), "near1")], lambda fd, a, op=op: getattr(fd.ops, op)(a))
        case(f"{op}_int_dim_bf16", op, ["bf16"], lambda g: [rand(g, torch.bfloat16, (5, 7), "near1")], lambda fd, a, op=op: getattr(fd.ops, op)(a, 0, True))
    from_dt = lambda: nv(torch.float64)
    case("sum_dtype_f64_from_bf16", "sum", ["bf16"], lambda g: [rand(g, torch.bfloat16, (5, 7))],
         lambda fd, a: fd.ops.sum(a, [1], dtype=from_dt()))
    case("sum_large_f32_inner", "sum", ["f32"], lambda g: [rand(g, torch.float32, (3, 129))], lambda fd, a: fd.ops.sum(a, [1]))
    for d in ["bf16", "f16", "f32", "f64", "int64"]:
        dt = DTYPES[d]
        case(f"var_{d}", "var", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a: fd.ops.var(a, [1]))
        case(f"var_mean_{d}", "var_mean", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))],
             lambda fd, a: list(fd.ops.var_mean(a, [0], correction=0)))
        case(f"welford_{d}", "welford", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a: list(fd.ops.welford(a, [1])))
    case("var_all_keep_corr2_f32", "var", ["f32"], lambda g: [rand(g, torch.float32, (5, 7), layout="T")],
         lambda fd, a: fd.ops.var(a, [0, 1], correction=2, keepdim=True))
    case("var_mean_all_keep_f32", "var_mean", ["f32"], lambda g: [rand(g, torch.float32, (3, 5, 7))],
         lambda fd, a: list(fd.ops.var_mean(a, [0, 1, 2], correction=1, keepdim=True)))
    case("welford_all_f32", "welford", ["f32"], lambda g: [rand(g, torch.float32, (3, 5, 7))],
         lambda fd, a: list(fd.ops.welford(a, [0, 1, 2])))


def add_scans():
    for op in ["cumsum", "cumprod", "cummin", "cummax"]:
        for d in ["bf16", "f16", "f32", "f64", "int32", "int64", "bool"]:
            dt = DTYPES[d]
            kind = "near1" if op == "cumprod" and dt.is_floating_point else "small"
            case(f"{op}_{d}", op, [d], lambda g, dt=dt, kind=kind: [rand(g, dt, (5, 7), kind)], lambda fd, a, op=op: getattr(fd.ops, op)(a, 1))
        case(f"{op}_dim0_f32_T", op, ["f32"], lambda g, op=op: [rand(g, torch.float32, (9, 5), "near1" if op == "cumprod" else "normal", op != "cumprod", "T")],
             lambda fd, a, op=op: getattr(fd.ops, op)(a, 0))
        case(f"{op}_3d_negdim_f32", op, ["f32"], lambda g, op=op: [rand(g, torch.float32, (2, 3, 9), "near1" if op == "cumprod" else "normal")],
             lambda fd, a, op=op: getattr(fd.ops, op)(a, -1))


def add_casts():
    for s in ALL:
        for d in ALL:
            st, dt = DTYPES[s], DTYPES[d]
            # Float -> integer casts of nan/inf/out-of-range values are undefined: only in-range values then.
            to_int = st.is_floating_point and not (dt.is_floating_point or dt.is_complex)
            kind = "shift" if "uint64" in (s, d) else "small" if to_int else "normal"
            edges = st.is_floating_point and not to_int

            def make(g, st=st, kind=kind, edges=edges):
                return [rand(g, st, (3, 5), kind, edges)]

            case(f"cast_{s}_to_{d}", "cast", [s, d], make, lambda fd, a, dt=dt: fd.ops.cast(a, nv(dt)))


def add_gemm():
    for d in ["bf16", "f16", "f32"]:
        dt = DTYPES[d]
        case(f"matmul_2d_{d}", "matmul", [d, d], lambda g, dt=dt: [rand(g, dt, (5, 8)), rand(g, dt, (8, 7))], lambda fd, a, b: fd.ops.matmul(a, b))
        case(f"linear_bias_{d}", "linear", [d] * 3, lambda g, dt=dt: [rand(g, dt, (5, 8)), rand(g, dt, (7, 8)), rand(g, dt, (7,))],
             lambda fd, a, w, b: fd.ops.linear(a, w, b))
    case("matmul_batched_bf16_T", "matmul", ["bf16", "bf16"], lambda g: [rand(g, torch.bfloat16, (3, 5, 8)), rand(g, torch.bfloat16, (3, 8, 7), layout="T")],
         lambda fd, a, b: fd.ops.matmul(a, b))
    case("matmul_1d_2d_f32", "matmul", ["f32", "f32"], lambda g: [rand(g, torch.float32, (8,)), rand(g, torch.float32, (8, 7))], lambda fd, a, b: fd.ops.matmul(a, b))
    case("matmul_broadcast_batch_f16", "matmul", ["f16", "f16"], lambda g: [rand(g, torch.float16, (2, 1, 5, 8)), rand(g, torch.float16, (3, 8, 7))],
         lambda fd, a, b: fd.ops.matmul(a, b))
    case("linear_nobias_3d_bf16", "linear", ["bf16", "bf16"], lambda g: [rand(g, torch.bfloat16, (2, 5, 8)), rand(g, torch.bfloat16, (7, 8))],
         lambda fd, a, w: fd.ops.linear(a, w))

    def gmm(g):
        return [rand(g, torch.bfloat16, (24, 16)), rand(g, torch.bfloat16, (3, 16, 8)), torch.tensor([8, 16, 24], dtype=torch.int32).cuda()]

    case("grouped_mm_bf16", "grouped_mm", ["bf16", "bf16", "int32"], gmm, lambda fd, a, b, o: fd.ops.grouped_mm(a, b, o))

    def smm(g):
        a = rand(g, torch.float8_e4m3fn, (16, 32))
        b = rand(g, torch.float8_e4m3fn, (32, 16), layout="T")
        return [a, b, torch.tensor(0.5, dtype=torch.float32).cuda(), torch.tensor(2.0, dtype=torch.float32).cuda()]

    def smm_build(fd, a, b, s1, s2):
        r = fd.ops.scaled_mm(a, b, s1, s2)
        return r[0] if isinstance(r, (list, tuple)) else r

    case("scaled_mm_e4m3", "scaled_mm", ["e4m3", "e4m3", "f32", "f32"], smm, smm_build)

    def sdpa_in(g, dt, lq=9, lk=11):
        return [rand(g, dt, (1, 2, lq, 16)), rand(g, dt, (1, 2, lk, 16)), rand(g, dt, (1, 2, lk, 16))]

    for d in ["bf16", "f16"]:
        dt = DTYPES[d]
        case(f"sdpfa_fwd_{d}", "sdpfa_fwd", [d] * 3, lambda g, dt=dt: sdpa_in(g, dt), lambda fd, q, k, v: list(fd.ops.sdpfa_fwd(q, k, v))[:2])
    case("sdpfa_fwd_causal_scale_bf16", "sdpfa_fwd", ["bf16"] * 3, lambda g: sdpa_in(g, torch.bfloat16, 11, 11),
         lambda fd, q, k, v: list(fd.ops.sdpfa_fwd(q, k, v, dropout_p=fd.define_scalar(0.0), is_causal=fd.define_scalar(True, dtype=nv(torch.bool)), scale=fd.define_scalar(0.3)))[:2])

    def bwd(fd, q, k, v, go):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(q, k, v)
        grads = fd.ops.sdpfa_bwd(go, q, k, v, out, lse, fd.define_scalar(0.0), fd.define_scalar(False, dtype=nv(torch.bool)), seed, offset, fd.define_scalar(0.25))
        fd.add_output(out)
        for t in grads:
            fd.add_output(t)

    case("sdpfa_bwd_bf16", "sdpfa_bwd", ["bf16"] * 4, lambda g: sdpa_in(g, torch.bfloat16) + [rand(g, torch.bfloat16, (1, 2, 9, 16))], bwd)
    case("nv_block_quantize_f32", "nv_block_quantize", ["f32"], lambda g: [rand(g, torch.float32, (16, 32))],
         lambda fd, a: list(fd.ops.nv_block_quantize(a)))
    case("probe_cutlass_nvfp4_grouped_mm", "cutlass_nvfp4_grouped_mm", [], lambda g: [], None,
         note="no case: needs fp4 (Float4_e2m1fn_x2) operands and Blackwell (sm100) CUTLASS kernels, which an H200 lacks")
    CASES[-1].probe = True
    case("preprocess_grouped_matmul_input_sf_f32", "preprocess_grouped_matmul_input_sf", ["f32", "int32", "int32"],
         lambda g: [rand(g, torch.float32, (8, 4)), torch.tensor([0, 4, 8], dtype=torch.int32).cuda(), torch.tensor([0, 128, 256], dtype=torch.int32).cuda()],
         lambda fd, a, io, oo: fd.ops.preprocess_grouped_matmul_input_sf(a, io, oo))
    case("nv_grouped_block_quantize_f32", "nv_grouped_block_quantize", ["f32", "int32", "int32"],
         lambda g: [rand(g, torch.float32, (32, 32)), torch.tensor([0, 16, 32], dtype=torch.int32).cuda(), torch.tensor([0, 128, 256], dtype=torch.int32).cuda()],
         lambda fd, a, io, oo: list(fd.ops.nv_grouped_block_quantize(a, io, oo)))


def add_shapes():
    F = torch.float32
    for d in ["f32", "int64", "bool", "bf16", "c64"]:
        dt = DTYPES[d]
        case(f"broadcast_in_dim_{d}", "broadcast_in_dim", [d], lambda g, dt=dt: [rand(g, dt, (7,))],
             lambda fd, a: fd.ops.broadcast_in_dim(a, [3, 5, 7], [2]))
        case(f"reshape_{d}", "reshape", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a: fd.ops.reshape(a, [7, 5]))
        case(f"permute_{d}", "permute", [d], lambda g, dt=dt: [rand(g, dt, (3, 5, 7))], lambda fd, a: fd.ops.permute(a, [2, 0, 1]))
        case(f"pad_{d}", "pad", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a: fd.ops.pad(a, [1, 2, 0, 1]))
        case(f"cat_{d}", "cat", [d, d], lambda g, dt=dt: [rand(g, dt, (5, 3)), rand(g, dt, (5, 4))], lambda fd, a, b: fd.ops.cat([a, b], 1))
        case(f"slice_{d}", "slice", [d], lambda g, dt=dt: [rand(g, dt, (9, 11))], lambda fd, a: fd.ops.slice(a, [1, 2], [8, 10]))
        case(f"triu_{d}", "triu", [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a: fd.ops.triu(a))
    case("broadcast_f32", "broadcast", ["f32", "f32"], lambda g: [rand(g, F, (7,)), rand(g, F, (5, 7))],
         lambda fd, a, b: fd.ops.add(fd.ops.broadcast(a, [True, False]), b))
    case("broadcast_in_dim_expand_f32", "broadcast_in_dim", ["f32"], lambda g: [rand(g, F, (5, 1))],
         lambda fd, a: fd.ops.broadcast_in_dim(a, [5, 7], [0, 1]))
    case("reshape_merge_T_f32", "reshape", ["f32"], lambda g: [rand(g, F, (5, 7), layout="T")], lambda fd, a: fd.ops.reshape(a, [35]))
    case("reshape_minus1_f32", "reshape", ["f32"], lambda g: [rand(g, F, (3, 5, 7))], lambda fd, a: fd.ops.reshape(a, [3, -1]))
    case("reshape_symbolic_sizes_f32", "reshape", ["f32"], lambda g: [rand(g, F, (5, 7))],
         lambda fd, a: fd.ops.reshape(a, [fd.ops.size(a, 1), fd.ops.size(a, 0)]))
    case("size_shape_full_f32", "size", ["f32"], lambda g: [rand(g, F, (5, 7))],
         lambda fd, a: fd.ops.add(a, fd.ops.full(fd.ops.shape(a), fd.ops.size(a, 0), nv(F))))
    case("expand_f32", "expand", ["f32"], lambda g: [rand(g, F, (1, 7))], lambda fd, a: fd.ops.expand(a, [5, 7]))
    case("expand_minus1_int64", "expand", ["int64"], lambda g: [rand(g, torch.int64, (3, 1))], lambda fd, a: fd.ops.expand(a, [-1, 4]))
    case("squeeze_f32", "squeeze", ["f32"], lambda g: [rand(g, F, (5, 1, 7))], lambda fd, a: fd.ops.squeeze(a, [1]))
    case("squeeze_expanded_f32", "squeeze", ["f32"], lambda g: [rand(g, F, (5, 1))],
         lambda fd, a: fd.ops.squeeze(fd.ops.expand(a, [5, 3]), [1], squeeze_expanded=True))
    case("slice_strides_f32", "slice", ["f32"], lambda g: [rand(g, F, (9, 11), layout="T")], lambda fd, a: fd.ops.slice(a, [1, 0], [8, 11], [2, 3]))
    case("slice_negative_f32", "slice", ["f32"], lambda g: [rand(g, F, (9, 11))], lambda fd, a: fd.ops.slice(a, [-5, 0], [-1, 6]))
    case("pad_value_negative_f32", "pad", ["f32"], lambda g: [rand(g, F, (5, 7))], lambda fd, a: fd.ops.pad(a, [-1, 2, 1, 0], fd.define_scalar(1.5)))
    case("cat_dim0_three_f16", "cat", ["f16"] * 3, lambda g: [rand(g, torch.float16, (2, 7)), rand(g, torch.float16, (1, 7)), rand(g, torch.float16, (3, 7), layout="T")],
         lambda fd, a, b, c: fd.ops.cat([a, b, c], 0))
    for diag in [2, -1]:
        case(f"triu_diag{diag}_f32", "triu", ["f32"], lambda g: [rand(g, F, (2, 5, 7))], lambda fd, a, diag=diag: fd.ops.triu(a, diag))
    case("stride_order_f32", "stride_order", ["f32"], lambda g: [rand(g, F, (3, 5, 7))], lambda fd, a: fd.ops.stride_order(fd.ops.neg(a), [0, 1, 2]))
    case("set_T_f32", "set", ["f32"], lambda g: [rand(g, F, (5, 7), layout="T")], lambda fd, a: fd.ops.set(a))


def add_indexing():
    F = torch.float32
    for d in ["f32", "int64", "bf16", "bool"]:
        dt = DTYPES[d]
        case(f"index_select_{d}", "index_select", [d, "int64"], lambda g, dt=dt: [rand(g, dt, (7, 5)), index(g, 7, (4,))],
             lambda fd, a, i: fd.ops.index_select(a, i, 0))
        case(f"gather_{d}", "gather", [d, "int64"], lambda g, dt=dt: [rand(g, dt, (7, 5)), index(g, 7, (4, 5))], lambda fd, a, i: fd.ops.gather(a, i, 0))
        case(f"take_along_axis_{d}", "take_along_axis", [d, "int64"], lambda g, dt=dt: [rand(g, dt, (5, 7)), index(g, 7, (5, 3))],
             lambda fd, a, i: fd.ops.take_along_axis(a, i, 1))
        case(f"select_{d}", "select", [d, "int64 scalar"], lambda g, dt=dt: [rand(g, dt, (5, 7)), 3], lambda fd, a, i: fd.ops.select(a, i, 1))

        def scat(g, dt=dt):
            idx = torch.stack([torch.randperm(7, generator=g)[:4] for _ in range(5)], 1).cuda()  # (4, 5), distinct per column
            return [rand(g, dt, (7, 5)), idx, rand(g, dt, (4, 5))]

        case(f"scatter_{d}", "scatter", [d, "int64", d], scat, lambda fd, a, i, s: fd.ops.scatter(a, i, s, 0))
    case("index_select_int32_index_dim1_f32", "index_select", ["f32", "int32"], lambda g: [rand(g, F, (5, 7), layout="T"), index(g, 7, (9,), torch.int32)],
         lambda fd, a, i: fd.ops.index_select(a, i, 1))
    case("gather_dim1_smaller_f32", "gather", ["f32", "int64"], lambda g: [rand(g, F, (5, 7)), index(g, 7, (3, 4))], lambda fd, a, i: fd.ops.gather(a, i, 1))
    case("take_along_axis_broadcast_index_f32", "take_along_axis", ["f32", "int64"], lambda g: [rand(g, F, (5, 7)), index(g, 5, (2, 7))],
         lambda fd, a, i: fd.ops.take_along_axis(a, i, 0))
    case("select_const_f32", "select", ["f32"], lambda g: [rand(g, F, (3, 5, 7))], lambda fd, a: fd.ops.select(a, fd.define_scalar(2), 2))
    case("scatter_scalar_src_f32", "scatter", ["f32", "int64"],
         lambda g: [rand(g, F, (5, 7)), torch.stack([torch.randperm(7, generator=g)[:3] for _ in range(5)]).cuda()],
         lambda fd, a, i: fd.ops.scatter(a, i, fd.define_scalar(9.0), 1))
    for d in ["f32", "bf16", "f16"]:
        dt = DTYPES[d]
        case(f"embedding_fwd_{d}", "embedding_fwd", ["int64", d], lambda g, dt=dt: [index(g, 11, (3, 4)), rand(g, dt, (11, 6))],
             lambda fd, i, w: fd.ops.embedding_fwd(i, w))
    case("embedding_fwd_padding_idx_f32", "embedding_fwd", ["int64", "f32"], lambda g: [index(g, 11, (9,)), rand(g, F, (11, 6))],
         lambda fd, i, w: fd.ops.embedding_fwd(i, w, padding_idx=fd.define_scalar(2)))
    # topk / argsort: PyTorch's answer is kept when nvFuser fails (values distinct so the order is defined).
    for d in ["f32", "int64", "bf16", "f64"]:
        dt = DTYPES[d]
        case(f"topk_{d}", "topk", [d], lambda g, dt=dt: [rand(g, dt, (5, 9), "perm")], lambda fd, a: list(fd.ops.topk(a, fd.define_scalar(3), 1, True, True)),
             torch_ref=lambda ins: list(torch.topk(ins[0], 3, 1, True, True)))
        case(f"argsort_{d}", "argsort", [d], lambda g, dt=dt: [rand(g, dt, (5, 9), "perm")], lambda fd, a: fd.ops.argsort(a, 1),
             torch_ref=lambda ins: [torch.argsort(ins[0], 1)])
    case("topk_smallest_dim0_f32", "topk", ["f32"], lambda g: [rand(g, F, (9, 5), "perm", layout="T")],
         lambda fd, a: list(fd.ops.topk(a, fd.define_scalar(4), 0, largest=False, sorted=True)),
         torch_ref=lambda ins: list(torch.topk(ins[0], 4, 0, largest=False, sorted=True)))
    case("argsort_desc_stable_int64", "argsort", ["int64"], lambda g: [rand(g, torch.int64, (5, 9), "small")],
         lambda fd, a: fd.ops.argsort(a, 1, descending=True, stable=True), torch_ref=lambda ins: [torch.argsort(ins[0], 1, descending=True, stable=True)])
    case("argsort_stable_bool", "argsort", ["bool"], lambda g: [rand(g, torch.bool, (3, 9))],
         lambda fd, a: fd.ops.argsort(a, 1, stable=True), torch_ref=lambda ins: [torch.argsort(ins[0], 1, stable=True)])


def add_factories():
    for d in ["int64", "int32", "f32", "f64", "bf16"]:
        dt = DTYPES[d]
        start, step = (2, 3) if not dt.is_floating_point else (0.5, 0.25)
        case(f"iota_{d}", "iota", [d], lambda g: [],
             lambda fd, dt=dt, start=start, step=step: fd.ops.iota(fd.define_scalar(13), fd.define_scalar(start), fd.define_scalar(step), nv(dt)))
        fill = {"int64": 7, "int32": -3, "f32": 1.25, "f64": -0.1, "bf16": 3.5}[d]
        case(f"full_{d}", "full", [d], lambda g: [], lambda fd, dt=dt, fill=fill: fd.ops.full([3, 5], fd.define_scalar(fill), nv(dt)))
    case("full_bool", "full", ["bool"], lambda g: [], lambda fd: fd.ops.full([4, 3], fd.define_scalar(True), nv(torch.bool)))
    case("iota_default", "iota", ["int64"], lambda g: [], lambda fd: fd.ops.iota(fd.define_scalar(9)))
    case("iota_scalar_inputs", "iota", ["int64"], lambda g: [11, -2, 5], lambda fd, n, s, st: fd.ops.iota(n, s, st, nv(torch.int64)))
    # RNG with an explicit seed and offset (Philox): deterministic, so the values are nvFuser's.
    for op in ["uniform", "normal"]:
        for d in ["f32", "f64", "bf16", "f16"]:
            dt = DTYPES[d]
            a, b = (-1.0, 3.0) if op == "uniform" else (0.5, 2.0)
            case(f"{op}_{d}", op, [d], lambda g: [1234, 7],
                 lambda fd, s, o, op=op, a=a, b=b, dt=dt: getattr(fd.ops, op)(fd.define_scalar(a), fd.define_scalar(b), [5, 7], rng_seed=s, rng_offset=o, dtype=nv(dt)),
                 rng={"seed_input": 0, "offset_input": 1})
        case(f"{op}_const_seed_odd_f32", op, ["f32"], lambda g: [],
             lambda fd, op=op: getattr(fd.ops, op)(fd.define_scalar(0.0), fd.define_scalar(1.0), [3, 37], rng_seed=fd.define_scalar(42), rng_offset=fd.define_scalar(0), dtype=nv(torch.float32)),
             rng={"seed": 42, "offset": 0})
        case(f"{op}_two_draws_f32", op, ["f32"], lambda g: [99, 4],
             lambda fd, s, o, op=op: [getattr(fd.ops, op)(fd.define_scalar(0.0), fd.define_scalar(1.0), [5, 3], rng_seed=s, rng_offset=o, dtype=nv(torch.float32)),
                                      getattr(fd.ops, op)(fd.define_scalar(0.0), fd.define_scalar(1.0), [5, 3], rng_seed=s, rng_offset=o, dtype=nv(torch.float32))],
             rng={"seed_input": 0, "offset_input": 1})
    # rand_like / randn_like draw from PyTorch's CUDA generator: seed and offset before the run are recorded.
    for op in ["rand_like", "randn_like"]:
        for d in ["f32", "bf16", "f64"]:
            dt = DTYPES[d]
            case(f"{op}_{d}", op, [d], lambda g, dt=dt: [rand(g, dt, (5, 7))], lambda fd, a, op=op: getattr(fd.ops, op)(a), rng={"torch_generator": True})


def add_fusion_forms():
    F = torch.float32

    def alias_build(fd, a, b):
        c = fd.ops.add(a, b)
        fd.add_output(c, a)
        fd.add_output(fd.ops.mul(c, b))

    case("add_output_alias_f32", "add_output", ["f32", "f32"], lambda g: [rand(g, F, (5, 7)), rand(g, F, (5, 7))], alias_build, alias=(0,))

    def alias_cast(fd, a, b):
        s = fd.ops.cast(fd.ops.add(fd.ops.cast(a, nv(F)), b), nv(torch.bfloat16))
        fd.add_output(s, a)
        fd.add_output(s)

    case("add_output_alias_bf16_also_returned", "add_output", ["bf16", "f32"], lambda g: [rand(g, torch.bfloat16, (3, 9)), rand(g, F, (3, 9))], alias_cast, alias=(0,))

    def alias_int(fd, a):
        fd.add_output(fd.ops.add(a, fd.define_scalar(1)), a)
        fd.add_output(fd.ops.sum(a, [1]))

    case("add_output_alias_int64_counter", "add_output", ["int64"], lambda g: [rand(g, torch.int64, (4, 5))], alias_int, alias=(0,))

    def dt_stride_order(fd, a):
        from nvfuser_direct import DataType

        t = fd.define_tensor(shape=[5, 7], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])
        return fd.ops.mul(t, fd.define_scalar(2.0))

    case("define_tensor_stride_order_f32", "define_tensor", ["f32"], lambda g: [rand(g, F, (5, 7), layout="T")], None, note="explicit define_tensor(stride_order=[0, 1])")
    CASES[-1].build = dt_stride_order
    CASES[-1].define_inputs = False

    def dt_symbolic(fd, a):
        from nvfuser_direct import DataType

        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, None, True], dtype=DataType.Float, is_cpu=False)
        return fd.ops.sum(t, [1])

    case("define_tensor_broadcast_dim_f32", "define_tensor", ["f32"], lambda g: [rand(g, F, (5, 1, 7))], None, note="explicit define_tensor(shape=[-1,-1,-1], contiguity=[True, None, True])")
    CASES[-1].build = dt_symbolic
    CASES[-1].define_inputs = False

    def dt_strides(fd, a):
        from nvfuser_direct import DataType

        t = fd.define_tensor(sizes=[3, 5, 7], strides=[1, 21, 3], dtype=DataType.Float, static_sizes=True, is_cpu=False)
        return fd.ops.exp(t)

    case("define_tensor_sizes_strides_f32", "define_tensor", ["f32"], lambda g: [rand(g, F, (3, 5, 7)).permute(1, 2, 0).contiguous().permute(2, 0, 1)], None,
         note="explicit define_tensor(sizes, strides) with a permuted layout")
    CASES[-1].build = dt_strides
    CASES[-1].define_inputs = False
    case("scalar_input_ops_f64", "define_scalar", ["f32", "f64 scalar"], lambda g: [rand(g, F, (5, 7)), 2.5],
         lambda fd, a, s: fd.ops.mul(a, fd.ops.add(s, fd.define_scalar(1.0))))
    case("segment_set_chain_f32", "segment_set", ["f32"], lambda g: [rand(g, F, (5, 7))],
         lambda fd, a: fd.ops.exp(fd.ops.segment_set(fd.ops.sum(a, [1], keepdim=True))))
    for name in ["batch_norm", "index_put_accumulate", "add_alpha", "sub_alpha", "tensor_sizes", "at", "define_vector"]:
        case(f"probe_{name}", name, [], lambda g: [], None, note="probe: is the op exposed by nvfuser_direct?")
        CASES[-1].probe = True


def all_cases():
    if not CASES:
        add_unary()
        add_binary()
        add_ternary()
        add_via_f32()
        add_reductions()
        add_scans()
        add_casts()
        add_gemm()
        add_shapes()
        add_indexing()
        add_factories()
        add_fusion_forms()
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    return CASES


# ---------------------------------------------------------------- saving

ST_CODE = {
    torch.bool: "BOOL",
    torch.uint8: "U8",
    torch.int8: "I8",
    torch.int16: "I16",
    torch.int32: "I32",
    torch.int64: "I64",
    torch.uint64: "U64",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float32: "F32",
    torch.float64: "F64",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
    torch.float8_e8m0fnu: "F8_E8M0",
}


def save_safetensors(path, tensors):
    """Writes the safetensors format directly (complex as its real view, trailing dim 2)."""
    header, blobs, off = {}, [], 0
    for k, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.is_complex():
            t = torch.view_as_real(t).contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[k] = {"dtype": ST_CODE[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, complex):
        return [v.real, v.imag]
    return v


def describe_input(x):
    if isinstance(x, torch.Tensor):
        return {"shape": list(x.shape), "stride": list(x.stride()), "dtype": tname(x.dtype)}
    kind = "bool" if isinstance(x, bool) else "int64" if isinstance(x, int) else "float64" if isinstance(x, float) else "complex128"
    return {"scalar": jsonable(x), "dtype": kind}


def clean_error(text, n=700):
    """The lines of an nvFuser error that say why (check, NVRTC message, where raised), not its stack."""
    lines = str(text).split("\n")
    keep = [lines[0]]
    for i, l in enumerate(lines[1:], 1):
        if l.startswith("Expected") or l.startswith("Exception raised from"):
            keep.append(l)
        elif "NVRTC compile error" in l:
            keep.extend(lines[i : i + 3])
    return short("\n".join(keep), n)


def short(text, n=1500):
    text = str(text)
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more characters]"


# ---------------------------------------------------------------- running one case


def run_case(c, out_dir, meta):
    import re

    import nvfuser_direct
    from nvfuser_direct import FusionDefinition, DataType

    # nvfuser_direct 0.2.36's repro_script_for calls re.sub for scalar inputs but never imports re.
    nvfuser_direct.re = re
    rec = {"op": c.op, "dtypes": c.dtypes, **meta}
    if c.note:
        rec["note"] = c.note
    if getattr(c, "probe", False):
        exposed = hasattr(nvfuser_direct.ops, c.op) or hasattr(FusionDefinition, c.op)
        rec.update(status="not_exposed" if not exposed else "exposed_not_recorded")
        rec["error"] = f"nvfuser_direct {meta['nvfuser_version']} has no ops.{c.op}" if not exposed else "exposed; no case written for it"
        return rec
    if not hasattr(nvfuser_direct.ops, c.op) and not c.op.startswith("__") and c.op not in ("add_output", "define_tensor", "define_scalar"):
        rec.update(status="not_exposed", error=f"nvfuser_direct {meta['nvfuser_version']} has no ops.{c.op}")
        return rec
    g = torch.Generator().manual_seed(zlib.crc32(c.name.encode()))
    torch.manual_seed(zlib.crc32(c.name.encode()))
    ins = c.make(g)
    pre = [x.clone() if isinstance(x, torch.Tensor) else x for x in ins]
    rec["inputs"] = [describe_input(x) for x in ins]
    stage = "define"
    script = None
    try:
        with FusionDefinition() as fd:
            vals = []
            if getattr(c, "define_inputs", True):
                for x in ins:
                    if isinstance(x, torch.Tensor):
                        # Concrete sizes (as ../shared/golden has them): fusebench runs fusions of known shapes.
                        vals.append(fd.define_tensor(sizes=list(x.shape), strides=list(x.stride()), dtype=nv(x.dtype), static_sizes=True, is_cpu=False))
                    else:
                        dt = DataType.Bool if isinstance(x, bool) else DataType.Int if isinstance(x, int) else DataType.Double
                        vals.append(fd.define_scalar(None, dtype=dt))
            else:
                vals = [None] * len(ins)
            res = c.build(fd, *vals)
            if res is not None:
                for r in res if isinstance(res, (list, tuple)) else [res]:
                    fd.add_output(r)
        script = fd.repro_script_for(ins)
        stage = "execute"
        if c.rng and c.rng.get("torch_generator"):
            gen = torch.cuda.default_generators[0]
            rec["rng"] = {"torch_generator": True, "seed": gen.initial_seed(), "offset_before": gen.get_offset()}
        elif c.rng:
            rec["rng"] = c.rng
        outs = fd.execute(ins)
        torch.cuda.synchronize()
        rec["reference"] = "nvfuser"
    except Exception as e:  # nvFuser refused the definition or failed to run it
        err = clean_error(f"{type(e).__name__}: {e}")
        low = err.lower()
        cuda_broken = "cuda error" in low or "illegal memory" in low or "illegal instruction" in low or "misaligned address" in low
        if c.torch_ref is not None and not cuda_broken:
            outs = c.torch_ref([x.clone() if isinstance(x, torch.Tensor) else x for x in pre])
            rec["reference"] = "torch"
            rec["nvfuser_error"] = {"stage": stage, "error": short(err)}
            if script is None:
                rec.update(status="refused", stage=stage, error=short(err))
                return rec
        else:
            rec.update(status="refused" if not cuda_broken else "crashed", stage=stage, error=short(err))
            if cuda_broken:
                rec["restart_worker"] = True
            return rec
    tensors = {}
    for i, x in enumerate(pre):
        if isinstance(x, torch.Tensor):
            tensors[f"in{i}"] = x
    rec["outputs"] = []
    for k, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            o = torch.tensor(o)
        tensors[f"out{k}"] = o
        rec["outputs"].append({"shape": list(o.shape), "dtype": tname(o.dtype), "stride": list(o.stride())})
    if c.alias:
        rec["post_inputs"] = list(c.alias)
        for i in c.alias:
            tensors[f"post_in{i}"] = ins[i]
    save_safetensors(os.path.join(out_dir, f"{c.name}.safetensors"), tensors)
    with open(os.path.join(out_dir, f"{c.name}.py"), "w") as f:
        f.write(script)
    rec["status"] = "ok"
    return rec


def worker(shard_file, out_dir, progress_file, results_file):
    import nvfuser_direct

    names = [n for n in open(shard_file).read().split("\n") if n]
    by_name = {c.name: c for c in all_cases()}
    meta = {
        "nvfuser_version": str(nvfuser_direct.version()),
        "torch_version": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(0),
    }
    for name in names:
        with open(progress_file, "w") as f:
            f.write(name)
        try:
            rec = run_case(by_name[name], out_dir, meta)
        except Exception as e:  # a bug of this script's case, not nvFuser's: recorded, never hidden
            rec = {"op": by_name[name].op, "dtypes": by_name[name].dtypes, **meta, "status": "script_error", "error": short(f"{type(e).__name__}: {e}")}
        with open(results_file, "a") as f:
            f.write(json.dumps({"name": name, **rec}) + "\n")
        if rec.pop("restart_worker", False):
            sys.exit(3)
    with open(progress_file, "w") as f:
        f.write("")


# ---------------------------------------------------------------- orchestration


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--budget", type=float, default=240.0, help="seconds; cases not started by then are left out")
    ap.add_argument("--only", default="", help="comma-separated name prefixes")
    ap.add_argument("--worker", nargs=3, metavar=("SHARD", "PROGRESS", "RESULTS"))
    args = ap.parse_args()
    cases_dir = os.path.join(args.out, "cases")
    os.makedirs(cases_dir, exist_ok=True)
    if args.worker:
        worker(args.worker[0], cases_dir, args.worker[1], args.worker[2])
        return
    t0 = time.time()
    names = [c.name for c in all_cases()]
    if args.only:
        names = [n for n in names if any(n.startswith(p) for p in args.only.split(","))]
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    n = args.workers
    queues = [names[i::n] for i in range(n)]
    procs = {}

    def start(k):
        done = done_names(k)
        rest = [x for x in queues[k] if x not in done]
        if not rest:
            return None
        with open(f"{work}/shard{k}", "w") as f:
            f.write("\n".join(rest))
        err = open(f"{work}/stderr{k}", "a")
        return subprocess.Popen(
            [sys.executable, __file__, "--out", args.out, "--worker", f"{work}/shard{k}", f"{work}/progress{k}", f"{work}/results{k}"],
            stdout=err, stderr=err,
        )

    def done_names(k):
        p = f"{work}/results{k}"
        if not os.path.exists(p):
            return set()
        return {json.loads(l)["name"] for l in open(p) if l.strip()}

    for k in range(n):
        procs[k] = start(k)
    last = {}
    while any(p is not None for p in procs.values()):
        time.sleep(0.5)
        for k, p in list(procs.items()):
            if p is None:
                continue
            rc = p.poll()
            prog = open(f"{work}/progress{k}").read() if os.path.exists(f"{work}/progress{k}") else ""
            stamp = (prog, os.path.getmtime(f"{work}/progress{k}") if prog else 0)
            if rc is None:
                if last.get(k, (None, time.time()))[0] != stamp:
                    last[k] = (stamp, time.time())
                elif time.time() - last[k][1] > 90:
                    p.kill()
                    p.wait()
                    rc = "hung"
                if time.time() - t0 > args.budget:
                    p.kill()
                    p.wait()
                    procs[k] = None
                    continue
                if rc is None:
                    continue
            if rc == 0 or not prog:
                procs[k] = None
                continue
            if prog not in done_names(k):
                tail = open(f"{work}/stderr{k}", errors="replace").read()[-1500:]
                c = next(c for c in CASES if c.name == prog)
                with open(f"{work}/results{k}", "a") as f:
                    f.write(json.dumps({"name": prog, "op": c.op, "dtypes": c.dtypes, "status": "crashed",
                                        "error": f"worker exited ({rc}) during this case; its stderr ends:\n{tail}"}) + "\n")
            procs[k] = start(k) if time.time() - t0 < args.budget else None
    manifest = {}
    for k in range(n):
        p = f"{work}/results{k}"
        if os.path.exists(p):
            for l in open(p):
                if l.strip():
                    r = json.loads(l)
                    manifest[r.pop("name")] = r
    for name in names:
        if name not in manifest:
            manifest[name] = {"op": next(c.op for c in CASES if c.name == name), "status": "not_run", "error": "time budget of the recording run"}
    ordered = {k: manifest[k] for k in names}
    with open(os.path.join(cases_dir, "manifest.json"), "w") as f:
        json.dump(ordered, f, indent=1)
    counts = {}
    for r in ordered.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print("cases:", len(ordered), counts, f"in {time.time() - t0:.0f}s")
    for name, r in ordered.items():
        if r["status"] not in ("ok",):
            print(f"  {name}: {r['status']}: {r.get('error', '')[:160]!r}")
        elif r.get("reference") == "torch":
            print(f"  {name}: torch reference: {r['nvfuser_error']['error'][:160]!r}")
    with tarfile.open(os.path.join(args.out, "..", "golden-ops.tar.gz"), "w:gz") as tf:
        tf.add(cases_dir, arcname="golden-ops")


if __name__ == "__main__":
    main()
