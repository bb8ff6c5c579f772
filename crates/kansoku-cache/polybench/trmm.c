/* trmm: the loop nest of PolyBench/C 4.2's trmm kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"

static void kernel_trmm(int m,
                 int n,
                 DATA_TYPE alpha,
                 DATA_TYPE POLYBENCH_2D(A,M,M,m,m),
                 DATA_TYPE POLYBENCH_2D(B,M,N,m,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (i = 0; i < _PB_M; i++)
     for (j = 0; j < _PB_N; j++) {
        for (k = i+1; k < _PB_M; k++)
           B[i][j] += A[k][i] * B[k][j];
        B[i][j] = alpha * B[i][j];
     }
#pragma endscop
}
