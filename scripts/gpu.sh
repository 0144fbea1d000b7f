#!/usr/bin/env bash
# Builds, checks and times on a GPU machine in one call.
#   here:  scripts/gpu.sh stage        (release build + copy of ../shared into .gpu/, both git-ignored)
#   there: scripts/gpu.sh run [ARGS]   (what the device runs; writes logs to $OUT when set)
#          scripts/gpu.sh peer [ARGS]  (nvFuser and fusebench side by side; carry .peer too)
#          scripts/gpu.sh repro [ARGS] (two invocations compared, cache policies, copy ceilings)
#          scripts/gpu.sh program      (programs saved, compared in-program vs standalone, explain pairs)
#          scripts/gpu.sh python [ARGS] (the Python module's GPU tests, the report redone, bench/peers.py)
#          scripts/gpu.sh thunder [ARGS] (fusebench.thunder.report on litgpt models, ARGS to bench/thunder_report.py; carry .peer)
#          scripts/gpu.sh nvbench      (a file nvbench itself writes; cuda-bench wheels in .gpu/wheels)
#          scripts/gpu.sh flush [ARGS] (L2 flush by write vs by read: copy ceilings, cold program vs standalone)
#          scripts/gpu.sh figures      (copy ceilings by the same method, % of copy, gather bytes, explain's planted pairs)
#          scripts/gpu.sh tests        (the GPU tests built by stage: engine outputs, the harness, the runtime;
#                                       run with --include-ignored, as built here they are marked ignored)
#          scripts/gpu.sh sweep        (fusions not in ../shared: checked, benchmarked, explain's pairs)
#          scripts/gpu.sh patterns [ARGS] (bench/patterns.py's sweep (ARGS go to it, selections joined by +): fusebench vs nvFuser vs
#                                       torch.compile vs the copy ceiling, one table per pattern; carry .peer)
#          scripts/gpu.sh ops [N]      (every op family's fixtures, nvFuser's per-op goldens, fuzz regressions,
#                                       N random fusions (default 10000) GPU vs CPU)
#          scripts/gpu.sh unrun [scans|channels|grouped]   (the kernels and plans written without a GPU, whose
#                                       settings stay off until run: checked against the CPU reference with them on,
#                                       then timed against the defaults, within one call; scripts/unrun.sh)
# With the device tool: carry [".gpu"] (the stripped binary and the shared fusions) and run `bash scripts/gpu.sh run`.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=./target/release/fusebench
[ -x .gpu/fusebench ] && bin=.gpu/fusebench
out=${OUT:-/tmp/fusebench-out}
shared=.gpu/shared

# peer_python: the peers' Python (.peer: nvFuser, Thunder, PyTorch) with the staged wheel importable.
peer_python() {
    source .peer/activate.sh
    pip install -q --no-deps --no-index --target /tmp/fbpy .gpu/fusebench-*.whl
    export PYTHONPATH=/tmp/fbpy:${PYTHONPATH:-}
}

# rec NAME COMMAND...: the record of a `bench --json` of one fusion, as $out/planted/NAME.json.
rec() {
    local name=$1
    shift
    "$@" --json 2>"$out/planted/$name.err" |
        python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["rows"][0]["record"], indent=1))' \
            >"$out/planted/$name.json" || tail -3 "$out/planted/$name.err"
}

# planted FILE PREFIX: one fusion's base (cold, CUPTI), its three single-change arms (other
# kernels: FUSEBENCH_ROW_UNROLL=1; warm; CUDA events), the three two-cause pairs and a second base.
planted() {
    local src=$1 f=$2
    rec $f-cold $bin bench "$src"
    FUSEBENCH_ROW_UNROLL=1 rec $f-cold-unroll1 $bin bench "$src"
    rec $f-warm $bin bench "$src" --cache warm
    rec $f-cold-events $bin bench "$src" --method events
    FUSEBENCH_ROW_UNROLL=1 rec $f-warm-unroll1 $bin bench "$src" --cache warm
    rec $f-warm-events $bin bench "$src" --cache warm --method events
    FUSEBENCH_ROW_UNROLL=1 rec $f-cold-unroll1-events $bin bench "$src" --method events
    rec $f-cold-2 $bin bench "$src"
}

