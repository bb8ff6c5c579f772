#!/usr/bin/env bash
# Issue 12: what a probe costs, side by side in one run — kansoku's agent, kernel uprobes,
# the seed's traps, and uftrace (Debian's package, on the same program built with
# -fpatchable-function-entry=5).
#   1. per call of a hot routine (qsort's callback, ~1.5 M calls): program time under each
#      tool minus its native time, divided by the calls (program time: kansoku's exec-to-exit,
#      uftrace's "elapsed time" from `uftrace info`);
#   2. program slowdown with 1, 10 and 100 probed functions (the events example);
#   3. corrected times of self-timed routines (~70 ns and 1 ms) against the program's own;
#   4. `record --marker` with marker hits from the agent and from a uprobe: cost per marker
#      hit, and the share of samples that landed in probe code (dropped, counted).
# Usage: bench/agent-probe.sh [KANSOKU]
set -euo pipefail
cd "$(dirname "$0")/.."
K=${1:-${CARGO_TARGET_DIR:-target}/release/kansoku}
[ -x "$K" ] || cargo build --release -p kansoku-cli
cargo build --release --quiet -p kansoku-agent
command -v uftrace >/dev/null || { echo "uftrace is not installed (scripts/setup --tests installs it)"; exit 1; }
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
cc -O2 -g -o "$D/st" bench/c/selftimed.c
cc -O2 -g -fpatchable-function-entry=5 -o "$D/st.pfe" bench/c/selftimed.c
$K demo --dir "$D/demo" >/dev/null 2>&1 || true
EV="$D/demo/bin/events"; [ -x "$EV" ] || { echo "demo did not build the examples"; exit 1; }

native() { # median wall time of 5 runs, s
  python3 - "$@" <<'PY'
import subprocess, sys, time
ts = []
for _ in range(5):
    t = time.perf_counter(); subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); ts.append(time.perf_counter() - t)
print(sorted(ts)[2])
PY
}
measured() { python3 -c "import json,sys;v=json.load(open(sys.argv[1]));print(v['report']['measured_ns']/1e9)" "$1"; }
calls_of() { python3 -c "import json,sys;v=json.load(open(sys.argv[1]));print(sum(r['calls'] for r in v['report']['routines']))" "$1"; }

echo "== 1. per call of cmp_keys (qsort's callback): (program time under the tool - native) / calls"
printf "%-34s %10s %12s %12s %14s\n" tool calls "native s" "probed s" "ns per call"
row() { python3 -c "import sys;t,c,n,p=sys.argv[1],int(sys.argv[2]),float(sys.argv[3]),float(sys.argv[4]);print('%-34s %10d %12.4f %12.4f %14.1f'%(t,c,n,p,(p-n)/c*1e9))" "$@"; }
for build in st st.pfe; do
  N=100000; nat=$(native "$D/$build" qsort $N)
  for m in agent uprobe; do
    $K monitor events --mechanism $m --probe cmp_keys --json -o "$D/e.json" -- "$D/$build" qsort $N >/dev/null 2>&1
    row "kansoku $m ($build)" "$(calls_of "$D/e.json")" "$nat" "$(measured "$D/e.json")"
  done
  if [ $build = st ]; then
    N=5000; nat=$(native "$D/$build" qsort $N)
    $K monitor events --mechanism trap --probe cmp_keys --json -o "$D/e.json" -- "$D/$build" qsort $N >/dev/null 2>&1
    row "kansoku trap ($build, n=$N)" "$(calls_of "$D/e.json")" "$nat" "$(measured "$D/e.json")"
  else
    N=100000
    rm -rf "$D/ut"; uftrace record -d "$D/ut" -P cmp_keys "$D/st.pfe" qsort $N >/dev/null 2>&1
    calls=$(uftrace report -d "$D/ut" 2>/dev/null | awk '$NF=="cmp_keys"{print $(NF-1)}')
    elapsed=$(uftrace info -d "$D/ut" 2>/dev/null | awk -F: '/elapsed time/{print $2}' | awk '{print $1}')
    row "uftrace record -P ($build)" "$calls" "$nat" "$elapsed"
  fi
done

