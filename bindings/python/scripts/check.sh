#!/usr/bin/env bash
# Builds and installs the Python package in a fresh virtual environment (pip install, which runs
# maturin), with pytest, pyarrow, pandas and dask[distributed], then runs its tests.
# Exits non-zero on any failure, including pytest finding no test (its exit 5).
# Usage: bindings/python/scripts/check.sh [VENV_DIR]   (default: a temporary folder)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
venv="${1:-$(mktemp -d)/venv}"

"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "$here[test]"

cd "$here"
set +e
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "check.sh: pytest ran no test" >&2
    exit 1
fi
exit "$status"
