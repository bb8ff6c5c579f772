/* Barriers and movement limits: nothing moves across KTRACE_BARRIER(); point 31 may move at
 * most 2 instructions and point 33 never moves, so they bound the merges around them. */
#include "kansoku_trace.h"

KTRACE_DECL(30, "phase_a", "i", KTRACE_DEFAULT, -1);
KTRACE_DECL(31, "phase_a_tight", "i,v", KTRACE_DEFAULT, 2);
KTRACE_DECL(32, "phase_b", "i,v", KTRACE_DEFAULT, -1);
KTRACE_DECL(33, "pinned", "v", KTRACE_DEFAULT, 0);
KTRACE_DECL(34, "phase_c", "v", KTRACE_DEFAULT, -1);

static volatile int sink;

int run(int n) {
  int v = 1;
  for (int i = 0; i < n; i++) {
    KTRACE(30, i);
    v = v * 3 + i;
    KTRACE(31, i, v);
    v ^= v >> 5;
    KTRACE(32, i, v);
    KTRACE_BARRIER();
    KTRACE(30, i + 1);
    KTRACE(33, v);
    KTRACE(34, v);
    KTRACE(34, v + 1);
  }
  sink = v;
  return v;
}
