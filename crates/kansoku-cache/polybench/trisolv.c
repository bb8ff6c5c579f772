/* trisolv: the loop nest of PolyBench/C 4.2's trisolv kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"

static void kernel_trisolv(int n,
                    DATA_TYPE POLYBENCH_2D(L,N,N,n,n),
                    DATA_TYPE POLYBENCH_1D(x,N,n),
                    DATA_TYPE POLYBENCH_1D(b,N,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (i = 0; i < _PB_N; i++)
    {
      x[i] = b[i];
      for (j = 0; j <i; j++)
        x[i] -= L[i][j] * x[j];
      x[i] = x[i] / L[i][i];
    }
#pragma endscop
}
