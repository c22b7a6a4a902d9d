#!/usr/bin/env bash
# Peak memory against the size of the tree checked: the Python files (.py, .ipynb) of a corpus,
# 1, 2 and 4 copies side by side, each checked whole:
#
#   scripts/rss-copies.sh CORPUS_DIR [runs]
#
# CORPUS_DIR is a folder of exported repositories (see lintcheck.sh); nothing is fetched. The
# copies are hard links where the file system allows them (else plain copies) in a temporary
# folder, removed at the end; each size is one folder named on the command line. Each size is
# checked `runs` times (default 5) with --threads 1
# and with --threads 2, in turns, caches off; prints the median peak RSS and wall time of each
# (from /usr/bin/time) and the ratio of each size's peak to that of 1 copy. With one thread the
# growth is what the run keeps per file; with two, what two files checked at once add to it.
# Needs python3.
set -euo pipefail
corpus=${1:?usage: scripts/rss-copies.sh CORPUS_DIR [runs]}
runs=${2:-5}
corpus=$(cd "$corpus" && pwd)
cd "$(dirname "$0")/.."
. scripts/release-env.sh

# trees/N/c1 .. cN: N copies of the corpus's Python files under the same relative paths.
(cd "$corpus" && find . -type f \( -name '*.py' -o -name '*.ipynb' \) -print0) >"$work/list"
for n in 1 2 4; do
    for c in $(seq 1 $n); do
        dest="$work/trees/$n/c$c"
        mkdir -p "$dest"
        # Hard links where the file system allows them; else plain copies, into an empty
        # folder (never written through a link into the corpus).
        if ! (cd "$corpus" && xargs -0 cp --parents -l -t "$dest" <"$work/list" 2>/dev/null); then
            rm -rf "$dest" && mkdir -p "$dest"
            (cd "$corpus" && xargs -0 cp --parents -t "$dest" <"$work/list")
        fi
    done
done

BIN="$bin" WORK="$work" RUNS="$runs" python3 - <<'PY'
import os, statistics, subprocess
bin, work, runs = os.environ["BIN"], os.environ["WORK"], int(os.environ["RUNS"])
trees = os.path.join(work, "trees")
sizes = {"1 copy": "1", "2 copies": "2", "4 copies": "4"}

def once(tree, threads):
    tfile = os.path.join(work, "time.txt")
    cmd = [bin, "check", "--no-cache", "--isolated", "--exit-zero", "--quiet",
           "--threads", str(threads), tree]
    subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", tfile] + cmd, cwd=trees,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall, rss = open(tfile).read().split()[-2:]
    return float(wall), int(rss) / 1024

n = sum(1 for _ in open(os.path.join(work, "list"), "rb").read().split(b"\0") if _)
print(f"{n} Python files per copy; median of {runs}")
for threads in (1, 2):
    samples = {name: [] for name in sizes}
    for tree in sizes.values():
        once(tree, threads)  # warm-up
    for _ in range(runs):
        for name, tree in sizes.items():
            samples[name].append(once(tree, threads))
    print(f"\n== --threads {threads}")
    base = None
    for name, s in samples.items():
        wall = statistics.median(w for w, _ in s)
        rss = statistics.median(r for _, r in s)
        base = base or rss
        print(f"{name:9} {wall:7.2f} s  peak RSS {rss:6.1f} MiB "
              f"(min {min(r for _, r in s):.1f}, max {max(r for _, r in s):.1f})  / 1 copy {rss / base:4.2f}")
PY
