"""Times each fusion of a directory with nvFuser, PyTorch eager, torch.compile and fusebench's own
engine, all with `fusebench.kernel_time` under the same policy (cold L2, CUPTI kernel time, median
until its 95% interval is within +-1%), and prints one table. Run on the GPU machine:

    source .peer/activate.sh && pip install --no-deps .gpu/fusebench-*.whl
    python3 bench/peers.py .gpu/shared/corpus [--compile 000,002,...] [--json peers.json]

nvFuser runs the script's own definition and inputs (gather ids redrawn in range, as
bench/nvfuser_peer.py does); eager and torch.compile run bench/torch_fusion.py's PyTorch version of
the same fusion on the same inputs; fusebench runs `fusebench.load(script)` on the same tensors too
(DLPack, no copy), or on inputs it generates from the script's recipe where a layout differs. torch.compile takes seconds per fusion to compile, so it runs on the fusions
`--compile` names (file-name prefixes; `all` for every one).
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# torch, fusebench and the peers are imported where fusions are timed: --table needs none of them.
torch = fusebench = scripts = valid_indices = build = None


def import_peers():
    global torch, fusebench, scripts, valid_indices, build
    import torch
    import fusebench
    from nvfuser_peer import scripts, valid_indices
    from torch_fusion import build


def script_parts(path):
    text = open(path).read().replace("fd.execute(inputs)", "")
    ns = {}
    exec(compile(text, path, "exec"), ns)
    inputs = ns["inputs"]
    valid_indices(inputs)
    group_offsets(path, inputs)
    return ns["fd"], inputs


def group_offsets(path, inputs):
    """grouped_mm's offsets made an even split of the extent they cut: a script's make_tensor cannot draw
    valid ones (nondecreasing group ends that end at the extent), and every peer times the same groups."""
    d = json.loads(fusebench.fusion_json(path))
    vals = d["values"]
    for n in d["nodes"]:
        o = n["op"]
        if o.get("op") == "gemm" and o.get("gemm_op") == "grouped_mm" and o["offsets"] in d["inputs"]:
            i = d["inputs"].index(o["offsets"])
            a, b = vals[o["mat1"]]["shape"], vals[o["mat2"]]["shape"]
            ext = a[0] if (len(a), len(b)) == (2, 3) else b[1] if len(a) == 3 else a[-1]
            g = inputs[i].numel()
            inputs[i] = torch.tensor([ext * (j + 1) // g for j in range(g)], dtype=torch.int32, device="cuda")


def timed(label, fn, *args, **kw):
    try:
        return fusebench.kernel_time(fn, *args, **kw)
    except Exception as e:  # one peer failing must not hide the others
        print(f"  {label}: FAILED: {e}", file=sys.stderr)
        return None


def as_json(row):
    return {k: (json.loads(v.to_json()) if hasattr(v, "to_json") else v) for k, v in row.items() if v is not None}


def median_us(row, peer):
    return row[peer]["summary"]["median"] if peer in row else None


def copy_us(row):
    """The copy of fusebench's bytes, timed the same way (kernel_time(ceiling=True))."""
    c = row.get("fusebench", {}).get("ceiling")
    return c["median_us"] if c else None


