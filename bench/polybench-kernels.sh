# Sourced by the bench/polybench-*.sh scripts that read the original PolyBench/C 4.2.1
# distribution: the kernel files to run, one per line, relative to PATH_TO_POLYBENCH.
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
