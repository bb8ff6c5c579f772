# Sourced by the bench/polybench-*.sh scripts that read the original PolyBench/C 4.2.1
# distribution: the kernel files to run, one per line, relative to PATH_TO_POLYBENCH, and
# one kernel compiled and run under callgrind.
#   polybench_kernels PATH_TO_POLYBENCH   every kernel's .c file (not utilities/, not *.orig.c),
#                                         or only those named in $KERNELS ("gemm atax")
polybench_kernels() {
  local all
  all=$(cd "$1" && find . -name '*.c' -path './*/*' ! -path './utilities/*' ! -name '*.orig.c' | sort)
  if [ -n "${KERNELS:-}" ]; then
    for k in $KERNELS; do echo "$all" | grep "/$k\.c$"; done
  else
    echo "$all"
  fi
}

# polybench_callgrind PATH_TO_POLYBENCH FILE SIZE START EXE
#   compiles FILE (relative to PATH_TO_POLYBENCH) at SIZE (MINI … EXTRALARGE) to EXE, with
#   -DPOLYBENCH_TIME when START is cold (PolyBench flushes the cache before the kernel), and
#   runs it under `valgrind --tool=callgrind --cache-sim=yes --D1=32768,8,64` (within
#   $CG_TIMEOUT seconds when set). Prints the D1 misses (D1mr + D1mw) of its kernel_*
#   function and callgrind's wall seconds, "-" for each it could not get; EXE.cc and EXE.vg
#   keep the compiler's and valgrind's messages.
#   Flags -O2 -fno-inline: -fno-inline keeps kernel_* and init_array functions of their own,
#   so callgrind charges the kernel's accesses to kernel_* (with -O2 alone gcc inlines both,
#   static and called once, into main); -O2 keeps the scalars (alpha, sums, loop counters) in
#   registers as kansoku assumes. -O2 may vectorise and keep a reused element in a register:
#   that changes the count of accesses, not which lines are touched in which order of lines,
#   so the misses are what is compared (kansoku's accesses are the C source's).
polybench_callgrind() {
  local pb=$1 file=$2 size=$3 start=$4 exe=$5
  local flag=""; [ "$start" = cold ] && flag=-DPOLYBENCH_TIME
  if ! gcc -O2 -fno-inline -I "$pb/utilities" -I "$pb/$(dirname "$file")" "$pb/utilities/polybench.c" "$pb/$file" -D${size}_DATASET $flag -lm -o "$exe" 2>"$exe.cc"; then
    echo "- -"; return
  fi
  local limit=(); [ -n "${CG_TIMEOUT:-}" ] && limit=(timeout "$CG_TIMEOUT")
  if ! /usr/bin/time -f "%e" -o "$exe.time" "${limit[@]}" valgrind --tool=callgrind --cache-sim=yes --D1=32768,8,64 \
      --callgrind-out-file="$exe.cg" "$exe" >/dev/null 2>"$exe.vg"; then
    echo "- -"; return
  fi
  local misses
  misses=$(callgrind_annotate --threshold=100 --show=D1mr,D1mw "$exe.cg" 2>/dev/null | python3 -c '
import re, sys
for line in sys.stdin:
    if ":kernel_" in line:
        nums = []
        for x in re.sub(r"\(\s*[\d.]+%\)", " ", line).split():
            if not re.fullmatch(r"[\d,]+", x):
                break
            nums.append(int(x.replace(",", "")))
        print(sum(nums[:2]))
        break
else:
    print("-")')
  echo "$misses $(tail -1 "$exe.time")"
}
