#!/usr/bin/env bash
# Seed 004 on a realistic L1 (issue 17): per PolyBench-style kernel and preset size
# (MINI, SMALL, MEDIUM; the next size only after the smaller one was built), the set
# method at the concrete sizes (`cache model FILE.c --size S --method sets`, array
# extents = the sizes) beside one simulation of the same run, both timed here.
# Usage: bench/polybench-l1.sh [BUDGET_SECONDS] [KERNEL...]   (KANSOKU=path: a fixed binary)
# Prints TSV: kernel, size, method seconds, method misses, simulator seconds, simulator
# misses, equal (yes/no/-: every reference's compulsory and conflict misses), note (why the method did not get there).
# MODEL_ARGS: more `cache model` options, e.g. MODEL_ARGS="--divisions at-count".
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${1:-30}
shift 1 2>/dev/null || true
if [ -z "${KANSOKU:-}" ]; then
  cargo build --release -q -p kansoku-cli
fi
K=${KANSOKU:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
cache=${CACHE:-32KiB,8-way,64B}
dir=crates/kansoku-cache/polybench
kernels=("$@")
[ ${#kernels[@]} -eq 0 ] && kernels=($(cd $dir && ls *.c | sed 's/\.c$//'))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Total misses, then each reference's compulsory and conflict (other) misses: the method
# and the simulator must agree on every reference, not only on the sum.
misses() { python3 -c 'import json,sys
d=json.load(sys.stdin)
ev=d.get("evaluation")
refs=[(r["compulsory"],r["conflict"]) for r in ev] if ev is not None else [(r["compulsory"],r["other"]) for r in d["refs"]]
print(sum(a+b for a,b in refs), ",".join("%d+%d" % r for r in refs))'; }
printf 'kernel\tsize\tmethod_s\tmethod_misses\tsim_s\tsim_misses\tequal\tnote\n'
for k in "${kernels[@]}"; do
  for size in MINI SMALL MEDIUM; do
    s=$(date +%s.%N)
    "$K" cache simulate "$dir/$k.c" --size $size --cache "$cache" --json > "$work/sim.json" 2> "$work/err" || { printf '%s\t%s\t-\t-\t-\t-\t-\trefused: %s\n' "$k" $size "$(head -1 "$work/err")"; break; }
    sim_s=$(echo "$(date +%s.%N) - $s" | bc)
    read -r sim_m sim_refs < <(misses < "$work/sim.json")
    s=$(date +%s.%N)
    "$K" cache model "$dir/$k.c" ${MODEL_ARGS:-} --size $size --cache "$cache" --method sets --budget "$budget" --json > "$work/model.json" 2> "$work/err"
    rc=$?
    m_s=$(echo "$(date +%s.%N) - $s" | bc)
    if [ $rc -ne 0 ]; then
      printf '%s\t%s\t%.1f\t-\t%.2f\t%s\t-\t%s\n' "$k" $size "$m_s" "$sim_s" "$sim_m" "$(grep -v '^$' "$work/err" | grep -v '^note' | tail -1 | cut -c1-200)"
      break
    fi
    read -r m_m m_refs < <(misses < "$work/model.json")
    eq=no; [ "$m_refs" = "$sim_refs" ] && eq=yes
    printf '%s\t%s\t%.1f\t%s\t%.2f\t%s\t%s\t\n' "$k" $size "$m_s" "$m_m" "$sim_s" "$sim_m" "$eq"
  done
done
