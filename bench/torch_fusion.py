"""A fusion as PyTorch code, for timing PyTorch eager and torch.compile on the same fusion.

    fn = build(fusebench.fusion_json("script.py"))
    outs = fn(*inputs)                 # eager
    outs = torch.compile(fn)(*inputs)  # compiled

Each node of fusebench's JSON form becomes the PyTorch op with the same meaning; every result is
cast to the dtype the fusion gives it (nvFuser computes reduced floats in float), so the memory traffic
matches the fusion's. The numbers are for timing; fusebench's CPU reference is the oracle for values.
"""
import json
import math
import operator

import torch
import torch.nn.functional as F

DTYPES = {
    "BFloat16": torch.bfloat16,
    "Half": torch.float16,
    "Float": torch.float32,
    "Double": torch.float64,
    "Int": torch.int64,
    "Int32": torch.int32,
    "Bool": torch.bool,
    "Index": torch.int64,
    "Float8E4m3fn": torch.float8_e4m3fn,
    "Float8E5m2": torch.float8_e5m2,
}
# Scalar arithmetic stays in Python: a torch scalar's .item() would break torch.compile's graph.
SCALAR_BINARY = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul, "Div": operator.truediv,
    "Pow": operator.pow, "Max": max, "Min": min, "Eq": operator.eq, "Ne": operator.ne,
    "Lt": operator.lt, "Le": operator.le, "Gt": operator.gt, "Ge": operator.ge,
}
SCALAR_UNARY = {
    "neg": operator.neg, "reciprocal": lambda x: 1.0 / x, "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "tanh": math.tanh, "erf": math.erf,
    "abs": abs,
}
BINARY = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "Pow": torch.pow,
    "Max": torch.maximum, "Min": torch.minimum, "Remainder": torch.remainder, "Fmod": torch.fmod,
    "Eq": torch.eq, "Ne": torch.ne, "Lt": torch.lt, "Le": torch.le, "Gt": torch.gt, "Ge": torch.ge,
    "LogicalAnd": torch.logical_and, "LogicalOr": torch.logical_or, "BitwiseAnd": torch.bitwise_and,
    "BitwiseOr": torch.bitwise_or, "Atan2": torch.atan2,
}


