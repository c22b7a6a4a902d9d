#!/usr/bin/env bash
# End to end: the wheel. maturin (from PyPI, in a temporary virtualenv) builds the binary wheel
# from pyproject.toml; it is installed into a fresh virtualenv and run from there: version,
# exit codes on a small tree. Then `pip install <checkout>` (the PEP 517 build) the same way.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpulint-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
fail() { echo "FAIL: $*" >&2; exit 1; }
pip_q() { "$1/bin/pip" install --quiet --disable-pip-version-check "${@:2}"; }
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -1)

echo "-- building the wheel with maturin"
python3 -m venv "$work/build"
pip_q "$work/build" "maturin>=1.5,<2"
t=$SECONDS
if ! (cd "$repo" && "$work/build/bin/maturin" build --release --out "$work/wheels") >"$work/build.log" 2>&1; then
  cat "$work/build.log"
  fail "maturin build failed"
fi
wheel=$(find "$work/wheels" -name "gpulint-$version-*.whl" | head -1)
[ -f "$wheel" ] || fail "no wheel for version $version in $work/wheels"
echo "ok: built $(basename "$wheel") in $((SECONDS - t))s"

# A small tree: a clean file, and one with a finding (GL002: a binary file under a .py name).
mkdir -p "$work/tree/clean" "$work/tree/dirty"
printf 'import torch\n\n\ndef double(x):\n    return x * 2\n' > "$work/tree/clean/train.py"
printf 'PK\003\004\000\000not python' > "$work/tree/dirty/weights.py"

check_install() { # check_install VENV HOW
  local bin="$1/bin/gpulint"
  [ -x "$bin" ] || fail "$2: no gpulint in $1/bin"
  local v
  v=$(cd "$work" && PATH="$1/bin:/usr/bin:/bin" gpulint --version)
  [ "$v" = "gpulint $version" ] || fail "$2: --version printed '$v', expected 'gpulint $version'"
  local rc=0
  (cd "$work/tree" && "$bin" --isolated clean) >/dev/null 2>&1 || rc=$?
  [ "$rc" = 0 ] || fail "$2: clean tree exited $rc, expected 0"
  rc=0
  (cd "$work/tree" && "$bin" --isolated --output-format concise .) >"$work/out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || { cat "$work/out"; fail "$2: tree with a finding exited $rc, expected 1"; }
  grep -q "^dirty/weights.py:1:1: GL002" "$work/out" || { cat "$work/out"; fail "$2: GL002 not reported"; }
  rc=0
  (cd "$work/tree" && "$bin" --isolated no-such-dir) >/dev/null 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "$2: a missing path exited $rc, expected 2"
  echo "ok: $2: '$v'; exit 0 clean, 1 with a finding, 2 for a missing path"
}

echo "-- installing the wheel into a fresh virtualenv"
python3 -m venv "$work/wheel-env"
pip_q "$work/wheel-env" "$wheel"
check_install "$work/wheel-env" "wheel"

echo "-- pip install <checkout> (PEP 517 build through maturin)"
python3 -m venv "$work/src-env"
t=$SECONDS
pip_q "$work/src-env" "$repo"
check_install "$work/src-env" "pip install ."
echo "   (built and installed in $((SECONDS - t))s)"

echo "pip e2e: 2 passed, 0 failed ($((SECONDS - start))s)"
