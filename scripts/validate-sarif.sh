#!/usr/bin/env bash
# Checks the fixtures with gpulint, writes SARIF (unsharded; three shards merged, which must be
# the same bytes; and from another working directory, where the files are outside it: absolute
# file:// URIs), and validates it with Microsoft's SARIF Multitool (from npm). Fails on any
# validation error or warning.
set -euo pipefail
cd "$(dirname "$0")/.."
tools="${SARIF_TOOLS_DIR:-${TMPDIR:-/tmp}/gpulint-sarif-tools}"
if [ ! -x "$tools/node_modules/.bin/sarif-multitool" ]; then
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --silent @microsoft/sarif-multitool@5 >/dev/null
fi
# npm may skip the package's postinstall that makes the binary executable.
find "$tools/node_modules/@microsoft" -name 'Sarif.Multitool' -type f -exec chmod u+x {} + 2>/dev/null || true
cargo build --release --locked --quiet
out=$(mktemp -d)
./target/release/gpulint --isolated --exit-zero --quiet --output-format sarif -o "$out/fixtures.sarif" fixtures
count=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"][0]["results"]))' "$out/fixtures.sarif")
echo "SARIF with $count results"
[ "$count" -gt 0 ] || { echo "no results: nothing was validated"; exit 1; }
repo=$PWD
(cd "$out" && "$repo/target/release/gpulint" --isolated --exit-zero --quiet --output-format sarif -o "$out/elsewhere.sarif" "$repo/fixtures")
grep -q '"uri": "file:///' "$out/elsewhere.sarif" || { echo "elsewhere.sarif has no absolute file:// URI"; exit 1; }
# The same check in three shards, merged: the merge must be the unsharded report.
for i in 1 2 3; do
  ./target/release/gpulint --isolated --exit-zero --quiet --output-format sarif -o "$out/shard-$i.sarif" --shard "$i/3" fixtures
done
./target/release/gpulint merge --isolated --exit-zero --quiet -o "$out/merged.sarif" "$out"/shard-*.sarif
cmp "$out/fixtures.sarif" "$out/merged.sarif" || { echo "merged shards differ from the unsharded report"; exit 1; }
for report in fixtures merged elsewhere; do
  "$tools/node_modules/.bin/sarif-multitool" validate "$out/$report.sarif" --output "$out/validation-$report.sarif" --log ForceOverwrite --level Error Warning >/dev/null
  python3 - "$out/validation-$report.sarif" "$report" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
problems = [r for run in runs for r in run.get("results", []) if r.get("level", "warning") in ("error", "warning")]
for r in problems:
    print(r.get("level"), r.get("ruleId"), json.dumps(r.get("message")))
print(f"sarif-multitool ({sys.argv[2]}): {len(problems)} error(s)/warning(s)")
sys.exit(1 if problems else 0)
PY
done
