#!/usr/bin/env bash
# The second level of a non-inclusive (NINE) hierarchy by the set method (issue 17): per
# kernel, every size parameter at extent E, the time of `cache model` for L1 alone and for
# L1 + L2 (`--l2 … --non-inclusive`: L2's formulas from L1's miss sets), the file's size,
# `cache eval --verify` at every size E-1 (both levels against one simulation of the
# hierarchy: 1 = equal), and one simulation of the hierarchy at the extents.
# Usage: bench/polybench-nine.sh [E] [BUDGET] [KERNEL...]   (KANSOKU=path: a fixed binary;
#   L1, L2: the caches, default assoc=2,line=32,sets=4 and assoc=1,line=32,sets=16)
set -uo pipefail
cd "$(dirname "$0")/.."
e=${1:-8}
budget=${2:-60}
shift 2 2>/dev/null || true
if [ -z "${KANSOKU:-}" ]; then
  cargo build --release -q -p kansoku-cli
fi
K=${KANSOKU:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
l1=${L1:-assoc=2,line=32,sets=4}
l2=${L2:-assoc=1,line=32,sets=16}
dir=crates/kansoku-cache/polybench
kernels=("$@")
[ ${#kernels[@]} -eq 0 ] && kernels=($(cd $dir && ls *.c | sed 's/\.c$//'))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'kernel\textents\tL1_alone_s\tL1_L2_s\tfile_KB\tverified_at_E-1\tsim_s\tnotes\n'
for k in "${kernels[@]}"; do
  ext=$("$K" cache info "$dir/$k.c" --size MINI --json | python3 -c "import sys,json; print(','.join(p+'=$e' for p in json.load(sys.stdin)['params']))")
  p=$(echo "$ext" | sed "s/=$e/=$((e - 1))/g")
  /usr/bin/time -f %e "$K" cache model "$dir/$k.c" --method sets --extent "$ext" --cache "$l1" --budget "$budget" -o "$tmp/l1.json" >/dev/null 2>"$tmp/l1.err"
  /usr/bin/time -f %e "$K" cache model "$dir/$k.c" --method sets --extent "$ext" --cache "$l1" --l2 "$l2" --non-inclusive --budget "$budget" -o "$tmp/l2.json" >/dev/null 2>"$tmp/l2.err"
  verified=$("$K" cache eval "$tmp/l2.json" --param "$p" --verify 2>&1 | grep -c "same counts for every reference at every level")
  sim=$( { /usr/bin/time -f %e "$K" cache simulate "$dir/$k.c" --param "$ext" --cache "$l1" --l2 "$l2" --non-inclusive >/dev/null; } 2>&1 | tail -1)
  kb=$(du -k "$tmp/l2.json" 2>/dev/null | cut -f1)
  notes=$(grep -h -E 'checked|error' "$tmp/l2.err" | tr '\n' ' ' | cut -c1-160)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$k" "$ext" "$(tail -1 "$tmp/l1.err")" "$(tail -1 "$tmp/l2.err")" "${kb:--}" "$verified" "$sim" "$notes"
  rm -f "$tmp/l2.json"
done
