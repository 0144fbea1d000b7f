"""Random small grouped_mm fusions for checking the GPU against the CPU reference (issue 17: "random GEMM
fusions, shapes incl. odd and small, every supported dtype and layout, match the CPU reference").

    python3 bench/grouped_random.py DIR [--count 120] [--seed 36]
    FUSEBENCH_GROUPED_MN=1 fusebench check --device gpu DIR        # on the GPU machine

Each script draws: the extent the groups cut (m, the rows of mat1; n, the columns of mat2; or k, each group's
product apart); 1 to 9 groups; m, n and k from 1 to 300 (a few up to 1100), multiples of 8 more often than not,
since that is where the 16-byte copies apply; bf16 or f16; and each operand's layout: k contiguous (a transposed
view where the operand is [k, n]), its rows contiguous (m of mat1, n of mat2: held [k, m] and permuted, or [k, n]
as it lies), or either of those sliced from a wider buffer (rows 8 or 5 elements longer, so both the aligned and
the unaligned strides occur). About a third apply SiLU to the product in Float after it. The offsets are drawn by
whoever runs the script: fusebench's `check` draws a random split, empty groups included. Needs neither torch nor a
GPU to write.
"""
import random

from attention_random import script_text, write_scripts

DTYPES = {"bf16": ("BFloat16", "torch.bfloat16"), "f16": ("Half", "torch.float16")}


def extent(rng):
    if rng.random() < 0.15:
        return rng.randrange(300, 1100)
    e = rng.randrange(1, 301)
    return e - e % 8 if rng.random() < 0.85 and e >= 8 else e


def operand(rng, name, shape, k_axis, nv_dt, torch_dt, lines, inputs):
    """Defines `name` of `shape` (k at `k_axis`, the rows at the other of the last two) in a random layout and
    returns the name of the value with that shape."""
    rank = len(shape)
    layout = rng.choice(["k", "rows"])
    # The dim held innermost: k, or the rows.
    inner = k_axis if layout == "k" else (rank - 1 if k_axis == rank - 2 else rank - 2)
    order = [d for d in range(rank) if d != inner] + [inner]
    held = [shape[d] for d in order]
    pad = rng.choice([0, 0, 0, 8, 8, 5])
    alloc = held[:-1] + [held[-1] + pad]
    contiguity = [None if e == 1 else True for e in alloc]
    lines.append(f"    {name}0 = fd.define_tensor(shape={alloc}, contiguity={contiguity}, dtype=DataType.{nv_dt}, "
                 "is_cpu=False)")
    inputs.append(f"    torch.testing.make_tensor({tuple(alloc)}, dtype={torch_dt}, device='cuda:0', low=-1, high=1),")
    v = f"{name}0"
    if pad:
        lines.append(f"    {name}1 = fd.ops.slice({v}, start_indices={[0] * rank}, end_indices={held}, "
                     f"strides={[1] * rank})")
        v = f"{name}1"
    if order != list(range(rank)):
        # permute dims: output dim d is held dim order.index(d)
        dims = [order.index(d) for d in range(rank)]
        lines.append(f"    {name}2 = fd.ops.permute({v}, dims={dims})")
        v = f"{name}2"
    return v, f"{layout}{'+pad' + str(pad) if pad else ''}"


def one(rng):
    dt = rng.choice(list(DTYPES))
    nv_dt, torch_dt = DTYPES[dt]
    cut = rng.choice(["m", "n", "k"])
    groups = rng.randrange(1, 10)
    m, n, k = extent(rng), extent(rng), extent(rng)
    lines, inputs = [], []
    if cut == "m":
        a, la = operand(rng, "a", [m, k], 1, nv_dt, torch_dt, lines, inputs)
        b, lb = operand(rng, "b", [groups, k, n], 1, nv_dt, torch_dt, lines, inputs)
    elif cut == "n":
        a, la = operand(rng, "a", [groups, m, k], 2, nv_dt, torch_dt, lines, inputs)
        b, lb = operand(rng, "b", [k, n], 0, nv_dt, torch_dt, lines, inputs)
    else:
        a, la = operand(rng, "a", [m, k], 1, nv_dt, torch_dt, lines, inputs)
        b, lb = operand(rng, "b", [k, n], 0, nv_dt, torch_dt, lines, inputs)
    lines.append(f"    o = fd.define_tensor(shape=[{groups}], contiguity=[True], dtype=DataType.Int32, is_cpu=False)")
    # The offsets' values are drawn by whoever runs the script, as in bench/patterns.py.
    inputs.append(f"    torch.testing.make_tensor(({groups},), dtype=torch.int32, device='cuda:0'),")
    lines.append(f"    y = fd.ops.grouped_mm({a}, {b}, o)")
    out = "y"
    silu = rng.random() < 0.3
    if silu:
        lines += ["    yf = fd.ops.cast(y, dtype=DataType.Float)", "    ys = fd.ops.silu(yf)",
                  f"    yo = fd.ops.cast(ys, dtype=DataType.{nv_dt})"]
        out = "yo"
    stem = f"gmm_cut{cut}_g{groups}_m{m}n{n}k{k}_a-{la}_b-{lb}{'_silu' if silu else ''}_{dt}"
    return stem, script_text(f"# random grouped_mm: groups cut {cut}; mat1 {la}, mat2 {lb}", lines, [out], inputs)


if __name__ == "__main__":
    write_scripts(one, __doc__, 36)
