"""Every nvFuser fusion of a Thunder-compiled model, timed in the step and from its saved repro.

    import thunder, fusebench.thunder
    jm = thunder.jit(model, nv_store_fusion_inputs=True)      # or thunderfx(model, nv_store_fusion_inputs=True)
    r = fusebench.thunder.report(jm, x, out="fusions/")
    print(r)                    # one row per nvFusion: in-step, online and saved times, ratios, causes
    r.to_json("r.json"); r.to_markdown("r.md")

What it does, in order:
1. Runs the step once (by default the call and, where it returns floating tensors that need gradients, the
   backward of their sum; pass `step=` for your own) so that Thunder's last traces hold this step's fusions.
2. Lists every nvFusion of the last forward and backward execution traces (`thunder.last_traces`,
   `thunder.last_backward_traces`; for thunderfx, of every Thunder-compiled subgraph), with the
   FusionDefinition it ran (`last_used`) and the inputs it last ran on (`last_inputs`, which Thunder keeps
   only under `nv_store_fusion_inputs=True`: without it this says so and stops).
3. In-step time: the whole step timed warm under `fusebench.kernel_time` (CUPTI, every kernel of the step,
   each with its median). nvFuser names every Thunder fusion's kernels alike (`..._f0_...`), so a fusion's
   kernels are found in the step by their launch signature (name, grid, block) as the fusion launches them
   alone, the first unclaimed run of them at or after where the fusion before it in its trace was found.
4. Online: `kernel_time(fd.execute, inputs)` cold and warm, in this process.
5. Saved: the fusion's repro (`fd.repro_script_for(inputs)`) written to `out`, and timed cold and warm in a
   fresh process (`python -m fusebench._saved`), and cold again after a write flush (L2 left full of dirty
   lines, as a kernel that wrote leaves it in the step: `kernel_time(..., flush="write")`). Integer inputs
   (indices) are saved beside it and used in place of the script's random ones, which could lie outside the
   indexed range. The step's figures go to `out/step.json` once timed and each fusion's row is appended to
   `out/rows.jsonl` as it is done, so that a report cut short keeps what it measured.
6. `fusebench.explain(online cold, saved cold)` for each fusion; the in-step time placed against the saved
   warm, cold and dirty-L2 cold times (`step_cause`: the share of the difference the step's L2 state accounts
   for); the peak device memory of the step and of each fusion's standalone run.

Nothing here imports torch or thunder until `report` runs.
"""

import json
import math
import os
import re
import subprocess
import sys


class ThunderReportError(RuntimeError):
    """The model's fusions cannot be reported: the message says why and what to change."""


def match_kernels(step, fusions):
    """Finds each fusion's kernels among the step's.

    step: the step's kernels in launch order, each (name, grid, block, median_us).
    fusions: (key, group, signature) in run order, signature the fusion's own kernels as it launches them
    alone, each (name, grid, block); fusions of one group (one trace) run in the order given.
    Returns {key: (sum of the matched kernels' medians, [their indices in step])}, or None for a key whose
    kernels were not found as one run in the step. A run of kernels is claimed once.
    """
    sigs = [(k[0], tuple(k[1]), tuple(k[2])) for k in step]
    claimed = [False] * len(step)
    after = {}
    out = {}
    for key, group, sig in fusions:
        sig = [(n, tuple(g), tuple(b)) for n, g, b in sig]
        n = len(sig)
        start = after.get(group, 0)
        hit = None
        if n:
            # First at or after the group's last match, then anywhere.
            for i in list(range(start, len(step) - n + 1)) + list(range(0, min(start, len(step) - n + 1))):
                if sigs[i:i + n] == sig and not any(claimed[i:i + n]):
                    hit = i
                    break
        if hit is None:
            out[key] = None
            continue
        idx = list(range(hit, hit + n))
        for i in idx:
            claimed[i] = True
        after[group] = hit + n
        out[key] = (sum(step[i][3] for i in idx), idx)
    return out


