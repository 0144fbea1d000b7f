"""Flash-attention forward (nvFuser's `fd.ops.sdpfa_fwd`) on LLM shapes: fusebench's own engine against
nvFuser, PyTorch's SDPA backends one at a time and torch.compile of the SDPA call.

Write the repro scripts (needs neither torch nor a GPU):

    python3 bench/attention.py write bench/attention            # the set in the repository
    python3 bench/attention.py write /tmp/attn-small --small    # seq / 64, batch 1, 2 heads
    target/debug/fusebench check --device cpu /tmp/attn-small   # the CPU reference on them

Time them on the GPU machine:

    source .peer/activate.sh && pip install --no-deps .gpu/fusebench-*.whl
    python3 bench/attention.py time bench/attention [--json attention.json] [--only attn_fwd_h128_,...] [--check]

The shapes are the FlashAttention-2 paper's: 16k tokens (batch = 16384 / seq) and hidden 2048 (heads =
2048 / head_dim), q, k, v [batch, heads, seq, head_dim] contiguous, outputs the attention and the
log-sum-exp. Every peer runs on the script's own tensors and is timed with `fusebench.kernel_time` under
one policy (cold L2, CUPTI kernel time, median until its 95% interval is within +-1%), as bench/peers.py
times its peers. PyTorch runs `F.scaled_dot_product_attention` under `sdpa_kernel` for FLASH_ATTENTION,
EFFICIENT_ATTENTION and CUDNN_ATTENTION separately (one that refuses the shape is shown as refused) and
torch.compile of the same call with every backend allowed; "best" is the fastest of those four. Ratios
above 1 mean fusebench is faster. --check compares fusebench's outputs with PyTorch's flash kernel's
(`aten._scaled_dot_product_flash_attention`, the kernel nvFuser's evaluator runs).
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


def cases():
    """(head_dim, seq, causal, dtype, scale); scale None leaves nvFuser's default, 1/sqrt(head_dim)."""
    out = [(d, s, c, "bf16", None) for d in (64, 128) for s in (1024, 2048, 4096, 8192) for c in (True, False)]
    out += [(128, 2048, c, "f16", None) for c in (True, False)]
    # Two explicit scales other than the default, so the argument is read and not assumed: 0.125 is
    # 1/sqrt(64) on head_dim 128; 0.1 is no power of two at all.
    out += [(128, 2048, True, "bf16", 0.125), (64, 4096, False, "bf16", 0.1)]
    return out


def file_name(d, seq, causal, dt, scale):
    return f"attn_fwd_h{d}_s{seq}{'_causal' if causal else ''}{'_scale' if scale else ''}_{dt}.py"


def script(d, seq, causal, dt, scale, small):
    if small:  # a CPU reference on the full shapes takes hours; this keeps every flag and head_dim
        b, h, s = 1, 2, seq // 64
    else:
        b, h, s = TOKENS // seq, HIDDEN // d, seq
    shape = [b, h, s, d]
    nv_dt, torch_dt = DTYPES[dt]
    # nvFuser marks dims of extent 1 as of no contiguity (None), as its recorded scripts do.
    contiguity = [None if e == 1 else True for e in shape]
    what = (f"{'causal' if causal else 'non-causal'}, scale {scale if scale else f'1/sqrt({d}) (default)'}: "
            f"q, k, v {shape} {dt}")
    lines = [f"# flash-attention forward (sdpfa_fwd), {what}; outputs the attention and its log-sum-exp",
             "import torch",
             "from nvfuser_direct import FusionDefinition, DataType",
             "",
             "def nvfuser_fusion(fd : FusionDefinition) -> None :"]
    for n in "qkv":
        lines.append(f"    {n} = fd.define_tensor(shape={shape}, contiguity={contiguity}, "
                     f"dtype=DataType.{nv_dt}, is_cpu=False)")
    lines += [f"    o, lse, seed, offset = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal={causal}"
              f"{f', scale={scale}' if scale else ''})",
              "    fd.add_output(o)",
              "    fd.add_output(lse)",
              "",
              "with FusionDefinition() as fd:",
              "    nvfuser_fusion(fd)",
              "",
              "inputs = ["]
    lines += [f"    torch.testing.make_tensor({tuple(shape)}, dtype={torch_dt}, device=\"cuda:0\", low=-1, high=1),"] * 3
    lines += ["]", "fd.execute(inputs)", ""]
    return "\n".join(lines)


def write(out_dir, small):
    os.makedirs(out_dir, exist_ok=True)
    for c in cases():
        with open(os.path.join(out_dir, file_name(*c)), "w") as f:
            f.write(script(*c, small))
    print(f"{len(cases())} scripts in {out_dir}")


def attention_args(path):
    """(is_causal, scale) of the script's sdpfa_fwd call: nvFuser's defaults where not given."""
    call = re.search(r"sdpfa_fwd\((.*)\)", open(path).read()).group(1)
    causal = re.search(r"is_causal=(\w+)", call)
    scale = re.search(r"scale=([-+.\deE]+)", call)
    return (causal is not None and causal.group(1) == "True"), (float(scale.group(1)) if scale else None)


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


