#!/usr/bin/env bash
# End to end: the GitHub Action (action.yml). Its structure is checked with a YAML parser (PyYAML
# from PyPI, in a temporary virtualenv); its install step builds gpulint from this checkout with
# `cargo install --locked --path`; its run step is run the way the runner runs it (inputs in
# INPUT_* variables, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_PATH files) on a small tree.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpulint-action.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
passed=0
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; passed=$((passed + 1)); }

echo "-- action.yml structure"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check pyyaml
"$work/venv/bin/python" - "$repo" <<'PY'
import os, re, sys, yaml
repo = sys.argv[1]
a = yaml.safe_load(open(os.path.join(repo, "action.yml")))
assert a["name"] and a["description"], "name and description are required"
assert set(a["inputs"]) == {"args", "paths", "fail-on", "sarif-file", "version"}, a["inputs"].keys()
for name, i in a["inputs"].items():
    assert i.get("description"), f"input {name} has no description"
    assert isinstance(i.get("default", ""), str), f"input {name}: default must be a string"
runs = a["runs"]
assert runs["using"] == "composite"
for step in runs["steps"]:
    assert step.get("shell") == "bash", f"composite run steps need a shell: {step}"
    for script in re.findall(r"\$GITHUB_ACTION_PATH/(\S+?)\"", step["run"]):
        assert os.path.isfile(os.path.join(repo, script)), f"missing {script}"
    for var in re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", str(step.get("env", {}))):
        assert var in a["inputs"], f"unknown input {var}"
for name, o in a["outputs"].items():
    assert "steps.run.outputs." + name in o["value"], name
PY
ok "action.yml: composite, five inputs, scripts present, outputs wired"

echo "-- install step: cargo install --locked --path (the action's own source)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
t=$SECONDS
RUNNER_TEMP="$work/runner" GITHUB_PATH="$work/github_path" GITHUB_ACTION_PATH="$repo" \
  bash "$repo/scripts/action-install.sh" > "$work/out" 2>&1 || { cat "$work/out"; fail "install step failed"; }
bindir=$(cat "$work/github_path")
[ -x "$bindir/gpulint" ] || fail "install step put no gpulint in $bindir"
grep -q "^gpulint " "$work/out" || { cat "$work/out"; fail "no version printed"; }
ok "install step: $(tail -1 "$work/out") in $bindir ($((SECONDS - t))s)"

echo "-- run step"
mkdir -p "$work/tree/src"
printf 'import torch\n\n\ndef double(x):\n    return x * 2\n' > "$work/tree/src/train.py"
printf 'PK\003\004\000\000not python' > "$work/tree/src/weights.py"
run_step() { # run_step FAIL_ON SARIF PATHS [ARGS]: sets $rc; output in $work/out
  : > "$work/gh_output"
  : > "$work/summary"
  rc=0
  (cd "$work/tree" && PATH="$bindir:$PATH" GITHUB_ACTION_PATH="$repo" GITHUB_OUTPUT="$work/gh_output" \
    GITHUB_STEP_SUMMARY="$work/summary" INPUT_FAIL_ON="$1" INPUT_SARIF_FILE="$2" INPUT_PATHS="$3" \
    INPUT_ARGS="${4:-}" bash "$repo/scripts/action-run.sh") > "$work/out" 2>&1 || rc=$?
}

run_step warning gpulint.sarif "src"
[ "$rc" = 1 ] || { cat "$work/out"; fail "fail-on warning with a warning: exit $rc, expected 1"; }
grep -q "^::warning file=src/weights.py,line=1,col=1,.*title=GL002 file-skipped::" "$work/out" \
  || { cat "$work/out"; fail "no annotation"; }
grep -qx "exit-code=1" "$work/gh_output" && grep -qx "sarif-file=gpulint.sarif" "$work/gh_output" \
  || { cat "$work/gh_output"; fail "outputs not written"; }
python3 - "$work/tree/gpulint.sarif" <<'PY' || fail "SARIF report"
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
results = run["results"]
assert [r["ruleId"] for r in results] == ["GL002"], results
assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/weights.py"
PY
grep -q "GL002" "$work/summary" || { cat "$work/summary"; fail "no job summary"; }
ok "fail-on warning: exit 1, annotation, SARIF with the finding, outputs and job summary"

run_step error "" "src"
[ "$rc" = 0 ] || { cat "$work/out"; fail "fail-on error with only a warning: exit $rc, expected 0"; }
grep -q "^::warning file=src/weights.py" "$work/out" || fail "annotation missing with fail-on error"
if grep -q "sarif-file=" "$work/gh_output"; then fail "SARIF written though sarif-file is empty"; fi
ok "fail-on error: exit 0, still annotated, no SARIF when sarif-file is empty"

run_step never out.sarif "src"
[ "$rc" = 0 ] || fail "fail-on never: exit $rc, expected 0"
ok "fail-on never: exit 0"

run_step warning out.sarif "src/train.py" "--select GL --gpu-memory 24GiB"
[ "$rc" = 0 ] || { cat "$work/out"; fail "clean file with args: exit $rc, expected 0"; }
grep -q "No findings" "$work/summary" || { cat "$work/summary"; fail "summary of a clean run"; }
ok "clean path with extra args: exit 0"

run_step sometimes out.sarif "src"
[ "$rc" = 2 ] && grep -q "^::error title=gpulint::fail-on must be" "$work/out" || { cat "$work/out"; fail "a bad fail-on: exit $rc, expected 2"; }
run_step warning out.sarif "src" "--select NOPE"
[ "$rc" = 2 ] && grep -qx "exit-code=2" "$work/gh_output" || { cat "$work/out"; fail "a bad argument: exit $rc, expected 2"; }
ok "bad inputs: exit 2 with a message"

echo "action e2e: $passed passed, 0 failed ($((SECONDS - start))s)"
