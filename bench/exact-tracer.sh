#!/usr/bin/env bash
# Exact tracer: throughput against the smallest C single-step loop (same program, same
# run), and recording size per instruction.
# Usage: bench/exact-tracer.sh [ITERATIONS]
#   ITERATIONS of seed000's func_M; 44 instructions each. Default 230000 ≈ 10 M traced
#   instructions, which takes about 5 minutes per tracer on a VM where a single-step trap
#   costs ~30 us; pass e.g. 20000 for a one-minute run.
set -euo pipefail
cd "$(dirname "$0")/.."
iterations=${1:-230000}
scripts/setup
cargo build --release -q -p kansoku-cli
K=$PWD/target/release/kansoku
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$K demo --dir "$work/demo" >/dev/null 2>&1 || true   # builds the example programs
prog="$work/demo/bin/seed000"
cc -O2 -o "$work/singlestep" bench/c/singlestep.c

# Whole program (loader, libc start-up, the loop, exit) under both tracers.
read -r base_stops base_secs < <("$work/singlestep" "$prog" "$iterations")
$K trace exact -o "$work/whole.ksk" --json -- "$prog" "$iterations" > "$work/whole.json"
# The marker window alone, for the recording size of a long regular trace.
$K trace exact --marker func_M --iterations "$iterations" -o "$work/window.ksk" --json -- "$prog" "$((iterations + 1))" > "$work/window.json"

python3 - "$work/whole.json" "$work/window.json" "$base_stops" "$base_secs" <<'PY'
import json, sys
whole, window = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
stops, secs = int(sys.argv[3]), float(sys.argv[4])
base_rate = stops / secs
print(f"C single-step loop (baseline)  {stops} stops in {secs:.2f} s = {base_rate:,.0f} steps/s ({1e6/base_rate:.1f} us/step)")
print(f"kansoku trace exact (whole)    {whole['instructions']} instructions in {whole['seconds']:.2f} s = {whole['instructions_per_second']:,.0f} instr/s ({1e6/whole['instructions_per_second']:.1f} us/instr)")
print(f"kansoku / baseline throughput  {whole['instructions_per_second']/base_rate:.2f}")
print(f"recording size (marker window) {window['instructions']} instructions in {window['bytes']} bytes = {window['bytes_per_instruction']:.3f} bytes/instruction")
print(f"recording size (whole program) {whole['bytes_per_instruction']:.3f} bytes/instruction")
PY
