/* nussinov: the loop nest of PolyBench/C 4.2's nussinov kernel, written in PolyBench's style
   for kansoku's tests (issue 17). Sizes come from -D NAME=VALUE or from kansoku's presets in
   sizes.h (kansoku cache ... --size MEDIUM). */
#include <polybench.h>
#include "sizes.h"
/* PolyBench's default element type for this kernel (its header, nussinov.h) */
# if !defined(DATA_TYPE_IS_INT) && !defined(DATA_TYPE_IS_FLOAT) && !defined(DATA_TYPE_IS_DOUBLE)
#  define DATA_TYPE_IS_INT
# endif
/* RNA bases represented as chars, range is [0,3] (as in PolyBench) */
typedef char base;

static void kernel_nussinov(int n,
                     base POLYBENCH_1D(seq,N,n),
                     DATA_TYPE POLYBENCH_2D(table,N,N,n,n))
{
  int i, j, k, t, r, q, p, s;

#pragma scop
 for (i = _PB_N-1; i >= 0; i--) {
  for (j=i+1; j<_PB_N; j++) {
   if (j-1>=0)
      table[i][j] = max_score(table[i][j], table[i][j-1]);
   if (i+1<_PB_N)
      table[i][j] = max_score(table[i][j], table[i+1][j]);
   if (j-1>=0 && i+1<_PB_N) {
     if (i<j-1)
        table[i][j] = max_score(table[i][j], table[i+1][j-1]+match(seq[i], seq[j]));
     else
        table[i][j] = max_score(table[i][j], table[i+1][j-1]);
   }
   for (k=i+1; k<j; k++) {
      table[i][j] = max_score(table[i][j], table[i][k] + table[k+1][j]);
   }
  }
 }
#pragma endscop
}
