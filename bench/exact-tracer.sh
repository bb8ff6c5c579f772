#!/usr/bin/env bash
# The ptrace engine of the exact tracer: throughput against the smallest C single-step
# loop, and recording size. (The Valgrind engine, the default, is measured on real
# programs by bench/exact-engine.sh.)
# Usage: bench/exact-tracer.sh [ITERATIONS] [SIZE_ITERATIONS]
#   Throughput: the whole seed000 run (loader, libc start-up, ITERATIONS calls of func_M,
#   exit) under the C loop and under `kansoku trace exact`, alternately, 3 rounds each;
#   medians. Alternating matters on a VM: the cost of a single-step trap drifts with the
#   host's load (seen here: 30 us to 75 us within minutes). Default 5000 (~0.3 M steps).
#   Size: one marker window of SIZE_ITERATIONS iterations (44 instructions each); default
#   100000 (4.4 M instructions, a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
iterations=${1:-5000}
size_iterations=${2:-100000}
scripts/setup
cargo build --release -q -p kansoku-cli
K=$PWD/target/release/kansoku
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$K demo --dir "$work/demo" >/dev/null 2>&1 || true   # builds the example programs
prog="$work/demo/bin/seed000"
cc -O2 -o "$work/singlestep" bench/c/singlestep.c

for round in 1 2 3; do
  "$work/singlestep" "$prog" "$iterations" >> "$work/base.txt"
  # the outcome (JSON) is on stderr: stdout is the program's
  $K trace exact --engine ptrace -o "$work/whole.ksk" --json -- "$prog" "$iterations" 2>> "$work/ours.jsonl" >/dev/null
  echo >> "$work/ours.jsonl"
done
$K trace exact --engine ptrace --marker func_M --iterations "$size_iterations" -o "$work/window.ksk" --json -- "$prog" "$((size_iterations + 1))" 2> "$work/window.json" >/dev/null

python3 - "$work/base.txt" "$work/ours.jsonl" "$work/window.json" <<'PY'
import json, statistics, sys
base = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
ours = [json.loads(block) for block in open(sys.argv[2]).read().split("\n\n") if block.strip()]
window = json.load(open(sys.argv[3]))
base_us = [s * 1e6 / n for n, s in base]
ours_us = [1e6 / r["instructions_per_second"] for r in ours]
print("per-step cost, 3 alternating rounds (us):")
print("  C single-step loop  " + "  ".join(f"{x:.1f}" for x in base_us) + f"   median {statistics.median(base_us):.1f}")
print("  kansoku trace exact " + "  ".join(f"{x:.1f}" for x in ours_us) + f"   median {statistics.median(ours_us):.1f}")
ratios = [b / o for b, o in zip(base_us, ours_us)]
print(f"kansoku throughput / C loop, per round: " + "  ".join(f"{r:.2f}" for r in ratios) + f"   median {statistics.median(ratios):.2f}")
print(f"instructions per whole run: {ours[0]['instructions']} (C loop counted {int(base[0][0])} stops)")
print(f"recording size, marker window: {window['instructions']} instructions in {window['bytes']} bytes = {window['bytes_per_instruction']:.3f} bytes/instruction")
print(f"recording size, whole program: {ours[0]['bytes_per_instruction']:.3f} bytes/instruction")
PY
