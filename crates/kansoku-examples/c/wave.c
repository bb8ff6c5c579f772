/* Program-waveform examples (seed 001, section 7).
 *   wave loop ITERATIONS   kernel_loop: a loop whose iteration is exactly 51 instructions
 *                          (16 x {load a[i], add, i++}, and, dec, jnz), walking an 8 KiB
 *                          array: code period 51 instructions, data period 64 x 51.
 *   wave phases ROUNDS     each round runs phase_a (sums array a) then phase_b (scales
 *                          array b): a slow two-phase wave for time sampling. Prints
 *                          the program's own mean round time: "round_ns=X". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long a[1024];
static double b[1 << 16];
volatile double dsink;

__attribute__((noinline)) long kernel_loop(const long *array, long iterations) {
    long sum = 0;
    if (iterations <= 0) return 0;
    __asm__ volatile(
        "xor %%rcx, %%rcx\n"
        "1:\n"
        ".rept 16\n"
        "mov (%[arr],%%rcx,8), %%rax\n"
        "add %%rax, %[sum]\n"
        "inc %%rcx\n"
        ".endr\n"
        "and $1023, %%rcx\n"
        "dec %[n]\n"
        "jnz 1b\n"
        : [sum] "+r"(sum), [n] "+r"(iterations)
        : [arr] "r"(array)
        : "rax", "rcx", "memory", "cc");
    return sum;
}

__attribute__((noinline)) double phase_a(void) {
    double s = 0;
    for (int r = 0; r < 8; r++)
        for (unsigned i = 0; i < sizeof b / sizeof b[0]; i++) s += b[i];
    return s;
}

__attribute__((noinline)) void phase_b(void) {
    for (int r = 0; r < 8; r++)
        for (unsigned i = 0; i < sizeof b / sizeof b[0]; i++) b[i] = b[i] * 0.5 + 1.0;
}

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "loop";
    long n = argc > 2 ? atol(argv[2]) : 100000;
    for (int i = 0; i < 1024; i++) a[i] = i;
    if (strcmp(mode, "loop") == 0) {
        printf("sum=%ld\n", kernel_loop(a, n));
        return 0;
    }
    if (strcmp(mode, "phases") == 0) {
        long long t0 = now_ns();
        for (long r = 0; r < n; r++) {
            dsink = phase_a();
            phase_b();
        }
        printf("round_ns=%.0f rounds=%ld\n", (double)(now_ns() - t0) / (n > 0 ? n : 1), n);
        return 0;
    }
    fprintf(stderr, "usage: wave loop ITERATIONS | wave phases ROUNDS\n");
    return 2;
}
