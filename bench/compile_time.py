"""How long NVRTC takes to compile fusebench's kernels, with no GPU: each fusion's module as
`fusebench emit --cuda` writes it, compiled for sm_90 with the runtime's options
(crates/runtime/src/compile.rs, BASE_OPTIONS), once with and once without `--split-compile=0`,
the best of REPS compiles each, after one compile that loads the library. The options' effect on
the machine code can be checked with `--sass` (needs `cuobjdump` on PATH): the kernels' SASS with
and without, compared function by function.

    python3 bench/compile_time.py DIR_OR_SCRIPTS... --nvrtc /path/to/libnvrtc.so.12 \
        [--fusebench target/release/fusebench] [--reps 2] [--sass]

A plan of several translation units (attention's kernels compile apart, `Plan::units`; `emit --cuda`
starts each with UNIT_LINE) is timed as the runtime compiles it: the units at once, one thread each,
the wall time of all.

With `--against OTHER_FUSEBENCH` it compares two builds instead: each fusion's module from both,
compiled with the runtime's options (split as the runtime splits), the ratio of their times, and
with `--sass` whether every kernel's machine code is the same (a change meant to cost the compiler
less, not the kernels anything).

NVRTC ships in the CUDA toolkit and in NVIDIA's nvrtc wheel for Python (nvidia-cuda-nvrtc-cu12,
the library in nvidia/cuda_nvrtc/lib). Times depend on the machine's cores and the NVRTC version:
the GPU machine's are the ones the issue's bar is about.
"""
import argparse
import concurrent.futures
import ctypes
import glob
import itertools
import math
import os
import subprocess
import sys
import tempfile
import time

BASE = [b"--gpu-architecture=sm_90", b"-default-device", b"--std=c++17", b"-lineinfo", b"-minimal"]
SPLIT = b"--split-compile=0"
# Names each compile's unused variable (atomic under the GIL, so threads get distinct ones).
COUNTER = itertools.count(1)
# The line `fusebench emit --cuda` writes before each translation unit where a plan has several.
UNIT_LINE = b"// fusebench translation unit "


class Nvrtc:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)

    def compile(self, src, opts):
        """(milliseconds, cubin bytes) of one compile; exits with NVRTC's log on an error. Each
        compile's source differs (one unused variable named by a counter): NVRTC 13 answered a
        repeated compile of the same source and options in a fraction of the time (the corpus's
        median 30 ms against 194 ms on the GPU machine), which is not what a first compile costs."""
        src = src + b"\n__device__ int fb_compile_time_%d;\n" % next(COUNTER)
        prog = ctypes.c_void_p()
        if self.lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"fusebench_kernel.cu", 0, None, None):
            sys.exit("nvrtcCreateProgram failed")
        arr = (ctypes.c_char_p * len(opts))(*opts)
        t = time.perf_counter()
        r = self.lib.nvrtcCompileProgram(prog, len(opts), arr)
        ms = 1000 * (time.perf_counter() - t)
        n = ctypes.c_size_t()
        if r:
            self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            log = ctypes.create_string_buffer(n.value)
            self.lib.nvrtcGetProgramLog(prog, log)
            sys.exit(f"NVRTC error {r}:\n{log.value.decode(errors='replace')[:4000]}")
        self.lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        self.lib.nvrtcGetCUBIN(prog, buf)
        self.lib.nvrtcDestroyProgram(ctypes.byref(prog))
        return ms, buf.raw


def units(src):
    """The translation units of `emit --cuda`'s output (one where no UNIT_LINE splits it)."""
    parts, cur = [], []
    for line in src.split(b"\n"):
        if line.startswith(UNIT_LINE):
            if any(l.strip() and not l.startswith(b"//") for l in cur):
                parts.append(b"\n".join(cur))
            cur = []
        else:
            cur.append(line)
    parts.append(b"\n".join(cur))
    return parts


def compile_units(nv, src, opts):
    """(wall milliseconds, cubins) of compiling `src`'s units at once, a thread each, each with
    `opts` (and the split where a unit holds SPLIT_FROM kernels or more, when `opts` is None)."""
    us = units(src)
    pick = lambda u: opts if opts is not None else BASE + ([SPLIT] if u.count(b"__global__") >= 3 else [])
    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(len(us)) as ex:
        done = list(ex.map(lambda u: nv.compile(u, pick(u)), us))
    return 1000 * (time.perf_counter() - t), [c for _, c in done]