def print_table(rows, device):
    """`rows`: dicts of file name and each peer's record (fusebench's JSON form)."""
    peers = [p for p in ("nvfuser", "eager", "compile", "fusebench") if any(p in r for r in rows)]
    print(f"kernel time, µs: median (95% interval half-width) under fusebench.kernel_time, cold L2, CUPTI; {device}")
    print("| fusion | " + " | ".join(peers) + " | copy | nvFuser / fusebench | compile / fusebench | % of copy |")
    print("| --- |" + " --- |" * (len(peers) + 4))
    ratios = []
    for r in rows:
        cells = []
        for p in peers:
            s = r[p]["summary"] if p in r else None
            cells.append(f"{s['median']:.2f} (±{100 * s['rel_ci']:.1f}%)" if s else "–")
        nv, tc, fb, cp = median_us(r, "nvfuser"), median_us(r, "compile"), median_us(r, "fusebench"), copy_us(r)
        ratio = nv / fb if nv and fb else None
        if ratio:
            ratios.append(ratio)
        cells.append(f"{cp:.2f}" if cp else "–")
        cells.append(f"{ratio:.2f}" if ratio else "–")
        cells.append(f"{tc / fb:.2f}" if tc and fb else "–")
        cells.append(f"{100 * cp / fb:.0f}%" if cp and fb else "–")
        print(f"| {r['file']} | " + " | ".join(cells) + " |")
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\ngeometric mean nvFuser / fusebench over {len(ratios)} fusions: {geo:.3f}")
    for p in ("eager", "compile"):
        r = [x[p]["summary"]["median"] / x["fusebench"]["summary"]["median"] for x in rows if p in x and "fusebench" in x]
        if r:
            geo = math.exp(sum(math.log(x) for x in r) / len(r))
            print(f"geometric mean {p} / fusebench over {len(r)} fusions: {geo:.3f}")


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def limits(rec):
    """What a record's kernels say about what limits them: count, launch shapes, registers, shared
    memory, the blocks a multiprocessor holds at once (and what bounds them) and the waves of the grid."""
    ks = rec.get("kernels", [])
    return "; ".join(
        f"{k['name'][:28]} {k['median_us']:.1f}µs grid {k['grid'][0]}x{k['grid'][1]} block {k['block'][0]} "
        f"{k['registers']} regs{' ' + str(k['shared_bytes']) + 'B smem' if k.get('shared_bytes') else ''}"
        f"{residency(k)}"
        for k in ks[:3]
    )


def residency(k):
    """", N/SM (bound), W waves" for a kernel record (`fusebench.resident`); nothing where fusebench
    cannot be imported (`--table` needs none of the peers)."""
    try:
        import fusebench as fb
    except ImportError:
        return ""
    threads = k["block"][0] * k["block"][1] * k["block"][2]
    blocks, bound, sms = fb.resident(threads, k["registers"], k.get("shared_bytes") or 0)
    grid = k["grid"][0] * k["grid"][1] * k["grid"][2]
    return f", {blocks}/SM ({bound}), {grid / (max(blocks, 1) * sms):.2f} waves"


def print_by_pattern(rows, device):
    """Per pattern (the file name up to its first '-'): the distribution of each peer's time over
    fusebench's, and the five worst fusions against each peer with their kernels."""
    print(f"\nper pattern, ratio = peer time / fusebench time (above 1: fusebench faster); {device}")
    print("| pattern | n | nvFuser/fb min | median | max | < 0.95 | compile/fb min | median | max | < 0.95 | % of copy median |")
    print("| --- |" + " --- |" * 10)
    pats = sorted({r["file"].split("-")[0] for r in rows})
    for pat in pats:
        rs = [r for r in rows if r["file"].split("-")[0] == pat and "fusebench" in r]
        cells = [pat, str(len(rs))]
        for peer in ("nvfuser", "compile"):
            x = sorted(median_us(r, peer) / median_us(r, "fusebench") for r in rs if peer in r)
            cells += [f"{x[0]:.2f}", f"{x[len(x) // 2]:.2f}", f"{x[-1]:.2f}", str(sum(v < 0.95 for v in x))] if x else ["–"] * 4
        pc = sorted(100 * copy_us(r) / median_us(r, "fusebench") for r in rs if copy_us(r))
        cells.append(f"{pc[len(pc) // 2]:.0f}%" if pc else "–")
        print("| " + " | ".join(cells) + " |")
    for peer in ("nvfuser", "compile"):
        x = [(median_us(r, peer) / median_us(r, "fusebench"), r) for r in rows if peer in r and "fusebench" in r]
        if not x:
            continue
        print(f"\ngeometric mean {peer} / fusebench over {len(x)} fusions: {geomean([v for v, _ in x]):.3f}; "
              f"{sum(v < 0.95 for v, _ in x)} below 0.95, {sum(v < 0.8 for v, _ in x)} below 0.8")
        print(f"five worst against {peer}:")
        for v, r in sorted(x, key=lambda t: t[0])[:5]:
            print(f"  {v:.2f} {r['file']}: fusebench {median_us(r, 'fusebench'):.2f} µs [{limits(r['fusebench'])}]"
                  f" vs {peer} {median_us(r, peer):.2f} µs [{limits(r[peer])}]")


