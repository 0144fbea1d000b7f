"""Flash-attention forward and backward (nvFuser's `fd.ops.sdpfa_fwd`, `fd.ops.sdpfa_bwd`) on LLM shapes:
fusebench's own engine against nvFuser, PyTorch's SDPA backends one at a time and (forward) torch.compile.

Write the repro scripts (needs neither torch nor a GPU):

    python3 bench/attention.py write bench/attention            # the set in the repository
    python3 bench/attention.py write bench/attention-bwd --backward
    python3 bench/attention.py write /tmp/attn-small --small    # seq / 64, batch 1, 2 heads
    target/debug/fusebench check --device cpu /tmp/attn-small   # the CPU reference on them

Time them on the GPU machine:

    source .peer/activate.sh && pip install --no-deps .gpu/fusebench-*.whl
    python3 bench/attention.py time bench/attention [--json attention.json] [--only attn_fwd_h128_,...] [--check]
    python3 bench/attention.py time bench/attention-bwd [--json attention-bwd.json] [--check]

The shapes are the FlashAttention-2 paper's: 16k tokens (batch = 16384 / seq) and hidden 2048 (heads =
2048 / head_dim), q, k, v [batch, heads, seq, head_dim] contiguous, outputs the attention and the
log-sum-exp. Every peer runs on the script's own tensors and is timed with `fusebench.kernel_time` under
one policy (cold L2, CUPTI kernel time, median until its 95% interval is within +-1%), as bench/peers.py
times its peers. PyTorch runs `F.scaled_dot_product_attention` under `sdpa_kernel` for FLASH_ATTENTION,
EFFICIENT_ATTENTION and CUDNN_ATTENTION separately (one that refuses the shape is shown as refused) and
torch.compile of the same call with every backend allowed; "best" is the fastest of those four. Ratios
above 1 mean fusebench is faster. --check compares fusebench's outputs with PyTorch's flash kernel's
(`aten._scaled_dot_product_flash_attention`, the kernel nvFuser's evaluator runs).

The backward scripts are the backward alone, as Thunder's backward fusions are: inputs g (the output's
gradient), q, k, v, the forward's output o and log-sum-exp lse, its philox seed and offset; outputs dq, dk,
dv. `time` knows them by their sdpfa_bwd call and replaces the script's o and lse by PyTorch's flash
forward of its q, k, v, so that every peer differentiates the same attention. PyTorch times
`torch.autograd.grad` of one SDPA call made outside the timing (only the backward's kernels count); there
is no torch.compile column. FLOPs are 2.5 times the forward's; --check compares dq, dk, dv with
`aten._scaled_dot_product_flash_attention_backward` on the very o and lse fusebench was given.
"""
import argparse
import json
import math
import os
import re
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # torch-free until peers.import_peers(): the write mode needs no torch

TOKENS, HIDDEN = 16384, 2048
DTYPES = {"bf16": ("BFloat16", "torch.bfloat16"), "f16": ("Half", "torch.float16")}


def cases(backward=False):
    """(head_dim, seq, causal, dtype, scale); scale None leaves nvFuser's default, 1/sqrt(head_dim)."""
    if backward:
        return [(d, s, c, "bf16", None) for d in (64, 128) for s in (1024, 4096) for c in (True, False)]
    out = [(d, s, c, "bf16", None) for d in (64, 128) for s in (1024, 2048, 4096, 8192) for c in (True, False)]
    out += [(128, 2048, c, "f16", None) for c in (True, False)]
    # Two explicit scales other than the default, so the argument is read and not assumed: 0.125 is
    # 1/sqrt(64) on head_dim 128; 0.1 is no power of two at all.
    out += [(128, 2048, True, "bf16", 0.125), (64, 4096, False, "bf16", 0.1)]
    return out


def file_name(d, seq, causal, dt, scale, backward=False):
    return f"attn_{'bwd' if backward else 'fwd'}_h{d}_s{seq}{'_causal' if causal else ''}{'_scale' if scale else ''}_{dt}.py"