def sass_all(cubins):
    out = {}
    for c in cubins:
        out.update(sass(c))
    return out


def sass(cubin):
    """Each function's instructions (no addresses or encodings), by function name."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run(["cuobjdump", "-sass", f.name], capture_output=True, text=True, check=True).stdout
    funcs, cur = {}, None
    for line in text.splitlines():
        if "Function :" in line:
            cur = line.split("Function :")[1].strip()
            funcs[cur] = []
        elif cur and "*/" in line and not line.strip().startswith("/* 0x"):
            funcs[cur].append(line.split("*/", 1)[1].strip())
    return funcs


def scripts(paths):
    out = []
    for p in paths:
        out += sorted(glob.glob(os.path.join(p, "*.py"))) if os.path.isdir(p) else [p]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--nvrtc", required=True, help="the NVRTC library (libnvrtc.so.12 or later)")
    ap.add_argument("--fusebench", default="target/release/fusebench")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sass", action="store_true", help="also compare the SASS with and without the split")
    ap.add_argument("--against", help="another fusebench build: compare the two builds' modules instead")
    a = ap.parse_args()
    nv = Nvrtc(a.nvrtc)
    nv.compile(b'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n', BASE)
    if a.against:
        return compare_builds(nv, a)
    rows = []
    for s in scripts(a.paths):
        src = subprocess.run([a.fusebench, "emit", "--cuda", s], capture_output=True, check=True).stdout
        one = min(compile_units(nv, src, BASE)[0] for _ in range(a.reps))
        split = min(compile_units(nv, src, BASE + [SPLIT])[0] for _ in range(a.reps))
        same = ""
        if a.sass:
            same = "same SASS" if sass_all(compile_units(nv, src, BASE)[1]) == sass_all(compile_units(nv, src, BASE + [SPLIT])[1]) else "SASS DIFFERS"
        rows.append((os.path.basename(s), src.count(b"__global__"), one, split, same))
        print(f"{rows[-1][0]:<55} {rows[-1][1]} kernels  {one:7.1f} ms  split {split:7.1f} ms  {same}", flush=True)
    if rows:
        g = math.exp(sum(math.log(r[3] / r[2]) for r in rows) / len(rows))
        one = sorted(r[2] for r in rows)
        split = sorted(r[3] for r in rows)
        print(
            f"{len(rows)} fusions, {os.cpu_count()} cores: without the split median {one[len(one) // 2]:.0f} ms, "
            f"max {one[-1]:.0f}; with it median {split[len(split) // 2]:.0f}, max {split[-1]:.0f}; "
            f"geometric mean of the ratio {g:.3f}"
        )


def compare_builds(nv, a):
    """Times (best of REPS) of the modules of `a.fusebench` over those of `a.against`."""
    ratios, same, differ = [], 0, 0
    for s in scripts(a.paths):
        times, funcs = [], []
        for build in (a.against, a.fusebench):
            src = subprocess.run([build, "emit", "--cuda", s], capture_output=True, check=True).stdout
            best = min((compile_units(nv, src, None) for _ in range(a.reps)), key=lambda r: r[0])
            times.append(best[0])
            if a.sass:
                funcs.append({k: v for k, v in sass_all(best[1]).items() if not k.startswith("fb_compile_time_")})
        verdict = ""
        if a.sass:
            verdict = "same SASS" if funcs[0] == funcs[1] else "SASS DIFFERS"
            same, differ = same + (funcs[0] == funcs[1]), differ + (funcs[0] != funcs[1])
        ratios.append(times[1] / times[0])
        print(f"{os.path.basename(s):<55} {times[0]:7.1f} -> {times[1]:7.1f} ms  {verdict}", flush=True)
    if ratios:
        g = math.exp(sum(map(math.log, ratios)) / len(ratios))
        sass_line = f"; {same} with the same SASS, {differ} not" if a.sass else ""
        print(f"{len(ratios)} fusions: compile time {a.fusebench} / {a.against}, geometric mean {g:.3f}{sass_line}")


if __name__ == "__main__":
    main()
