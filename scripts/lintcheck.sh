#!/usr/bin/env bash
# Real-world check: runs gpulint over a corpus of exported repositories and prints, per rule,
# how many findings it reports; then times, in one hyperfine run (median of N):
#   - a parse-only pass over the same files (the floor),
#   - the full check with every rule, and with the foundation rules only,
#   - the check with a cold cache (removed before each run) and a warm one.
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
command -v hyperfine >/dev/null || { echo "hyperfine not installed: no timing"; exit 0; }
common="--isolated --threads $threads --exit-zero -q"
cache="$PWD/.gpulint_cache"
"$bin" $common . >/dev/null # fill the cache for the warm runs
json=$(mktemp)
hyperfine --warmup 1 --runs "$runs" --export-json "$json" \
  --prepare true --prepare true --prepare true --prepare "rm -rf '$cache'" --prepare true \
  -n parse-only "$bin $common --no-cache --parse-only ." \
  -n check "$bin $common --no-cache ." \
  -n check-foundation-rules "$bin $common --no-cache --select PY001,TF001,TF002,CU001,CU002,GL ." \
  -n cache-cold "$bin $common ." \
  -n cache-warm "$bin $common ." >/dev/null
rm -rf "$cache"
python3 - "$json" <<'PY'
import json, statistics, sys
r = {x["command"]: statistics.median(x["times"]) for x in json.load(open(sys.argv[1]))["results"]}
for name, t in r.items():
    print(f"{name:24} median {t:7.3f} s")
p = r["parse-only"]
print(f"check / parse-only                    = {r['check'] / p:.2f}")
print(f"check-foundation-rules / parse-only   = {r['check-foundation-rules'] / p:.2f}")
print(f"cache-warm / cache-cold               = {r['cache-warm'] / r['cache-cold']:.1%}")
PY