def script(d, seq, causal, dt, scale, small, backward=False):
    if small:  # a CPU reference on the full shapes takes hours; this keeps every flag and head_dim
        b, h, s = 1, 2, seq // 64
    else:
        b, h, s = TOKENS // seq, HIDDEN // d, seq
    shape = [b, h, s, d]
    nv_dt, torch_dt = DTYPES[dt]

    def define(n, shape, nv_dt):
        # nvFuser marks dims of extent 1 as of no contiguity (None), as its recorded scripts do.
        contiguity = [None if e == 1 else True for e in shape]
        return f"    {n} = fd.define_tensor(shape={shape}, contiguity={contiguity}, dtype=DataType.{nv_dt}, is_cpu=False)"

    def make(shape, torch_dt, low, high):
        return f"    torch.testing.make_tensor({tuple(shape)}, dtype={torch_dt}, device=\"cuda:0\", low={low}, high={high}),"

    what = f"{'causal' if causal else 'non-causal'}, scale {scale if scale else f'1/sqrt({d}) (default)'}: "
    args = f"dropout_p=0.0, is_causal={causal}"
    if backward:
        tensors = "gqkvo"  # g: the gradient of the forward's output o
        head = (f"# flash-attention backward (sdpfa_bwd) alone, {what}g, q, k, v, o {shape} {dt}, the forward's "
                f"log-sum-exp lse {shape[:3]} f32, philox seed and offset as inputs; outputs dq, dk, dv")
        # nvFuser's binding of sdpfa_bwd has no default for scale: None asks for 1/sqrt(d).
        call = [f"    dq, dk, dv = fd.ops.sdpfa_bwd(g, q, k, v, o, lse, {args}, philox_seed=seed, philox_offset=off, "
                f"scale={scale if scale else None})"]
        outs = ("dq", "dk", "dv")
    else:
        tensors = "qkv"
        head = f"# flash-attention forward (sdpfa_fwd), {what}q, k, v {shape} {dt}; outputs the attention and its log-sum-exp"
        call = [f"    o, lse, seed, offset = fd.ops.sdpfa_fwd(q, k, v, {args}{f', scale={scale}' if scale else ''})"]
        outs = ("o", "lse")
    lines = [head,
             "import torch",
             "from nvfuser_direct import FusionDefinition, DataType",
             "",
             "def nvfuser_fusion(fd : FusionDefinition) -> None :"]
    lines += [define(n, shape, nv_dt) for n in tensors]
    if backward:
        lines += [define("lse", shape[:3], "Float"), define("seed", [2], "UInt64"), define("off", [], "UInt64")]
    lines += call + [f"    fd.add_output({o})" for o in outs]
    lines += ["",
              "with FusionDefinition() as fd:",
              "    nvfuser_fusion(fd)",
              "",
              "inputs = ["]
    lines += [make(shape, torch_dt, -1, 1)] * len(tensors)
    if backward:  # time replaces o and lse by the flash forward of q, k, v; dropout 0 reads no seed
        lines += [make(shape[:3], "torch.float32", 2, 4), make([2], "torch.uint64", 0, 10), make([], "torch.uint64", 0, 10)]
    lines += ["]", "fd.execute(inputs)", ""]
    return "\n".join(lines)


def write(out_dir, small, backward):
    os.makedirs(out_dir, exist_ok=True)
    for c in cases(backward):
        with open(os.path.join(out_dir, file_name(*c, backward)), "w") as f:
            f.write(script(*c, small, backward))
    print(f"{len(cases(backward))} scripts in {out_dir}")


def attention_args(path):
    """(backward, is_causal, scale): whether the script calls sdpfa_bwd, and the flags of that call (else
    of its sdpfa_fwd call), nvFuser's defaults where not given."""
    text = open(path).read()
    backward = "sdpfa_bwd(" in text
    call = re.search(r"sdpfa_bwd\((.*)\)" if backward else r"sdpfa_fwd\((.*)\)", text).group(1)
    causal = re.search(r"is_causal=(\w+)", call)
    scale = re.search(r"scale=([-+.\deE]+)", call)
    return backward, (causal is not None and causal.group(1) == "True"), (float(scale.group(1)) if scale else None)


def backend_refusal(torch, fn, backend, sdpa_kernel):
    """None where the backend runs the call, else why not (PyTorch's warnings give the reasons)."""
    with warnings.catch_warnings(record=True) as caught, sdpa_kernel(backend):
        warnings.simplefilter("always")
        try:
            fn()
            torch.cuda.synchronize()
            return None
        except RuntimeError as e:
            # PyTorch warns once per failed requirement before it raises "No available kernel".
            return "; ".join(" ".join(str(m).split()) for m in [w.message for w in caught] + [e])


