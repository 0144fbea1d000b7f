#!/usr/bin/env bash
# Builds the Python module as an abi3 wheel (one wheel for CPython >= 3.9) in a virtual
# environment under target/, installs it there and runs its tests.
#   scripts/python.sh            build, install, test
#   scripts/python.sh wheel      build only (the wheel lands in target/wheels/)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pyvenv
[ -x $venv/bin/python ] || python3 -m venv $venv
$venv/bin/python -m pip install -q --disable-pip-version-check "maturin>=1.5,<2"
rm -f target/wheels/fusebench-*.whl
$venv/bin/maturin build --release -m crates/python/Cargo.toml -o target/wheels
[ "${1:-}" = wheel ] && exit 0
$venv/bin/python -m pip install -q --disable-pip-version-check --force-reinstall target/wheels/fusebench-*.whl
# numpy exports DLPack on the CPU: the reader's tests use it.
$venv/bin/python -m pip install -q --disable-pip-version-check numpy
(cd target && pyvenv/bin/python ../crates/python/tests/test_fusebench.py -v && pyvenv/bin/python ../crates/python/tests/test_thunder.py -v)
