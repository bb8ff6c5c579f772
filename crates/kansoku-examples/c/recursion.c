/* Calls and returns: recursive Fibonacci and a helper called from two sites. */
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) long twice(long x) { return x + x; }

__attribute__((noinline)) long fib(long n) {
    if (n < 2)
        return n;
    return fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) long work(long n) {
    long f = fib(n);
    return twice(f) + twice(n);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10;
    long repeat = argc > 2 ? atol(argv[2]) : 1;
    for (long r = 0; r < repeat; r++) sink = work(n);
    return 0;
}
