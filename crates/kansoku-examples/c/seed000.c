/* The seed-000 example: one call of func_M is the reproducible region. func_M calls
 * func_A once, func_B three times and func_C once; main calls func_M in a loop. Every
 * iteration executes exactly the same instructions: no data-dependent branches. */
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) void func_A(void) { long x = sink; x = x * 3 + 1; sink = x; }
__attribute__((noinline)) void func_B(void) { long x = sink; x ^= x >> 3; x += 7; sink = x; }
__attribute__((noinline)) void func_C(void) { long x = sink; x = (x << 2) - x; sink = x + 11; }

__attribute__((noinline)) void func_M(void) {
    func_A();
    func_B();
    func_B();
    func_B();
    func_C();
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < iterations; i++)
        func_M();
    return 0;
}
