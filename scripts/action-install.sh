#!/usr/bin/env bash
# Installs gpulint for the GitHub Action (action.yml): from PyPI when GPULINT_VERSION is set,
# else from the action's own source with cargo. Puts it on the job's PATH.
set -euo pipefail
root="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/gpulint-action"
if [ -n "${GPULINT_VERSION:-}" ]; then
  python3 -m venv "$root/venv" 2>/dev/null || python -m venv "$root/venv"
  bin="$root/venv/bin"
  [ -d "$bin" ] || bin="$root/venv/Scripts" # Windows
  "$bin/python" -m pip install --quiet --disable-pip-version-check "gpulint==${GPULINT_VERSION#v}"
else
  source_dir="${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}"
  cargo install --locked --quiet --root "$root" --path "$source_dir"
  bin="$root/bin"
fi
if [ -n "${GITHUB_PATH:-}" ]; then
  echo "$bin" >> "$GITHUB_PATH"
fi
"$bin/gpulint" --version
