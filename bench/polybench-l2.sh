#!/usr/bin/env bash
# Two cache levels on the PolyBench-style kernels (issue 17): per kernel at a preset size,
# the misses of L1 and L2 each simulated alone, and of the inclusive hierarchy (`cache
# simulate --l2`: L2 sees only L1's misses, L2's evictions leave L1). Where the columns
# differ, one level's formulas alone cannot give the hierarchy's misses.
# Usage: bench/polybench-l2.sh [SIZE] [KERNEL...]   (KANSOKU=path: a fixed binary;
#   L1, L2: the caches, default 32KiB,8-way,64B and 512KiB,8-way,64B)
set -uo pipefail
cd "$(dirname "$0")/.."
size=${1:-MEDIUM}
shift 1 2>/dev/null || true
if [ -z "${KANSOKU:-}" ]; then
  cargo build --release -q -p kansoku-cli
fi
K=${KANSOKU:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
l1=${L1:-32KiB,8-way,64B}
l2=${L2:-512KiB,8-way,64B}
dir=crates/kansoku-cache/polybench
kernels=("$@")
[ ${#kernels[@]} -eq 0 ] && kernels=($(cd $dir && ls *.c | sed 's/\.c$//'))
printf 'kernel\tsize\taccesses\tL1_alone\tL1_inclusive\tL2_alone\tL2_inclusive\tseconds_hierarchy\n'
for k in "${kernels[@]}"; do
  alone1=$("$K" cache simulate "$dir/$k.c" --size "$size" --cache "$l1" --json 2>/dev/null) || { printf '%s\t%s\trefused\n' "$k" "$size"; continue; }
  alone2=$("$K" cache simulate "$dir/$k.c" --size "$size" --cache "$l2" --json)
  both=$("$K" cache simulate "$dir/$k.c" --size "$size" --cache "$l1" --l2 "$l2" --json)
  python3 - "$k" "$size" "$alone1" "$alone2" "$both" <<'PY'
import json, sys
k, size, a1, a2, h = sys.argv[1], sys.argv[2], *map(json.loads, sys.argv[3:])
print("\t".join(map(str, [k, size, a1["total_accesses"], a1["total_misses"], h["total_misses"], a2["total_misses"], h["lower_levels"][0]["total_misses"], round(h["seconds"], 3)])))
PY
done
