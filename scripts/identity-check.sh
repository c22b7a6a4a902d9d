#!/usr/bin/env bash
# Byte-identity check for refactors that must not change any user-visible output.
#
#   scripts/identity-check.sh BASE_REV [NEW_REV] [--corpus DIR]
#
#   BASE_REV      the revision to compare against (e.g. main, HEAD~3, a SHA).
#   NEW_REV       the revision under test; default: the working tree as it is (uncommitted
#                 changes included). BASE_REV and an explicit NEW_REV are checked out with
#                 `git worktree add --detach` into a temporary folder, removed on exit.
#   --corpus DIR  also check DIR (e.g. exported real-world repositories; see lintcheck.sh).
#
# Each side is built with `cargo build --release --locked --quiet` into its own target folder,
# target/identity/base and target/identity/new, so later runs rebuild incrementally. Both
# binaries then run on the SAME inputs, from the same working directory and with the same
# relative paths, so file paths in the output match:
#   - `check` of fixtures/ and tests/ (a copy of this checkout's working tree taken at the start,
#     so later edits do not matter; cwd = the copy's root) in
#     every output format (json and sarif as the reference formats; full, concise, github,
#     gitlab, junit too), with --isolated --no-cache --threads 2 --exit-zero;
#   - `check` of the corpus (cwd = DIR, path `.`) with --output-format json and sarif;
#   - `estimate --output-format json` (and text) of every .py under tests/memory_models/ and of
#     every fixtures/**/MEM*.py;
#   - `rules` (text and json), `explain CODE` for every rule code either binary lists, and a few
#     `decode` calls (text and json);
#   - the exit code of every invocation (exit-codes.tsv).
# Standard output and standard error are stored separately under target/identity/out-base and
# target/identity/out-new. The only normalisation: the wall-clock time in the "Checked N files
# ... in 1.23s:" summary on standard error is replaced by "<TIME>". Every stored file is compared
# byte for byte; one line per file, then "identity: N identical, M different".
#
# The corpus is read in place; if it or the copy changes during the run (fingerprint of paths, sizes and
# modification times), nothing is compared and the script exits 2.
#
# Exit status: 0 all identical, 1 some output differs, 2 usage or build error, or the inputs
# changed during the run.
set -euo pipefail

usage() { sed -n '2,10s/^# \{0,1\}//p' "$0" >&2; exit 2; }

base_rev="" new_rev="" corpus=""
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus) [ $# -ge 2 ] || usage; corpus=$2; shift 2 ;;
    --corpus=*) corpus=${1#--corpus=}; shift ;;
    -h|--help) usage ;;
    -*) echo "identity-check: unknown option $1" >&2; usage ;;
    *) if [ -z "$base_rev" ]; then base_rev=$1
       elif [ -z "$new_rev" ]; then new_rev=$1
       else usage; fi
       shift ;;
  esac
done
[ -n "$base_rev" ] || usage

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$repo"
if [ -n "$corpus" ]; then
  [ -d "$corpus" ] || { echo "identity-check: no such folder: $corpus" >&2; exit 2; }
  corpus=$(cd "$corpus" && pwd)
fi
base_sha=$(git rev-parse --verify --quiet "$base_rev^{commit}") \
  || { echo "identity-check: unknown revision $base_rev" >&2; exit 2; }
if [ -n "$new_rev" ]; then
  new_sha=$(git rev-parse --verify --quiet "$new_rev^{commit}") \
    || { echo "identity-check: unknown revision $new_rev" >&2; exit 2; }
fi

