#!/usr/bin/env bash
# Issue 44: probing for hours. One run of `kansoku monitor events --mechanism agent --probe
# work` on a program calling work() PAIRS times (2 hits a call), with kansoku's peak RSS
# (/usr/bin/time -v; the program's own RSS is a few MB, so the peak is kansoku's), the
# wall time beside the program alone, and the count checked against PAIRS.
# Usage: bench/event-scale.sh [PAIRS]   (default 50000000: 100 M hits; uses target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
K="${KANSOKU:-${CARGO_TARGET_DIR:-target}/release/kansoku}"
export KANSOKU_AGENT="${KANSOKU_AGENT:-${CARGO_TARGET_DIR:-target}/release/libkansoku_agent.so}"
N="${1:-50000000}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -fpatchable-function-entry=5 -o "$W/pairs" bench/c/pairs.c
t0=$(date +%s.%N); "$W/pairs" "$N" > /dev/null; t1=$(date +%s.%N)
alone=$(echo "$t1 - $t0" | bc)
t0=$(date +%s.%N)
/usr/bin/time -v -o "$W/time" "$K" monitor events --mechanism agent --probe work --json -o "$W/r.json" -- "$W/pairs" "$N" > /dev/null
t1=$(date +%s.%N)
k=$(echo "$t1 - $t0" | bc)
python3 - "$W/r.json" "$W/time" "$N" "$alone" "$k" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read()).group(1))
n, alone, k = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
w = r["report"]["routines"][0]
print(f"pairs {n}: hits {r['report']['hits']}, calls {w['calls']} ({'exact' if w['calls'] == n else 'NOT EXACT'}), lost {r['lost']}, unfinished {w['unfinished']}")
print(f"program alone {alone:.2f} s, kansoku monitor events {k:.2f} s ({(k - alone) * 1e9 / n:.0f} ns per pair more), kansoku peak RSS {rss / 1024:.0f} MiB")
print(f"mean {w['mean_ns']:.1f} ns, p50 {w['p50_ns']:.1f}, p99 {w['p99_ns']:.1f}, max {w['max_ns']:.0f}, histogram bins {len(w['histogram'])}, log bins {len(w['log_histogram'])}")
PY
