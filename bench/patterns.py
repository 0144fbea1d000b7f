"""The generated sweep of the schedules: nvFuser repro scripts (direct syntax) for the op patterns of
nvFuser's own benchmark suite (Fuser benchmarks/python), forward and backward, across row lengths, row
counts, dtypes and input layouts, so that the engine is measured on shapes it was never tuned on. Every
script computes in Float, as nvFuser's benchmarks do for half types, and is named
PATTERN-DTYPE-ROWSxCOLS-LAYOUT.py. ROWS x COLS is the [rows, cols] tensor the pattern works on (for
rope: tokens x the width of q, the input being the fused [tokens, 3 * cols] qkv; for embedding: ids x
the table's row length; for cross_entropy: tokens x vocabulary).

Layouts of the [rows, cols] inputs (define_tensor's contiguity and stride_order are derived from the
strides of the torch input, as nvFuser's computeTensorDescriptor does):
    rowmajor   contiguous
    colmajor   column-major (the transpose of a contiguous [cols, rows])
    sliced     the first half of each row of a [rows, 2 * cols] tensor: row stride 2 * cols, contiguity [False, True]
    broadcast  the first such input is one row expanded over the rows (stride 0, contiguity [None, True])
For transpose, rowmajor permutes the input and writes [cols, rows] row-major; colmajor writes the
column-major input out row-major (no permute: the copy changes the layout).

Families (--family): schedules (the default: the patterns above); gemm, the matrix products of issue 17
(linear, linear + GELU, matmul, scaled_mm, grouped_mm; layouts of the weight); scans (cumsum, cummax along
the rows); channels (batch, instance and group norms of [N, C, H, W] images, forward and backward, stored
channels first or last; ROWS x COLS is N x CxHxW). All but the first are drawn only when asked for.

Grids (--grid):
    small   row lengths 7 and 1000 (rope: 128 and 256), 1 and 33 rows, every dtype and layout: the CPU test
    sweep   (default, about 420 scripts) a structured subset of the product:
              row lengths: every pattern in its first layout, bf16, 2048 rows, 10 of the 14 row lengths
                           (768 1000 2048 3072 3200 4096 5120 8192 11008 16384);
              layouts:     every other layout, bf16, 2048 rows, row lengths 1000, 4096 and 16384;
              row counts:  every pattern in its first layout, bf16, 1, 8, 256 and 32768 rows, 4096 long;
              dtypes:      every pattern in its first layout, f16 and f32, 2048 x 4096;
              vocabulary:  cross_entropy at 2048 x 32064 and 2048 x 128256, softmax at 2048 x 32064 (bf16)
    full    the whole product: patterns x layouts x 14 row lengths x 5 row counts x 3 dtypes

    python3 bench/patterns.py DIR                 # the sweep
    python3 bench/patterns.py DIR --grid small    # (or --small) the CPU test
    python3 bench/patterns.py DIR --only gelu,softmax --cols 768,1000 --rows 1,4096 --dtypes bf16
"""

import argparse
import random
import os
import sys

DTYPES = {"bf16": ("BFloat16", "torch.bfloat16"), "f16": ("Half", "torch.float16"), "f32": ("Float", "torch.float32")}
COLS = [768, 1000, 1536, 2048, 2560, 3072, 3200, 4096, 5120, 6144, 8192, 11008, 14336, 16384]
ROWS = [1, 8, 256, 2048, 32768]
SWEEP_COLS = [768, 1000, 2048, 3072, 3200, 4096, 5120, 8192, 11008, 16384]  # the sweep's row lengths
LAYOUTS = ["rowmajor", "colmajor", "sliced", "broadcast", "nchw", "nhwc"]
VOCAB_COLS = {"cross_entropy": [32064, 128256], "softmax": [32064]}  # rows as long as a vocabulary, in the sweep
VOCAB = 32064  # embedding table rows (phi-3's vocabulary, one of nvFuser's embedding configs)
DROPOUT_P = 0.1


def descriptor(shape, strides):
    """nvFuser's computeTensorDescriptor: contiguity in allocation order and the stride order. Dims of
    stride 0 or extent 1 are broadcasts (contiguity None); the others are ordered by decreasing stride."""
    n = len(shape)
    dims = sorted((i for i in range(n) if strides[i] != 0), key=lambda i: -strides[i])
    for i in (i for i in range(n) if strides[i] == 0):
        dims.insert(min(i, len(dims)), i)
    bcast = lambda d: strides[d] == 0 or shape[d] == 1
    contiguity, order = [None] * n, [0] * n
    for pos, d in enumerate(dims):
        order[d] = n - 1 - pos
        if not bcast(d):
            inner = next((e for e in dims[pos + 1:] if not bcast(e)), None)
            contiguity[pos] = strides[d] == (1 if inner is None else strides[inner] * shape[inner])
    return contiguity, order


def dense(shape):
    strides, s = [], 1
    for e in reversed(shape):
        strides.insert(0, s)
        s *= e
    return strides


