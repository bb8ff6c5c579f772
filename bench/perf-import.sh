#!/usr/bin/env bash
# Issue 43: `perf record -a` and `-g` files read whole. Records a shell that forks two
# busy subshells, once with call chains (-g) and once system-wide with call chains
# (-a -g), and compares `kansoku show --json` with `perf script`: samples per process,
# and samples per (pid, tid, call chain) against the raw chains `perf script -D` dumps
# (perf's context markers left out). Prints one line per file; fails on a difference.
# Usage: [K=KANSOKU] bench/perf-import.sh [ITERATIONS_PER_SUBSHELL] (default 200000)   (needs perf and permission)
set -euo pipefail
cd "$(dirname "$0")/.."
# a comparison of counts, not of speed: the test build, or K=KANSOKU
[ -n "${K:-}" ] || cargo build -q -p kansoku-cli
K=${K:-$PWD/target/debug/kansoku}
N=${1:-200000}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
WORK="for k in 1 2; do (i=0; while [ \$i -lt $N ]; do i=\$((i+1)); done) & done; wait"
perf record -q -o "$D/g.data" -g -e cpu-clock -F 1000 -- sh -c "$WORK"
perf record -q -o "$D/a.data" -a -g -e cpu-clock -F 1000 -- sh -c "$WORK"
python3 - "$K" "$D/g.data" "$D/a.data" <<'PY'
import json, subprocess, sys
from collections import Counter
kansoku, files = sys.argv[1], sys.argv[2:]
MARKERS = 2**64 - 4095
def perf_chains(f):
    out = subprocess.run(["perf", "script", "-D", "-i", f], capture_output=True, text=True, check=True).stdout
    c, cur = Counter(), None
    def flush():
        if cur:
            c[(cur[0], cur[1], tuple(cur[3] or [cur[2]]))] += 1
    for line in out.splitlines():
        if "PERF_RECORD_SAMPLE(" in line:
            flush()
            rest = line.split("PERF_RECORD_SAMPLE(")[1].split(": ")
            pid, tid = rest[1].split("/")
            cur = [int(pid), int(tid), int(rest[2].split()[0], 16), []]
        elif cur and line.startswith("....."):
            a = int(line.split(": ")[1], 16)
            if a < MARKERS:
                cur[3].append(a)
        elif cur and not line.startswith(("...", " ", "\t")):
            flush()
            cur = None
    flush()
    return c
def perf_pids(f):
    out = subprocess.run(["perf", "script", "-i", f, "-F", "pid"], capture_output=True, text=True, check=True).stdout
    return Counter(int(l) for l in out.split())
def shown(f):
    out = subprocess.run([kansoku, "show", f, "--json", "--limit", "0", "--by", "function"], capture_output=True, text=True, check=True).stdout
    c = Counter()
    for e in json.loads(out)["events"]:
        if e["event"] == "sample":
            c[(e["pid"], e["tid"], tuple(int(x, 16) for x in (e.get("stack") or [e["addr"]])))] += 1
    return c
bad = False
for f in files:
    p, k, pids = perf_chains(f), shown(f), perf_pids(f)
    kp = Counter()
    for (pid, _, _), n in k.items():
        kp[pid] += n
    same = p == k and kp == pids
    bad |= not same
    print(f"{f.rsplit('/', 1)[-1]}: samples perf {sum(pids.values())} kansoku {sum(kp.values())}; processes {len(pids)} / {len(kp)}, "
          f"per process equal: {kp == pids}; distinct (pid, tid, chain) {len(p)} / {len(k)}, per chain equal: {p == k}; deepest chain {max(len(x[2]) for x in p)} frames")
sys.exit(1 if bad else 0)
PY
