"""`fusebench.thunder.report` on litgpt models, forward and backward, on the GPU machine.

Each model (a few layers of a litgpt config, bf16, batch x 1024 tokens) is compiled with
`thunder.jit(model, nv_store_fusion_inputs=True)` (or thunderfx, `--compiler fx`; or, with `--recipe nv-all`, nvFuser
alone taking the linears, matmuls and attention too, as Thunder's Hugging Face recipe does; on the peer machine's
Thunder and nvFuser 0.2.36 its attention fails to build, BENCHMARKS.md session 29); one training step (the forward, then the backward of the
loss) is reported: every nvFusion in the step, online and from its saved repro in a fresh process.

    source .peer/activate.sh && pip install --no-deps --target /tmp/fbpy .gpu/fusebench-*.whl
    PYTHONPATH=/tmp/fbpy:$PYTHONPATH python3 bench/thunder_report.py OUT_DIR [--models Llama-3.2-1B:2,phi-2:2] [--batch 2]   (or scripts/gpu.sh thunder)
"""
import argparse
import os

import torch

import fusebench.thunder


def model_step(name, layers, batch, compiler="jit", recipe="default"):
    import thunder
    from litgpt import GPT, Config

    torch.manual_seed(0)
    cfg = Config.from_name(name, n_layer=layers, block_size=1024)
    with torch.device("cuda"):
        torch.set_default_dtype(torch.bfloat16)
        model = GPT(cfg)
        torch.set_default_dtype(torch.float32)
    if compiler == "fx":
        from thunder.dynamo import thunderfx

        jm = thunderfx(model, nv_store_fusion_inputs=True)
    elif recipe == "nv-all":
        # Thunder's Hugging Face recipe's options: nvFuser also takes the linears, matmuls and
        # attention (sdpfa_fwd / sdpfa_bwd), so its fusions hold them.
        from thunder.executors.nvfuserex import nvfuserex

        jm = thunder.jit(model, executors=[nvfuserex], nv_store_fusion_inputs=True, nv_enable_linear=True,
                         nv_enable_matmul=True, nv_enable_sdpa=True)
    else:
        jm = thunder.jit(model, nv_store_fusion_inputs=True)
    idx = torch.randint(0, cfg.padded_vocab_size, (batch, 1024), device="cuda")
    target = torch.randint(0, cfg.padded_vocab_size, (batch, 1024), device="cuda")

    def step():
        logits = jm(idx)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), target.flatten())
        loss.backward()

    return jm, step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default="Llama-3.2-1B:2,phi-2:2", help="NAME:LAYERS, comma-separated")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--max-time", type=float, default=0.5)
    ap.add_argument("--compiler", choices=["jit", "fx"], default="jit", help="thunder.jit, or thunderfx (Dynamo, then Thunder)")
    ap.add_argument("--recipe", choices=["default", "nv-all"], default="default",
                    help="nv-all: nvFuser alone, with nv_enable_linear, nv_enable_matmul and nv_enable_sdpa (thunder.jit only)")
    a = ap.parse_args()
    for spec in a.models.split(","):
        name, layers = spec.split(":")
        jm, step = model_step(name, int(layers), a.batch, a.compiler, a.recipe)
        out = os.path.join(a.out, name)
        r = fusebench.thunder.report(jm, out=out, step=step, max_time=a.max_time)
        print(f"== {name}, {layers} layers, batch {a.batch} x 1024 tokens, {a.compiler}")
        print(r)
        r.to_json(os.path.join(out, "report.json"))
        r.to_markdown(os.path.join(out, "report.md"))


if __name__ == "__main__":
    main()