echo "== 2. slowdown of the events example (20,000 rounds) with 1, 10, 100 probed functions"
nat=$(native "$EV" 20000 0)
printf "%-10s %8s %12s %12s %10s\n" mechanism probes calls "probed s" slowdown
for m in agent uprobe; do
  for k in 1 10 100; do
    P=$(for i in $(seq 0 $((k-1))); do printf -- "--probe p%d " $i; done)
    $K monitor events --mechanism $m $P --json -o "$D/e.json" -- "$EV" 20000 0 >/dev/null 2>&1
    python3 -c "import sys;m,k,c,n,p=sys.argv[1:];print('%-10s %8s %12s %12.4f %9.1fx'%(m,k,c,float(p),float(p)/float(n)))" $m $k "$(calls_of "$D/e.json")" "$nat" "$(measured "$D/e.json")"
  done
done
echo "   (native: $nat s)"

echo "== 3. self-timed routines: kansoku's corrected time vs the program's own figure"
printf "%-8s %-11s %9s %12s %12s %12s %12s %10s\n" mechanism routine calls "own mean" "own median" "mean" "p50" overhead
for m in agent uprobe trap; do
  for job in "short_work short 1000000" "spin_1ms spin 200"; do
    set -- $job
    n=$3; [ $m = trap ] && [ $2 = short ] && n=20000
    [ $m = uprobe ] && [ $2 = short ] && n=200000
    $K monitor events --mechanism $m --calibrate --probe $1 --json -o "$D/e.json" -- "$D/st" $2 $n >"$D/own.txt" 2>/dev/null
    python3 - "$D/e.json" "$D/own.txt" $m $1 <<'PY'
import json, re, sys
v = json.load(open(sys.argv[1])); own = open(sys.argv[2]).read()
om, omed = (float(re.search(k + r"=([\d.]+)", own).group(1)) for k in ("mean_ns", "median_ns"))
r = v["report"]["routines"][0]; c = v["calibration"]
print("%-8s %-11s %9d %12.1f %12.1f %12.1f %12.1f %10.1f   (mean %+.1f %%, p50 %+.1f %%)" % (sys.argv[3], sys.argv[4], r["calls"], om, omed, r["mean_ns"], r["p50_ns"], c["overhead_ns"], (r["mean_ns"] / om - 1) * 100, (r["p50_ns"] / omed - 1) * 100))
PY
  done
done

echo "== 4. record --marker func_M on seed000 (2,000,000 iterations)"
# cost per marker hit: sampling every 10 ms (a few samples: the probe alone); share of
# samples in probe code: sampling every 10 us
SEED="$D/demo/bin/seed000"
secs() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['seconds'])" "$1"; }
$K record --time-period 10000000 --json -o "$D/r0.ksk" -- "$SEED" 2000000 >/dev/null 2>"$D/r0.json"
base=$(secs "$D/r0.json")
printf "%-8s %10s %14s %12s %26s\n" markers hits "10 ms: s" "ns per hit" "10 us: samples in probe"
for by in agent uprobe; do
  $K record --time-period 10000000 --marker func_M --marker-by $by --json -o "$D/r.ksk" -- "$SEED" 2000000 >/dev/null 2>"$D/r.json"
  $K record --time-period 10000 --marker func_M --marker-by $by --json -o "$D/r2.ksk" -- "$SEED" 2000000 >/dev/null 2>"$D/r2.json"
  python3 - "$D/r.json" "$D/r2.json" "$base" $by <<'PY'
import json, sys
v, w, base = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
kept, dropped = w["samples"], w["samples_in_probe"]
print("%-8s %10d %14.3f %12.1f %12d of %d (%.1f %%)" % (sys.argv[4], v["markers"], v["seconds"], (v["seconds"] - base) / v["markers"] * 1e9, dropped, kept + dropped, 100.0 * dropped / max(1, kept + dropped)))
PY
done
echo "   (no markers: $base s)"
# the same on a program whose iterations are longer (the events example: ~9 us a round)
EV_N=1000000
$K record --time-period 10000 --marker spin --marker-by agent --json -o "$D/r3.ksk" -- "$EV" $EV_N 0 >/dev/null 2>"$D/r3.json"
python3 - "$D/r3.json" <<'PY'
import json, sys
w = json.load(open(sys.argv[1])); kept, dropped = w["samples"], w["samples_in_probe"]
print("agent on events (%d rounds, marker spin): %d of %d samples in probe code (%.2f %%), %.1f s" % (w["markers"], dropped, kept + dropped, 100.0 * dropped / max(1, kept + dropped), w["seconds"]))
PY