class Fusion:
    """One script being written: its inputs (the define_tensor line and the torch call that makes
    each), its ops (in Float for half dtypes) and its outputs (cast back, unless kept in Float)."""

    def __init__(self, dt, layout):
        self.nv, self.torch_dt = DTYPES[dt]
        self.half = dt != "f32"
        self.layout = layout
        self.defs, self.ops, self.casts, self.makes, self.outs = [], [], [], [], []
        self.n = 0

    def input(self, shape, strides=None, kind="data", low=None, high=None, cast=True):
        """A tensor input; kind: data (the sweep's dtype), float (Float statistics), ids (Int in [0, high)).
        Returns the value the ops use: data inputs of half dtypes are cast to Float first, unless not cast."""
        name = f"t{self.n}"
        self.n += 1
        strides = strides or dense(shape)
        contiguity, order = descriptor(shape, strides)
        nv, tdt = {"data": (self.nv, self.torch_dt), "float": ("Float", "torch.float32"), "ids": ("Int", "torch.int64"),
                   "e4m3": ("Float8_e4m3fn", "torch.float8_e4m3fn"), "offs": ("Int32", "torch.int32")}[kind]
        so = "" if order == list(range(len(shape) - 1, -1, -1)) else f", stride_order={order}"
        self.defs.append(f"{name} = fd.define_tensor(shape={list(shape)}, contiguity={contiguity}, dtype=DataType.{nv}, is_cpu=False{so})")
        size = "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
        if kind == "ids":
            self.makes.append(f"torch.randint(0, {high}, {size}, dtype={tdt}, device='cuda:0')")
        elif strides == dense(shape):
            bounds = "" if low is None else f", low={low}, high={high}"
            self.makes.append(f"torch.testing.make_tensor({size}, dtype={tdt}, device='cuda:0'{bounds})")
        else:
            storage = 1 + sum((e - 1) * s for e, s in zip(shape, strides))
            self.makes.append(f"torch.randn({storage}, dtype={tdt}, device='cuda:0').as_strided({size}, {tuple(strides)})")
        if kind == "data" and self.half and cast:
            self.casts.append(f"f{name[1:]} = fd.ops.cast({name}, dtype=DataType.Float)")
            return f"f{name[1:]}"
        return name

    def main(self, r, c, first=True):
        """A [rows, cols] input in the script's layout (broadcast applies to the first one only)."""
        strides = {"rowmajor": None, "colmajor": [1, r], "sliced": [2 * c, 1],
                   "broadcast": [0, 1] if first else None}[self.layout]
        return self.input([r, c], strides)

    def op(self, *lines):
        self.ops.extend(lines)

    def out(self, v, keep_float=False):
        if self.half and not keep_float:
            o = f"o{len(self.outs)}"
            self.op(f"{o} = fd.ops.cast({v}, dtype=DataType.{self.nv})")
            v = o
        self.outs.append(v)

    def text(self):
        body = "\n".join("    " + l for l in self.defs + self.casts + self.ops + [f"fd.add_output({o})" for o in self.outs])
        args = "\n".join(f"    {m}," for m in self.makes)
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


# The bodies. Each takes the Fusion, rows and cols; values are named by what they hold.

def gelu_ops(f, v, y="y"):  # tanh approximation, as nvFuser's benchmark writes it
    f.op(f"g1 = fd.ops.mul({v}, {v})", f"g2 = fd.ops.mul(g1, {v})", "g3 = fd.ops.mul(g2, 0.044715)",
         f"g4 = fd.ops.add({v}, g3)", "g5 = fd.ops.mul(g4, 0.7978845608)", "g6 = fd.ops.tanh(g5)",
         "g7 = fd.ops.add(g6, 1.0)", f"g8 = fd.ops.mul({v}, 0.5)", f"{y} = fd.ops.mul(g8, g7)")


def gelu(f, r, c):
    gelu_ops(f, f.main(r, c))
    f.out("y")


def gelu_bwd(f, r, c):
    """Gradient of gelu(x + bias) (tanh form): g * d/dz [z/2 (1 + tanh(k (z + 0.044715 z^3)))]."""
    x, g, b = f.main(r, c), f.main(r, c, first=False), f.input([c])
    f.op(f"bb = fd.ops.broadcast_in_dim({b}, shape=[{r}, {c}], broadcast_dims=[1])", f"z = fd.ops.add({x}, bb)",
         "z2 = fd.ops.mul(z, z)", "z3 = fd.ops.mul(z2, z)", "u1 = fd.ops.mul(z3, 0.044715)", "u2 = fd.ops.add(z, u1)",
         "u = fd.ops.mul(u2, 0.7978845608)", "th = fd.ops.tanh(u)",
         "h1 = fd.ops.add(th, 1.0)", "half_1pth = fd.ops.mul(h1, 0.5)",
         "th2 = fd.ops.mul(th, th)", "nth2 = fd.ops.neg(th2)", "sech2 = fd.ops.add(nth2, 1.0)",
         "du1 = fd.ops.mul(z2, 0.134145)", "du2 = fd.ops.add(du1, 1.0)", "du = fd.ops.mul(du2, 0.7978845608)",
         "zh = fd.ops.mul(z, 0.5)", "k1 = fd.ops.mul(zh, sech2)", "k2 = fd.ops.mul(k1, du)",
         "dy = fd.ops.add(half_1pth, k2)", f"gx = fd.ops.mul({g}, dy)")
    f.out("gx")


def gelu_bwd_bias(f, r, c):
    """gelu_bwd's gradient and the bias's, its sum over the rows (nvFuser's gelu_bwd_reduction benchmark): the
    backward of a linear layer's bias + GELU, two outputs over the same rows."""
    gelu_bwd(f, r, c)
    f.op("gb = fd.ops.sum(gx, dims=[0])")
    f.out("gb")


def silu_mul(f, r, c):
    a, b = f.main(r, c), f.main(r, c, first=False)
    f.op(f"s = fd.ops.silu({a})", f"y = fd.ops.mul(s, {b})")
    f.out("y")


def silu_mul_bwd(f, r, c):
    """y = silu(a) * b: grad_a = g b sig(a) (1 + a (1 - sig(a))), grad_b = g silu(a)."""
    g, a, b = f.main(r, c), f.main(r, c, first=False), f.main(r, c, first=False)
    f.op(f"na = fd.ops.neg({a})", "en = fd.ops.exp(na)", "d1 = fd.ops.add(en, 1.0)", "sg = fd.ops.reciprocal(d1)",
         f"sa = fd.ops.mul({a}, sg)", f"gb = fd.ops.mul({g}, sa)",
         "nsg = fd.ops.neg(sg)", "omsg = fd.ops.add(nsg, 1.0)", f"t1 = fd.ops.mul({a}, omsg)", "t2 = fd.ops.add(t1, 1.0)",
         "ds = fd.ops.mul(sg, t2)", f"gs = fd.ops.mul({g}, {b})", "ga = fd.ops.mul(gs, ds)")
    f.out("ga")
    f.out("gb")


