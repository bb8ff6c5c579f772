#!/usr/bin/env bash
# The exact engine (issue 11): kansoku's Valgrind tool against the ptrace engine and the
# Valgrind tools a user would compare it with, on real programs, in one run.
# Usage: bench/exact-engine.sh [INPUT_MB] [PTRACE_INSTRUCTIONS]
#   Workloads: Debian's gzip compressing INPUT_MB (default 2) of text, and zsqueeze
#   (bench/c/zsqueeze.c, ours, -O2 -g, linked against Debian's zlib) on the same input.
#   Per workload: native, valgrind --tool=none, lackey --trace-mem=yes, callgrind, kansoku
#   trace exact (Valgrind engine, whole run, read back with `kansoku show`), and the ptrace
#   engine over its first PTRACE_INSTRUCTIONS (default 300000) instructions: its rate is
#   all that is compared (a whole run would take hours). Instructions: ours against
#   callgrind's "Collected" count of the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-2}
ptrace_n=${2:-300000}
scripts/setup
cargo build --release -q -p kansoku-cli
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# text a compressor meets every day: licences and C headers (cat is cut off by head: || true)
(cat /usr/share/common-licenses/* /usr/include/*.h /usr/include/*/*.h 2>/dev/null || true) | head -c $((mb * 1000000)) > "$work/input"
cc -O2 -g -o "$work/zsqueeze" bench/c/zsqueeze.c -lz

secs() { local s e; s=$(date +%s.%N); "$@" < "$work/input" > /dev/null 2>>"$work/log" || true; e=$(date +%s.%N); echo "$e - $s" | bc; }
printf '%-10s %9s %9s %9s %9s %9s %12s %10s %9s %12s %10s\n' workload native none lackey-mem callgrind kansoku "insns" "callgrind" "B/insn" "ptrace i/s" "×ptrace"
for w in gzip zsqueeze; do
  case $w in
    gzip) cmd=(gzip -c) ;;
    zsqueeze) cmd=("$work/zsqueeze") ;;
  esac
  native=$(secs "${cmd[@]}")
  none=$(secs valgrind --tool=none "${cmd[@]}")
  lackey=$(secs valgrind --tool=lackey --trace-mem=yes --log-file=/dev/null "${cmd[@]}")
  callgrind=$(secs valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file="$work/cg.log" "${cmd[@]}")
  collected=$(grep -o 'Collected : [0-9]*' "$work/cg.log" | grep -o '[0-9]*$')
  s=$(date +%s.%N)
  "$K" trace exact --json -o "$work/t.ksk" -- "${cmd[@]}" < "$work/input" > /dev/null 2> "$work/k.json"
  e=$(date +%s.%N)
  ours=$(echo "$e - $s" | bc)
  "$K" trace exact --engine ptrace --max-instructions "$ptrace_n" --json -o "$work/p.ksk" -- "${cmd[@]}" < "$work/input" > /dev/null 2> "$work/p.json"
  s=$(date +%s.%N)
  back=$("$K" show "$work/t.ksk" --limit 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["instructions"])')
  e=$(date +%s.%N)
  read_s=$(echo "$e - $s" | bc)
  python3 - "$w" "$native" "$none" "$lackey" "$callgrind" "$ours" "$collected" "$back" "$read_s" "$work/k.json" "$work/p.json" <<'PY'
import json, sys
w, native, none, lackey, cg, ours, collected, back, read_s = sys.argv[1:10]
k = json.load(open(sys.argv[10])); p = json.load(open(sys.argv[11]))
n = k["instructions"]
assert int(back) == n, f"read back {back} instructions, recorded {n}"
print(f"{w:<10} {float(native):8.2f}s {float(none):8.2f}s {float(lackey):8.2f}s {float(cg):8.2f}s {float(ours):8.2f}s {n:>12} {int(collected):>10} {k['bytes_per_instruction']:9.3f} {p['instructions_per_second']:12.0f} {k['instructions_per_second'] / p['instructions_per_second']:9.0f}")
print(f"{'':<10} kansoku: {k['instructions_per_second'] / 1e6:.0f} M instructions/s recorded ({ours}s wall); {float(ours) / float(none):.1f}× valgrind --tool=none; read back {int(back) / float(read_s) / 1e6:.0f} M instructions/s; ours − callgrind = {n - int(collected)}")
PY
done
