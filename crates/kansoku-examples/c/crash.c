/* Runs a little, then dereferences a null pointer: for tests of crash handling. */
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) void step(long i) { sink += i; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    for (long i = 0; i < n; i++) step(i);
    volatile long *nothing = 0;
    return (int)*nothing;
}
