/* Shaped like seed 003's figure 2: block A branches to B or C, both reach D, and D loops
 * back to A or exits to E (no-reorder-blocks keeps that order in memory, so D->A is the one
 * backward branch). A is the function's entry block (no set-up code: the running
 * sum lives in a global), so one call of walk() runs exactly the paths ABD/ACD (cut at the
 * back edge D->A) and a last ABDE or ACDE.
 *
 * walk(p, end) visits p[0..end-p): B when the element is odd, C when it is even.
 * main fills data[i] = i and, for r = 0..REPEAT-1, walks N elements starting at data[r % 2],
 * so even r sees 0..N-1 and odd r sees 1..N. Arguments: N REPEAT (defaults 10 1). */
#include <stdlib.h>

volatile long sink;

__attribute__((noinline, optimize("no-reorder-blocks"))) void walk(const long *p, const long *end) {
    do {
        long v = *p;               /* A */
        if (v & 1)
            sink += v * 3;         /* B */
        else
            sink -= v;             /* C */
        p++;                       /* D */
    } while (p < end);
}                                  /* E */

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10;
    long repeat = argc > 2 ? atol(argv[2]) : 1;
    if (n < 1) n = 1;
    long *data = malloc(sizeof(long) * (n + 1));
    for (long i = 0; i <= n; i++) data[i] = i;
    for (long r = 0; r < repeat; r++) walk(data + r % 2, data + r % 2 + n);
    free(data);
    return 0;
}
