#!/usr/bin/env bash
# Real-world check: runs gpulint over a corpus of exported repositories (see the corpus list
# kept with the project's shared material) and prints, per rule, how many findings it reports,
# then times a full check against a parse-only pass over the same files, in the same run.
#
#   scripts/lintcheck.sh /path/to/corpus [threads] [runs]
#
# Needs hyperfine (Debian package `hyperfine`) for the timing part.
set -euo pipefail
corpus=${1:?usage: scripts/lintcheck.sh CORPUS_DIR [threads] [runs]}
threads=${2:-2}
runs=${3:-5}
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
bin=$PWD/target/release/gpulint
cd "$corpus"
echo "== findings per rule (all rules, --threads $threads)"
"$bin" --isolated --no-cache --threads "$threads" --exit-zero --statistics . 2>&1
if command -v hyperfine >/dev/null; then
  echo "== wall time: full check vs parse-only pass over the same files (median of $runs)"
  hyperfine --warmup 1 --runs "$runs" --export-json /tmp/gpulint-lintcheck.json \
    -n parse-only "$bin --isolated --no-cache --threads $threads --parse-only -q ." \
    -n check "$bin --isolated --no-cache --threads $threads --exit-zero -q ." >/dev/null
  python3 - <<'PY'
import json
r = {x["command"]: x for x in json.load(open("/tmp/gpulint-lintcheck.json"))["results"]}
p, c = r["parse-only"]["median"], r["check"]["median"]
print(f"parse-only median {p:.2f} s, check median {c:.2f} s, check/parse-only = {c / p:.2f}")
PY
fi
