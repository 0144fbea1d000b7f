"""Golden cases for the ops only nvFuser's legacy frontend has, recorded from PyTorch.

`add_alpha`, `sub_alpha`, `batch_norm` and `index_put_accumulate` exist in the legacy `nvfuser` module
only; nvFuser 0.2.36 ships `nvfuser_direct`, which has none of them, so `bench/record_goldens.py` cannot
record them from nvFuser. This script writes, for each, a legacy-syntax repro script and the outputs of
the PyTorch function nvFuser's op stands for (torch.add/sub with alpha, torch.nn.functional.batch_norm
with its running-stat update, Tensor.index_put_ with accumulate=True), in the format of the per-op
golden cases (crates/reference/tests/fixtures/golden-ops/README.md): CASE.py, CASE.safetensors (`in<i>`,
`out<k>`, `post_in<i>`) and one manifest line per case with `"reference": "torch"`.

Run on the GPU machine (PyTorch there; the outputs are CUDA's):
    python3 bench/record_torch_goldens.py --out $OUT/torch-goldens
then copy the files into the golden-ops folder and append the manifest lines to its manifest.json.
"""

import argparse
import json
import os

import torch
from record_goldens import NV_NAME, save_safetensors, tname  # the nvFuser cases' names and file format


def spec(t):
    return {"shape": list(t.shape), "stride": list(t.stride()), "dtype": tname(t.dtype)}


def define(name, t):
    contig = ", ".join("True" for _ in t.shape)
    return (f"    {name} = fd.define_tensor(shape={list(t.shape)}, contiguity=[{contig}], "
            f"dtype=DataType.{NV_NAME[t.dtype]}, is_cpu=False)")


def script(inputs, body, outputs):
    lines = ["import torch", "from nvfuser import FusionDefinition, DataType",
             "def nvfuser_fusion_id0(fd : FusionDefinition) -> None :"]
    lines += [define(f"T{i}", t) for i, t in enumerate(inputs)]
    lines += [f"    {b}" for b in body]
    lines += [f"    fd.add_output({o})" for o in outputs]
    lines += ["with FusionDefinition() as fd:", "    nvfuser_fusion_id0(fd)", ""]
    return "\n".join(lines)


def rand(g, shape, dt):
    if dt.is_floating_point:
        return torch.randn(shape, generator=g, device="cuda").to(dt)
    return torch.randint(-50, 50, shape, generator=g, device="cuda", dtype=dt)


