#!/usr/bin/env bash
# Issue 46: every kernel of the original PolyBench/C 4.2.1 at a size (default LARGE) on a
# 32 KiB 8-way 64 B L1, cold: kansoku's simulator (innermost loops' runs of iterations
# that only hit are counted, not simulated) beside the plain one (`--every-access`: one
# access at a time, as before); the misses must be equal. Times are wall seconds of the
# whole command (`/usr/bin/time`), run under nice, and its CPU seconds (user + system: on a
# shared machine the wall seconds grow with the load, the CPU seconds much less).
#
# Usage: bench/polybench-large.sh PATH_TO_POLYBENCH [SIZE]
#   PATH_TO_POLYBENCH: an unpacked PolyBench/C 4.2.1 (nothing of it is downloaded or committed).
#   KANSOKU=path: a fixed kansoku binary; KERNELS="gemm atax": some only; PLAIN=0: skip the plain run;
#   TIMEOUT=s: stop each kansoku run after s seconds ("-"); CALLGRIND=1: also the
#   -DPOLYBENCH_TIME build under callgrind (bench/polybench-kernels.sh, polybench_callgrind;
#   within CG_TIMEOUT seconds when set).
# Prints TSV: kernel, size, accesses, misses (kansoku), seconds (kansoku), CPU seconds
# (kansoku), misses (plain), seconds (plain), CPU seconds (plain), speed-up (of CPU seconds),
# equal (yes/no), callgrind's D1 misses of kernel_* and its seconds ("-" without CALLGRIND=1).
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
run() { # FILE [FLAGS...] -> "accesses misses seconds cpu-seconds"
  local limit=(); [ -n "${TIMEOUT:-}" ] && limit=(timeout "$TIMEOUT")
  if ! /usr/bin/time -f "%e %U %S" -o "$tmp/time" "${limit[@]}" nice -n 10 "$K" cache simulate "$pb/$1" --size "$size" --cache 32KiB,8-way,64B \
      --max-accesses 1000000000000 "${@:2}" --json >"$tmp/out" 2>"$tmp/err"; then
    echo "- - - -"; return
  fi
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=open(sys.argv[2]).read().split()[-3:]; print(d["total_accesses"], d["total_misses"], t[0], "%.2f" % (float(t[1]) + float(t[2])))' "$tmp/out" "$tmp/time"
}
printf 'kernel\tsize\taccesses\tmisses\tseconds\tcpu seconds\tplain misses\tplain seconds\tplain cpu seconds\tspeed-up\tequal\tcallgrind misses\tcallgrind seconds\n'
for f in $files; do
  name=$(basename "$f" .c)
  read -r acc miss secs cpu <<<"$(run "$f")"
  if [ "${PLAIN:-1}" = 0 ]; then
    pm=-; ps=-; pc=-
  else
    read -r _ pm ps pc <<<"$(run "$f" --every-access)"
  fi
  cm=-; cs=-
  if [ "${CALLGRIND:-0}" = 1 ]; then
    read -r cm cs <<<"$(nice -n 10 bash -c '. bench/polybench-kernels.sh; polybench_callgrind "$@"' _ "$pb" "$f" "$size" cold "$tmp/$name")"
  fi
  python3 - "$name" "$size" "$acc" "$miss" "$secs" "$cpu" "$pm" "$ps" "$pc" "$cm" "$cs" <<'PY'
import sys
name, size, acc, miss, secs, cpu, pm, ps, pc, cm, cs = sys.argv[1:]
up = "%.1f" % (float(pc) / float(cpu)) if "-" not in (pc, cpu) and float(cpu) > 0 else "-"
eq = "-" if "-" in (pm, miss) else ("yes" if pm == miss else "no")
print("\t".join([name, size, acc, miss, secs, cpu, pm, ps, pc, up, eq, cm, cs]))
PY
done
