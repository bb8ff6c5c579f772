/* A reproducible region with data-dependent branches, a loop and calls, for seed-000
 * reconstruction tests: region() classifies 24 fixed values (three-way branch, a helper
 * called on one arm) and sums them; main calls region() N times. The data never change,
 * so every call executes the same instructions.   usage: branchy N */
#include <stdlib.h>

volatile long sink;
static const long data[24] = {3, 8, 15, 4, 42, 7, 9, 16, 23, 1, 0, 12, 5, 30, 11, 2, 6, 27, 14, 19, 10, 21, 18, 13};

__attribute__((noinline)) long helper(long v) { return v * v - 3 * v + 1; }

__attribute__((noinline)) long region(void) {
    long acc = sink & 0; /* a volatile read: keeps every call (region is not pure) */
    for (int i = 0; i < 24; i++) {
        long v = data[i];
        if (v % 3 == 0)
            acc += helper(v);
        else if (v & 1)
            acc -= v << 1;
        else
            acc ^= v;
    }
    return acc;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < n; i++)
        sink = region();
    return 0;
}
