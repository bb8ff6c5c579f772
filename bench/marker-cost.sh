#!/usr/bin/env bash
# The agent marker's cost per hit (issue 42): seed000 × HITS recorded by `kansoku record`
# with and without `--marker func_M` at a 100 µs cpu-clock period (the sampling's own cost
# is small and equal in both), the runs alternating, under nice; minimum of ROUNDS runs
# each (the least disturbed). Two figures: wall time (kansoku's draining and writing of
# every hit included) and the program's own CPU time (its samples × the period). Each AGENT given (another build of libkansoku_agent.so,
# e.g. one copied before a change) runs the same marked command with KANSOKU_AGENT=AGENT,
# in the same rounds. Name each copy libkansoku_agent.so (in a directory of its own): the
# recorder tells the agent's code, dropped as probe code, by that file name.
# Then where a hit's time goes: `perf record` of one marked run (perf follows kansoku's
# child), its samples in the program by symbol.
# Usage: bench/marker-cost.sh [HITS] [ROUNDS] [AGENT...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${NO_BUILD:-}" ] || { cargo build --release -q -p kansoku-cli; cargo build --release -q -p kansoku-agent; }
K=$PWD/target/release/kansoku
hits=${1:-20000000}; rounds=${2:-7}; shift 2 || true; agents=("$@")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
$K demo --dir "$work/demo" >/dev/null 2>&1 || true
prog="$work/demo/bin/seed000"
t() { local s=$(date +%s.%N); nice -n 10 "$@" >/dev/null 2>"$work/err"; echo "$(date +%s.%N) - $s" | bc; }
# the program's own CPU time in the last run: its cpu-clock samples, kept and dropped as
# probe code, times the period (kansoku's work on the hits, draining and writing them, is
# not in it; the wall time above has it)
cpu() { local kept dropped; kept=$(grep -o '[0-9]* samples (cpu-clock' "$work/err" | grep -o '^[0-9]*'); dropped=$(grep -o '[0-9]* samples landed in probe code' "$work/err" | grep -o '^[0-9]*' || echo 0); echo "($kept + ${dropped:-0}) * $period / 1000000000" | bc -l; }
period=100000
: > "$work/without"; : > "$work/with"; for i in "${!agents[@]}"; do : > "$work/agent$i"; done
for r in $(seq "$rounds"); do
  t $K record --time-period $period -o "$work/h0.ksk" -- "$prog" "$hits" >> "$work/without"; cpu "$work/h0.ksk" >> "$work/without.cpu"
  t $K record --time-period $period --marker func_M -o "$work/h.ksk" -- "$prog" "$hits" >> "$work/with"; cpu "$work/h.ksk" >> "$work/with.cpu"
  for i in "${!agents[@]}"; do t env KANSOKU_AGENT="${agents[$i]}" $K record --time-period $period --marker func_M -o "$work/hb.ksk" -- "$prog" "$hits" >> "$work/agent$i"; cpu "$work/hb.ksk" >> "$work/agent$i.cpu"; done
done
mn() { sort -n "$1" | head -1; }
per() { echo "($1 - $(mn "$work/without${2:-}")) * 1000000000 / $hits" | bc -l | cut -c1-6; }
show() { # label file
  echo "$1: wall $(mn "$work/$2") s, $(per "$(mn "$work/$2")") ns a hit; program CPU $(mn "$work/$2.cpu" | cut -c1-6) s, $(per "$(mn "$work/$2.cpu")" .cpu) ns a hit"
}
echo "$hits hits, $rounds rounds alternating, cpu-clock every $((period / 1000)) µs, minimum of the rounds"
echo "without marker: wall $(mn "$work/without") s, program CPU $(mn "$work/without.cpu" | cut -c1-6) s"
show "marker (this build)" with
for i in "${!agents[@]}"; do show "marker (${agents[$i]})" "agent$i"; done
if command -v perf >/dev/null; then
  nice -n 10 perf record -q -e cpu-clock -c 100000 -o "$work/perf.data" -- $K record --time-period 10000000 --marker func_M -o "$work/hp.ksk" -- "$prog" "$hits" >/dev/null 2>&1
  echo "where a marked run's time goes (perf, cpu-clock every 100 µs, samples in seed000 by symbol):"
  perf report -i "$work/perf.data" --comm seed000 --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12
fi