def compare(torch, got, want, dtype, of_max=False):
    """Max abs difference, and the elements beyond 2 ulps of the inputs' dtype relative plus a tenth
    of that absolute (the log-sum-exp is f32 but computed from the same 16-bit inputs); of_max: that
    tenth times the reference's max magnitude (gradients are sums over a sequence, far from 1)."""
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {list(got.shape)} vs {list(want.shape)}"
    rtol = 2 * torch.finfo(dtype).eps
    g, w = got.float(), want.float()
    diff = (g - w).abs()
    top = float(w.abs().max()) if of_max else 1.0
    beyond = int((diff > rtol * w.abs() + 0.1 * rtol * top).sum())
    return (f"max abs diff {float(diff.max()):.3e}, {beyond} of {w.numel()} beyond tolerance"
            f"{f' (reference max {top:.3e})' if of_max else ''}")


def flash_reference(torch, xs, causal, scale, backward):
    """PyTorch's flash kernels (those nvFuser's evaluator runs) on fusebench's inputs xs: the forward's
    attention and log-sum-exp, or the backward's dq, dk, dv from the o and lse in xs (its other
    arguments, the forward's sequence bookkeeping, from a flash forward of the same q, k, v)."""
    q, k, v = xs[1:4] if backward else xs
    fwd = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
    if not backward:
        return fwd[:2]
    g, o, lse = xs[0], xs[4], xs[5]
    cum_q, cum_k, max_q, max_k, seed, off = fwd[2:8]
    return torch.ops.aten._scaled_dot_product_flash_attention_backward(
        g, q, k, v, o, lse, cum_q, cum_k, max_q, max_k, 0.0, causal, seed, off, scale=scale)


def median(row, peer):
    return row[peer]["summary"]["median"] if isinstance(row.get(peer), dict) and "summary" in row[peer] else None


BACKENDS = ("flash", "efficient", "cudnn", "compile")  # the backward's table has no compile column


def print_table(rows, device, backends=BACKENDS, title=""):
    print(f"{title}kernel time, µs (median under fusebench.kernel_time, cold L2, CUPTI); {device}")
    print("| fusion | fusebench | nvFuser | " + " | ".join(backends) +
          " | best | best / fusebench | nvFuser / fusebench | fusebench TFLOP/s |")
    print("| --- |" + " --- |" * (len(backends) + 6))
    best_r, nv_r = [], []
    for r in rows:
        fb, nv = median(r, "fusebench"), median(r, "nvfuser")
        cells = [f"{fb:.1f}" if fb else "–", f"{nv:.1f}" if nv else "–"]
        for p in backends:
            cells.append("refused" if p in r.get("refused", {}) else f"{median(r, p):.1f}" if median(r, p) else "–")
        times = [(median(r, p), p) for p in backends if median(r, p)]
        best = min(times) if times else None
        cells.append(best[1] if best else "–")
        if best and fb:
            best_r.append(best[0] / fb)
        if nv and fb:
            nv_r.append(nv / fb)
        cells.append(f"{best[0] / fb:.2f}" if best and fb else "–")
        cells.append(f"{nv / fb:.2f}" if nv and fb else "–")
        cells.append(f"{r['flops'] / fb / 1e6:.0f}" if fb else "–")
        print(f"| {r['file']} | " + " | ".join(cells) + " |")
    print(f"\ngeometric mean best PyTorch / fusebench over {len(best_r)} fusions: {peers.geomean(best_r):.3f}")
    print(f"geometric mean nvFuser / fusebench over {len(nv_r)} fusions: {peers.geomean(nv_r):.3f}")
    for r in rows:
        for p, why in r.get("refused", {}).items():
            print(f"{r['file']}: {p} refused: {why}")
        for out, text in r.get("check", {}).items():
            print(f"{r['file']}: check {out}: {text}")


