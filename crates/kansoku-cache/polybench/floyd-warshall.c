/* floyd-warshall: the loop nest of PolyBench/C 4.2's floyd-warshall kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"
/* PolyBench's default element type for this kernel (its header, floyd-warshall.h) */
# if !defined(DATA_TYPE_IS_INT) && !defined(DATA_TYPE_IS_FLOAT) && !defined(DATA_TYPE_IS_DOUBLE)
#  define DATA_TYPE_IS_INT
# endif

static void kernel_floyd_warshall(int n,
                           DATA_TYPE POLYBENCH_2D(path,N,N,n,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
  for (k = 0; k < _PB_N; k++)
    {
      for(i = 0; i < _PB_N; i++)
	for (j = 0; j < _PB_N; j++)
	  path[i][j] = path[i][j] < path[i][k] + path[k][j] ?
	    path[i][j] : path[i][k] + path[k][j];
    }
#pragma endscop
}
