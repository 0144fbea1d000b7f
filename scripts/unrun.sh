#!/usr/bin/env bash
# The kernels and plans written without a GPU, whose settings stay off until this passes: checked against the
# CPU reference with them on (outputs poisoned, per-element bounds), then timed with `bench` (cold L2, CUPTI)
# against the defaults in the same call, most wanted first. Steps past BUDGET seconds (default 540) are
# skipped and said so, so that one device call holds it; the logs go to $OUT/unrun.tgz.
#   scripts/unrun.sh [all|scans|channels|grouped]      (through scripts/gpu.sh unrun, carry .gpu)
# What each part turns on:
#   scans     FUSEBENCH_SCAN_LINES, FUSEBENCH_SCAN_EPILOGUE (sessions 39-40), FUSEBENCH_SCAN_TILES (41)
#   channels  FUSEBENCH_RESHAPED_OUTPUTS, FUSEBENCH_STAT_EPILOGUE, FUSEBENCH_ROWS_STORE, FUSEBENCH_GRID_MOMENTS,
#             FUSEBENCH_SIBLINGS (42)
#   grouped   FUSEBENCH_GROUPED_WS_CUTS=m,n,k, FUSEBENCH_GROUPED_WS_MN (39)
set -u
cd "$(dirname "$0")/.."
part=${1:-all}
b=./target/release/fusebench
[ -x .gpu/fusebench ] && b=.gpu/fusebench
o=/tmp/unrun-logs; rm -rf $o; mkdir -p $o
t0=$(date +%s); budget=${BUDGET:-540}
left() { echo $(( budget - ($(date +%s) - t0) )); }
step() { # SECONDS LABEL LOG CMD...: runs CMD into LOG with at most SECONDS (less where the budget is shorter), or skips it
    local s=$1 l=$2 log=$3; shift 3
    local r=$(left); [ $r -lt 20 ] && { echo "skipped ($r s left): $l"; return; }
    [ $s -gt $((r - 10)) ] && s=$((r - 10))
    echo "== $l ($s s at most, $(date -u +%T))"
    timeout $s "$@" > $log 2>&1; echo "exit $?"
    grep -E "^  (run on|matched|mismatched|failed|refused)|fusions:|MISMATCH|FAILED|panicked|error" $log | head -12
}
timed() { local n=$1 d=$2; shift 2; step ${T:-75} "bench $n" $o/b-$n.txt env "$@" $b bench $d --jsonl $o/t-$n.jsonl; }
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
u=/tmp/unrun; rm -rf $u
p() { python3 bench/patterns.py "$@" >/dev/null; }
p $u/scanchk --family scans --cols 1,5,31,32,33,100,127,128,1000,4096,5000,32000 --rows 1,3,8,64,1000 --dtypes f32,bf16
p $u/scans --family scans --only cumsum --cols 128,4096,32000 --rows 8,64,1024 --dtypes f32,bf16 --layouts rowmajor
p $u/scans --family scans --only cumsum --cols 128,4096 --rows 32768 --dtypes f32,bf16 --layouts rowmajor
p $u/scancol --family scans --only cumsum --cols 128,1000,4096 --rows 4096,32768 --dtypes f32,bf16 --layouts colmajor
p $u/ch --family channels
mkdir -p $u/chsub && cp $u/ch/*-bf16-8x* $u/chsub/
python3 bench/grouped_random.py $u/gsmall --count 120 --seed 38 >/dev/null
p $u/gmmk --family gemm --only grouped_mm_k --cols 1024,2048,4096 --rows 4096,16384 --dtypes bf16 --layouts colmajor
p $u/gmn --family gemm --only grouped_mm,grouped_mm_k --cols 1024,2048,4096 --rows 4096,16384 --dtypes bf16 --layouts rowmajor
S="FUSEBENCH_SCAN_LINES=1 FUSEBENCH_SCAN_EPILOGUE=1 FUSEBENCH_SCAN_TILES=1"
C="FUSEBENCH_RESHAPED_OUTPUTS=1 FUSEBENCH_STAT_EPILOGUE=1 FUSEBENCH_ROWS_STORE=1 FUSEBENCH_GRID_MOMENTS=1 FUSEBENCH_SIBLINGS=1"
G="FUSEBENCH_GROUPED_WS_CUTS=m,n,k FUSEBENCH_GROUPED_WS_MN=1"
# Checks first: a setting that fails one is not timed worth anything.
if want scans; then
    step 100 "scan shapes, every scan setting" $o/chk-scans.txt env $S $b fuzz --replay $u/scanchk --device gpu --jobs 14
    step 60 "column-major scans, every scan setting" $o/chk-scancol.txt env $S $b fuzz --replay $u/scancol --device gpu --jobs 14
    step 40 "index fixtures, every scan setting" $o/chk-index.txt env $S $b fuzz --replay crates/cli/tests/fixtures/ops/index --device gpu --jobs 14
fi
if want channels; then
    step 90 "channels, defaults" $o/chk-ch-default.txt $b check --device gpu $u/ch
    step 90 "channels, the channel settings" $o/chk-ch-knobs.txt env $C $b check --device gpu $u/ch
    step 60 "reduce and layout fixtures, fuzz regressions, the channel settings" $o/chk-fixtures.txt env $C $b check --device gpu \
        crates/cli/tests/fixtures/ops/reduce crates/cli/tests/fixtures/ops/layout crates/cli/tests/fixtures/fuzz-regressions
fi
if want grouped; then
    step 60 "small grouped fusions, every cut, MN-major" $o/chk-grouped.txt env $G $b fuzz --replay $u/gsmall --device gpu --jobs 14
    step 40 "product fixtures, every cut, MN-major" $o/chk-products.txt env $G $b fuzz --replay crates/cli/tests/fixtures/ops/products --device gpu --jobs 14
fi
[ "$part" = all ] && step 60 "1500 random fusions, every setting" $o/chk-fuzz.txt env $S $C $G $b fuzz --seed 7 --count 1500 --device gpu --jobs 14 --keep $o/fail
want scans && step 40 "scan shapes, blocks + epilogue" $o/chk-scans-blocks.txt env FUSEBENCH_SCAN_EPILOGUE=1 $b fuzz --replay $u/scanchk --device gpu --jobs 14
# Then timings, each against the defaults of the same call.
if want scans; then
    timed scans-default $u/scans X=0
    timed scans-lines-epilogue $u/scans FUSEBENCH_SCAN_LINES=1 FUSEBENCH_SCAN_EPILOGUE=1
    timed col-default $u/scancol X=0
    timed col-tiles $u/scancol $S
fi
if want channels; then
    T=120 timed ch-default $u/chsub X=0
    T=120 timed ch-knobs $u/chsub $C
fi
if want grouped; then
    timed k-default $u/gmmk X=0
    timed k-ws $u/gmmk FUSEBENCH_GROUPED_WS_CUTS=m,n,k
    timed mn-default $u/gmn X=0
    timed mn-ws $u/gmn $G
fi
if want scans; then
    timed col-lines-epilogue $u/scancol FUSEBENCH_SCAN_LINES=1 FUSEBENCH_SCAN_EPILOGUE=1
    timed scans-lines $u/scans FUSEBENCH_SCAN_LINES=1
fi
python3 - "$o" <<'PY'
import json, math, sys
o = sys.argv[1]
def load(n):
    try:
        return {json.loads(l)["file"]: json.loads(l)["ours_us"] for l in open(f"{o}/t-{n}.jsonl")}
    except OSError:
        return {}
for base, arms in [("scans-default", ["scans-lines-epilogue", "scans-lines"]), ("col-default", ["col-tiles", "col-lines-epilogue"]),
                   ("ch-default", ["ch-knobs"]), ("k-default", ["k-ws"]), ("mn-default", ["mn-ws"])]:
    a = load(base)
    bs = [load(n) for n in arms]
    if not a:
        continue
    print(f"{'us':44s} {base:>14s} " + " ".join(f"{n:>20s}" for n in arms))
    for k in sorted(a):
        print(f"{k[-44:]:44s} {a[k]:14.1f} " + " ".join(f"{b.get(k, math.nan):20.1f}" for b in bs))
    for n, b in zip(arms, bs):
        r = [b[k] / a[k] for k in a if k in b]
        if r:
            g = math.exp(sum(map(math.log, r)) / len(r))
            print(f"geomean {n} / {base}: {g:.3f} over {len(r)} ({min(r):.2f}-{max(r):.2f})")
PY
[ -n "${OUT:-}" ] && tar czf "$OUT/unrun.tgz" -C $o .
echo "done $(date -u +%T), $(left) s of the budget left"