idir=$repo/target/identity
mkdir -p "$idir"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/identity-check.XXXXXX")
worktrees=()
cleanup() {
  local wt
  for wt in "${worktrees[@]+"${worktrees[@]}"}"; do
    git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true
  done
  rm -rf "$tmp"
  git -C "$repo" worktree prune 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# build SIDE SRC_DIR: build SRC_DIR into target/identity/SIDE; sets $bin.
build() {
  local side=$1 src=$2 tdir=$idir/$1
  # First run: start from the checkout's own release build (dependencies already compiled);
  # cargo's fingerprints decide what is stale, so a mismatched seed only costs a rebuild.
  if [ ! -d "$tdir/release" ] && [ -d "$repo/target/release" ]; then
    mkdir -p "$tdir" && cp -a "$repo/target/release" "$tdir/release" 2>/dev/null || true
  fi
  echo "identity-check: building $side ($3)" >&2
  local t0=$SECONDS
  (cd "$src" && CARGO_TARGET_DIR=$tdir cargo build --release --locked --quiet) \
    || { echo "identity-check: build of $side failed" >&2; exit 2; }
  echo "identity-check: built $side in $((SECONDS - t0))s" >&2
  bin=$tdir/release/gpulint
}

checkout() { # checkout SIDE SHA: a detached worktree of SHA; prints its path
  local wt=$tmp/$1
  git -C "$repo" worktree add --quiet --detach "$wt" "$2" >&2
  echo "$wt"
}

wt=$(checkout base "$base_sha"); worktrees+=("$wt")
build base "$wt" "$base_rev = $base_sha"; base_bin=$bin
if [ -n "$new_rev" ]; then
  wt=$(checkout new "$new_sha"); worktrees+=("$wt")
  build new "$wt" "$new_rev = $new_sha"; new_bin=$bin
else
  build new "$repo" "working tree"; new_bin=$bin
fi

# The inputs, fixed once from this checkout's working tree: both sides get the same lists.
estimate_files=()
while IFS= read -r f; do estimate_files+=("$f"); done < <(
  { [ -d tests/memory_models ] && find tests/memory_models -type f -name '*.py'
    [ -d fixtures ] && find fixtures -type f -name 'MEM*.py'; } | LC_ALL=C sort)
check_dirs=()
for d in fixtures tests; do [ -d "$d" ] && check_dirs+=("$d"); done
# A copy taken now: edits to the checkout while the script runs change nothing.
inputs=$tmp/inputs
mkdir -p "$inputs"
for d in "${check_dirs[@]+"${check_dirs[@]}"}"; do cp -a "$d" "$inputs/"; done
rule_codes() { "$1" rules --output-format json 2>/dev/null | grep -o '"code": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/'; }
codes=$({ rule_codes "$base_bin"; rule_codes "$new_bin"; } | LC_ALL=C sort -u)
[ -n "$codes" ] || { echo "identity-check: no rule codes from 'gpulint rules'" >&2; exit 2; }

common=(--isolated --no-cache --threads 2 --exit-zero)

# inv OUT NAME CWD ARGS...: run the binary in CWD, store NAME.stdout / NAME.stderr, record rc.
inv() {
  local out=$1 name=$2 cwd=$3; shift 3
  local rc=0
  mkdir -p "$(dirname "$out/$name")"
  (cd "$cwd" && NO_COLOR=1 LC_ALL=C "$bin" "$@") >"$out/$name.stdout" 2>"$out/$name.stderr" </dev/null || rc=$?
  sed -E -i 's/^(Checked .*) in [0-9]+\.[0-9]+s: /\1 in <TIME>s: /' "$out/$name.stderr"
  printf '%s\t%s\n' "$name" "$rc" >>"$out/exit-codes.tsv"
}

run_all() { # run_all SIDE
  local out=$idir/out-$1 fmt d f c
  rm -rf "$out"; mkdir -p "$out"
  echo "identity-check: running $1" >&2
  for d in "${check_dirs[@]+"${check_dirs[@]}"}"; do
    for fmt in json sarif full concise github gitlab junit; do
      inv "$out" "check/$d.$fmt" "$inputs" "${common[@]}" --output-format "$fmt" "$d"
    done
  done
  if [ -n "$corpus" ]; then
    for fmt in json sarif; do
      inv "$out" "check/corpus.$fmt" "$corpus" "${common[@]}" --output-format "$fmt" .
    done
  fi
  for f in "${estimate_files[@]+"${estimate_files[@]}"}"; do
    inv "$out" "estimate/${f//\//__}.json" "$inputs" estimate --output-format json "$f"
    inv "$out" "estimate/${f//\//__}.txt" "$inputs" estimate "$f"
  done
  inv "$out" rules.txt "$repo" rules
  inv "$out" rules.json "$repo" rules --output-format json
  for c in $codes; do inv "$out" "explain/$c.txt" "$repo" explain "$c"; done
  for c in 139 -11 -1073740791 0xC0000409 12345; do
    inv "$out" "decode/$c.txt" "$repo" decode "$c"
    inv "$out" "decode/$c.json" "$repo" decode --output-format json "$c"
  done
}

# The inputs are read in place, so an edit made while the script runs would show up as a
# difference: fingerprint them (paths, sizes, modification times) around the two runs.
fingerprint() {
  { (cd "$inputs" && find . -type f -printf '%p %s %T@\n')
    [ -z "$corpus" ] || (cd "$corpus" && find . -type f -printf '%p %s %T@\n'); } | LC_ALL=C sort | cksum
}
before=$(fingerprint)
SECONDS=0
bin=$base_bin; run_all base; echo "identity-check: base ran in ${SECONDS}s" >&2
SECONDS=0
bin=$new_bin; run_all new; echo "identity-check: new ran in ${SECONDS}s" >&2
if [ "$(fingerprint)" != "$before" ]; then
  echo "identity-check: the inputs (fixtures/, tests/ or the corpus) changed during the run;" \
    "outputs not compared, run again" >&2
  exit 2
fi

# Compare every stored file, byte for byte.
same=0 differ=0
size() { if [ -e "$1" ]; then wc -c <"$1" | tr -d ' '; else echo missing; fi; }
while IFS= read -r rel; do
  a=$idir/out-base/$rel b=$idir/out-new/$rel
  if [ -f "$a" ] && [ -f "$b" ] && cmp -s "$a" "$b"; then
    same=$((same + 1)); printf 'identical  %s (%s bytes)\n' "$rel" "$(size "$a")"
  else
    differ=$((differ + 1))
    printf 'DIFFERENT  %s (base %s bytes, new %s bytes)\n' "$rel" "$(size "$a")" "$(size "$b")"
  fi
done < <({ cd "$idir/out-base" && find . -type f; cd "$idir/out-new" && find . -type f; } \
           | sed 's|^\./||' | LC_ALL=C sort -u)
if [ "$differ" -gt 0 ]; then
  echo "--- first differences (diff -r target/identity/out-base target/identity/out-new):"
  diff -r "$idir/out-base" "$idir/out-new" | head -40 || true
fi
echo "identity: $same identical, $differ different"
[ "$differ" -eq 0 ]
