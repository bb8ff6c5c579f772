#!/usr/bin/env bash
# Exact tracer throughput and recording size, on the seed-000 example.
# Usage: bench/exact-tracer.sh [ITERATIONS]   (default 230000 ≈ 10 M traced instructions)
set -euo pipefail
cd "$(dirname "$0")/.."
iterations=${1:-230000}
cargo build --release -q -p kansoku-cli
K=target/release/kansoku
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$K demo --dir "$work/demo" >/dev/null 2>&1 || true   # builds the example programs
prog="$work/demo/bin/seed000"

native_start=$(date +%s.%N)
"$prog" "$iterations"
native_end=$(date +%s.%N)

$K trace exact --marker func_M --iterations "$iterations" -o "$work/t.ksk" --json -- "$prog" "$((iterations + 1))" > "$work/r.json"
python3 - "$work/r.json" "$native_start" "$native_end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
native = float(sys.argv[3]) - float(sys.argv[2])
print(f"traced instructions   {r['instructions']}")
print(f"tracing time          {r['seconds']:.2f} s")
print(f"throughput            {r['instructions_per_second']/1e6:.3f} M instructions/s")
print(f"recording size        {r['bytes']} bytes = {r['bytes_per_instruction']:.3f} bytes/instruction")
print(f"native run (whole program, same iterations) {native*1000:.1f} ms -> slowdown x{r['seconds']/native:.0f}")
PY
