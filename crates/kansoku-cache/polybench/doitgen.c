/* doitgen: the loop nest of PolyBench/C 4.2's doitgen kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"

static void kernel_doitgen(int nr,
                    int nq,
                    int np,
                    DATA_TYPE POLYBENCH_3D(A,NR,NQ,NP,nr,nq,np),
                    DATA_TYPE POLYBENCH_2D(C4,NP,NP,np,np),
                    DATA_TYPE POLYBENCH_1D(sum,NP,np))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (r = 0; r < _PB_NR; r++)
    for (q = 0; q < _PB_NQ; q++)  {
      for (p = 0; p < _PB_NP; p++)  {
	sum[p] = SCALAR_VAL(0.0);
	for (s = 0; s < _PB_NP; s++)
	  sum[p] += A[r][q][s] * C4[s][p];
      }
      for (p = 0; p < _PB_NP; p++)
	A[r][q][p] = sum[p];
    }
#pragma endscop
}
