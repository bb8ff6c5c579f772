/* gesummv: the loop nest of PolyBench/C 4.2's gesummv kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"

static void kernel_gesummv(int n,
                    DATA_TYPE alpha,
                    DATA_TYPE beta,
                    DATA_TYPE POLYBENCH_2D(A,N,N,n,n),
                    DATA_TYPE POLYBENCH_2D(B,N,N,n,n),
                    DATA_TYPE POLYBENCH_1D(tmp,N,n),
                    DATA_TYPE POLYBENCH_1D(x,N,n),
                    DATA_TYPE POLYBENCH_1D(y,N,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (i = 0; i < _PB_N; i++)
    {
      tmp[i] = SCALAR_VAL(0.0);
      y[i] = SCALAR_VAL(0.0);
      for (j = 0; j < _PB_N; j++)
	{
	  tmp[i] = A[i][j] * x[j] + tmp[i];
	  y[i] = B[i][j] * x[j] + y[i];
	}
      y[i] = alpha * tmp[i] + beta * y[i];
    }
#pragma endscop
}