def time_all(a):
    peers.import_peers()
    torch, fusebench, timed = peers.torch, peers.fusebench, peers.timed
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.set_grad_enabled(False)  # the inputs need no grad; this keeps autograd out of every call but the backward's
    only = a.only.split(",") if a.only else None
    rows = []
    for path in peers.scripts(a.paths):
        name = os.path.basename(path)
        if only and not any(name.startswith(p) for p in only):
            continue
        print(name, file=sys.stderr)
        try:
            fd, inputs = peers.script_parts(path)
            backward, causal, scale = attention_args(path)
            if backward:  # g, q, k, v, o, lse, seed, offset: o and lse those of q, k, v, not noise
                if len(inputs) != 8:
                    raise ValueError(f"{len(inputs)} inputs: the backward alone takes g, q, k, v, o, lse, seed, offset")
                g, q, k, v = inputs[:4]
                fwd = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
                inputs[4], inputs[5] = fwd[0].contiguous(), fwd[1].contiguous()  # flash's o is [b, L, h, d] transposed
            else:
                q, k, v = inputs
        except Exception as e:
            print(f"  script: FAILED: {e}", file=sys.stderr)
            continue
        b, h, L, d = q.shape
        S = k.shape[2]
        # The backward's FLOPs: 2.5 times the forward's (five products of the forward's two's size).
        row = {"file": name, "flops": (10 if backward else 4) * b * h * L * S * d // (2 if causal else 1), "refused": {}}
        if backward:
            row["backward"] = True
        kw = {"name": name, "max_time": a.max_time}
        row["nvfuser"] = timed("nvFuser", fd.execute, inputs, **kw)
        try:
            f = fusebench.load(path)
            try:
                f(*inputs)  # the very tensors nvFuser ran on, through DLPack
                args = inputs
            except ValueError as e:
                print(f"  fusebench: its own inputs ({e})", file=sys.stderr)
                args = []
            # No ceiling=True as peers.py asks: attention is bound by its math, not by a copy of its bytes.
            row["fusebench"] = timed("fusebench", f, *args, bytes=f.bytes, **kw)
            if a.check:
                f(*args)
                got = [torch.from_dlpack(o).clone() for o in f.outputs()]  # valid only until the next call
                xs = args or [torch.from_dlpack(i) for i in f.inputs()]
                want = flash_reference(torch, xs, causal, scale, backward)
                names = ("dq", "dk", "dv") if backward else ("attention", "lse")
                row["check"] = {out: compare(torch, x, w, q.dtype, backward) for out, x, w in zip(names, got, want)}
                print(f"  check: {row['check']}", file=sys.stderr)
        except Exception as e:
            print(f"  fusebench: FAILED: {e}", file=sys.stderr)

        def sdpa(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        def peer():
            """(fn, *args) to time under the backend in force: the SDPA call, or the gradients of one
            SDPA call made here, outside the timing (its graph retained for every call)."""
            if not backward:
                return sdpa, q, k, v
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            out = sdpa(*leaves)
            return (lambda: torch.autograd.grad(out, leaves, g, retain_graph=True),)

        def once():
            fn, *args = peer()
            fn(*args)

        for p, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                           ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            with torch.set_grad_enabled(backward):  # grad mode is per thread: kernel_time calls from this one
                why = backend_refusal(torch, once, backend, sdpa_kernel)
                if why:
                    print(f"  {p}: refused: {why}", file=sys.stderr)
                    row["refused"][p] = why
                    continue
                with sdpa_kernel(backend):  # sets the global backend flags for every call kernel_time makes
                    row[p] = timed(p, *peer(), **kw)
        if not backward:
            # Each fusion's sdpa shares one code object: without a reset, dynamo stops recompiling after its
            # cache limit and silently runs eager (as peers.py notes).
            torch._dynamo.reset()
            row["compile"] = timed("torch.compile", torch.compile(sdpa, dynamic=False), q, k, v, **kw)
        rows.append(peers.as_json(row))
        if a.json:  # rewritten after each fusion, so a cut-short run keeps what it measured
            with open(a.json, "w") as out:
                json.dump(rows, out)
    fwd_rows, bwd_rows = [r for r in rows if not r.get("backward")], [r for r in rows if r.get("backward")]
    if fwd_rows or not bwd_rows:
        print_table(fwd_rows, torch.cuda.get_device_name())
    if bwd_rows:
        if fwd_rows:
            print()
        print_table(bwd_rows, torch.cuda.get_device_name(), BACKENDS[:3], "flash-attention backward (sdpfa_bwd): ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    w = sub.add_parser("write", help="write the repro scripts into DIR")
    w.add_argument("dir")
    w.add_argument("--small", action="store_true", help="seq / 64, batch 1, 2 heads: for CPU checks")
    w.add_argument("--backward", action="store_true", help="the sdpfa_bwd set (attn_bwd_*) instead of the forward's")
    t = sub.add_parser("time", help="time every script of DIR (or the files given) on the GPU")
    t.add_argument("paths", nargs="+")
    t.add_argument("--json", default=None, help="every row with the full kernel_time records")
    t.add_argument("--only", default="", help="comma-separated file-name prefixes")
    t.add_argument("--max-time", type=float, default=1.0)
    t.add_argument("--check", action="store_true", help="compare fusebench's outputs with PyTorch's flash kernels")
    a = ap.parse_args()
    if a.mode == "write":
        write(a.dir, a.small, a.backward)
    else:
        time_all(a)


if __name__ == "__main__":
    main()
