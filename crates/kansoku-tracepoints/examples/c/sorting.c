/* Insertion sort with traced comparisons and moves: branching code, short basic blocks. */
#include "kansoku_trace.h"

KTRACE_DECL(60, "pass", "i,key", KTRACE_DEFAULT, -1);
KTRACE_DECL(61, "compare", "j,aj,key", KTRACE_DEFAULT, -1);
KTRACE_DECL(62, "move", "from,to", KTRACE_DEFAULT, -1);
KTRACE_DECL(63, "place", "pos,key", KTRACE_DEFAULT, -1);

#define MAXN 512
static int arr[MAXN];

int run(int n) {
  if (n > MAXN) n = MAXN;
  unsigned x = 12345;
  for (int i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    arr[i] = (int)((x >> 16) & 1023);
  }
  for (int i = 1; i < n; i++) {
    int key = arr[i];
    int j = i - 1;
    KTRACE(60, i, key);
    while (j >= 0) {
      KTRACE(61, j, arr[j], key);
      if (arr[j] <= key) break;
      arr[j + 1] = arr[j];
      KTRACE(62, j, j + 1);
      j--;
    }
    arr[j + 1] = key;
    KTRACE(63, j + 1, key);
  }
  int h = 0;
  for (int i = 0; i < n; i++) h = h * 31 + arr[i];
  return h;
}
