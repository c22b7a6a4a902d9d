#!/usr/bin/env bash
# Speed and memory against the tools users compare gpulint with, on a corpus of real code:
#
#   scripts/bench-corpus.sh CORPUS_DIR [threads] [runs]
#
# CORPUS_DIR is a folder of exported repositories (see lintcheck.sh); nothing is fetched. Times
# whole processes (wall seconds and peak RSS from /usr/bin/time), `runs` times each (default 5)
# after one warm-up, in turns (A B C A B C ...) so that drift of the machine's speed hits every
# command alike, and prints the medians and the ratios of medians:
#   - Python files (.py, .ipynb): gpulint check, gpulint --parse-only, Ruff's default rules,
#     ast-grep with three rules of the same kind as gpulint's;
#   - CUDA files (.cu, .cuh): gpulint check, --parse-only, ast-grep with three rules;
#   - the whole corpus: gpulint check and --parse-only.
# `check` reads every file but parses only those an enabled rule could match, and also checks
# the C++/CUDA sources that the Python files build: the Python and CUDA groups also time
# --parse-only on just the files `check` parses (from what `check --verbose` names), the
# baseline of the analysis' own cost.
# Ruff and ast-grep are taken from PATH (`pip install ruff ast-grep-cli`); a missing one is
# reported and left out. Caches are off everywhere (--no-cache). Needs python3.
set -euo pipefail
corpus=${1:?usage: scripts/bench-corpus.sh CORPUS_DIR [threads] [runs]}
threads=${2:-2}
runs=${3:-5}
corpus=$(cd "$corpus" && pwd)
cd "$(dirname "$0")/.."
. scripts/release-env.sh

# File lists (NUL-separated), so each tool reads exactly the same files.
(cd "$corpus" && find . -type f \( -name '*.py' -o -name '*.ipynb' \) -print0 | sort -z) >"$work/python.list"
(cd "$corpus" && find . -type f \( -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z) >"$work/cuda.list"

# ast-grep rules of the kind gpulint checks (a call pattern each).
mkdir -p "$work/sg/rules"
cat >"$work/sg/sgconfig.yml" <<'YAML'
ruleDirs: [rules]
languageGlobs:
  cpp: ["*.cu", "*.cuh"]
YAML
cat >"$work/sg/rules/python.yml" <<'YAML'
id: memory-growth
language: python
rule: { pattern: tf.config.experimental.set_memory_growth($$$ARGS) }
---
id: loss-append
language: python
rule: { pattern: $LIST.append($LOSS) }
---
id: empty-cache
language: python
rule: { pattern: torch.cuda.empty_cache() }
YAML
cat >"$work/sg/rules/cuda.yml" <<'YAML'
id: thread-index
language: cpp
rule: { pattern: blockIdx.x * blockDim.x + threadIdx.x }
---
id: syncthreads
language: cpp
rule: { pattern: __syncthreads() }
---
id: cuda-malloc
language: cpp
rule: { pattern: cudaMalloc($$$ARGS) }
YAML

python3 - "$bin" "$corpus" "$work" "$threads" "$runs" <<'PY'
import os, shutil, statistics, subprocess, sys

bin, corpus, work, threads, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

def files(kind):
    raw = open(os.path.join(work, kind + ".list"), "rb").read().split(b"\0")
    return [f.decode() for f in raw if f]

py, cu = files("python"), files("cuda")
common = [bin, "--isolated", "--no-cache", "--exit-zero", "-q", "--threads", threads]

def parsed(names):
    """The files `check` parses when given `names`: those of `names` and the extension sources
    they build that `check --verbose` does not say it left unparsed."""
    out = subprocess.run([bin, "--isolated", "--no-cache", "--exit-zero", "--verbose",
                          "-o", os.devnull, "--threads", threads, "--"] + names,
                         cwd=corpus, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    lines = out.stderr.decode(errors="replace").splitlines()
    added = [l[len("also checked: "):].rsplit(" (", 1)[0] for l in lines if l.startswith("also checked: ")]
    skipped = {os.path.normpath(l[len("not parsed: "):]) for l in lines if l.startswith("not parsed: ")}
    every = names + added
    kept = [n for n in every if os.path.normpath(n) not in skipped]
    if len(every) - len(kept) != len(skipped):
        sys.exit(f"check --verbose named {len(skipped)} files not parsed, of which only "
                 f"{len(every) - len(kept)} are known: cannot tell which files it parses")
    return kept

py_parsed, cu_parsed = parsed(py), parsed(cu)
ruff = shutil.which("ruff")
sg = shutil.which("ast-grep")
groups = {
    "python": {
        "gpulint check": common + ["--"] + py,
        "gpulint --parse-only": common + ["--parse-only", "--"] + py,
        "--parse-only, parsed files": common + ["--parse-only", "--"] + py_parsed,
    },
    "cuda": {
        "gpulint check": common + ["--"] + cu,
        "gpulint --parse-only": common + ["--parse-only", "--"] + cu,
        "--parse-only, parsed files": common + ["--parse-only", "--"] + cu_parsed,
    },
    "whole corpus": {
        "gpulint check": common + ["."],
        "gpulint --parse-only": common + ["--parse-only", "."],
    },
}
if ruff:
    groups["python"]["ruff (default rules)"] = [ruff, "check", "--isolated", "--no-cache", "--exit-zero", "--quiet", "--"] + py
else:
    print("ruff not on PATH: left out (pip install ruff)")
if sg:
    cfg = os.path.join(work, "sg", "sgconfig.yml")
    groups["python"]["ast-grep (3 rules)"] = [sg, "scan", "-c", cfg, "--filter", "memory-growth|loss-append|empty-cache", "-j", threads, "--"] + py
    groups["cuda"]["ast-grep (3 rules)"] = [sg, "scan", "-c", cfg, "--filter", "thread-index|syncthreads|cuda-malloc", "-j", threads, "--"] + cu
else:
    print("ast-grep not on PATH: left out (pip install ast-grep-cli)")

def once(cmd):
    tfile = os.path.join(work, "time.txt")
    subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", tfile] + cmd, cwd=corpus,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall, rss = open(tfile).read().split()[-2:]
    return float(wall), int(rss) / 1024

print(f"corpus: {corpus}: {len(py)} Python files, {len(cu)} CUDA files; --threads {threads}; median of {runs}")
print(f"check parses {len(py_parsed)} files for the Python list (extension sources they build included) "
      f"and {len(cu_parsed)} for the CUDA list")
for group, cmds in groups.items():
    for cmd in cmds.values():
        once(cmd)  # warm-up
    samples = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            samples[name].append(once(cmd))
    print(f"\n== {group}")
    med = {}
    for name, s in samples.items():
        wall = statistics.median(w for w, _ in s)
        rss = statistics.median(r for _, r in s)
        med[name] = wall
        print(f"{name:26} {wall:7.3f} s  (min {min(w for w, _ in s):.3f}, max {max(w for w, _ in s):.3f})  peak RSS {rss:6.1f} MiB")
    base = med["gpulint check"]
    for name, wall in med.items():
        if name != "gpulint check":
            # /usr/bin/time counts in hundredths: a tiny corpus can take "0.00 s".
            ratio = f"{base / wall:5.2f}" if wall > 0 else "  n/a (too fast to time)"
            print(f"gpulint check / {name:26} = {ratio}")
PY