case "${1:-run}" in
ops)
    # Issue 13's checks: each op family's scripts GPU vs CPU (outputs poisoned twice), nvFuser's
    # per-op goldens through the engine's GPU test, the fuzzer's regressions, then random fusions.
    n=${2:-10000}
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
    echo "== op fixtures on the GPU"
    $bin check --device gpu crates/cli/tests/fixtures/ops/* >"$out/ops.txt" 2>&1; echo "exit $?"
    grep -E "FAILED|MISMATCH|fusions:" "$out/ops.txt" | tail -20
    echo "== nvFuser's per-op goldens on the GPU"
    GOLDEN_OPS_DIR=crates/reference/tests/fixtures/golden-ops FUSEBENCH_SHARED=$shared \
        .gpu/tests/gpu_outputs golden_ops --include-ignored --nocapture >"$out/golden-ops.txt" 2>&1; echo "exit $?"
    grep -E "^golden|test result|problem|not yet|GPU" "$out/golden-ops.txt" | tail -30
    echo "== fuzz regressions"
    $bin fuzz --replay crates/cli/tests/fixtures/fuzz-regressions --device gpu >"$out/replay.txt" 2>&1; echo "exit $?"
    tail -12 "$out/replay.txt"
    echo "== $n random fusions"
    $bin fuzz --count "$n" --seed 1 --device gpu --jobs 12 --keep "$out/failures" >"$out/fuzz.txt" 2>&1; echo "exit $?"
    tail -40 "$out/fuzz.txt"
    # The device returns only a few files: the kept repro scripts travel as one archive.
    if [ -d "$out/failures" ]; then
        tar -czf "$out/failures.tar.gz" -C "$out" failures && rm -rf "$out/failures"
        echo "kept failures: $out/failures.tar.gz"
    fi
    ;;
patterns)
    # Issue 14's table: the generated sweep timed by every peer under fusebench.kernel_time (cold L2,
    # CUPTI), torch.compile compiled first by 14 worker processes so that timing stays serial.
    shift || true
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
    # Several selections of the grid are separated by "+": patterns --only gelu + --only rmsnorm --dtypes f16
    rm -rf /tmp/sweep
    sel=()
    for a in "$@" +; do
        if [ "$a" = + ]; then python3 bench/patterns.py /tmp/sweep "${sel[@]}"; sel=(); else sel+=("$a"); fi
    done
    peer_python
    python3 bench/peers.py /tmp/sweep --compile all --skip eager --precompile 14 --by-pattern \
        --json "$out/sweep.json" >"$out/sweep.txt" 2>"$out/sweep-stderr.txt"
    echo "peers exit $?"
    sed -n '/^per pattern/,$p' "$out/sweep.txt"
    grep -B1 FAILED "$out/sweep-stderr.txt" | head -30
    # PEERS_ALSO=DIR: the same peers on another directory too (the shared corpus), in the same call.
    if [ -n "${PEERS_ALSO:-}" ]; then
        python3 bench/peers.py "$PEERS_ALSO" --compile all --skip eager --precompile 14 \
            --json "$out/also.json" >"$out/also.txt" 2>"$out/also-stderr.txt"
        echo "peers (also) exit $?"
        grep -E "^geometric" "$out/also.txt"
        grep -B1 FAILED "$out/also-stderr.txt" | head -20
    fi
    ;;
unrun)
    # The kernels and plans written without a GPU, off until this passes: scripts/unrun.sh says which.
    shift || true
    OUT=$out bash scripts/unrun.sh "$@"
    ;;
stage)
    cargo build --release -p fusebench-cli
    mkdir -p .gpu/shared
    rm -rf .gpu/shared/corpus .gpu/shared/golden
    cp -r ../shared/corpus ../shared/golden .gpu/shared/
    strip -o .gpu/fusebench target/release/fusebench
    # The GPU tests, built here (no Rust toolchain there). Built without a driver they are
    # marked ignored (crates/testdata's needs_gpu!): `tests` runs them with --include-ignored.
    mkdir -p .gpu/tests
    cargo test --release --no-run -p fusebench-engine -p fusebench-harness -p fusebench-runtime --message-format=json 2>/dev/null |
        python3 -c '
import json, sys, subprocess
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        name, src = m["target"]["name"], m["target"]["src_path"]
        if name == "gpu_outputs":
            dest = ".gpu/tests/gpu_outputs"
        elif name == "gpu" and "/crates/harness/" in src:
            dest = ".gpu/tests/harness_gpu"
        elif name == "gpu" and "/crates/runtime/" in src:
            dest = ".gpu/tests/runtime_gpu"
        else:
            continue
        subprocess.run(["strip", "-o", dest, m["executable"]], check=True)
        print("staged", dest)
'
    bash scripts/python.sh wheel
    rm -f .gpu/fusebench-*.whl && cp target/wheels/fusebench-*.whl .gpu/
    ;;
run)
    shift || true
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
    echo "== check golden on GPU"
    $bin check --device gpu $shared/golden >"$out/check-golden.txt" 2>&1; echo "exit $?"
    grep -E "FAILED|MISMATCH|fusions:" "$out/check-golden.txt" | tail -30
    echo "== check corpus on GPU"
    $bin check --device gpu $shared/corpus >"$out/check-corpus.txt" 2>&1; echo "exit $?"
    grep -E "FAILED|MISMATCH|fusions:|GPU:" "$out/check-corpus.txt" | tail -60
    echo "== bench corpus (cold L2)"
    $bin bench $shared/corpus "$@" 2>"$out/bench-stderr.txt" | tee "$out/bench.txt"
    ;;
peer)
    # nvFuser and fusebench side by side in one run: needs .peer (../shared/tools/nvfuser-peer/prepare.sh .peer) carried too.
    shift || true
    mkdir -p "$out"
    echo "== compile: first run, then cached"
    rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/fusebench"
    for i in 1 2; do
        $bin check --device gpu --json $shared/corpus >"$out/check-$i.json" 2>/dev/null
        python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['reports']; c=[x['gpu']['compile_ms'] for x in r]; h=sum(x['gpu']['from_cache'] for x in r); print(f'run $i: compile ms min {min(c):.1f} median {sorted(c)[len(c)//2]:.1f} max {max(c):.1f}; {h} of {len(c)} from cache')" "$out/check-$i.json"
    done
    source .peer/activate.sh
    python3 bench/nvfuser_peer.py $shared/corpus "$@" --out "$out/nvfuser.json" 2>"$out/peer-stderr.txt"
    tail -3 "$out/peer-stderr.txt"
    $bin bench $shared/corpus --nvfuser "$out/nvfuser.json" --kernels "$@" 2>"$out/bench-stderr.txt" >"$out/bench-side-by-side.txt"
    sed -n '/^NVIDIA/,/^└/p;/^geometric/p' "$out/bench-side-by-side.txt"
    ;;
repro)
    # Two separate invocations of the cold benchmark, then how many medians agree within 1%,
    # the RMSNorm at batch 1-32 under each cache policy and method, and the copy ceilings.
    shift || true
    mkdir -p "$out"
    $bin peak | tee "$out/peak.txt"
    for i in 1 2; do $bin bench $shared/corpus --json "$@" >"$out/bench-$i.json" 2>/dev/null; done
    python3 - "$out/bench-1.json" "$out/bench-2.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["rows"] for p in sys.argv[1:3])
m = {r["file"]: r["ours_us"] for r in a}
d = [(r["file"], abs(r["ours_us"] / m[r["file"]] - 1)) for r in b if r["file"] in m]
ok = sum(x <= 0.01 for _, x in d)
print(f"{ok} of {len(d)} medians agree within 1%; worst {max(d, key=lambda t: t[1])}")
for name, rows in (("run 1", a), ("run 2", b)):
    conv = [r for r in rows if "converged" in r["stop"]]
    fast = [r for r in conv if r["sampling_s"] <= 1.0]
    t = sorted(r["sampling_s"] for r in rows)
    thr = sum(r["record"]["throttled_samples"] for r in rows)
    print(f"{name}: {len(conv)} of {len(rows)} converged, {len(fast)} within 1 s; sampling s median {t[len(t)//2]:.2f} max {t[-1]:.2f}; throttled samples {thr}")
PY
    # The facts file's RMSNorm at batch 1, 2, 4, 8 under each cache policy.
    mkdir -p "$out/rms"
    for B in 1 2 4 8 32; do
        sed "s/\[4, 1024/[$B, 1024/g; s/(4, 1024/($B, 1024/g" $shared/corpus/seed_rmsnorm_legacy.py >"$out/rms/rmsnorm_b$B.py"
    done
    for c in cold warm rotate; do
        $bin bench "$out/rms" --cache $c --method events --json "$@" >"$out/rms-$c.json" 2>"$out/rms-$c.err"
        $bin bench "$out/rms" --cache $c --method cupti --json "$@" >"$out/rms-$c-cupti.json" 2>"$out/rms-$c-cupti.err"; tail -2 "$out/rms-$c-cupti.err"
    done
    python3 - "$out" <<'PY'
import json, sys
o = sys.argv[1]
t = {}
for c in ("cold", "warm", "rotate"):
    for m, suf in (("events", ""), ("cupti", "-cupti")):
        try:
            for r in json.load(open(f"{o}/rms-{c}{suf}.json"))["rows"]:
                t[(r["file"], c, m)] = (r["ours_us"], r["rel_ci"])
        except Exception as e:
            print(f"rms {c} {m}: {e}")
print("| B | cold events | warm events | rotate events | cold cupti | warm cupti | rotate cupti |")
for B in (1, 2, 4, 8, 32):
    f = f"rmsnorm_b{B}.py"
    cells = []
    for m in ("events", "cupti"):
        for c in ("cold", "warm", "rotate"):
            v = t.get((f, c, m))
            cells.append(f"{v[0]:.2f} (+-{100 * v[1]:.1f}%)" if v else "-")
    print(f"| {B} | " + " | ".join(cells) + " |")
PY
    # CUDA events against the CUPTI kernel records of run 1, per fusion.
    $bin bench $shared/corpus --method events --json "$@" >"$out/bench-events.json" 2>"$out/events-stderr.txt"
    tail -3 "$out/events-stderr.txt"
    python3 - "$out/bench-events.json" "$out/bench-1.json" <<'PY'
import json, sys
e, c = (json.load(open(p))["rows"] for p in sys.argv[1:3])
m = {r["file"]: r["ours_us"] for r in e}
for r in c:
    if r["file"] in m:
        print(f'{r["file"]}: events {m[r["file"]]:.2f} us, cupti {r["ours_us"]:.2f} us, {100 * (r["ours_us"] / m[r["file"]] - 1):+.1f}%')
PY
    ;;
program)
    # Each model's forward and backward programs: saved as repros, then timed in the
    # program and standalone from those repros; and the measurement pairs explain is tested on.
    shift || true
    mkdir -p "$out"
    $bin save $shared/corpus --by-model --out "$out/saved" 2>&1 | tail -1
    $bin compare $shared/corpus --by-model --saved "$out/saved" --records "$out/records" "$@" | tee "$out/compare.txt"
    seed=$shared/corpus/seed_rmsnorm_legacy.py
    fx=crates/cli/tests/fixtures/explain
    sed 's/\[4, 1024/[1, 1024/g; s/(4, 1024/(1, 1024/g' $seed >"$out/rmsnorm_b1.py"
    $bin bench $seed --json >"$out/seed-cold-1.json" 2>/dev/null
    $bin bench $seed --json >"$out/seed-cold-2.json" 2>/dev/null
    $bin bench $seed --cache warm --json >"$out/seed-warm.json" 2>/dev/null
    FUSEBENCH_ROW_UNROLL=1 $bin bench $seed --json >"$out/seed-cold-unroll1.json" 2>/dev/null
    $bin bench "$out/rmsnorm_b1.py" --json >"$out/b1-cold.json" 2>/dev/null
    $bin bench "$out/rmsnorm_b1.py" --cache warm --json >"$out/b1-warm.json" 2>/dev/null
    $bin bench $fx/square_rows.py --json >"$out/square-rows.json" 2>/dev/null
    $bin bench $fx/square_columns.py --json >"$out/square-columns.json" 2>/dev/null
    for p in "seed-cold-1 seed-cold-unroll1" "square-rows square-columns" "seed-cold-1 seed-warm" \
             "b1-cold b1-warm" "seed-cold-1 seed-cold-2"; do
        set -- $p
        echo "== explain $1 $2"
        $bin explain "$out/$1.json" "$out/$2.json" | tail -4
    done
    # One archive: the device tool returns only a few files.
    tar czf /tmp/program.tgz -C "$out" . && mv /tmp/program.tgz "$out/" &&
        find "$out" -mindepth 1 -not -name "*.tgz" -not -name compare.txt -delete
    ;;
python)
    # The Python module with nvFuser, Thunder and PyTorch beside it: its tests on the GPU, the
    # original report redone, and every corpus fusion timed by each peer (carry .gpu and .peer).
    shift || true
    mkdir -p "$out"
    peer_python
    python3 crates/python/tests/test_fusebench.py 2>&1 | tail -4
    python3 bench/report_repro.py "$out/report" 2>"$out/report-stderr.txt" || tail -20 "$out/report-stderr.txt"
    python3 bench/peers.py $shared/corpus --json "$out/peers.json" "$@" 2>"$out/peers-stderr.txt"
    grep -B1 FAILED "$out/peers-stderr.txt" | head -20
    ;;
thunder)
    # Issue 16: every nvFusion of litgpt models' training steps, in the step, online and saved
    # (bench/thunder_report.py; default Llama-3.2-1B and phi-2 at 2 layers, batch 2 x 1024).
    shift || true
    mkdir -p "$out"
    peer_python
    python3 bench/thunder_report.py "$out/thunder" --models Llama-3.2-1B:2,phi-2:2 "$@" 2>"$out/thunder-stderr.txt" \
        || tail -30 "$out/thunder-stderr.txt"
    ;;
flush)
    # The L2 flush by a write (memset) against one by a read: copy ceilings, and every
    # program compared cold in the program and standalone under each.
    shift || true
    mkdir -p "$out"
    $bin save $shared/corpus --by-model --out "$out/saved" 2>&1 | tail -1
    for kind in write read; do
        FUSEBENCH_FLUSH=$kind $bin peak --json >"$out/peak-$kind.json" 2>"$out/peak-$kind.err"
        FUSEBENCH_FLUSH=$kind $bin compare $shared/corpus --by-model --saved "$out/saved" --json "$@" \
            >"$out/compare-$kind.json" 2>"$out/compare-$kind.err"; tail -2 "$out/compare-$kind.err"
    done
    python3 bench/flush_summary.py "$out" | tee "$out/flush-summary.txt"
    rm -rf "$out/saved"
    ;;
tests)
    # The cargo tests that need a GPU, built by stage where no driver is: they were marked
    # ignored there (needs a GPU), so they run with --include-ignored; each still checks for
    # the GPU itself and says "skipped" if there is none.
    mkdir -p "$out"
    for t in .gpu/tests/*; do
        echo "== $t"
        FUSEBENCH_SHARED=$shared GOLDEN_OPS_DIR=crates/reference/tests/fixtures/golden-ops \
            $t --include-ignored --nocapture >"$out/$(basename $t).txt" 2>&1
        echo "exit $?"
        grep -E "^test |test result|mismatch|MISMATCH|panicked|skipped" "$out/$(basename $t).txt" | tail -15
    done
    # The harness test orders the cold copy ceiling above the warm one only after a write flush.
    echo "== .gpu/tests/harness_gpu under FUSEBENCH_FLUSH=write"
    FUSEBENCH_FLUSH=write FUSEBENCH_SHARED=$shared .gpu/tests/harness_gpu seed_rmsnorm --include-ignored --nocapture \
        >"$out/harness_gpu-write.txt" 2>&1
    echo "exit $?"
    grep -E "^test |test result|panicked|skipped" "$out/harness_gpu-write.txt" | tail -5
    ;;
figures)
    # Every figure beside the headline, measured the way it is: the copy ceilings (peak), the
    # seed RMSNorm's % of copy, the gather fusions' bytes, and the records explain is checked on:
    # for b1 (1x1024x4096, fits in L2) and seed (4x1024x4096), a base (cold, CUPTI), three
    # single-change arms (other kernels: FUSEBENCH_ROW_UNROLL=1; warm; CUDA events), three
    # two-cause pairs and a second base run; and the transposed-layout pair.
    shift || true
    mkdir -p "$out/planted"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/gpu.txt"
    $bin peak | tee "$out/peak.txt"
    seed=$shared/corpus/seed_rmsnorm_legacy.py
    cp $seed "$out/seed.py"
    sed 's/\[4, 1024/[1, 1024/g; s/(4, 1024/(1, 1024/g' $seed >"$out/b1.py"
    for f in b1 seed; do
        planted "$out/$f.py" $f
    done
    fx=crates/cli/tests/fixtures/explain
    rec square-rows $bin bench $fx/square_rows.py
    rec square-columns $bin bench $fx/square_columns.py
    echo "== seed and the gather (embedding) fusions: bytes and % of copy, copies timed the same way"
    $bin bench $seed $shared/corpus/000_*.py $shared/corpus/012_*.py $shared/corpus/023_*.py 2>/dev/null | tee "$out/gather.txt"
    for f in b1 seed; do
        for b in cold-unroll1 warm cold-events warm-unroll1 warm-events cold-unroll1-events cold-2; do
            echo "== explain $f-cold $f-$b"
            $bin explain "$out/planted/$f-cold.json" "$out/planted/$f-$b.json" | sed -n '/^B − A/p;/^Shares/,$p'
        done
    done | tee "$out/explain.txt"
    tar czf /tmp/figures.tgz -C "$out" planted explain.txt peak.txt gather.txt gpu.txt && mv /tmp/figures.tgz "$out/"
    rm -rf "$out/planted"
    ;;
sweep)
    # Fusions none of the shared ones are (bench/sweep.py: RMSNorms and embedding+RMSNorms at other
    # hidden sizes, row counts, vocabularies and dtypes): checked on the GPU, benchmarked with their
    # ceilings and siblings, and two of them planted as explain's pairs are.
    mkdir -p "$out/planted"
    python3 bench/sweep.py write "$out/fusions"
    $bin check --device gpu "$out/fusions" >"$out/check.txt" 2>&1
    echo "check exit $?: $(tail -1 "$out/check.txt")"
    $bin bench "$out/fusions" --json >"$out/bench.json" 2>"$out/bench.err"
    echo "bench exit $?"
    for f in rms_8x1024x5120_f16 rms_8x1024x1536_bf16; do
        planted "$out/fusions/$f.py" $f
        for b in warm-unroll1 warm-events cold-unroll1-events; do
            $bin explain "$out/planted/$f-cold.json" "$out/planted/$f-$b.json" --json \
                >"$out/planted/$f--$b.explain.json"
        done
    done
    python3 bench/sweep.py summary "$out" | tee "$out/summary.txt"
    tar czf /tmp/sweep.tgz -C "$out" planted bench.json check.txt && mv /tmp/sweep.tgz "$out/"
    rm -rf "$out/planted" "$out/fusions"
    ;;
nvbench)
    # A file nvbench itself writes, for the nvbench reader's tests: cuda-bench and cuda-bindings
    # wheels (for the machine's Python) are carried in .gpu/wheels.
    mkdir -p "$out"
    source .peer/activate.sh
    pip install -q --no-deps --no-index --target /tmp/nvb .gpu/wheels/*.whl
    PYTHONPATH=/tmp/nvb:${PYTHONPATH:-} python3 bench/nvbench_fixture.py --json "$out/nvbench_copy.json" | tail -8
    $bin diff "$out/nvbench_copy.json" "$out/nvbench_copy.json"
    ;;
*)
    echo "usage: scripts/gpu.sh stage|run|peer|patterns|repro|program|python|nvbench|flush|figures|tests|sweep [bench args]" >&2
    exit 2
    ;;
esac
