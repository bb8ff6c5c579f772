/* Event-mode example (seed 001): functions with known call counts and a function that
 * spins for a known time, measuring itself with its own clock.
 *   events ROUNDS SPIN_NS [OUTFILE]
 * Per round: spin(SPIN_NS) once, leaf() 3 times, recurse(4) (5 activations, nested),
 * and each of the 1000 functions p0..p999 once (for >= 1,000 measurement points).
 * At the end it prints the spin's own mean and median time per call:
 * "spin: calls=N mean_ns=X median_ns=Y" (to OUTFILE too, when given). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;
static long spin_calls;
static long long spin_total_ns;
static long long spin_each[4096];

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Busy-waits `ns` nanoseconds; adds its own duration (first to last clock read) to the total. */
__attribute__((noinline)) void spin(long ns) {
    long long start = now_ns(), t;
    do { t = now_ns(); } while (t - start < ns);
    spin_total_ns += t - start;
    if (spin_calls < 4096) spin_each[spin_calls] = t - start;
    spin_calls++;
}

__attribute__((noinline)) void leaf(void) { sink += 1; }

__attribute__((noinline)) void recurse(int depth) {
    sink += depth;
    if (depth > 0) recurse(depth - 1);
    sink -= 1;
}

#define P(n) __attribute__((noinline)) void p##n(void) { sink += n; }
#define P10(n) P(n##0) P(n##1) P(n##2) P(n##3) P(n##4) P(n##5) P(n##6) P(n##7) P(n##8) P(n##9)
#define P100(n) P10(n##0) P10(n##1) P10(n##2) P10(n##3) P10(n##4) P10(n##5) P10(n##6) P10(n##7) P10(n##8) P10(n##9)
P10() P100(1) P100(2) P100(3) P100(4) P100(5) P100(6) P100(7) P100(8) P100(9)
P10(1) P10(2) P10(3) P10(4) P10(5) P10(6) P10(7) P10(8) P10(9)
#define R(n) p##n,
#define R10(n) R(n##0) R(n##1) R(n##2) R(n##3) R(n##4) R(n##5) R(n##6) R(n##7) R(n##8) R(n##9)
#define R100(n) R10(n##0) R10(n##1) R10(n##2) R10(n##3) R10(n##4) R10(n##5) R10(n##6) R10(n##7) R10(n##8) R10(n##9)
static void (*const table[])(void) = { R10() R10(1) R10(2) R10(3) R10(4) R10(5) R10(6) R10(7) R10(8) R10(9)
    R100(1) R100(2) R100(3) R100(4) R100(5) R100(6) R100(7) R100(8) R100(9) };

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    long spin_ns = argc > 2 ? atol(argv[2]) : 100000;
    for (long r = 0; r < rounds; r++) {
        spin(spin_ns);
        leaf(); leaf(); leaf();
        recurse(4);
        for (unsigned i = 0; i < sizeof table / sizeof table[0]; i++) table[i]();
    }
    long kept = spin_calls < 4096 ? spin_calls : 4096;
    qsort(spin_each, kept, sizeof spin_each[0], cmp_ll);
    long long median = kept ? spin_each[(kept + 1) / 2 - 1] : 0;
    printf("spin: calls=%ld mean_ns=%.1f median_ns=%lld functions=%zu\n", spin_calls,
           spin_calls ? (double)spin_total_ns / spin_calls : 0.0, median, sizeof table / sizeof table[0]);
    if (argc > 3) {
        FILE *f = fopen(argv[3], "w");
        if (!f) { perror(argv[3]); return 1; }
        fprintf(f, "spin: calls=%ld mean_ns=%.1f median_ns=%lld functions=%zu\n", spin_calls,
                spin_calls ? (double)spin_total_ns / spin_calls : 0.0, median, sizeof table / sizeof table[0]);
        fclose(f);
    }
    return 0;
}