def add_bias(f, r, c):
    x, w = f.main(r, c), f.input([c])
    f.op(f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", f"y = fd.ops.add({x}, wb)")
    f.out("y")


def scale_shift(f, r, c):
    """Pointwise with both broadcast operands as tensors: x * s[rows, 1] + b[1, cols]."""
    x, s, b = f.main(r, c), f.input([r, 1]), f.input([1, c])
    f.op(f"sb = fd.ops.expand({s}, shape=[{r}, {c}])", f"bb = fd.ops.expand({b}, shape=[{r}, {c}])",
         f"xs = fd.ops.mul({x}, sb)", "y = fd.ops.add(xs, bb)")
    f.out("y")


def rmsnorm(f, r, c):
    x, w = f.main(r, c), f.input([c])
    f.op(f"q = fd.ops.mul({x}, {x})", "ss = fd.ops.sum(q, dims=[1], keepdim=True)",
         f"ms = fd.ops.mul(ss, {1.0 / c!r})", "me = fd.ops.add(ms, 1e-06)", "rs = fd.ops.rsqrt(me)",
         f"rb = fd.ops.expand(rs, shape=[{r}, {c}])", f"n = fd.ops.mul({x}, rb)",
         f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", "y = fd.ops.mul(n, wb)")
    f.out("y")
    f.out("rs", keep_float=True)


def rmsnorm_bwd(f, r, c):
    """From x, grad_out, the forward's rsqrt(mean(x^2) + eps) and the weight: grad_in = rs (gw - xh mean(gw xh))
    with xh = x rs, gw = grad_out w (a row sum), and grad_weight = sum over rows of grad_out xh (a column sum)."""
    x, g, rs, w = f.main(r, c), f.main(r, c, first=False), f.input([r, 1], kind="float", low=0.5, high=2.0), f.input([c])
    f.op(f"rb = fd.ops.expand({rs}, shape=[{r}, {c}])", f"xh = fd.ops.mul({x}, rb)",
         f"gxh = fd.ops.mul({g}, xh)", "gwt = fd.ops.sum(gxh, dims=[0])",
         f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", f"gw = fd.ops.mul({g}, wb)",
         "p = fd.ops.mul(gw, xh)", "ps = fd.ops.sum(p, dims=[1], keepdim=True)", f"pm = fd.ops.mul(ps, {1.0 / c!r})",
         f"pmb = fd.ops.expand(pm, shape=[{r}, {c}])", "t = fd.ops.mul(xh, pmb)", "d = fd.ops.sub(gw, t)",
         "gx = fd.ops.mul(d, rb)")
    f.out("gx")
    f.out("gwt")


def layernorm(f, r, c):
    x, w = f.main(r, c), f.input([c])
    f.op(f"var, mean = fd.ops.var_mean({x}, dims=[1], correction=0, keepdim=True)",
         "ve = fd.ops.add(var, 1e-05)", "rs = fd.ops.rsqrt(ve)",
         f"mb = fd.ops.expand(mean, shape=[{r}, {c}])", f"d = fd.ops.sub({x}, mb)",
         f"rb = fd.ops.expand(rs, shape=[{r}, {c}])", "n = fd.ops.mul(d, rb)",
         f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", "y = fd.ops.mul(n, wb)")
    f.out("y")
    f.out("mean", keep_float=True)
    f.out("rs", keep_float=True)


def layernorm_bwd(f, r, c):
    """From x, grad_out, the forward's mean and rsqrt(var + eps), and the weight: with xh = (x - mean) rs and
    gw = grad_out w, grad_in = rs (gw - mean(gw) - xh mean(gw xh)) (two row sums); grad_weight and grad_bias
    are column sums of grad_out xh and grad_out."""
    x, g = f.main(r, c), f.main(r, c, first=False)
    mean, rs = f.input([r, 1], kind="float"), f.input([r, 1], kind="float", low=0.5, high=2.0)
    w = f.input([c])
    f.op(f"mb = fd.ops.expand({mean}, shape=[{r}, {c}])", f"rb = fd.ops.expand({rs}, shape=[{r}, {c}])",
         f"d = fd.ops.sub({x}, mb)", "xh = fd.ops.mul(d, rb)",
         f"gb = fd.ops.sum({g}, dims=[0])", f"gxh = fd.ops.mul({g}, xh)", "gwt = fd.ops.sum(gxh, dims=[0])",
         f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", f"gw = fd.ops.mul({g}, wb)",
         "s1 = fd.ops.sum(gw, dims=[1], keepdim=True)", f"m1 = fd.ops.mul(s1, {1.0 / c!r})",
         "p = fd.ops.mul(gw, xh)", "s2 = fd.ops.sum(p, dims=[1], keepdim=True)", f"m2 = fd.ops.mul(s2, {1.0 / c!r})",
         f"m1b = fd.ops.expand(m1, shape=[{r}, {c}])", f"m2b = fd.ops.expand(m2, shape=[{r}, {c}])",
         "e1 = fd.ops.sub(gw, m1b)", "e2 = fd.ops.mul(xh, m2b)", "e = fd.ops.sub(e1, e2)", "gx = fd.ops.mul(e, rb)")
    f.out("gx")
    f.out("gwt")
    f.out("gb")


def softmax(f, r, c):
    x = f.main(r, c)
    f.op(f"m = fd.ops.max({x}, dims=[1], keepdim=True)", f"mb = fd.ops.expand(m, shape=[{r}, {c}])",
         f"d = fd.ops.sub({x}, mb)", "e = fd.ops.exp(d)", "s = fd.ops.sum(e, dims=[1], keepdim=True)",
         f"sb = fd.ops.expand(s, shape=[{r}, {c}])", "y = fd.ops.div(e, sb)")
    f.out("y")


def softmax_bwd(f, r, c):
    """From the forward's output y and grad_out: grad_in = y (grad_out - sum(grad_out y)) over each row."""
    y, g = f.main(r, c), f.main(r, c, first=False)
    f.op(f"p = fd.ops.mul({y}, {g})", "s = fd.ops.sum(p, dims=[1], keepdim=True)",
         f"sb = fd.ops.expand(s, shape=[{r}, {c}])", f"d = fd.ops.sub({g}, sb)", f"gx = fd.ops.mul({y}, d)")
    f.out("gx")


def cross_entropy(f, r, c):
    """Mean over rows of logsumexp(logits) - logits[target], the max / sum / log form; ids in range."""
    x, ids = f.main(r, c), f.input([r], kind="ids", high=c)
    f.op(f"m = fd.ops.max({x}, dims=[1], keepdim=True)", f"mb = fd.ops.expand(m, shape=[{r}, {c}])",
         f"d = fd.ops.sub({x}, mb)", "e = fd.ops.exp(d)", "s = fd.ops.sum(e, dims=[1], keepdim=True)",
         "ls = fd.ops.log(s)", "lse = fd.ops.add(ls, m)",
         f"ib = fd.ops.broadcast_in_dim({ids}, shape=[{r}, 1], broadcast_dims=[0])",
         f"picked = fd.ops.take_along_axis({x}, ib, dim=1)", "nll = fd.ops.sub(lse, picked)",
         "tot = fd.ops.sum(nll, dims=[0, 1])", f"loss = fd.ops.mul(tot, {1.0 / r!r})")
    f.out("loss", keep_float=True)


def logsumexp(f, r, c):
    """log(sum(exp(x - max))) + max of each row, the max / sum / log form: the statistic a fused
    cross-entropy or attention keeps for its backward; one Float per row."""
    x = f.main(r, c)
    f.op(f"m = fd.ops.max({x}, dims=[1], keepdim=True)", f"mb = fd.ops.expand(m, shape=[{r}, {c}])",
         f"d = fd.ops.sub({x}, mb)", "e = fd.ops.exp(d)", "s = fd.ops.sum(e, dims=[1], keepdim=True)",
         "ls = fd.ops.log(s)", "lse = fd.ops.add(ls, m)", f"o = fd.ops.reshape(lse, new_shape=[{r}])")
    f.out("o", keep_float=True)


def dropout_residual_norm(f, r, c):
    """layernorm(residual + dropout(x)) with weight and bias; the mask is uniform(0, 1) < 1 - p, as nvFuser's
    benchmark draws it. Outputs: the normalized rows, mean, rsqrt(var + eps) and the mask."""
    x, res, w, b = f.main(r, c), f.main(r, c, first=False), f.input([c]), f.input([c])
    f.op("lo = fd.define_scalar(0.0, dtype=DataType.Double)", "hi = fd.define_scalar(1.0, dtype=DataType.Double)",
         f"u = fd.ops.uniform(lo, hi, shape=[{r}, {c}], dtype=DataType.Float)", f"keep = fd.ops.lt(u, {1 - DROPOUT_P!r})",
         "km = fd.ops.cast(keep, dtype=DataType.Float)", f"xk = fd.ops.mul({x}, km)",
         f"xd = fd.ops.mul(xk, {1 / (1 - DROPOUT_P)!r})", f"h = fd.ops.add({res}, xd)",
         "var, mean = fd.ops.var_mean(h, dims=[1], correction=0, keepdim=True)",
         "ve = fd.ops.add(var, 1e-05)", "rs = fd.ops.rsqrt(ve)",
         f"mb = fd.ops.expand(mean, shape=[{r}, {c}])", "d = fd.ops.sub(h, mb)",
         f"rb = fd.ops.expand(rs, shape=[{r}, {c}])", "n = fd.ops.mul(d, rb)",
         f"wb = fd.ops.broadcast_in_dim({w}, shape=[{r}, {c}], broadcast_dims=[1])", "nw = fd.ops.mul(n, wb)",
         f"bb = fd.ops.broadcast_in_dim({b}, shape=[{r}, {c}], broadcast_dims=[1])", "y = fd.ops.add(nw, bb)")
    f.out("y")
    f.out("mean", keep_float=True)
    f.out("rs", keep_float=True)
    f.out("keep", keep_float=True)


def rope(f, r, c):
    """Rotary embedding as Thunder emits litgpt's for a fused qkv [tokens, 3 * cols] (one query per kv
    group): view as [tokens, heads, 3, head], permute to [heads, 3, tokens, head], slice out q, k and v;
    q and k become q cos + rotate_half(q) sin with cos, sin [tokens, head]; v is returned as the view it is."""
    hs = 128 if c % 128 == 0 else 64
    h = c // hs
    qkv = f.input([r, 3 * c], cast=False)
    cos, sin = f.input([r, hs]), f.input([r, hs])
    f.op(f"v4 = fd.ops.reshape({qkv}, new_shape=[{r}, {h}, 3, {hs}])", "p = fd.ops.permute(v4, dims=[1, 2, 0, 3])")
    for k, name in enumerate("qkv"):
        f.op(f"{name}s = fd.ops.slice(p, start_indices=[0, {k}, 0, 0], end_indices=[{h}, {k + 1}, {r}, {hs}])",
             f"{name} = fd.ops.reshape({name}s, new_shape=[{h}, {r}, {hs}])")
    f.op(f"cb = fd.ops.broadcast_in_dim({cos}, shape=[{h}, {r}, {hs}], broadcast_dims=[1, 2])",
         f"sb = fd.ops.broadcast_in_dim({sin}, shape=[{h}, {r}, {hs}], broadcast_dims=[1, 2])")
    for name in "qk":
        v = name
        if f.half:
            v = f"{name}f"
            f.op(f"{v} = fd.ops.cast({name}, dtype=DataType.Float)")
        f.op(f"{name}1 = fd.ops.slice({v}, start_indices=[0, 0, 0], end_indices=[{h}, {r}, {hs // 2}])",
             f"{name}2 = fd.ops.slice({v}, start_indices=[0, 0, {hs // 2}], end_indices=[{h}, {r}, {hs}])",
             f"{name}2n = fd.ops.neg({name}2)", f"{name}rot = fd.ops.cat([{name}2n, {name}1], dim=-1)",
             f"{name}c = fd.ops.mul({v}, cb)", f"{name}r = fd.ops.mul({name}rot, sb)",
             f"{name}o = fd.ops.add({name}c, {name}r)")
        f.out(f"{name}o")
    f.outs.append("v")  # the view of the input, in its own dtype


def rope_fits(c):
    """the row length must be a whole number of 64- or 128-wide heads"""
    return c % 64 == 0


def transpose(f, r, c):
    """rowmajor: relu of the permuted input, written [cols, rows] row-major. colmajor: relu of the
    column-major input written row-major (the layout changes, the logical shape does not)."""
    x, y = f.main(r, c), "y"
    if f.layout == "rowmajor":
        f.op(f"xt = fd.ops.permute({x}, dims=[1, 0])", "y = fd.ops.relu(xt)")
    else:
        f.op(f"y = fd.ops.relu({x})")
    if f.half:
        f.op(f"yc = fd.ops.cast(y, dtype=DataType.{f.nv})")
        y = "yc"
    f.op(f"yr = fd.ops.stride_order({y}, stride_order=[1, 0])")
    f.outs.append("yr")


def embedding(f, r, c, vocab=VOCAB):
    """Rows of a [vocab, cols] table picked by r ids in range (embedding_fwd, as Thunder emits it for nvFuser)."""
    ids, table = f.input([r], kind="ids", high=vocab), f.input([vocab, c], cast=False)  # a gather: no compute
    f.op(f"y = fd.ops.embedding_fwd({ids}, {table})")
    f.outs.append("y")


def reduction(dims):
    def body(f, r, c):
        f.op(f"y = fd.ops.sum({f.main(r, c)}, dims={dims})")
        f.out("y")
    return body


PW, NORM, RED = ["rowmajor", "colmajor", "sliced", "broadcast"], ["rowmajor", "colmajor", "sliced"], ["rowmajor", "colmajor", "sliced", "broadcast"]
# name: (body, layouts it is swept over; the first is the main one)
PATTERNS = {
    "gelu": (gelu, PW),
    "gelu_bwd": (gelu_bwd, PW),
    "gelu_bwd_bias": (gelu_bwd_bias, ["rowmajor", "sliced"]),
    "silu_mul": (silu_mul, PW),
    "silu_mul_bwd": (silu_mul_bwd, ["rowmajor", "colmajor", "sliced"]),
    "add_bias": (add_bias, PW),
    "scale_shift": (scale_shift, ["rowmajor", "colmajor"]),
    "rmsnorm": (rmsnorm, NORM),
    "rmsnorm_bwd": (rmsnorm_bwd, NORM),
    "layernorm": (layernorm, NORM),
    "layernorm_bwd": (layernorm_bwd, ["rowmajor", "sliced"]),
    "softmax": (softmax, NORM),
    "softmax_bwd": (softmax_bwd, ["rowmajor", "sliced"]),
    "cross_entropy": (cross_entropy, ["rowmajor", "sliced"]),
    "logsumexp": (logsumexp, NORM),
    "dropout_residual_norm": (dropout_residual_norm, ["rowmajor"]),
    "rope": (rope, ["rowmajor"]),
    "transpose": (transpose, ["rowmajor", "colmajor"]),
    "embedding": (embedding, ["rowmajor"]),
    "sum_inner": (reduction([1]), RED),
    "sum_outer": (reduction([0]), RED),
    "sum_all": (reduction([0, 1]), ["rowmajor", "colmajor"]),
}


# Matrix products (issue 17), apart from the patterns above: the GPU engine has no kernel for them yet, so they
# are drawn only when named (--only, or --family gemm), never into the default sweep or a --sample of it. Their
# inputs stay in the script's dtype (a product of bf16 tensors, as Thunder gives nvFuser with nv_enable_linear),
# and what follows the product computes in Float. ROWS x COLS: tokens x the hidden size; the weight is
# [COLS, COLS]. Layouts are the weight's: rowmajor is [out, in] contiguous as a torch Linear holds it,
# colmajor the same values stored [in, out] (its transpose contiguous).
def gemm_weight(f, c):
    return f.input([c, c], [1, c] if f.layout == "colmajor" else None, cast=False)


def linear(f, r, c):
    x, w, b = f.input([r, c], cast=False), gemm_weight(f, c), f.input([c], cast=False)
    f.op(f"y = fd.ops.linear({x}, {w}, {b})")
    f.outs.append("y")


def linear_gelu(f, r, c):
    """gelu(x w^T + b), the product in the dtype and the GELU in Float (an MLP's first half)."""
    x, w, b = f.input([r, c], cast=False), gemm_weight(f, c), f.input([c], cast=False)
    f.op(f"l = fd.ops.linear({x}, {w}, {b})")
    v = "l"
    if f.half:
        f.op("lf = fd.ops.cast(l, dtype=DataType.Float)")
        v = "lf"
    gelu_ops(f, v)
    f.out("y")


def matmul(f, r, c):
    a, b = f.input([r, c], cast=False), gemm_weight(f, c)
    f.op(f"y = fd.ops.matmul({a}, {b})")
    f.outs.append("y")


def scaled_mm(f, r, c, rowwise=False):
    """An FP8 product as torch._scaled_mm takes it: x [r, c] row-major times the transpose of a weight [c, c]
    held [out, in] (a view with k contiguous), e4m3 both, Float scales (one each, or one per row and per
    column), D in the dtype."""
    x = f.input([r, c], kind="e4m3", cast=False)
    w = f.input([c, c], kind="e4m3", cast=False)
    sx = f.input([r, 1] if rowwise else [], kind="float")
    sw = f.input([1, c] if rowwise else [], kind="float")
    f.op(f"wt = fd.ops.permute({w}, dims=[1, 0])")
    f.op(f"y, _, _ = fd.ops.scaled_mm({x}, wt, {sx}, {sw}, dtype=DataType.{f.nv})")
    f.outs.append("y")


def grouped_mm(f, r, c, groups=8):
    """An MoE layer's expert products: r tokens sorted by expert [r, c] times each expert's weight.
    colmajor: the weight held [groups, c, c] as [out, in] and read transposed (k contiguous, as
    torch._grouped_mm takes a linear's weight); rowmajor: held [groups, in, out] and read as it lies (n
    contiguous, as MoE layers that keep their experts' weights as one [experts, in, out] parameter hold
    them). The offsets are drawn by whoever runs the script (bench/peers.py: an even split; fusebench: a
    random one)."""
    x, w, o = f.input([r, c], cast=False), f.input([groups, c, c], cast=False), f.input([groups], kind="offs")
    if f.layout == "rowmajor":
        f.op(f"y = fd.ops.grouped_mm({x}, {w}, {o})")
    else:
        f.op(f"wt = fd.ops.permute({w}, dims=[0, 2, 1])")
        f.op(f"y = fd.ops.grouped_mm({x}, wt, {o})")
    f.outs.append("y")


def grouped_mm_k(f, r, c, groups=8):
    """The experts' weight gradients: x^T [c, r] times dy [r, c], the groups cutting the r tokens (k).
    colmajor: both held with the tokens contiguous (k contiguous in both operands); rowmajor: x [r, c] and
    dy [r, c] as the forward and autograd hold them, x^T a view (the tokens strided in both operands)."""
    if f.layout == "rowmajor":
        x, dy = f.input([r, c], cast=False), f.input([r, c], cast=False)
        o = f.input([groups], kind="offs")
        f.op(f"xt = fd.ops.permute({x}, dims=[1, 0])")
        f.op(f"y = fd.ops.grouped_mm(xt, {dy}, {o})")
    else:
        xt, dy = f.input([c, r], cast=False), f.input([c, r], cast=False)
        o = f.input([groups], kind="offs")
        f.op(f"dyt = fd.ops.permute({dy}, dims=[1, 0])")
        f.op(f"y = fd.ops.grouped_mm({xt}, dyt, {o})")
    f.outs.append("y")


GEMM_PATTERNS = {
    "linear": (linear, ["rowmajor", "colmajor"]),
    "linear_gelu": (linear_gelu, ["rowmajor", "colmajor"]),
    "matmul": (matmul, ["rowmajor", "colmajor"]),
    # The weight is always read k contiguous, as torch._scaled_mm takes it (a transposed view).
    "scaled_mm": (scaled_mm, ["colmajor"]),
    "scaled_mm_rowwise": (lambda f, r, c: scaled_mm(f, r, c, rowwise=True), ["colmajor"]),
    "grouped_mm": (grouped_mm, ["colmajor", "rowmajor"]),
    "grouped_mm_k": (grouped_mm_k, ["colmajor", "rowmajor"]),
}


def scan(kind):
    """An inclusive scan along the rows (cumsum, cummax), as a sampling step's cumulative probabilities."""
    def body(f, r, c):
        f.op(f"y = fd.ops.{kind}({f.main(r, c)}, dim=1)")
        f.out("y")
    return body


# Scans (the scan schedules: a thread or a block per line), drawn only when named (--family scans).
SCAN_PATTERNS = {
    "cumsum": (scan("cumsum"), ["rowmajor", "colmajor"]),
    "cummax": (scan("cummax"), ["rowmajor"]),
}
# Norms over channels (nvFuser's batchnorm, instancenorm and groupnorm benchmarks), drawn only when named
# (--family channels): [N, C, H, W] activations, the statistics over every dim but the channel (batchnorm),
# over each image's planes (instancenorm) or over each image's groups of channels (groupnorm). Their
# ROWS x COLS is N x CxHxW (batchnorm-bf16-8x64x56x56-nhwc.py); layouts: nchw (contiguous) or nhwc (the
# same logical dims stored channels last, as a torch channels_last tensor lies).
CHANNEL_SHAPES = [(64, 56, 56), (128, 28, 28), (256, 14, 14), (512, 7, 7), (320, 64, 64), (640, 32, 32),
                  (1280, 16, 16), (96, 35, 35)]
CHANNEL_BATCHES = [2, 8, 32]


def chw(c):
    """(C, H, W) of a channels case's COLS, "CxHxW"."""
    return tuple(int(x) for x in str(c).split("x"))


def image(f, n, c, first=True):
    """An [N, C, H, W] input in the script's layout."""
    cc, h, w = chw(c)
    strides = [h * w * cc, 1, w * cc, cc] if f.layout == "nhwc" else None
    return f.input([n, cc, h, w], strides), [n, cc, h, w]


def per_channel(shape, v, name, dims=(1,)):
    return f"{name} = fd.ops.broadcast_in_dim({v}, shape={shape}, broadcast_dims={list(dims)})"


def groups_of(c):
    """The groups of a groupnorm over c channels: the largest power of two up to 32 that divides c."""
    g = 1
    while g < 32 and c % (2 * g) == 0:
        g *= 2
    return g


def batchnorm(f, n, c):
    """Training-mode batch norm: statistics over N, H and W; outputs y, the mean, rsqrt(var + eps) and the
    running mean and variance updated with momentum 0.1 (the variance unbiased, as torch keeps it)."""
    x, s = image(f, n, c)
    w, b = f.input([s[1]]), f.input([s[1]])
    rm, rv = f.input([s[1]], kind="float"), f.input([s[1]], kind="float", low=0.5, high=2.0)
    m = s[0] * s[2] * s[3]
    f.op(f"var, mean = fd.ops.var_mean({x}, dims=[0, 2, 3], correction=0, keepdim=False)",
         "ve = fd.ops.add(var, 1e-05)", "rs = fd.ops.rsqrt(ve)",
         per_channel(s, "mean", "mb"), f"d = fd.ops.sub({x}, mb)", per_channel(s, "rs", "rb"), "xn = fd.ops.mul(d, rb)",
         per_channel(s, w, "wb"), "xw = fd.ops.mul(xn, wb)", per_channel(s, b, "bb"), "y = fd.ops.add(xw, bb)",
         f"rm0 = fd.ops.mul({rm}, 0.9)", "rm1 = fd.ops.mul(mean, 0.1)", "rmn = fd.ops.add(rm0, rm1)",
         f"rv0 = fd.ops.mul({rv}, 0.9)", f"rv1 = fd.ops.mul(var, {0.1 * m / max(m - 1, 1)!r})", "rvn = fd.ops.add(rv0, rv1)")
    f.out("y")
    for v in ["mean", "rs", "rmn", "rvn"]:
        f.out(v, keep_float=True)


def norm_bwd(f, n, c, dims):
    """A batch or instance norm's backward from x, grad_out, the weight and the forward's mean and
    rsqrt(var + eps) (over `dims`): with xh = (x - mean) rs, grad_in = w rs (g - mean(g) - xh mean(g xh));
    grad_weight and grad_bias sum g xh and g over every dim but the channel."""
    x, s = image(f, n, c)
    g, _ = image(f, n, c, first=False)
    kept = [d for d in range(4) if d not in dims]
    stat = [s[d] for d in kept]
    w = f.input([s[1]])
    mean, rs = f.input(stat, kind="float"), f.input(stat, kind="float", low=0.5, high=2.0)
    m = 1
    for d in dims:
        m *= s[d]
    f.op(per_channel(s, mean, "mb", kept), per_channel(s, rs, "rb", kept), f"d = fd.ops.sub({x}, mb)", "xh = fd.ops.mul(d, rb)",
         f"gs = fd.ops.sum({g}, dims={dims}, keepdim=False)", f"gx = fd.ops.mul({g}, xh)",
         f"gxs = fd.ops.sum(gx, dims={dims}, keepdim=False)", f"m1 = fd.ops.mul(gs, {1.0 / m!r})",
         f"m2 = fd.ops.mul(gxs, {1.0 / m!r})", per_channel(s, "m1", "m1b", kept), per_channel(s, "m2", "m2b", kept),
         f"e1 = fd.ops.sub({g}, m1b)", "e2 = fd.ops.mul(xh, m2b)", "e = fd.ops.sub(e1, e2)",
         per_channel(s, w, "wb"), "sc = fd.ops.mul(wb, rb)", "gi = fd.ops.mul(e, sc)")
    if 0 in dims:
        gw, gb = "gxs", "gs"
    else:
        f.op("gw = fd.ops.sum(gxs, dims=[0], keepdim=False)", "gb = fd.ops.sum(gs, dims=[0], keepdim=False)")
        gw, gb = "gw", "gb"
    f.out("gi")
    f.out(gw)
    f.out(gb)


def instancenorm(f, n, c):
    """Instance norm: statistics over each image's planes (H, W); outputs y, the mean and rsqrt(var + eps)."""
    x, s = image(f, n, c)
    w, b = f.input([s[1]]), f.input([s[1]])
    f.op(f"var, mean = fd.ops.var_mean({x}, dims=[2, 3], correction=0, keepdim=False)",
         "ve = fd.ops.add(var, 1e-05)", "rs = fd.ops.rsqrt(ve)",
         per_channel(s, "mean", "mb", (0, 1)), f"d = fd.ops.sub({x}, mb)", per_channel(s, "rs", "rb", (0, 1)),
         "xn = fd.ops.mul(d, rb)", per_channel(s, w, "wb"), "xw = fd.ops.mul(xn, wb)", per_channel(s, b, "bb"),
         "y = fd.ops.add(xw, bb)")
    f.out("y")
    f.out("mean", keep_float=True)
    f.out("rs", keep_float=True)


def groupnorm(f, n, c):
    """Group norm: each image's channels cut into groups (groups_of), statistics over a group's channels and
    planes through a reshape to [N, G, C / G, H, W] and back; outputs y."""
    x, s = image(f, n, c)
    g = groups_of(s[1])
    s5 = [s[0], g, s[1] // g, s[2], s[3]]
    w, b = f.input([s[1]]), f.input([s[1]])
    f.op(f"x5 = fd.ops.reshape({x}, new_shape={s5})",
         "var, mean = fd.ops.var_mean(x5, dims=[2, 3, 4], correction=0, keepdim=False)",
         "ve = fd.ops.add(var, 1e-05)", "rs = fd.ops.rsqrt(ve)",
         per_channel(s5, "mean", "mb", (0, 1)), "d = fd.ops.sub(x5, mb)", per_channel(s5, "rs", "rb", (0, 1)),
         "xn = fd.ops.mul(d, rb)", f"w2 = fd.ops.reshape({w}, new_shape=[{g}, {s[1] // g}])",
         f"b2 = fd.ops.reshape({b}, new_shape=[{g}, {s[1] // g}])", per_channel(s5, "w2", "wb", (1, 2)),
         "xw = fd.ops.mul(xn, wb)", per_channel(s5, "b2", "bb", (1, 2)), "y5 = fd.ops.add(xw, bb)",
         f"y = fd.ops.reshape(y5, new_shape={s})")
    f.out("y")


CHANNEL_PATTERNS = {
    "batchnorm": (batchnorm, ["nchw", "nhwc"]),
    "batchnorm_bwd": (lambda f, n, c: norm_bwd(f, n, c, [0, 2, 3]), ["nchw", "nhwc"]),
    "instancenorm": (instancenorm, ["nchw", "nhwc"]),
    "instancenorm_bwd": (lambda f, n, c: norm_bwd(f, n, c, [2, 3]), ["nchw", "nhwc"]),
    "groupnorm": (groupnorm, ["nchw", "nhwc"]),
}
FAMILIES = {"schedules": list(PATTERNS), "gemm": list(GEMM_PATTERNS), "scans": list(SCAN_PATTERNS),
            "channels": list(CHANNEL_PATTERNS)}
PATTERNS = {**PATTERNS, **GEMM_PATTERNS, **SCAN_PATTERNS, **CHANNEL_PATTERNS}
FITS = {"rope": rope_fits}  # patterns that take only some row lengths (left out elsewhere, said on stderr)


def script(name, dt, r, c, layout, vocab=VOCAB):
    f = Fusion(dt, layout)
    if name == "embedding":
        embedding(f, r, c, vocab)
    else:
        PATTERNS[name][0](f, r, c)
    return f.text()


def grid(kind, names, dtypes):
    """(name, dtype, rows, cols, layout) of the grid, without repeats, in a stable order."""
    seen, out = set(), []

    def add(n, dt, r, c, lay):
        if (n, dt, r, c, lay) not in seen and FITS.get(n, lambda c: True)(c) and dt in dtypes:
            seen.add((n, dt, r, c, lay))
            out.append((n, dt, r, c, lay))

    for n in names:
        lays = PATTERNS[n][1]
        if n in CHANNEL_PATTERNS:
            channel_grid(kind, n, lays, add)
        elif kind == "small":
            for lay in lays:
                for dt in DTYPES:
                    for r in [1, 33]:
                        for c in ([128, 256] if n == "rope" else [7, 1000]):
                            add(n, dt, r, c, lay)
        elif kind == "full":
            for lay in lays:
                for dt in DTYPES:
                    for r in ROWS:
                        for c in COLS:
                            add(n, dt, r, c, lay)
        else:
            for c in SWEEP_COLS:
                add(n, "bf16", 2048, c, lays[0])
            for lay in lays[1:]:
                for c in [1000, 4096, 16384]:
                    add(n, "bf16", 2048, c, lay)
            for r in ROWS:
                add(n, "bf16", r, 4096, lays[0])
            for dt in ["f16", "f32"]:
                add(n, dt, 2048, 4096, lays[0])
            for c in VOCAB_COLS.get(n, []):
                add(n, "bf16", 2048, c, lays[0])
    return out


def channel_grid(kind, n, lays, add):
    """The channels family's grid: N x CxHxW (see CHANNEL_SHAPES)."""
    cs = ["x".join(map(str, t)) for t in CHANNEL_SHAPES]
    if kind == "small":
        for lay in lays:
            for dt in DTYPES:
                for b in [1, 3]:
                    for c in ["3x5x7", "64x3x3"]:
                        add(n, dt, b, c, lay)
    elif kind == "full":
        for lay in lays:
            for dt in DTYPES:
                for b in CHANNEL_BATCHES:
                    for c in cs:
                        add(n, dt, b, c, lay)
    else:
        for c in cs:
            add(n, "bf16", 8, c, lays[0])
        for lay in lays[1:]:
            for c in cs[::3]:
                add(n, "bf16", 8, c, lay)
        for b in CHANNEL_BATCHES:
            add(n, "bf16", b, "256x14x14", lays[0])
        for dt in ["f16", "f32"]:
            add(n, dt, 8, "128x28x28", lays[0])


def sample(cases, n, seed):
    """n of `cases`, the patterns taken in turn (each its cases shuffled by `seed`) until n are drawn or none is
    left, so that every pattern gets its share whatever the size of its own product; in the grid's order."""
    rng = random.Random(seed)
    per = {}
    for c in cases:
        per.setdefault(c[0], []).append(c)
    for v in per.values():
        rng.shuffle(v)
    kept = set()
    while len(kept) < n and any(per.values()):
        for v in per.values():
            if v and len(kept) < n:
                kept.add(v.pop())
    return [c for c in cases if c in kept]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--grid", choices=["small", "sweep", "full"], default="sweep", help="which grid (see the module doc)")
    p.add_argument("--small", action="store_true", help="the same as --grid small")
    p.add_argument("--only", help="patterns, comma-separated (default: the family's)")
    p.add_argument("--family", choices=list(FAMILIES), default="schedules",
                   help="schedules (default): the fused-kernel patterns; gemm: the matrix products of issue 17; "
                   "scans: cumsum and cummax along the rows; channels: batch, instance and group norms of "
                   "[N, C, H, W] images (ROWS x COLS is N x CxHxW)")
    p.add_argument("--cols", help="row lengths, comma-separated: with --rows, or alone (then the grid's row counts), "
                   "their product over the patterns, their layouts and the dtypes replaces the grid")
    p.add_argument("--rows", help="row counts, comma-separated (alone: with the grid's row lengths)")
    p.add_argument("--dtypes", help="of bf16,f16,f32")
    p.add_argument("--layouts", help=f"of {','.join(LAYOUTS)} (default: each pattern's own)")
    p.add_argument("--sample", type=int, help="keep N of the cases, drawn at random and spread evenly over the "
                   "patterns: a fresh set of shapes to measure on, not the grid the engine was tuned on")
    p.add_argument("--seed", type=int, default=0, help="the --sample draw's seed (the same seed, the same set)")
    a = p.parse_args()
    kind = "small" if a.small else a.grid
    dtypes = a.dtypes.split(",") if a.dtypes else list(DTYPES)
    names = a.only.split(",") if a.only else FAMILIES[a.family]
    for n in names:
        if n not in PATTERNS:
            p.error(f"unknown pattern {n!r}; the patterns are {', '.join(PATTERNS)}")
    for d in dtypes:
        if d not in DTYPES:
            p.error(f"unknown dtype {d!r}; the dtypes are {', '.join(DTYPES)}")
    layouts = a.layouts.split(",") if a.layouts else None
    for l in layouts or []:
        if l not in LAYOUTS:
            p.error(f"unknown layout {l!r}; the layouts are {', '.join(LAYOUTS)}")
    cases = grid(kind, names, dtypes)
    if a.cols or a.rows:  # an explicit product, over the grid's patterns, dtypes and layouts
        ints = lambda s: [int(x) for x in s.split(",")]
        cols = a.cols.split(",") if a.cols else sorted({str(c) for _, _, _, c, _ in cases}, key=lambda c: [int(x) for x in c.split("x")])
        rows = ints(a.rows) if a.rows else sorted({r for _, _, r, _, _ in cases})

        def col(n, c):  # a row length, or for the channels family CxHxW
            ok = len(c.split("x")) == 3 if n in CHANNEL_PATTERNS else c.isdigit()
            if not all(x.isdigit() for x in c.split("x")) or not ok:
                p.error(f"--cols {c!r} for {n}: expected " + ("CxHxW" if n in CHANNEL_PATTERNS else "an integer"))
            return c if n in CHANNEL_PATTERNS else int(c)
        cases = [(n, dt, r, col(n, c), lay) for n in names for lay in PATTERNS[n][1] for dt in dtypes
                 for r in rows for c in cols if FITS.get(n, lambda c: True)(col(n, c))]
        for n in names:
            left = [col(n, c) for c in cols if not FITS.get(n, lambda c: True)(col(n, c))]
            if left:
                print(f"{n}: row lengths {left} left out ({FITS[n].__doc__})", file=sys.stderr)
    if layouts:
        cases = [x for x in cases if x[4] in layouts]
    if a.sample is not None:
        cases = sample(cases, a.sample, a.seed)
    vocab = 97 if kind == "small" else VOCAB
    os.makedirs(a.dir, exist_ok=True)
    for n, dt, r, c, lay in cases:
        with open(os.path.join(a.dir, f"{n}-{dt}-{r}x{c}-{lay}.py"), "w") as f:
            f.write(script(n, dt, r, c, lay, vocab))
    print(f"wrote {len(cases)} scripts to {a.dir}")


if __name__ == "__main__":
    main()
