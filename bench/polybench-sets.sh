#!/usr/bin/env bash
# Seed 004 on the 30 PolyBench-style kernels (issue 17): the set method at 2-, 4- and
# 8-way on small caches, every size a parameter with array extents E (default 16).
# Usage: bench/polybench-sets.sh [EXTENT] [BUDGET_SECONDS] [KERNEL...]
#   Per kernel and associativity: `kansoku cache model FILE.c --extent P=E,... --budget B`
#   (wall time, formula file size, the construction used, the references with pieces
#   tabulated point by point, the points `cache model` checked
#   against the simulator before writing), then `cache eval --verify` at
#   20 random points in 1..E for every size (each equal to a fresh simulation, or not).
#   Caches: 2-way 32 B lines 4 sets (the tests' cache), 4-way 64 B 4 sets, 8-way 64 B 4 sets.
#   Prints one TSV line per run; run it in the background, it takes long.
#   MODEL_ARGS: more `cache model` options, e.g. MODEL_ARGS="--divisions at-count".
#   CACHES: other caches, e.g. CACHES=assoc=8,line=64,sets=4.
set -uo pipefail
cd "$(dirname "$0")/.."
extent=${1:-16}
budget=${2:-60}
shift 2 2>/dev/null || shift $#
# KANSOKU=path: a copy of the binary, so that builds during a long run do not change it.
if [ -z "${KANSOKU:-}" ]; then
  cargo build --release -q -p kansoku-cli
fi
K=${KANSOKU:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
dir=crates/kansoku-cache/polybench
kernels=("$@")
[ ${#kernels[@]} -eq 0 ] && kernels=($(cd $dir && ls *.c | sed 's/\.c$//'))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'kernel\tcache\tparams\tseconds\tbytes\tverified\tnote\n'
for k in "${kernels[@]}"; do
  params=$("$K" cache info "$dir/$k.c" --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["params"]))') || { printf '%s\t-\t-\t-\t-\t-\trefused: %s\n' "$k" "$("$K" cache info "$dir/$k.c" 2>&1 | head -1)"; continue; }
  ext=$(for p in $params; do printf '%s=%s,' "$p" "$extent"; done | sed 's/,$//')
  for cache in ${CACHES:-assoc=2,line=32,sets=4 assoc=4,line=64,sets=4 assoc=8,line=64,sets=4}; do
    s=$(date +%s.%N)
    "$K" cache model "$dir/$k.c" ${MODEL_ARGS:-} --method sets --cache "$cache" --extent "$ext" --budget "$budget" -o "$work/f.json" > "$work/out" 2> "$work/err"
    rc=$?
    e=$(date +%s.%N)
    secs=$(echo "$e - $s" | bc)
    if [ $rc -ne 0 ]; then
      printf '%s\t%s\t%s\t%.1f\t-\t-\t%s\n' "$k" "$cache" "$params" "$secs" "$(grep -v '^$' "$work/err" | tail -1 | cut -c1-160)"
      continue
    fi
    bytes=$(stat -c %s "$work/f.json")
    # The constructions that built references, those built again after the check found a
    # difference with the simulator, the references with pieces tabulated point by point,
    # and how many points the check compared.
    note=$(grep -o -e 'P[0-9, P]*: built with [a-z -]*' -e 'P[0-9]*: built again with [A-Za-z]*' -e 'P[0-9][^:]*: counted point by point' -e 'checked against the simulator at [0-9]* parameter points*' "$work/err" | paste -sd ';' -)
    ok=0
    for i in $(seq 20); do
      point=$(for p in $params; do printf '%s=%s,' "$p" $((RANDOM % extent + 1)); done | sed 's/,$//')
      if "$K" cache eval "$work/f.json" --param "$point" --verify 2>&1 | grep -q "verified: the simulator gives the same counts"; then
        ok=$((ok + 1))
      else
        note="$note differs at $point"
      fi
    done
    printf '%s\t%s\t%s\t%.1f\t%s\t%s/20\t%s\n' "$k" "$cache" "$params" "$secs" "$bytes" "$ok" "$note"
  done
done