def compare(torch, got, want, dtype):
    """Max abs difference, and the elements beyond 2 ulps of the inputs' dtype relative plus a tenth
    of that absolute (the log-sum-exp is f32 but computed from the same 16-bit inputs)."""
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {list(got.shape)} vs {list(want.shape)}"
    rtol = 2 * torch.finfo(dtype).eps
    g, w = got.float(), want.float()
    diff = (g - w).abs()
    beyond = int((diff > rtol * w.abs() + 0.1 * rtol).sum())
    return f"max abs diff {float(diff.max()):.3e}, {beyond} of {w.numel()} beyond tolerance"


def median(row, peer):
    return row[peer]["summary"]["median"] if isinstance(row.get(peer), dict) and "summary" in row[peer] else None


BACKENDS = ("flash", "efficient", "cudnn", "compile")


def print_table(rows, device):
    print(f"kernel time, µs (median under fusebench.kernel_time, cold L2, CUPTI); {device}")
    print("| fusion | fusebench | nvFuser | " + " | ".join(BACKENDS) +
          " | best | best / fusebench | nvFuser / fusebench | fusebench TFLOP/s |")
    print("| --- |" + " --- |" * (len(BACKENDS) + 6))
    best_r, nv_r = [], []
    for r in rows:
        fb, nv = median(r, "fusebench"), median(r, "nvfuser")
        cells = [f"{fb:.1f}" if fb else "–", f"{nv:.1f}" if nv else "–"]
        for p in BACKENDS:
            cells.append("refused" if p in r.get("refused", {}) else f"{median(r, p):.1f}" if median(r, p) else "–")
        times = [(median(r, p), p) for p in BACKENDS if median(r, p)]
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

    torch.set_grad_enabled(False)  # the inputs need no grad; this keeps autograd out of every call
    only = a.only.split(",") if a.only else None
    rows = []
    for path in peers.scripts(a.paths):
        name = os.path.basename(path)
        if only and not any(name.startswith(p) for p in only):
            continue
        print(name, file=sys.stderr)
        try:
            fd, inputs = peers.script_parts(path)
            causal, scale = attention_args(path)
        except Exception as e:
            print(f"  script: FAILED: {e}", file=sys.stderr)
            continue
        q, k, v = inputs
        b, h, L, d = q.shape
        S = k.shape[2]
        row = {"file": name, "flops": 4 * b * h * L * S * d // (2 if causal else 1), "refused": {}}
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
                qkv = args or [torch.from_dlpack(i) for i in f.inputs()]
                want = torch.ops.aten._scaled_dot_product_flash_attention(*qkv, 0.0, causal, False, scale=scale)
                row["check"] = {out: compare(torch, g, w, q.dtype) for out, g, w in zip(("attention", "lse"), got, want[:2])}
                print(f"  check: {row['check']}", file=sys.stderr)
        except Exception as e:
            print(f"  fusebench: FAILED: {e}", file=sys.stderr)

        def sdpa(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        for p, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                           ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            why = backend_refusal(torch, lambda: sdpa(q, k, v), backend, sdpa_kernel)
            if why:
                print(f"  {p}: refused: {why}", file=sys.stderr)
                row["refused"][p] = why
                continue
            with sdpa_kernel(backend):  # sets the global backend flags for every call kernel_time makes
                row[p] = timed(p, sdpa, q, k, v, **kw)
        # Each fusion's sdpa shares one code object: without a reset, dynamo stops recompiling after its
        # cache limit and silently runs eager (as peers.py notes).
        torch._dynamo.reset()
        row["compile"] = timed("torch.compile", torch.compile(sdpa, dynamic=False), q, k, v, **kw)
        rows.append(peers.as_json(row))
        if a.json:  # rewritten after each fusion, so a cut-short run keeps what it measured
            with open(a.json, "w") as out:
                json.dump(rows, out)
    print_table(rows, torch.cuda.get_device_name())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    w = sub.add_parser("write", help="write the repro scripts into DIR")
    w.add_argument("dir")
    w.add_argument("--small", action="store_true", help="seq / 64, batch 1, 2 heads: for CPU checks")
    t = sub.add_parser("time", help="time every script of DIR (or the files given) on the GPU")
    t.add_argument("paths", nargs="+")
    t.add_argument("--json", default=None, help="every row with the full kernel_time records")
    t.add_argument("--only", default="", help="comma-separated file-name prefixes")
    t.add_argument("--max-time", type=float, default=1.0)
    t.add_argument("--check", action="store_true", help="compare fusebench's outputs with PyTorch's flash kernel")
    a = ap.parse_args()
    if a.mode == "write":
        write(a.dir, a.small)
    else:
        time_all(a)


if __name__ == "__main__":
    main()
