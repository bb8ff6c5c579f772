/* mvt: the loop nest of PolyBench/C 4.2's mvt kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"

static void kernel_mvt(int n,
                DATA_TYPE POLYBENCH_1D(x1,N,n),
                DATA_TYPE POLYBENCH_1D(x2,N,n),
                DATA_TYPE POLYBENCH_1D(y_1,N,n),
                DATA_TYPE POLYBENCH_1D(y_2,N,n),
                DATA_TYPE POLYBENCH_2D(A,N,N,n,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (i = 0; i < _PB_N; i++)
    for (j = 0; j < _PB_N; j++)
      x1[i] = x1[i] + A[i][j] * y_1[j];
  for (i = 0; i < _PB_N; i++)
    for (j = 0; j < _PB_N; j++)
      x2[i] = x2[i] + A[j][i] * y_2[j];
#pragma endscop
}
