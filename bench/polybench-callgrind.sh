#!/usr/bin/env bash
# Seed 004 against the real program (issue 46): each kernel of the original PolyBench/C
# 4.2.1 distribution, unmodified, compiled twice — with -DPOLYBENCH_TIME (PolyBench flushes
# the cache before the kernel: cold) and plain (the kernel runs right after init_array:
# warm) — and run under `valgrind --tool=callgrind --cache-sim=yes --D1=32768,8,64`; the D1
# misses (D1mr + D1mw) of its kernel_* function beside kansoku's misses of the same file
# with its default options (`cache simulate FILE.c --size S --cache 32KiB,8-way,64B`, and
# `--warm` for the plain build).
#
# Usage: bench/polybench-callgrind.sh PATH_TO_POLYBENCH [SIZE...]   (default: MINI SMALL MEDIUM)
#   PATH_TO_POLYBENCH: an unpacked PolyBench/C 4.2.1 (its utilities/ and the kernels' directories);
#   nothing of it is downloaded, committed or built here: it is compiled in a temporary directory.
#   KANSOKU=path: a fixed kansoku binary; JOBS=n: runs at once (default 2); KERNELS="gemm atax": some only.
# Prints TSV: kernel, size, start (cold|warm), callgrind D1 misses of kernel_*, kansoku misses,
# ratio (kansoku / callgrind), within 1 % (yes/no), note.
#
# Compiler flags and how kernel_* is read: polybench_callgrind in bench/polybench-kernels.sh.
set -uo pipefail
pb=${1:?usage: bench/polybench-callgrind.sh PATH_TO_POLYBENCH [SIZE...]}
shift
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(MINI SMALL MEDIUM)
pb=$(cd "$pb" && pwd)
[ -f "$pb/utilities/polybench.c" ] || { echo "$pb: no utilities/polybench.c (an unpacked PolyBench/C 4.2.1?)" >&2; exit 2; }
cd "$(dirname "$0")/.."
if [ -z "${KANSOKU:-}" ]; then
  cargo build --release -q -p kansoku-cli
fi
export K=${KANSOKU:-${CARGO_TARGET_DIR:-$PWD/target}/release/kansoku}
export PB=$pb
export WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. bench/polybench-kernels.sh
files=$(polybench_kernels "$pb")

one() {
  local file=$1 size=$2 start=$3
  local name; name=$(basename "$file" .c)
  local exe=$WORK/$name.$size.$start
  local cg
  read -r cg _ <<<"$(polybench_callgrind "$PB" "$file" "$size" "$start" "$exe")"
  if [ ! -x "$exe" ]; then
    printf '%s\t%s\t%s\t-\t-\t-\t-\tdoes not compile\n' "$name" "$size" "$start"; return
  fi
  local warm=""; [ "$start" = warm ] && warm=--warm
  local ks note=""
  if ks=$("$K" cache simulate "$PB/$file" --size "$size" --cache 32KiB,8-way,64B $warm --json 2>"$exe.k"); then
    ks=$(echo "$ks" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_misses"])')
  else
    ks=-; note=$(head -c 200 "$exe.k" | tr '\n\t' '  ')
  fi
  python3 - "$name" "$size" "$start" "$cg" "$ks" "$note" <<'EOF'
import sys
name, size, start, cg, ks, note = sys.argv[1:]
if cg == "-" or ks == "-":
    ratio, ok = "-", "-"
else:
    c, k = int(cg), int(ks)
    ratio = "%.4f" % (k / c) if c else ("1.0000" if k == 0 else "inf")
    ok = "yes" if abs(k - c) <= 0.01 * c else "no"
print("\t".join([name, size, start, cg, ks, ratio, ok, note]))
EOF
}
export -f one polybench_callgrind
printf 'kernel\tsize\tstart\tcallgrind\tkansoku\tratio\twithin 1%%\tnote\n'
for size in "${sizes[@]}"; do
  for f in $files; do
    for start in cold warm; do
      echo "$f $size $start"
    done
  done
done | xargs -P "${JOBS:-2}" -L 1 bash -c 'one "$@"' _