def precompile_one(path):
    """Compiles one fusion with torch.compile and runs it once, in a worker process, so that the
    timing process finds Inductor's and Triton's caches warm. Returns an error message or None."""
    import_peers()
    try:
        _, inputs = script_parts(path)
        fn = build(fusebench.fusion_json(path))
        with torch.no_grad():
            torch.compile(fn, dynamic=False)(*inputs)
        torch.cuda.synchronize()
        return None
    except Exception as e:
        return f"{os.path.basename(path)}: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--compile", default="", help="comma-separated file-name prefixes, or 'all'")
    ap.add_argument("--json", default=None, help="rewritten after each fusion, so a cut-short run keeps what it measured")
    ap.add_argument("--table", nargs="+", default=None, help="only print the table of these --json files, merged")
    ap.add_argument("--max-time", type=float, default=1.0)
    ap.add_argument("--skip", default="", help="peers not to time, comma-separated (e.g. eager)")
    ap.add_argument("--precompile", type=int, default=0,
                    help="worker processes that torch.compile every fusion first (warm caches; timing stays serial)")
    ap.add_argument("--by-pattern", action="store_true", help="also the per-pattern distribution and the worst five")
    a = ap.parse_args()
    skip = set(a.skip.split(",")) if a.skip else set()
    if a.table:
        rows = [r for path in a.table for r in json.load(open(path))]
        rows.sort(key=lambda r: r["file"])
        dev = next((r[p]["environment"]["gpu_name"] for r in rows for p in r if isinstance(r[p], dict)), "?")
        print_table(rows, dev)
        if a.by_pattern:
            print_by_pattern(rows, dev)
        return
    import_peers()
    want_compile = a.compile.split(",") if a.compile else []
    paths = scripts(a.paths)
    if a.precompile and want_compile:
        import multiprocessing as mp
        todo = [p for p in paths if "all" in want_compile or any(os.path.basename(p).startswith(w) for w in want_compile)]
        with mp.get_context("spawn").Pool(a.precompile) as pool:
            for err in pool.imap_unordered(precompile_one, todo):
                if err:
                    print(f"  precompile: {err}", file=sys.stderr)
    rows = []
    for path in paths:
        name = os.path.basename(path)
        print(name, file=sys.stderr)
        row = {"file": name}
        try:
            fd, inputs = script_parts(path)
        except Exception as e:
            print(f"  script: FAILED: {e}", file=sys.stderr)
            continue
        if "nvfuser" not in skip:
            row["nvfuser"] = timed("nvFuser", fd.execute, inputs, name=name, max_time=a.max_time)
        try:
            fj = fusebench.fusion_json(path)
            # Inductor runs a product as cuBLAS (no Triton kernel) whether or not it compiled the rest.
            products = any(n["op"]["op"] in ("matmul", "linear", "gemm") for n in json.loads(fj)["nodes"])
            fn = build(fj)
            with torch.no_grad():
                if "eager" not in skip:
                    row["eager"] = timed("eager", fn, *inputs, name=name, max_time=a.max_time)
                if "all" in want_compile or any(name.startswith(p) for p in want_compile):
                    # Every fusion's function shares one code object: without a reset, dynamo
                    # stops recompiling after its cache limit and silently runs eager.
                    torch._dynamo.reset()
                    cfn = torch.compile(fn, dynamic=False)
                    m = timed("torch.compile", cfn, *inputs, name=name, max_time=a.max_time)
                    if m and not products and not any(k["name"].startswith("triton") for k in m.kernels):
                        print("  torch.compile: FAILED: no Triton kernel ran (it fell back to eager)", file=sys.stderr)
                        m = None
                    row["compile"] = m
        except Exception as e:
            print(f"  eager/compile: FAILED: {e}", file=sys.stderr)
        try:
            f = fusebench.load(path)
            try:
                # The very tensors nvFuser ran on, through DLPack.
                f(*inputs)
                args = inputs
            except ValueError as e:
                print(f"  fusebench: its own inputs ({e})", file=sys.stderr)
                args = []
            row["fusebench"] = timed("fusebench", f, *args, name=name, bytes=f.bytes, ceiling=True, max_time=a.max_time)
        except Exception as e:
            print(f"  fusebench: FAILED: {e}", file=sys.stderr)
        rows.append(as_json(row))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f)
    print_table(rows, torch.cuda.get_device_name())
    if a.by_pattern:
        print_by_pattern(rows, torch.cuda.get_device_name())


if __name__ == "__main__":
    main()
