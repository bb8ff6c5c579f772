/* gemver: the loop nest of PolyBench/C 4.2's gemver kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"

static void kernel_gemver(int n,
                   DATA_TYPE alpha,
                   DATA_TYPE beta,
                   DATA_TYPE POLYBENCH_2D(A,N,N,n,n),
                   DATA_TYPE POLYBENCH_1D(u1,N,n),
                   DATA_TYPE POLYBENCH_1D(v1,N,n),
                   DATA_TYPE POLYBENCH_1D(u2,N,n),
                   DATA_TYPE POLYBENCH_1D(v2,N,n),
                   DATA_TYPE POLYBENCH_1D(w,N,n),
                   DATA_TYPE POLYBENCH_1D(x,N,n),
                   DATA_TYPE POLYBENCH_1D(y,N,n),
                   DATA_TYPE POLYBENCH_1D(z,N,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (i = 0; i < _PB_N; i++)
    for (j = 0; j < _PB_N; j++)
      A[i][j] = A[i][j] + u1[i] * v1[j] + u2[i] * v2[j];
  for (i = 0; i < _PB_N; i++)
    for (j = 0; j < _PB_N; j++)
      x[i] = x[i] + beta * A[j][i] * y[j];
  for (i = 0; i < _PB_N; i++)
    x[i] = x[i] + z[i];
  for (i = 0; i < _PB_N; i++)
    for (j = 0; j < _PB_N; j++)
      w[i] = w[i] +  alpha * A[i][j] * x[j];
#pragma endscop
}
