/* Shaped like seed 003's figure 2: block A branches to B or C, both reach D, and D loops
 * back to A or exits to E. The branch depends on the data: element i takes B when it is
 * odd, so with N iterations over 0,1,2,... B runs N/2 times (rounded down) and C the rest. */
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) long walk(const long *data, long n) {
    long acc = 0, i = 0;
    do {
        long v = data[i];          /* A */
        if (v & 1)
            acc += v * 3;          /* B */
        else
            acc -= v;              /* C */
        i++;                       /* D */
    } while (i < n);
    return acc;                    /* E */
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10;
    long repeat = argc > 2 ? atol(argv[2]) : 1;
    if (n < 1) n = 1;
    long *data = malloc(sizeof(long) * n);
    for (long i = 0; i < n; i++) data[i] = i;
    for (long r = 0; r < repeat; r++) sink = walk(data, n);
    free(data);
    return 0;
}