class Report:
    """One row per nvFusion (dicts, `rows`), the step's own figures (`step`) and notes."""

    COLUMNS = [
        ("fusion", "key", "{}"),
        ("ops", "ops", "{}"),
        ("kernels", "kernels", "{}"),
        ("in step us", "in_step_us", "{:.2f}"),
        ("online cold", "online_cold_us", "{:.2f}"),
        ("online warm", "online_warm_us", "{:.2f}"),
        ("saved cold", "saved_cold_us", "{:.2f}"),
        ("saved warm", "saved_warm_us", "{:.2f}"),
        ("saved cold, dirty L2", "saved_cold_write_us", "{:.2f}"),
        ("saved/online cold", "saved_vs_online_cold", "{:.3f}"),
        ("saved vs online", "cause", "{}"),
        ("in step/saved cold", "in_step_vs_saved_cold", "{:.3f}"),
        ("in step vs saved: why", "in_step_cause", "{}"),
        ("peak MiB alone", "peak_mib_alone", "{:.0f}"),
    ]

    def __init__(self, rows, step, notes=()):
        # Fusions whose in-step time lies outside the saved cold time's noise first, by how far.
        def order(r):
            v = r.get("in_step_vs_saved_cold")
            return (not r.get("in_step_differs", False), -abs(math.log(v)) if v else 0.0)

        self.rows = sorted(rows, key=order)
        self.step = dict(step)
        self.notes = list(notes)

    def _cells(self, r):
        out = []
        for _, field, fmt in self.COLUMNS:
            v = r.get(field)
            out.append("-" if v is None else fmt.format(v))
        return out

    def to_markdown(self, path=None):
        lines = ["| " + " | ".join(c for c, _, _ in self.COLUMNS) + " |", "|" + " --- |" * len(self.COLUMNS)]
        lines += ["| " + " | ".join(self._cells(r)) + " |" for r in self.rows]
        text = "\n".join(lines) + "\n" + self._footer()
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text

    def to_json(self, path=None):
        text = json.dumps({"step": self.step, "fusions": self.rows, "notes": self.notes}, indent=1)
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text

    def _footer(self):
        s = self.step
        lines = []
        if s.get("median_us") is not None:
            lines.append(
                f"step: {s['median_us']:.2f} us of kernels per step ({s.get('kernels', 0)} kernels, "
                f"{s.get('fusion_us', 0.0):.2f} us in the {len(self.rows)} nvFusions), "
                f"peak {s.get('peak_mib', float('nan')):.0f} MiB"
            )
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines) + ("\n" if lines else "")

    def __str__(self):
        cells = [[c for c, _, _ in self.COLUMNS]] + [self._cells(r) for r in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.COLUMNS))]
        text = "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells)
        return text + "\n" + self._footer()

    __repr__ = __str__


def compiled_functions(compiled):
    """The Thunder-jitted callables of `compiled`: itself for `thunder.jit`; every subgraph's for
    `thunderfx` (its ThunderCompiler's `subgraph_infos`), keyed by where they sit."""
    backend = compiled if hasattr(compiled, "subgraph_infos") else getattr(compiled, "_backend", None)
    if backend is not None and hasattr(backend, "subgraph_infos"):
        return [
            (f"g{i}.f{j}/", fn)
            for i, info in enumerate(backend.subgraph_infos)
            for j, fn in enumerate(info.thunder_compiled_fns)
        ]
    return [("", compiled)]


def nv_fusions(thunder, compiled):
    """(key, group, wrapper) for every nvFusion of the last forward and backward execution traces,
    in trace order; the wrapper is Thunder's FusionDefinitionWrapper (`last_used`, `last_inputs`)."""
    found = []
    for prefix, fn in compiled_functions(compiled):
        traces = [("fwd", thunder.last_traces(fn))]
        try:
            traces.append(("bwd", thunder.last_backward_traces(fn)))
        except Exception:  # a function with no backward
            pass
        for kind, trs in traces:
            if not trs:
                continue
            for b in trs[-1].bound_symbols:
                name = b.sym.name
                if getattr(b.sym, "is_fusion", False) and name.startswith("nvFusion"):
                    found.append((f"{prefix}{kind}/{name}", f"{prefix}{kind}", b._call_ctx[name]))
    return found


def _loss(out):
    """The sum of the floating tensors of `out` that need gradients (None without one)."""
    import torch

    stack, parts = [out], []
    while stack:
        o = stack.pop()
        if isinstance(o, torch.Tensor):
            if o.requires_grad and o.is_floating_point():
                parts.append(o.float().sum())
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
    return sum(parts) if parts else None


def default_step(fn, args, kwargs):
    """The call, then the backward of the sum of what it returns that needs gradients."""

    def step():
        loss = _loss(fn(*args, **kwargs))
        if loss is not None:
            loss.backward()

    return step


def _kernels(measurement):
    return [(k["name"], k["grid"], k["block"], k["median_us"]) for k in json.loads(measurement.to_json())["kernels"]]


def _peak_mib(torch, f):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    f()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**20


