/* Nested calls that inline: the trace points of helpers end up in the caller's basic blocks
 * and merge there. `emit_report` is kept out of line: it traces, so no trace call may move
 * across a call to it. */
#include "kansoku_trace.h"

KTRACE_DECL(10, "enter_step", "k", KTRACE_DEFAULT, -1);
KTRACE_DECL(11, "square", "x,sq", KTRACE_DEFAULT, -1);
KTRACE_DECL(12, "scale", "x,scaled", KTRACE_DEFAULT, -1);
KTRACE_DECL(13, "leave_step", "k,val", KTRACE_DEFAULT, -1);
KTRACE_DECL(14, "report", "k,total", KTRACE_DEFAULT, -1);

static inline int square(int x) {
  KTRACE(11, x, x * x);
  return x * x;
}

static inline int scale(int x) {
  KTRACE(12, x, x << 2);
  return x << 2;
}

static inline int step(int k) {
  KTRACE(10, k);
  int v = square(k) + scale(k + 1);
  KTRACE(13, k, v);
  return v;
}

__attribute__((noinline)) static int emit_report(int k, int total) {
  KTRACE(14, k, total);
  return total & 1;
}

int run(int n) {
  int total = 0, odd = 0;
  for (int k = 0; k < n; k++) {
    total += step(k);
    if ((k & 15) == 15) odd += emit_report(k, total);
  }
  return total + odd;
}
