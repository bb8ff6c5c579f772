#!/usr/bin/env bash
# Issue 46: does `--budget S` hold? Each of the 30 bundled PolyBench-style kernels
# (crates/kansoku-cache/polybench) by `kansoku cache model FILE.c --method METHOD --cache C
# --extent P=E,... --budget S`: its wall seconds (the whole command, /usr/bin/time, under
# nice) and their ratio to S; the goal is ≤ 1.2 × S whatever the kernel. A run that does
# not end is stopped at 10 × S (printed as such).
# Usage: bench/polybench-budget.sh [S] [EXTENT] [CACHE] [METHOD]
#   defaults: S = 5, EXTENT = 16, CACHE = assoc=8,line=64,sets=4, METHOD = sets (auto adds
#   interpolation's own budget after the set method's).
#   KANSOKU=path: a fixed binary; KERNELS="gemm atax": some only.
# Prints TSV: kernel, seconds, seconds / S, within 1.2 × S (yes/no), exit status, last line of stderr.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${1:-5}
extent=${2:-16}
cache=${3:-assoc=8,line=64,sets=4}
method=${4:-sets}
if [ -z "${KANSOKU:-}" ]; then
  cargo build --release -q -p kansoku-cli
fi
K=${KANSOKU:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
dir=crates/kansoku-cache/polybench
kernels=(${KERNELS:-$(cd $dir && ls *.c | sed 's/\.c$//')})
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stop=$(echo "$budget * 10" | bc)
printf 'kernel\tseconds\tratio\twithin 1.2 S\texit\tlast line\n'
for k in "${kernels[@]}"; do
  params=$("$K" cache info "$dir/$k.c" --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["params"]))') || continue
  ext=$(for p in $params; do printf '%s=%s,' "$p" "$extent"; done | sed 's/,$//')
  /usr/bin/time -f "%e" -o "$work/time" timeout "$stop" nice -n 10 "$K" cache model "$dir/$k.c" --method "$method" --cache "$cache" \
    --extent "$ext" --budget "$budget" -o "$work/f.json" >"$work/out" 2>"$work/err"
  rc=$?
  secs=$(grep -E '^[0-9.]+$' "$work/time" | tail -1)
  last=$(grep -v '^$' "$work/err" | grep -v '^Command ' | tail -1 | cut -c1-140)
  [ "$rc" = 124 ] && last="stopped at 10 S"
  python3 - "$k" "$secs" "$budget" "$rc" "$last" <<'PY'
import sys
k, secs, budget, rc, last = sys.argv[1:]
r = float(secs) / float(budget)
print("\t".join([k, secs, "%.2f" % r, "yes" if r <= 1.2 else "no", rc, last]))
PY
done
