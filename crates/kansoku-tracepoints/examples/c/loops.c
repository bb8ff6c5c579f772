/* Nested loops with several trace points in each body: the merge pass folds the calls of a
 * basic block into one, and the loop-nesting estimate spends new ids on the inner loop. */
#include "kansoku_trace.h"

KTRACE_DECL(1, "outer", "i", KTRACE_DEFAULT, -1);
KTRACE_DECL(2, "inner_begin", "i,j", KTRACE_DEFAULT, -1);
KTRACE_DECL(3, "inner_acc", "j,acc", KTRACE_DEFAULT, -1);
KTRACE_DECL(4, "inner_end", "acc", KTRACE_DEFAULT, -1);
KTRACE_DECL(5, "done", "acc", KTRACE_DEFAULT, -1);

static volatile int sink;

int run(int n) {
  int acc = 0;
  for (int i = 0; i < n; i++) {
    KTRACE(1, i);
    for (int j = 0; j < n; j++) {
      KTRACE(2, i, j);
      acc += (i ^ j) & 7;
      KTRACE(3, j, acc);
      KTRACE(4, acc);
    }
  }
  KTRACE(5, acc);
  sink = acc;
  return acc;
}
