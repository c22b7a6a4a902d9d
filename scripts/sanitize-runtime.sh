#!/usr/bin/env bash
# Runtime ground truth for the CUDA rules: builds every program in fixtures/cuda/runtime/, runs
# it plainly and under NVIDIA Compute Sanitizer, and writes what happened to
# fixtures/cuda/runtime/truth.json (replacing the hand-written expectations, "measured": false,
# with "measured": true).
#
#   scripts/sanitize-runtime.sh [-o TRUTH_JSON] [--logs DIR] [--only NAME_SUBSTRING]
#
# --logs is where the build logs and raw sanitizer reports go (default: target/sanitize-runtime);
# --only runs the programs whose name contains the substring and, without -o, writes
# truth.partial.json into the logs folder instead of replacing truth.json.
#
# Needs a CUDA machine: nvcc and compute-sanitizer on PATH or under /usr/local/cuda/bin,
# nvidia-smi, and python3 (it parses the reports). Each program is built with
#   nvcc -lineinfo -arch=native -o prog file.cu        (-arch=sm_90 where native is refused)
# then run
#   - plainly (its exit code is the program's "exit": most out-of-bounds accesses a few
#     elements past a buffer do not fault without a sanitizer);
#   - under `compute-sanitizer --tool memcheck`, and under the other tools named in the
#     program's header comment (`// sanitize: memcheck racecheck`).
# Parsed from the reports: device-side errors ("Invalid __global__ read of size 4 bytes",
# "Race reported between ...", "Barrier error detected ...", "Uninitialized __global__ memory
# read ...", "Stack overflow", hardware exceptions) with the `in <file>:<line>` of their `at`
# line; CUDA API errors ("Program hit cudaErrorX (error N) due to ... on CUDA API call to F");
# and, from the plain run, the program's own check (`CUDA error cudaErrorX at file:line: ...`).
# A build failure is recorded as an "nvcc" fault.
#
# In "faults": every device-side error, every API or program error that is not the sticky
# after-effect of a device fault (cudaErrorLaunchFailure, cudaErrorIllegalAddress, ... when a
# sanitizer reported the device fault that caused it), and a build failure. After-effects go
# to "consequences". Timeouts: SANITIZE_TIMEOUT seconds per run (default 300).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=fixtures/cuda/runtime
truth="$dir/truth.json"
logs=""
only=""
out_given=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) truth=${2:?}; out_given=1; shift 2 ;;
    --logs) logs=${2:?}; shift 2 ;;
    --only) only=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,31s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

