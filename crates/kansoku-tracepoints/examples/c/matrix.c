/* A traced matrix multiplication: one event per element with its indices, the flat index
 * (derivable: i*N + j) and the value, and a row summary. */
#include "kansoku_trace.h"

#define N 24
KTRACE_DECL(50, "elem_begin", "i,j,flat", KTRACE_DEFAULT, -1);
KTRACE_DECL(51, "elem_value", "i,j,value", KTRACE_DEFAULT, -1);
KTRACE_DECL(52, "row_done", "i,row_sum", KTRACE_DEFAULT, -1);

static int a[N][N], b[N][N], c[N][N];

int run(int seed) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      a[i][j] = (i * 31 + j * 17 + seed) & 15;
      b[i][j] = (i * 7 + j * 3 + seed) & 15;
    }
  int total = 0;
  for (int i = 0; i < N; i++) {
    int row = 0;
    for (int j = 0; j < N; j++) {
      int s = 0;
      for (int k = 0; k < N; k++) s += a[i][k] * b[k][j];
      c[i][j] = s;
      KTRACE(50, i, j, i * N + j);
      KTRACE(51, i, j, s);
      row += s;
    }
    KTRACE(52, i, row);
    total += row;
  }
  return total;
}
