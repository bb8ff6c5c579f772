/* Idempotent and disabled points: adjacent repeats of an idempotent point with equal
 * arguments are removed, and calls of a disabled point are deleted altogether. */
#include "kansoku_trace.h"

KTRACE_DECL(40, "state", "s", KTRACE_IDEMPOTENT, -1);
KTRACE_DECL(41, "debug_detail", "i,s", KTRACE_DISABLED, -1);
KTRACE_DECL(42, "work", "i,w", KTRACE_DEFAULT, -1);
KTRACE_DECL(43, "heartbeat", "", KTRACE_IDEMPOTENT, -1);

static volatile int sink;

static inline void set_state(int s) { KTRACE(40, s); }

int run(int n) {
  int w = 0;
  for (int i = 0; i < n; i++) {
    int s = i & 3;
    set_state(s);
    KTRACE(41, i, s);
    w += i * s;
    set_state(s);
    KTRACE(42, i, w);
    KTRACE(43);
    KTRACE(43);
    set_state(s);
  }
  sink = w;
  return w;
}
