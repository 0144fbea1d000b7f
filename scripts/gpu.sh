#!/usr/bin/env bash
# Builds, checks and times on a GPU machine in one call.
#   here:  scripts/gpu.sh stage        (release build + copy of ../shared into .gpu/, both git-ignored)
#   there: scripts/gpu.sh run [ARGS]   (what the device runs; writes logs to $OUT when set)
#          scripts/gpu.sh peer [ARGS]  (nvFuser and fusebench side by side; carry .peer too)
#          scripts/gpu.sh repro [ARGS] (two invocations compared, cache policies, copy ceilings)
# With the device tool: carry [".gpu"] (the stripped binary and the shared fusions) and run `bash scripts/gpu.sh run`.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=./target/release/fusebench
[ -x .gpu/fusebench ] && bin=.gpu/fusebench
out=${OUT:-/tmp/fusebench-out}
shared=.gpu/shared

case "${1:-run}" in
stage)
    cargo build --release -p fusebench-cli
    mkdir -p .gpu/shared
    rm -rf .gpu/shared/corpus .gpu/shared/golden
    cp -r ../shared/corpus ../shared/golden .gpu/shared/
    strip -o .gpu/fusebench target/release/fusebench
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
    # plus warm/cold/rotate of the seed RMSNorm and the copy ceilings.
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
PY
    for c in cold warm rotate; do $bin bench .gpu/shared/corpus/seed_rmsnorm_legacy.py --cache $c 2>/dev/null | grep -E "^│ seed"; done
    # CUPTI kernel records against CUDA events, per fusion.
    $bin bench $shared/corpus --method cupti --json "$@" >"$out/bench-cupti.json" 2>"$out/cupti-stderr.txt"
    tail -3 "$out/cupti-stderr.txt"
    python3 - "$out/bench-1.json" "$out/bench-cupti.json" <<'PY'
import json, sys
e, c = (json.load(open(p))["rows"] for p in sys.argv[1:3])
m = {r["file"]: r["ours_us"] for r in e}
for r in c:
    if r["file"] in m:
        print(f'{r["file"]}: events {m[r["file"]]:.2f} us, cupti {r["ours_us"]:.2f} us, {100 * (r["ours_us"] / m[r["file"]] - 1):+.1f}%')
PY
    ;;
*)
    echo "usage: scripts/gpu.sh stage|run|peer|repro [bench args]" >&2
    exit 2
    ;;
esac
