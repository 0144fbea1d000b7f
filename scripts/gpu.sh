#!/usr/bin/env bash
# Builds, checks and times on a GPU machine in one call.
#   here:  scripts/gpu.sh stage        (release build + copy of ../shared into .gpu/, both git-ignored)
#   there: scripts/gpu.sh run [ARGS]   (what the device runs; writes logs to $OUT when set)
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
*)
    echo "usage: scripts/gpu.sh stage|run [bench args]" >&2
    exit 2
    ;;
esac
