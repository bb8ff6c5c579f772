/* A reproducible region with nested loops and data-dependent branches, for seed-000
 * reconstruction: region() copies 8 fixed values and insertion-sorts them (the inner
 * loop runs a different number of times for each value). The data never change, so
 * every call executes the same instructions.   usage: sortfixed N */
#include <stdlib.h>

volatile long sink;
static const int data[8] = {5, 2, 7, 1, 8, 3, 6, 4};

__attribute__((noinline)) void insertion_sort(int *v, int n) {
    for (int i = 1; i < n; i++) {
        int key = v[i];
        int j = i - 1;
        while (j >= 0 && v[j] > key) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = key;
    }
}

__attribute__((noinline)) long region(void) {
    int v[8];
    for (int i = 0; i < 8; i++)
        v[i] = data[i];
    insertion_sort(v, 8);
    return v[0] + v[7] + (sink & 0);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < n; i++)
        sink = region();
    return 0;
}