def report(compiled, *args, out="fusions", step=None, max_time=1.0, **kwargs):
    """Times every nvFusion of `compiled` (thunder.jit or thunderfx) in its step, online and from its
    saved repro, cold and warm, and says why in-step and saved differ (module doc)."""
    import torch
    import thunder

    import fusebench

    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, "rows.jsonl"), "w").close()
    step = step or default_step(compiled, args, kwargs)
    step_peak = _peak_mib(torch, step)  # also fills the traces
    fusions = nv_fusions(thunder, compiled)
    if not fusions:
        raise ThunderReportError("no nvFusion in the last forward or backward trace: is nvFuser Thunder's executor here?")
    missing = [k for k, _, w in fusions if getattr(w, "last_inputs", None) is None]
    if missing:
        raise ThunderReportError(
            f"Thunder kept no inputs for {', '.join(missing)}: compile with nv_store_fusion_inputs=True "
            "(thunder.jit(model, nv_store_fusion_inputs=True), or the same keyword to thunderfx)"
        )
    _say(f"{len(fusions)} nvFusions; timing the step")
    m_step = fusebench.kernel_time(step, cache="warm", max_time=max_time, name="step", context="in step")
    step_kernels = _kernels(m_step)
    with open(os.path.join(out, "step.json"), "w") as f:
        json.dump({"median_us": m_step.median, "kernels": len(step_kernels), "peak_mib": step_peak,
                   "kernel_list": step_kernels, "record": json.loads(m_step.to_json())}, f)
    rows, sigs, online, notes = [], [], {}, []
    for i, (key, group, w) in enumerate(fusions):
        _say(f"[{i + 1}/{len(fusions)}] {key}: online")
        fd, inputs = w.last_used, list(w.last_inputs)
        try:
            cold = fusebench.kernel_time(fd.execute, inputs, cache="cold", max_time=max_time, name=key, context="online")
            warm = fusebench.kernel_time(fd.execute, inputs, cache="warm", max_time=max_time, name=key, context="online")
        except Exception as e:  # one fusion failing must not hide the others: it is listed with why
            notes.append(f"{key}: timing it online failed: {e}")
            continue
        online[key] = (cold, warm, w)
        sigs.append((key, group, [(n, g, b) for n, g, b, _ in _kernels(cold)]))
    found = match_kernels(step_kernels, sigs)
    for i, (key, group, sig) in enumerate(sigs):
        cold, warm, w = online[key]
        path = os.path.join(out, key.replace("/", "_") + ".py")
        _say(f"[{i + 1}/{len(sigs)}] {key}: saved, in a fresh process")
        try:
            saved = _save_and_time(w.last_used, list(w.last_inputs), path, key, max_time)
        except ThunderReportError as e:
            notes.append(str(e))
            continue
        s_cold = fusebench.Measurement.from_json(saved["cold"])
        s_warm = fusebench.Measurement.from_json(saved["warm"])
        s_cold_w = fusebench.Measurement.from_json(saved["cold_write"])
        hit = found.get(key)
        in_step = hit[0] if hit else None
        if hit is None:
            notes.append(f"{key}: its {len(sig)} kernels were not found as one run in the step's {len(step_kernels)}")
        lo, hi = s_cold.ci
        ratio = in_step / s_cold.median if in_step else None
        why = fusebench.explain(cold, s_cold)
        noise = max(_rel(m_step), _rel(s_cold), 0.01)
        in_step_why = step_cause(in_step, s_warm.median, s_cold.median, s_cold_w.median, noise) if in_step else None
        with open(path) as f:
            ops = op_summary(f.read())
        rows.append({
            "key": key,
            "ops": ops,
            "kernels": len(sig),
            "in_step_us": in_step,
            "online_cold_us": cold.median,
            "online_warm_us": warm.median,
            "saved_cold_us": s_cold.median,
            "saved_warm_us": s_warm.median,
            "saved_cold_write_us": s_cold_w.median,
            "saved_vs_online_cold": s_cold.median / cold.median,
            "in_step_vs_saved_cold": ratio,
            # The in-step sum against the saved cold interval, widened by the step's own relative width.
            "in_step_differs": bool(in_step) and not (lo * (1 - _rel(m_step)) <= in_step <= hi * (1 + _rel(m_step))),
            "peak_mib_alone": saved.get("peak_mib"),
            "repro": path,
            "cause": first_cause(why),
            "in_step_cause": in_step_why[0] if in_step_why else None,
            "in_step_l2_share": in_step_why[1] if in_step_why else None,
            "explain_online_vs_saved_cold": str(why),
        })
        # Each row as it is done, so that a report cut short keeps what it measured.
        with open(os.path.join(out, "rows.jsonl"), "a") as f:
            f.write(json.dumps(rows[-1]) + "\n")
    fusion_us = sum(r["in_step_us"] or 0.0 for r in rows)
    step_row = {"median_us": m_step.median, "kernels": len(step_kernels), "fusion_us": fusion_us, "peak_mib": step_peak,
                # Each kernel of the step (name, grid, block, median us) and the fusions' matched indices, so
                # that an unmatched fusion can be traced by hand.
                "kernel_list": step_kernels, "matched": {k: v[1] for k, v in found.items() if v}}
    return Report(rows, step_row, notes)


