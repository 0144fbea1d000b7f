"""The original report, redone with fusebench.kernel_time on the GPU machine.

The first nvFusion of a litgpt Llama-3-8B reduced to 3 layers (block size 1024, bf16, batch 4) is
taken from Thunder the way the report took it (the FusionDefinition its trace holds, `last_used`) and
timed online; its repro script (`fd.repro_script_for`) is then run in a fresh process and timed the same
ways. Each side is timed three ways: the report's method (5 warm-up calls, then the summed kernel
times of one call; the report read them from torch.profiler, here from the same CUPTI records through
`kernel_time(..., cache="warm", warmup=5, samples=1)`, because one process cannot hold two CUPTI
subscribers), and `fusebench.kernel_time` cold and warm.

    source .peer/activate.sh && pip install --no-deps .gpu/fusebench-*.whl
    python3 bench/report_repro.py OUT_DIR
"""
import json
import os
import subprocess
import sys

import torch

import fusebench
from fusebench._saved import definition

TOKENS = 255  # the report fed ids drawn from [0, 255)


def report_method(fd, inputs):
    m = fusebench.kernel_time(fd.execute, inputs, cache="warm", warmup=5, samples=1)
    return m.median


def measure(fd, inputs, label):
    out = {"report_method_us": report_method(fd, inputs)}
    for cache in ("cold", "warm"):
        m = fusebench.kernel_time(fd.execute, inputs, cache=cache, name="nvFusion0", context=label)
        print(f"{label} {cache}: {m!r}", file=sys.stderr)
        out[cache] = json.loads(m.to_json())
    return out


def online(out_dir):
    import thunder
    from litgpt import GPT, Config

    torch.manual_seed(0)
    cfg = Config.from_name("Llama-3-8B", n_layer=3, block_size=1024)
    with torch.device("cuda"):
        torch.set_default_dtype(torch.bfloat16)
        model = GPT(cfg)
        torch.set_default_dtype(torch.float32)
    idx = torch.randint(0, TOKENS, (4, 1024), device="cuda")
    jm = thunder.jit(model)
    jm(idx)
    trace = thunder.last_traces(jm)[-1]
    bsym = next(b for b in trace.bound_symbols if "nvFusion" in b.sym.name)
    fd = bsym._call_ctx[bsym.sym.name].last_used
    # Fresh inputs of the fusion's input types, ids in the model's range.
    inputs = []
    for p in bsym.flat_args:
        if not hasattr(p, "shape"):
            inputs.append(p)
            continue
        dt = thunder.torch.to_torch_dtype(p.dtype)
        if dt == torch.int64:
            inputs.append(torch.randint(0, TOKENS, tuple(p.shape), device="cuda"))
        else:
            inputs.append(torch.testing.make_tensor(tuple(p.shape), dtype=dt, device="cuda"))
    print(f"{bsym.sym.name}: inputs {[tuple(t.shape) for t in inputs if hasattr(t, 'shape')]}", file=sys.stderr)
    script = fd.repro_script_for(inputs)
    path = os.path.join(out_dir, "nvfusion0_repro.py")
    with open(path, "w") as f:
        f.write(script)
    return measure(fd, inputs, "online")


def saved(path):
    text = definition(open(path).read())
    ns = {}
    exec(compile(text, path, "exec"), ns)
    fd, inputs = ns["fd"], ns["inputs"]
    # The script's make_tensor draws int64 ids from [-9, 10): draw them as the model did.
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.dtype == torch.int64:
            inputs[i] = torch.randint(0, TOKENS, t.shape, device=t.device)
    return measure(fd, inputs, "saved script, fresh process")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--saved":
        print(json.dumps(saved(sys.argv[2])))
        return
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    res = {"online": online(out_dir)}
    p = subprocess.run(
        [sys.executable, __file__, "--saved", os.path.join(out_dir, "nvfusion0_repro.py")],
        capture_output=True, text=True,
    )
    sys.stderr.write(p.stderr[-3000:])
    res["saved"] = json.loads(p.stdout.strip().splitlines()[-1])
    with open(os.path.join(out_dir, "report_repro.json"), "w") as f:
        json.dump(res, f)
    print(f"{'':32} {'report method':>14} {'cold median [95% CI]':>28} {'warm median [95% CI]':>28}")
    for side in ("online", "saved"):
        r = res[side]
        cells = [f"{r['report_method_us']:14.2f}"]
        for c in ("cold", "warm"):
            s = r[c]["summary"]
            cells.append(f"{s['median']:8.2f} [{s['ci_low']:.2f}, {s['ci_high']:.2f}] n={s['n']:<4}")
        print(f"{side:32} " + " ".join(f"{c:>28}" for c in cells))
    for c in ("cold", "warm"):
        a, b = res["online"][c]["summary"]["median"], res["saved"][c]["summary"]["median"]
        print(f"{c}: saved / online = {b / a:.4f}")
    print(f"report method: saved / online = {res['saved']['report_method_us'] / res['online']['report_method_us']:.4f}")


if __name__ == "__main__":
    main()
