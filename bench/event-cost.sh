#!/usr/bin/env bash
# Issue 44: what one probed entry+exit pair costs the user, as the whole command: the wall
# time of `kansoku monitor events --mechanism agent` minus the program alone, per pair,
# beside `uftrace record -P work` + `uftrace report` of the same binary (built with
# -fpatchable-function-entry=5, which both patch), runs alternating.
# Usage: bench/event-cost.sh [PAIRS] [ROUNDS]   (default 3500000 3; uses target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
K="${KANSOKU:-${CARGO_TARGET_DIR:-target}/release/kansoku}"
export KANSOKU_AGENT="${KANSOKU_AGENT:-${CARGO_TARGET_DIR:-target}/release/libkansoku_agent.so}"
N="${1:-3500000}"
ROUNDS="${2:-3}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -fpatchable-function-entry=5 -o "$W/pairs" bench/c/pairs.c
wall() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
printf 'round\talone s\tkansoku s\tkansoku ns/pair\tkansoku peak KB\tuftrace s\tuftrace ns/pair\n'
for r in $(seq 1 "$ROUNDS"); do
  alone=$(wall "$W/pairs" "$N")
  /usr/bin/time -f "%M" -o "$W/rss" true
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$W/rss" "$K" monitor events --mechanism agent --probe work --json -o "$W/r.json" -- "$W/pairs" "$N" > /dev/null 2>&1
  t1=$(date +%s.%N)
  k=$(echo "$t1 - $t0" | bc)
  calls=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['report']['routines'][0]['calls'])" "$W/r.json")
  [ "$calls" = "$N" ] || { echo "kansoku counted $calls calls of $N" >&2; exit 1; }
  t0=$(date +%s.%N)
  uftrace record -d "$W/ut" -P work "$W/pairs" "$N" > /dev/null 2>&1
  uftrace report -d "$W/ut" > "$W/ut.txt" 2>&1
  t1=$(date +%s.%N)
  u=$(echo "$t1 - $t0" | bc)
  grep -q " $N  work" "$W/ut.txt" || grep -q "$N  work" "$W/ut.txt" || { echo "uftrace's report: $(head -5 "$W/ut.txt")" >&2; }
  rm -rf "$W/ut"
  python3 -c "
import sys
n, a, k, rss, u = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], float(sys.argv[5])
print(f'{sys.argv[6]}\t{a:.3f}\t{k:.3f}\t{(k-a)*1e9/n:.0f}\t{rss}\t{u:.3f}\t{(u-a)*1e9/n:.0f}')" "$N" "$alone" "$k" "$(cat "$W/rss")" "$u" "$r"
done