def _say(msg):
    print(f"fusebench.thunder: {msg}", file=sys.stderr, flush=True)


def _rel(m):
    lo, hi = m.ci
    return (hi - lo) / 2 / m.median if m.median else 0.0


def first_cause(explanation):
    """`explain`'s most likely cause with its share, or its verdict where it names none (within noise)."""
    lines = [line.strip() for line in str(explanation).splitlines()]
    for line in lines:
        if line.startswith("Most likely cause:"):
            return line[len("Most likely cause:"):].strip()
    for line in lines:
        if line.startswith("B − A") or line.startswith("B - A"):
            return line.split(":")[-1].strip()
    return ""


def _save_and_time(fd, inputs, path, key, max_time):
    """Writes the repro of `fd` on `inputs` to `path` (integer inputs beside it) and times it cold, warm and
    cold after a write flush in a fresh process; returns the runner's JSON (records as JSON text keyed
    "cold", "warm", "cold_write"; peak MiB)."""
    import torch

    with open(path, "w") as f:
        f.write(fd.repro_script_for(inputs))
    ints = {i: t.detach().cpu() for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and not t.is_floating_point()
            and not t.is_complex() and t.dtype != torch.bool}
    if ints:
        torch.save(ints, path + ".ints.pt")
    p = subprocess.run(
        [sys.executable, "-m", "fusebench._saved", path, "--name", key, "--max-time", str(max_time),
         "--caches", "cold,warm,cold-write"],
        capture_output=True, text=True,
    )
    if p.returncode != 0:
        raise ThunderReportError(f"{key}: timing the saved repro {path} failed:\n{p.stderr.strip()[-2000:]}")
    # The last line: a repro script may print (its device header) before the runner does.
    return json.loads(p.stdout.strip().splitlines()[-1])


def op_summary(script):
    """What a fusion does, from its script: its first five distinct ops in order and how many ops it has
    ("cast, add, mul, sum, rsqrt, ... (19 ops)"), so that a row can be told apart from its key alone."""
    ops = re.findall(r"fd\.ops\.(\w+)\(", script)
    seen = list(dict.fromkeys(ops))
    more = ", ..." if len(seen) > 5 else ""
    return f"{', '.join(seen[:5])}{more} ({len(ops)} ops)"


def step_cause(in_step, warm, cold, cold_write, noise):
    """Why a fusion's in-step time differs from its saved cold time, from the saved run under three L2 states:
    warm (its own data left in L2), cold after a read flush (L2 clean, none of its data), cold after a write
    flush (L2 full of dirty lines that must be written back, as a step leaves it after a kernel that wrote).
    `noise`: the relative half-width within which two times are the same. Returns (text, share of the
    difference the L2 state accounts for, or None where there is no difference)."""
    d = in_step - cold
    pct = 100 * d / cold
    if abs(d) <= noise * cold:
        return (f"as saved cold ({pct:+.1f}%, within noise)", None)
    if d < 0:
        if warm >= cold:
            return (f"{pct:+.1f}% below saved cold, and saved warm is no faster: no saved L2 state explains it", 0.0)
        share = min(1.0, -d / (cold - warm))
        text = f"{pct:+.1f}%: the step leaves part of its data in L2 ({100 * share:.0f}% of the way to saved warm)"
        if in_step < warm * (1 - noise):
            text += f"; {100 * (in_step - warm) / warm:+.1f}% beyond saved warm, which no saved L2 state explains"
        return (text, share)
    extra = cold_write - cold
    if extra <= noise * cold:
        return (f"{pct:+.1f}% above saved cold; a dirty L2 (write flush) costs nothing here: no saved L2 state explains it", 0.0)
    share = min(1.0, extra / d)
    text = f"{pct:+.1f}%: the L2 the step leaves is dirty; a write-flushed cold run accounts for {100 * share:.0f}%"
    if share < 1.0:
        text += f" (the other {100 * (1 - share):.0f}%: no saved L2 state explains it; clocks or neighbours' overlap)"
    return (text, share)
