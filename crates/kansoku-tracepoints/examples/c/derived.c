/* Arguments the host can compute: products, sums, differences, x + c, x << c and constants
 * are not emitted when their operands are emitted by the same merged event. */
#include "kansoku_trace.h"

KTRACE_DECL(20, "pair", "x,y", KTRACE_DEFAULT, -1);
KTRACE_DECL(21, "product_sum", "xy,x_plus_y", KTRACE_DEFAULT, -1);
KTRACE_DECL(22, "diff_shift", "x_minus_y,x_shl_3", KTRACE_DEFAULT, -1);
KTRACE_DECL(23, "offset_const", "x_plus_100,version,kind", KTRACE_DEFAULT, -1);

static volatile int sink;

int run(int n) {
  int s = 0;
  for (int i = 1; i <= n; i++) {
    int x = i * 7 + s;
    int y = i ^ (s >> 3);
    KTRACE(20, x, y);
    KTRACE(21, x * y, x + y);
    KTRACE(22, x - y, x << 3);
    KTRACE(23, x + 100, 2, 42);
    s = (s + x * y) & 0xffff;
  }
  sink = s;
  return s;
}
