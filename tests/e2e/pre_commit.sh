#!/usr/bin/env bash
# End to end: pre-commit (from PyPI, in a temporary virtualenv) installs gpulint from this
# checkout as a hook repository (`language: rust`, so `cargo install --path .`), and a commit
# with a finding is refused with gpulint's message while clean commits go through.
#
# pre-commit clones the hook repository at a commit, so the checkout's working tree (tracked
# and untracked, not ignored files) is copied into a temporary repository and committed there:
# what is tested is what is on disk, committed or not.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpulint-pre-commit.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "-- installing pre-commit into a virtualenv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check pre-commit
export PATH="$work/venv/bin:$PATH"
export PRE_COMMIT_HOME="$work/cache"
# Share compiled dependencies with the checkout's own release build (the crate itself is
# rebuilt: its path differs).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
pre-commit --version

echo "-- hook repository: a commit of this checkout's working tree"
mkdir "$work/hooks"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard \
  | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
  | xargs -0 cp --parents -t "$work/hooks")
git_q() { git -c user.name=e2e -c user.email=e2e@example.invalid -c commit.gpgsign=false -c init.defaultBranch=main "$@"; }
(cd "$work/hooks" && git_q init -q && git_q add -A && git_q commit -q -m hooks)
rev=$(git -C "$work/hooks" rev-parse HEAD)

echo "-- project repository using the hook"
mkdir "$work/project"
cd "$work/project"
git_q init -q
cat > .pre-commit-config.yaml <<EOF
repos:
  - repo: $work/hooks
    rev: $rev
    hooks:
      - id: gpulint
EOF
cat > gpulint.toml <<'EOF'
extend-exclude = ["third_party"]
EOF
pre-commit install >/dev/null

commit() { # commit MESSAGE: runs the hook through git; output in $work/out
  git_q commit -m "$1" >"$work/out" 2>&1
}
commits() { git rev-list --count HEAD 2>/dev/null || echo 0; }

# 1. A clean Python file and a guarded kernel: accepted. (First use builds the hook: minutes.)
printf 'import torch\n\n\ndef double(x):\n    return x * 2\n' > train.py
mkdir -p ops
printf '__global__ void scale(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) out[i] *= 2.0f;\n}\n' > ops/scale.cu
git add -A
t=$SECONDS
commit "clean" || { cat "$work/out"; fail "a clean commit was refused"; }
grep -q "gpulint.*Passed" "$work/out" || { cat "$work/out"; fail "the hook did not run on the clean commit"; }
echo "ok: clean commit accepted (hook installed and run in $((SECONDS - t))s)"
bin=$(find "$PRE_COMMIT_HOME" -path '*rustenv*/bin/gpulint' -type f | head -1)
[ -x "$bin" ] || fail "no gpulint binary in pre-commit's environment"

# 2. Findings: refused, with gpulint's message. GL002 (a binary file under a .py name) is always
#    there; PY001 and CU001 are checked too when this build has them.
printf 'PK\003\004\000\000not python' > weights.py
expect=("GL002" "weights.py")
if "$bin" rules | grep -q '^PY001 '; then
  printf 'import torch\n\n\ndef walk(node):\n    return [walk(c) for c in node.children]\n' > tree.py
  expect+=("PY001" "tree.py")
fi
if "$bin" rules | grep -q '^CU001 '; then
  printf '__global__ void add(const float* a, float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    out[i] = a[i];\n}\n' > ops/add.cu
  expect+=("CU001" "ops/add.cu")
fi
before=$(commits)
git add -A
if commit "findings"; then cat "$work/out"; fail "a commit with findings was accepted"; fi
grep -q "gpulint.*Failed" "$work/out" || { cat "$work/out"; fail "the hook did not fail"; }
for e in "${expect[@]}"; do
  grep -q -- "$e" "$work/out" || { cat "$work/out"; fail "'$e' missing from the hook's output"; }
done
[ "$(commits)" = "$before" ] || fail "the refused commit was recorded"
echo "ok: commit with findings refused, output names ${expect[*]}"
git reset -q
rm -f weights.py tree.py ops/add.cu

# 3. A staged file in an excluded folder (gpulint.toml) is not checked: --force-exclude.
mkdir -p third_party
printf '\000binary' > third_party/vendored.py
git add -A
commit "vendored" || { cat "$work/out"; fail "an excluded file was checked"; }
echo "ok: excluded file accepted"

# 4. Nothing gpulint reads is staged: the hook is skipped, the commit goes through.
echo "notes" > NOTES.txt
git add NOTES.txt
commit "notes" || { cat "$work/out"; fail "a commit without sources was refused"; }
grep -q "gpulint.*(no files to check)Skipped" "$work/out" || { cat "$work/out"; fail "the hook was not skipped"; }
echo "ok: hook skipped when no source file is staged"

# 5. `pre-commit run --all-files` sees the committed files, and `--` with no file checks nothing.
pre-commit run gpulint --all-files >"$work/out" 2>&1 || { cat "$work/out"; fail "run --all-files failed"; }
(cd "$work" && "$bin" check --) 2>&1 | grep -q "Checked 0 files" || fail "\`gpulint check --\` checked something"
echo "ok: --all-files passes; \`gpulint check --\` checks nothing"

echo "pre-commit e2e: 5 passed, 0 failed ($((SECONDS - start))s)"
