/* A reproducible region for seed-000 reconstruction (issue 13's new grid program):
 * region() looks up 6 fixed keys in a sorted table of 32 by binary search (a loop whose
 * branch depends on each comparison), calling less() for every comparison and found()
 * for keys present; main calls region() N times. The data never change, so every call
 * executes the same instructions.   usage: bsearch N */
#include <stdlib.h>

volatile long sink;
static const long table[32] = {1, 4, 6, 9, 13, 17, 20, 22, 27, 31, 34, 38, 40, 45, 49, 52,
                               55, 58, 63, 66, 70, 73, 77, 81, 84, 88, 91, 95, 98, 102, 105, 109};
static const long keys[6] = {45, 3, 109, 60, 1, 77};

__attribute__((noinline)) int less(long a, long b) { return a < b; }

__attribute__((noinline)) long found(long at, long key) { return at * 31 + key; }

__attribute__((noinline)) long region(void) {
    long acc = sink & 0; /* a volatile read keeps every call */
    for (int k = 0; k < 6; k++) {
        long key = keys[k], lo = 0, hi = 32;
        while (lo < hi) {
            long mid = (lo + hi) / 2;
            if (less(table[mid], key))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < 32 && table[lo] == key)
            acc += found(lo, key);
        else
            acc -= lo;
    }
    return acc;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < n; i++)
        sink = region();
    return 0;
}