def build(fusion_json):
    d = json.loads(fusion_json)
    values, nodes = d["values"], d["nodes"]

    def fn(*inputs):
        env = dict(zip(d["inputs"], inputs))

        def val(v):
            if v in env:
                return env[v]
            c = values[v].get("constant")
            if c is None:
                raise ValueError(f"value {values[v]['name']} has no value")
            return next(iter(c.values()))

        def typed(x, v):
            want = DTYPES.get(values[v]["dtype"])
            if isinstance(x, torch.Tensor) and want is not None and x.dtype != want:
                return x.to(want)
            return x

        for n in nodes:
            o, outs = n["op"], n["outputs"]
            k = o["op"]
            shape = values[outs[0]]["shape"]
            dt = DTYPES.get(values[outs[0]]["dtype"])
            if k == "cast":
                x = val(o["x"])
                r = x.to(dt) if isinstance(x, torch.Tensor) else x
            elif k == "unary":
                x = val(o["x"])
                name = o["kind"].lower()
                f = {"neg": torch.neg, "not": torch.logical_not, "relu": torch.relu}.get(name)
                f = f or getattr(torch, name, None) or getattr(F, name)  # silu is only in F
                if isinstance(x, torch.Tensor):
                    r = f(x.to(dt) if x.is_floating_point() and dt.is_floating_point else x)
                else:
                    r = SCALAR_UNARY[name](x)
            elif k == "binary":
                a, b = val(o["a"]), val(o["b"])
                comp = o["kind"] in ("Eq", "Ne", "Lt", "Le", "Gt", "Ge")
                if not comp and dt is not None:
                    a = a.to(dt) if isinstance(a, torch.Tensor) else a
                    b = b.to(dt) if isinstance(b, torch.Tensor) else b
                if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
                    r = SCALAR_BINARY[o["kind"]](a, b)
                else:
                    r = BINARY[o["kind"]](a, b)
            elif k == "where":
                c, a, b = val(o["cond"]), val(o["a"]), val(o["b"])
                if not isinstance(c, torch.Tensor):
                    r = a if c else b
                else:
                    r = torch.where(c, a, b)
            elif k == "reduce":
                x = val(o["x"])
                dims = o["dims"]
                if o["kind"] == "Sum":
                    r = torch.sum(x, dims, keepdim=o["keepdim"])
                elif o["kind"] == "Max":
                    r = torch.amax(x, dims, keepdim=o["keepdim"])
                else:
                    r = torch.amin(x, dims, keepdim=o["keepdim"])
            elif k == "scan":
                # An inclusive scan; nvFuser's init (a scalar combined with the first element) taken as
                # combined with every element's prefix, which is the same for sum, prod, min and max.
                x, dim = val(o["x"]), o["dim"]
                kind = o["kind"]
                if kind == "Cumsum":
                    r = torch.cumsum(x, dim)
                elif kind == "Cumprod":
                    r = torch.cumprod(x, dim)
                elif kind == "Cummax":
                    r = torch.cummax(x, dim).values
                else:
                    r = torch.cummin(x, dim).values
                if o.get("init") is not None:
                    i = val(o["init"])
                    r = {"Cumsum": lambda: r + i, "Cumprod": lambda: r * i,
                         "Cummax": lambda: torch.clamp(r, min=i), "Cummin": lambda: torch.clamp(r, max=i)}[kind]()
            elif k == "welford":
                x = val(o["x"])
                var, mean = torch.var_mean(x, o["dims"], correction=0)
                count = 1
                for dim in o["dims"]:
                    count *= x.shape[dim]
                env[outs[0]], env[outs[1]] = mean, var * count
                env[outs[2]] = torch.full_like(mean, count, dtype=DTYPES[values[outs[2]]["dtype"]])
                continue
            elif k == "var_mean":
                var, mean = torch.var_mean(val(o["x"]), o["dims"], correction=o["correction"], keepdim=o["keepdim"])
                env[outs[0]], env[outs[1]] = var, mean
                continue
            elif k in ("broadcast", "squeeze", "reshape"):
                r = val(o["x"]).reshape(shape)
            elif k == "broadcast_in_dim":
                x = val(o["x"])
                kept = [1] * len(shape)
                for i, dim in enumerate(o["broadcast_dims"]):
                    kept[dim] = x.shape[i]
                r = x.reshape(kept).expand(shape)
            elif k == "expand":
                r = val(o["x"]).expand(shape)
            elif k == "permute":
                r = val(o["x"]).permute(o["dims"])
            elif k == "slice":
                x = val(o["x"])
                r = x[tuple(slice(s, e, st) for s, e, st in zip(o["start"], o["end"], o["strides"]))]
            elif k == "pad":
                x = val(o["x"])
                widths = [int(val(w)) for w in o["widths"]]
                pad_value = val(o["value"]) if o.get("value") is not None else 0
                r = F.pad(x, widths, value=pad_value)
            elif k == "cat":
                xs = [val(x) for x in o["xs"]]
                # A manually padded cat: the inputs are full-size and zero outside their range.
                r = sum(xs[1:], xs[0]) if o["manual_padding"] else torch.cat(xs, o["dim"])
            elif k == "full":
                r = torch.full(shape, val(o["fill"]), dtype=DTYPES[o["dtype"]], device="cuda")
            elif k == "index_select":
                # nvFuser takes an index of any shape with one non-1 extent; torch wants a vector.
                r = torch.index_select(val(o["x"]), o["dim"], val(o["index"]).reshape(-1)).reshape(shape)
            elif k == "index":
                r = index_op(o, val)
            elif k == "rng":
                # Other numbers than nvFuser's Philox stream: these are for timing.
                a, b, dt_rng = val(o["a"]), val(o["b"]), DTYPES[o["dtype"]]
                if o["dist"] == "Uniform":
                    r = torch.rand(shape, dtype=dt_rng, device="cuda") * (b - a) + a
                else:
                    r = torch.randn(shape, dtype=dt_rng, device="cuda") * b + a
            elif k == "rng_like":
                x = val(o["x"])
                r = torch.rand_like(x) if o["dist"] == "Uniform" else torch.randn_like(x)
            elif k == "stride_order":
                # stride_order[d] is dim d's rank counted from the innermost: permute into allocation
                # order, make that contiguous, permute back (a copy in the new layout).
                x, so = val(o["x"]), o["stride_order"]
                n = len(so)
                order = sorted(range(n), key=lambda d: -(so[d] % n))
                back = sorted(range(n), key=lambda d: order[d])
                r = x.permute(order).contiguous().permute(back)
            elif k == "set":
                r = val(o["x"]).clone()
            elif k == "matmul":
                r = torch.matmul(val(o["a"]), val(o["b"]))
            elif k == "linear":
                b = o.get("bias")
                r = F.linear(val(o["a"]), val(o["weight"]), None if b is None else val(b))
            elif k == "gemm" and o["gemm_op"] == "grouped_mm":
                r = torch._grouped_mm(val(o["mat1"]), val(o["mat2"]), offs=val(o["offsets"]))
            elif k == "gemm" and o["gemm_op"] == "scaled_mm":
                r = torch._scaled_mm(val(o["mat1"]), val(o["mat2"]), scale_a=val(o["scale1"]),
                                     scale_b=val(o["scale2"]), out_dtype=DTYPES[o["dtype"]])
            else:
                raise NotImplementedError(f"op {k}")
            env[outs[0]] = typed(r, outs[0])
        return [env[v] for v in d["outputs"]]

    return fn


def index_op(o, val):
    """fusebench's index ops (the `index_op` of an `index` node) as their PyTorch forms."""
    k = o["index_op"]
    if k == "take_along_axis":  # the index broadcasts against x outside dim, as in take_along_dim
        return torch.take_along_dim(val(o["x"]), val(o["index"]), o["dim"])
    if k == "gather":
        return torch.gather(val(o["x"]), o["dim"], val(o["index"]))
    if k == "embedding_fwd":
        pad = o.get("padding_idx")
        return F.embedding(val(o["input"]), val(o["weight"]), padding_idx=None if pad is None else int(val(pad)))
    raise NotImplementedError(f"index op {k}")
