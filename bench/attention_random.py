"""Random small flash-attention fusions for checking the GPU against the CPU reference (issue 17: "random
attention fusions, shapes incl. odd and small, every supported dtype and layout, match the CPU reference").

    python3 bench/attention_random.py DIR [--count 120] [--seed 29]
    fusebench check --device gpu DIR        # on the GPU machine

Each script draws: batch 1-3 and heads 1-4; 1 to 300 queries and keys (equal where causal); head dims from 8 to
256 in steps of 8, the value's the same or another; bf16 or f16; the scale left to its default, given, or
negative; q, k and v contiguous, or sliced from one [batch, seq, 3, heads, dim] projection and permuted (read
in place at their strides), or (forward only) keys and values shared by the heads (broadcast); and in about
half the scripts the backward of the forward too, with a gradient input, its gradients returned as they are
or cast to Float. Needs neither torch nor a GPU to write.
"""
import argparse
import os
import random

DTYPES = {"bf16": ("BFloat16", "torch.bfloat16"), "f16": ("Half", "torch.float16")}


def define(name, shape, nv_dt):
    contiguity = [None if e == 1 else True for e in shape]
    return f"    {name} = fd.define_tensor(shape={shape}, contiguity={contiguity}, dtype=DataType.{nv_dt}, is_cpu=False)"


def make(shape, torch_dt):
    return f"    torch.testing.make_tensor({tuple(shape)}, dtype={torch_dt}, device=\"cuda:0\", low=-1, high=1),"


def one(rng):
    """(file-name stem, script text) of one random attention fusion."""
    b, h = rng.randint(1, 3), rng.randint(1, 4)
    causal = rng.random() < 0.4
    length = rng.randint(1, 300)
    keys = length if causal else rng.randint(1, 300)
    e = 8 * rng.randint(1, 32)
    ev = e if rng.random() < 0.6 else 8 * rng.randint(1, 32)
    dt = rng.choice(sorted(DTYPES))
    nv_dt, torch_dt = DTYPES[dt]
    backward = rng.random() < 0.5
    layouts = ["dense", "projection"] + ([] if backward else ["shared_kv"])
    layout = rng.choice(layouts)
    if layout == "projection" and (e != ev or keys != length):
        layout = "dense"  # one projection holds q, k and v of one length and head dim
    scale = rng.choice([None, None, round(rng.uniform(0.02, 0.5), 4), -round(rng.uniform(0.02, 0.3), 4)])
    lines, inputs = [], []
    if layout == "projection":
        proj = [b, length, 3, h, e]
        lines.append(define("qkv", proj, nv_dt))
        inputs.append(make(proj, torch_dt))
        for i, n in enumerate("qkv"):
            lines.append(f"    {n}s = fd.ops.slice(qkv, start_indices=[0, 0, {i}, 0, 0], end_indices=[{b}, {length}, {i + 1}, {h}, {e}], strides=[1, 1, 1, 1, 1])")
            lines.append(f"    {n}r = fd.ops.squeeze({n}s, dims=[2])")
            lines.append(f"    {n} = fd.ops.permute({n}r, dims=[0, 2, 1, 3])")
    else:
        kv_heads = 1 if layout == "shared_kv" else h
        for n, shape in (("q", [b, h, length, e]), ("k", [b, kv_heads, keys, e]), ("v", [b, kv_heads, keys, ev])):
            lines.append(define(n, shape, nv_dt))
            inputs.append(make(shape, torch_dt))
    args = f"dropout_p=0.0, is_causal={causal}" + (f", scale={scale}" if scale is not None else "")
    lines.append(f"    o, lse, seed, off = fd.ops.sdpfa_fwd(q, k, v, {args})")
    outs = ["o", "lse"]
    if backward:
        lines.append(define("g", [b, h, length, ev], nv_dt))
        inputs.append(make([b, h, length, ev], torch_dt))
        lines.append(f"    dq, dk, dv = fd.ops.sdpfa_bwd(g, q, k, v, o, lse, {args}, philox_seed=seed, philox_offset=off"
                     + ("" if scale is not None else ", scale=None") + ")")
        outs = ["o", "dq", "dk", "dv"]
        if rng.random() < 0.3:
            lines.append("    dqf = fd.ops.cast(dq, dtype=DataType.Float)")
            outs[1] = "dqf"
    stem = (f"attn_{'fwdbwd' if backward else 'fwd'}_b{b}h{h}_l{length}s{keys}_e{e}v{ev}{'_causal' if causal else ''}"
            f"_{layout}_{dt}")
    comment = f"# random attention ({'forward and backward' if backward else 'forward'}), {layout}, scale {scale}"
    return stem, script_text(comment, lines, outs, inputs)


def script_text(comment, lines, outs, inputs):
    """A repro script in nvFuser's direct syntax: the fusion's lines, its outputs and its inputs."""
    text = [comment, "import torch", "from nvfuser_direct import FusionDefinition, DataType", "",
            "def nvfuser_fusion(fd : FusionDefinition) -> None :", *lines, *[f"    fd.add_output({o})" for o in outs],
            "", "with FusionDefinition() as fd:", "    nvfuser_fusion(fd)", "", "inputs = [", *inputs, "]",
            "fd.execute(inputs)", ""]
    return "\n".join(text)


def write_scripts(one, doc, seed):
    """The command line of a random-script writer: DIR, --count and --seed; `one(rng)` gives each (stem, text)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--count", type=int, default=120)
    ap.add_argument("--seed", type=int, default=seed)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.dir, exist_ok=True)
    for i in range(a.count):
        stem, text = one(rng)
        with open(os.path.join(a.dir, f"{i:03d}_{stem}.py"), "w") as f:
            f.write(text)
    print(f"{a.count} scripts in {a.dir}")


if __name__ == "__main__":
    write_scripts(one, __doc__, 29)