def cases(g):
    # add_alpha / sub_alpha: lhs +/- rhs * alpha in the operands' common dtype.
    for op, fn in (("add_alpha", torch.add), ("sub_alpha", torch.sub)):
        for dt, alpha in ((torch.float32, "0.5"), (torch.bfloat16, "-1.25"), (torch.float16, "3.0"),
                          (torch.int64, "3")):
            a, b = rand(g, (5, 7), dt), rand(g, (5, 7), dt)
            if dt in (torch.bfloat16, torch.float16):
                # Drawn (so the recorded cases' inputs stay the same) but not
                # written: nvFuser promotes half types to Float first, as its
                # own addcmul cases show, so such a case tests the cast, not
                # the op, and PyTorch's result keeps the half dtype.
                continue
            al = float(alpha) if "." in alpha else int(alpha)
            out = fn(a, b, alpha=al)
            body = [f"T2 = fd.ops.{op}(T0, T1, {alpha})"]
            yield f"{op}_{tname(dt)}", op, [a, b], body, ["T2"], [out], {}
    # batch_norm: training (batch stats, running stats updated in place) and
    # inference (running stats), with and without weight/bias, channels last.
    for dt in (torch.float32, torch.bfloat16):
        x = rand(g, (4, 3, 5, 7), dt)
        w, b = rand(g, (3,), torch.float32), rand(g, (3,), torch.float32)
        rm = rand(g, (3,), torch.float32)
        rv = torch.rand((3,), generator=g, device="cuda") + 0.5
        xf = x.float()
        # training with running stats: F.batch_norm updates rm/rv in place.
        rm2, rv2 = rm.clone(), rv.clone()
        y = torch.nn.functional.batch_norm(xf, rm2, rv2, w, b, training=True, momentum=0.1, eps=1e-5)
        mean = xf.mean(dim=(0, 2, 3))
        invstd = torch.rsqrt(xf.var(dim=(0, 2, 3), unbiased=False) + 1e-5)
        cast = ["T5 = fd.ops.cast(T0, dtype=DataType.Float)"] if dt != torch.float32 else []
        src = "T5" if cast else "T0"
        body = cast + ["S6 = fd.define_scalar(0.1, dtype=DataType.Double)",
                       "S7 = fd.define_scalar(1e-05, dtype=DataType.Double)",
                       f"T8, T9, T10 = fd.ops.batch_norm({src}, T1, T2, T3, T4, S6, S7, True)"]
        yield (f"batch_norm_training_running_{tname(dt)}", "batch_norm", [x, w, b, rm, rv], body,
               ["T8", "T9", "T10"], [y, mean, invstd], {3: rm2, 4: rv2})
        # inference with running stats, no weight or bias.
        y = torch.nn.functional.batch_norm(xf, rm, rv, None, None, training=False, momentum=0.1, eps=1e-5)
        body = cast + ["S6 = fd.define_scalar(0.1, dtype=DataType.Double)",
                       "S7 = fd.define_scalar(1e-05, dtype=DataType.Double)",
                       f"T8, T9, T10 = fd.ops.batch_norm({src}, None, None, T1, T2, S6, S7, False)"]
        yield (f"batch_norm_inference_{tname(dt)}", "batch_norm", [x, rm, rv], body, ["T8"], [y], {})
    # channels last, training, no running stats.
    x = rand(g, (4, 5, 6, 3), torch.float32)
    y = torch.nn.functional.batch_norm(x.permute(0, 3, 1, 2), None, None, None, None, training=True,
                                       eps=1e-3).permute(0, 2, 3, 1).contiguous()
    body = ["S1 = fd.define_scalar(0.1, dtype=DataType.Double)",
            "S2 = fd.define_scalar(0.001, dtype=DataType.Double)",
            "T3, T4, T5 = fd.ops.batch_norm(T0, None, None, None, None, S1, S2, True, channels_last=True)"]
    yield "batch_norm_channels_last_float32", "batch_norm", [x], body, ["T3"], [y], {}
    # index_put_accumulate(acc, index, value): acc[index[i], :] += value[i, :]
    # (Tensor.index_put_ with accumulate=True), repeated indices summed.
    # (bf16 left out: PyTorch accumulates repeated indices in bf16 in an
    # order of its own, so its rounding is not a definition to test against.)
    for dt, it in ((torch.float32, torch.int64), (torch.int64, torch.int32)):
        acc = rand(g, (10, 6), dt)
        idx = torch.randint(0, 10, (17,), generator=g, device="cuda", dtype=it)
        val = rand(g, (17, 6), dt)
        out = acc.clone().index_put_((idx,), val, accumulate=True)
        body = ["T3 = fd.ops.index_put_accumulate(T0, T1, T2)"]
        yield f"index_put_accumulate_{tname(dt)}", "index_put_accumulate", [acc, idx, val], body, ["T3"], [out], {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    manifest = []
    for name, op, inputs, body, outs, results, post in cases(g):
        tensors = {f"in{i}": t for i, t in enumerate(inputs)}
        tensors.update({f"out{k}": t for k, t in enumerate(results)})
        tensors.update({f"post_in{i}": t for i, t in post.items()})
        save_safetensors(os.path.join(args.out, f"{name}.safetensors"), tensors)
        with open(os.path.join(args.out, f"{name}.py"), "w") as f:
            f.write(f"# PyTorch reference: {op} exists only in nvFuser's legacy frontend\n")
            f.write(script(inputs, body, outs))
        entry = {
            "op": op,
            "dtypes": [tname(t.dtype) for t in inputs],
            "torch_version": torch.__version__,
            "date": os.environ.get("RECORD_DATE", ""),
            "gpu": torch.cuda.get_device_name(),
            "inputs": [spec(t) for t in inputs],
            "reference": "torch",
            "note": f"{op} is in nvFuser's legacy frontend only; outputs from the PyTorch function it stands for",
            "outputs": [{"shape": list(t.shape), "dtype": tname(t.dtype), "stride": list(t.contiguous().stride())}
                        for t in results],
            "status": "ok",
        }
        if post:
            entry["post_inputs"] = sorted(post)
        manifest.append(f"{json.dumps(name)}: {json.dumps(entry, separators=(',', ':'))}")
    with open(os.path.join(args.out, "manifest-lines.txt"), "w") as f:
        f.write(",\n".join(manifest) + "\n")
    print(f"{len(manifest)} cases written to {args.out}")


if __name__ == "__main__":
    main()
