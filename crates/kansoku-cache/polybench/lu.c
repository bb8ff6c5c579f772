/* lu: the loop nest of PolyBench/C 4.2's lu kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"

static void kernel_lu(int n,
               DATA_TYPE POLYBENCH_2D(A,N,N,n,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (i = 0; i < _PB_N; i++) {
    for (j = 0; j <i; j++) {
       for (k = 0; k < j; k++) {
          A[i][j] -= A[i][k] * A[k][j];
       }
        A[i][j] /= A[j][j];
    }
   for (j = i; j < _PB_N; j++) {
       for (k = 0; k < i; k++) {
          A[i][j] -= A[i][k] * A[k][j];
       }
    }
  }
#pragma endscop
}