case "$truth" in /*) ;; *) truth="$root/$truth" ;; esac

for tool in nvcc compute-sanitizer; do
  if ! command -v "$tool" >/dev/null && [ -x "/usr/local/cuda/bin/$tool" ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
  fi
  command -v "$tool" >/dev/null || { echo "sanitize-runtime: $tool not found (PATH, /usr/local/cuda/bin)" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "sanitize-runtime: python3 is needed to parse the reports" >&2; exit 2; }
timeout_s=${SANITIZE_TIMEOUT:-300}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -n "$logs" ] || logs="$root/target/sanitize-runtime"
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
# A partial run (--only) never replaces the full truth file unless -o says so.
[ -n "$only" ] && [ -z "$out_given" ] && truth="$logs/truth.partial.json"

# The architecture: native where this nvcc knows it, else sm_90.
printf '__global__ void k() {}\nint main() { k<<<1, 1>>>(); return 0; }\n' >"$work/probe.cu"
if nvcc -arch=native -o "$work/probe" "$work/probe.cu" >/dev/null 2>&1; then arch=native; else arch=sm_90; fi
echo "sanitize-runtime: nvcc -lineinfo -arch=$arch; logs in $logs"

{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1 || true
} >"$logs/_gpu.txt"
nvcc --version >"$logs/_nvcc.txt" 2>&1 || true
compute-sanitizer --version >"$logs/_sanitizer.txt" 2>&1 || true
echo "$arch" >"$logs/_arch.txt"

for src in "$dir"/*.cu; do
  name=$(basename "$src" .cu)
  case "$name" in *"$only"*) ;; *) continue ;; esac
  bin="$work/$name"
  rm -f "$logs/$name".*
  echo "== $name"
  if nvcc -lineinfo -arch="$arch" -o "$bin" "$src" >"$logs/$name.build.txt" 2>&1; then
    echo 0 >"$logs/$name.build.rc"
  else
    echo $? >"$logs/$name.build.rc"
    echo "   build failed (recorded)"
    continue
  fi
  # The program's own argv: none; every program runs with its defaults.
  (cd "$work" && timeout "$timeout_s" "$bin" >"$logs/$name.plain.out" 2>"$logs/$name.plain.err") && rc=0 || rc=$?
  echo "$rc" >"$logs/$name.plain.rc"
  tools=$(sed -n 's|^// sanitize:[[:space:]]*||p' "$src" | head -n1)
  case " $tools " in *" memcheck "*) ;; *) tools="memcheck $tools" ;; esac
  for t in $tools; do
    (cd "$work" && timeout "$timeout_s" compute-sanitizer --tool "$t" --print-limit 100 "$bin" \
      >"$logs/$name.$t.txt" 2>&1) && rc=0 || rc=$?
    echo "$rc" >"$logs/$name.$t.rc"
    echo "   $t: exit $rc, $(grep -c '^========= [^ ]' "$logs/$name.$t.txt" || true) report lines"
  done
done

python3 - "$root/$dir" "$logs" "$truth" "$only" <<'PY'
import json, os, re, sys
from datetime import datetime, timezone

src_dir, logs, out, only = sys.argv[1:5]

STICKY = {  # errors that follow a device fault and poison the context
    "cudaErrorLaunchFailure", "cudaErrorIllegalAddress", "cudaErrorIllegalInstruction",
    "cudaErrorMisalignedAddress", "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc",
    "cudaErrorHardwareStackError", "cudaErrorLaunchTimeout", "cudaErrorAssert",
}
SKIP = re.compile(r"^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|"
                  r"Target application returned|Saved host backtrace|Internal Sanitizer|"
                  r"Error: process didn't terminate|Warning: Device not supported)")
LOC = re.compile(r"\bin (\S+?):(\d+)\b")
API = re.compile(r"Program hit (\w+) \(error \d+\) due to \"(.*?)\" on CUDA API call to (\w+)")
PROGRAM = re.compile(r"CUDA error (\w+) at (\S+):(\d+): (.*)")


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def blocks(text):
    """Compute Sanitizer reports: a top-level `========= X` line and its indented lines."""
    cur = None
    for raw in text.splitlines():
        if not raw.startswith("========="):
            continue
        body = raw[len("========="):]
        if not body.strip():
            if cur:
                yield cur
            cur = None
        elif body.startswith(" ") and not body.startswith("  "):
            if cur:
                yield cur
            cur = [body.strip()]
        elif cur is not None and body.strip():
            cur.append(body.strip())
    if cur:
        yield cur


def location(lines, fname):
    for l in lines:
        for m in LOC.finditer(l):
            if os.path.basename(m.group(1)) == fname:
                return int(m.group(2))
    return None


def parse_tool(tool, text, fname):
    device, api = [], []
    for b in blocks(text):
        head = b[0]
        if SKIP.match(head) or head.startswith("Host Frame") or head.startswith("Device Frame"):
            continue
        m = API.search(head)
        if m:
            api.append({"tool": tool, "kind": f"Program hit {m.group(1)} on {m.group(3)}",
                        "error": m.group(1), "message": m.group(2), "line": None})
            continue
        if head.startswith("Race reported") or re.match(r"(Error|Warning): ", head):
            sev, _, rest = head.partition(": ")
            if not rest:
                sev, rest = "Error", head
            m = re.match(r"(.*?) between (\w+) access at .*? and (\w+) access at",
                         " ".join([rest] + b[1:]))
            if m:
                kind = f"{m.group(1)} between {m.group(2)} access and {m.group(3)} access"
            else:
                kind = re.sub(r"\s+at .*$", "", rest)
            locs = [int(x.group(2)) for l in b for x in LOC.finditer(l)
                    if os.path.basename(x.group(1)) == fname]
            f = {"tool": tool, "kind": kind, "severity": sev.lower(),
                 "line": locs[0] if locs else None}
            if len(locs) > 1:
                f["other_line"] = locs[1]
            device.append(f)
            continue
        kind = re.sub(r"(of size \d+) bytes?", r"\1", head).rstrip(".")
        device.append({"tool": tool, "kind": kind, "line": location(b, fname)})
    return device, api


def dedupe(items):
    seen, out = {}, []
    for f in items:
        key = json.dumps({k: v for k, v in f.items() if k != "message"}, sort_keys=True)
        if key in seen:
            seen[key]["count"] = seen[key].get("count", 1) + 1
        else:
            f = dict(f)
            seen[key] = f
            out.append(f)
    return out


gpu = read(f"{logs}/_gpu.txt").strip()
name, _, driver = gpu.partition(",")
nvcc = re.search(r"release ([\d.]+), V([\d.]+)", read(f"{logs}/_nvcc.txt"))
san = re.search(r"Version ([\w.]+)", read(f"{logs}/_sanitizer.txt"))
truth = {
    "measured": True,
    "gpu": name.strip() or None,
    "driver": driver.strip() or None,
    "cuda": nvcc.group(2) if nvcc else None,
    "compute_sanitizer": san.group(1) if san else None,
    "arch": read(f"{logs}/_arch.txt").strip() or None,
    "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "build": "nvcc -lineinfo -arch=<arch> -o prog file.cu",
    "programs": {},
}
for fname in sorted(os.listdir(src_dir)):
    if not fname.endswith(".cu") or only not in fname[:-3]:
        continue
    stem = fname[:-3]
    text = read(os.path.join(src_dir, fname))
    m = re.search(r"^// sanitize:\s*(.*)$", text, re.M)
    tools = m.group(1).split() if m else []
    if "memcheck" not in tools:
        tools.insert(0, "memcheck")
    entry = {"tools": tools, "faults": [], "exit": None}
    if read(f"{logs}/{stem}.build.rc", "1").strip() != "0":
        build = read(f"{logs}/{stem}.build.txt")
        err = next((l.strip() for l in build.splitlines() if "error" in l.lower()), build.strip()[:300])
        entry["faults"].append({"tool": "nvcc", "kind": "build error", "line": None, "message": err})
        truth["programs"][fname] = entry
        continue
    rc = read(f"{logs}/{stem}.plain.rc").strip()
    entry["exit"] = int(rc) if rc.lstrip("-").isdigit() else None
    device, api, runs = [], [], {}
    for t in tools:
        report = read(f"{logs}/{stem}.{t}.txt")
        d, a = parse_tool(t, report, fname)
        device += d
        api += a
        trc = read(f"{logs}/{stem}.{t}.rc").strip()
        s = (re.search(r"ERROR SUMMARY: (\d+) error", report)
             or re.search(r"RACECHECK SUMMARY: .*?\((\d+) error", report))
        runs[t] = {"exit": int(trc) if trc.lstrip("-").isdigit() else None,
                   "errors": int(s.group(1)) if s else None}
    program = []
    pm = PROGRAM.search(read(f"{logs}/{stem}.plain.err"))
    if pm:
        program.append({"tool": "program", "kind": pm.group(1), "message": pm.group(4),
                        "line": int(pm.group(3))})
    faults, consequences = list(device), []
    for f in api + program:
        err = f.get("error", f["kind"])
        (consequences if device and err in STICKY else faults).append(f)
    entry["faults"] = dedupe(faults)
    if consequences:
        entry["consequences"] = dedupe(consequences)
    entry["runs"] = runs
    truth["programs"][fname] = entry

with open(out, "w") as f:
    json.dump(truth, f, indent=2)
    f.write("\n")
n = len(truth["programs"])
bad = sum(1 for p in truth["programs"].values() if p["faults"])
print(f"sanitize-runtime: {n} programs, {bad} with faults -> {out}")
PY
