#!/usr/bin/env bash
# Seed 000 overhead: wall time of `kansoku record` / native, beside `perf record` at the
# same periods, median of 5, same run; plus the exact tracer and valgrind lackey.
# Without a PMU (this VM) both sample cpu-clock: periods are then nanoseconds.
# Usage: bench/reconstruct-overhead.sh [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kansoku-cli
K=$PWD/target/release/kansoku
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
$K demo --dir "$work/demo" >/dev/null 2>&1 || true
prog="$work/demo/bin/seed000"; n=${1:-60000000}
if perf stat -x, -e instructions:u true 2>&1 >/dev/null | grep -qv "not supported"; then ev=instructions:u; opt=--period; periods="10007 100003 1000003 10000019";
else echo "no hardware counters: cpu-clock, periods in ns"; ev=cpu-clock; opt=--time-period; periods="10000 100000 1000000 10000000"; fi
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
t() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $s" | bc; }
native=$(for i in 1 2 3 4 5; do t "$prog" $n; done | med)
echo "native $native s ($n iterations of func_M)"
printf "%10s %12s %12s\n" period kansoku perf
for p in $periods; do
  k=$(for i in 1 2 3 4 5; do t $K record $opt $p -o "$work/r.ksk" -- "$prog" $n; done | med)
  f=$(for i in 1 2 3 4 5; do t perf record -e $ev -c $p -o "$work/perf.data" -- "$prog" $n; done | med)
  printf "%10s %12.3f %12.3f\n" $p $(echo "$k / $native" | bc -l) $(echo "$f / $native" | bc -l)
done
small=20000
ns=$(for i in 1 2 3; do t "$prog" $small; done | med)
ex=$(t $K trace exact -o "$work/e.ksk" -- "$prog" $small)
lk=$(t valgrind --tool=lackey --trace-mem=yes "$prog" $small)
mk=$(t $K record $opt $(echo $periods | cut -d' ' -f2) --marker func_M -o "$work/m.ksk" -- "$prog" $small)
echo "on $small iterations (native $ns s): exact tracer x$(echo "$ex / $ns" | bc -l | cut -c1-8), lackey x$(echo "$lk / $ns" | bc -l | cut -c1-8), record with --marker uprobe x$(echo "$mk / $ns" | bc -l | cut -c1-8)"
# The marker's own cost (issue 42): seed000 recorded with and without `--marker func_M`
# (the agent's marker where it applies) at a long sampling period, so the difference is the
# hits'; per hit in ns, minimum of 5 runs each (the least disturbed).
mn() { sort -n | head -1; }
hits=20000000
with=$(for i in 1 2 3 4 5; do t $K record $opt 10000000 --marker func_M -o "$work/h.ksk" -- "$prog" $hits; done | mn)
without=$(for i in 1 2 3 4 5; do t $K record $opt 10000000 -o "$work/h0.ksk" -- "$prog" $hits; done | mn)
echo "marker cost: $(echo "($with - $without) * 1000000000 / $hits" | bc -l | cut -c1-6) ns a hit ($hits hits: $with s with the marker, $without s without)"
