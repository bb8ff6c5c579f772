/* Workload for bench/paths.sh: runs >= 1 s natively with few, long basic blocks (chains of
 * dependent divisions), a data-dependent branch and a call per iteration, so that Valgrind's
 * superblock trace stays a size a benchmark can stream. Argument: iterations. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) double step(double x, long i) {
    if (i & 3) {
        x = x / 1.0000001 + 0.25; x = x / 1.0000002 + 0.25; x = x / 1.0000003 + 0.25;
        x = x / 1.0000004 + 0.25; x = x / 1.0000005 + 0.25; x = x / 1.0000006 + 0.25;
        x = x / 1.0000007 + 0.25; x = x / 1.0000008 + 0.25; x = x / 1.0000009 + 0.25;
    } else {
        x = x / 0.9999999 - 0.25; x = x / 0.9999998 - 0.25; x = x / 0.9999997 - 0.25;
        x = x / 0.9999996 - 0.25; x = x / 0.9999995 - 0.25; x = x / 0.9999994 - 0.25;
    }
    return x;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    double x = 1.0;
    for (long i = 0; i < n; i++) x = step(x, i);
    printf("%f\n", x);
    return 0;
}
