#!/usr/bin/env bash
# Issue 46: every kernel of the original PolyBench/C 4.2.1 at a size (default LARGE) on a
# 32 KiB 8-way 64 B L1, cold: kansoku's simulator (innermost loops' runs of iterations
# that only hit are counted, not simulated) beside the plain one (`--every-access`: one
# access at a time, as before); the misses must be equal. Times are wall seconds of the
# whole command (`/usr/bin/time`), run under nice.
#
# Usage: bench/polybench-large.sh PATH_TO_POLYBENCH [SIZE]
#   PATH_TO_POLYBENCH: an unpacked PolyBench/C 4.2.1 (nothing of it is downloaded or committed).
#   KANSOKU=path: a fixed kansoku binary; KERNELS="gemm atax": some only; PLAIN=0: skip the plain run;
#   TIMEOUT=s: stop each kansoku run after s seconds ("-"); CALLGRIND=1: also the
#   -DPOLYBENCH_TIME build under callgrind (bench/polybench-kernels.sh, polybench_callgrind;
#   within CG_TIMEOUT seconds when set).
# Prints TSV: kernel, size, accesses, misses (kansoku), seconds (kansoku), misses (plain),
# seconds (plain), speed-up, equal (yes/no), callgrind's D1 misses of kernel_* and its
# seconds ("-" without CALLGRIND=1).
set -uo pipefail
pb=${1:?usage: bench/polybench-large.sh PATH_TO_POLYBENCH [SIZE]}
size=${2:-LARGE}
pb=$(cd "$pb" && pwd)
cd "$(dirname "$0")/.."
if [ -z "${KANSOKU:-}" ]; then
  cargo build --release -q -p kansoku-cli
fi
K=${KANSOKU:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
. bench/polybench-kernels.sh
files=$(polybench_kernels "$pb")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # FILE [FLAGS...] -> "accesses misses seconds"
  local limit=(); [ -n "${TIMEOUT:-}" ] && limit=(timeout "$TIMEOUT")
  if ! /usr/bin/time -f "%e" -o "$tmp/time" "${limit[@]}" nice -n 10 "$K" cache simulate "$pb/$1" --size "$size" --cache 32KiB,8-way,64B \
      --max-accesses 1000000000000 "${@:2}" --json >"$tmp/out" 2>"$tmp/err"; then
    echo "- - -"; return
  fi
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["total_accesses"], d["total_misses"], open(sys.argv[2]).read().split()[-1])' "$tmp/out" "$tmp/time"
}
printf 'kernel\tsize\taccesses\tmisses\tseconds\tplain misses\tplain seconds\tspeed-up\tequal\tcallgrind misses\tcallgrind seconds\n'
for f in $files; do
  name=$(basename "$f" .c)
  read -r acc miss secs <<<"$(run "$f")"
  if [ "${PLAIN:-1}" = 0 ]; then
    pm=-; ps=-
  else
    read -r _ pm ps <<<"$(run "$f" --every-access)"
  fi
  cm=-; cs=-
  if [ "${CALLGRIND:-0}" = 1 ]; then
    read -r cm cs <<<"$(nice -n 10 bash -c '. bench/polybench-kernels.sh; polybench_callgrind "$@"' _ "$pb" "$f" "$size" cold "$tmp/$name")"
  fi
  python3 - "$name" "$size" "$acc" "$miss" "$secs" "$pm" "$ps" "$cm" "$cs" <<'PY'
import sys
name, size, acc, miss, secs, pm, ps, cm, cs = sys.argv[1:]
up = "%.1f" % (float(ps) / float(secs)) if "-" not in (ps, secs) and float(secs) > 0 else "-"
eq = "-" if "-" in (pm, miss) else ("yes" if pm == miss else "no")
print("\t".join([name, size, acc, miss, secs, pm, ps, up, eq, cm, cs]))
PY
done
