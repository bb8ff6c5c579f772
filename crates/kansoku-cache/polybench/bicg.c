/* bicg: the loop nest of PolyBench/C 4.2's bicg kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"

static void kernel_bicg(int m,
                 int n,
                 DATA_TYPE POLYBENCH_2D(A,N,M,n,m),
                 DATA_TYPE POLYBENCH_1D(s,M,m),
                 DATA_TYPE POLYBENCH_1D(q,N,n),
                 DATA_TYPE POLYBENCH_1D(p,M,m),
                 DATA_TYPE POLYBENCH_1D(r,N,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (i = 0; i < _PB_M; i++)
    s[i] = 0;
  for (i = 0; i < _PB_N; i++)
    {
      q[i] = SCALAR_VAL(0.0);
      for (j = 0; j < _PB_M; j++)
	{
	  s[j] = s[j] + r[i] * A[i][j];
	  q[i] = q[i] + A[i][j] * p[j];
	}
    }
#pragma endscop
}
