/* Data-dependent branches: insertion sort of pseudo-random numbers from a fixed-seed
 * linear congruential generator, so every run sorts the same data. */
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) unsigned next_random(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    return (*state >> 16) & 0x7fff;
}

__attribute__((noinline)) void insertion_sort(unsigned *v, int n) {
    for (int i = 1; i < n; i++) {
        unsigned key = v[i];
        int j = i - 1;
        while (j >= 0 && v[j] > key) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = key;
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 32;
    long repeat = argc > 2 ? atol(argv[2]) : 1;
    if (n < 1) n = 1;
    unsigned *v = malloc(sizeof(unsigned) * n);
    unsigned state = 1;
    for (long r = 0; r < repeat; r++) {
        for (int i = 0; i < n; i++) v[i] = next_random(&state);
        insertion_sort(v, n);
        sink = v[n / 2];
    }
    free(v);
    return 0;
}
