/* selftimed: routines that time themselves, for the probe benchmarks (issue 12).
 *   selftimed qsort N    sorts N random keys with libc's qsort: cmp_keys is called about
 *                        N log2 N times (a real hot routine: qsort's callback)
 *   selftimed short N    N calls of short_work, about 90 ns of dependent arithmetic
 *   selftimed spin N     N calls of spin_1ms, a 1 ms busy wait
 * The program prints its own figure for the routine on stdout:
 *   "short_work: calls=N mean_ns=X median_ns=Y"
 * spin_1ms reads the time stamp counter at the first and last instruction of its body
 * (probes at its entry and exit fall outside). short_work is too short for that (a read
 * costs ~10 ns): its figure comes from an identical unprobed twin, called N times in 1000
 * batches timed from outside (mean, and median of the batch means), each batch followed
 * by as many calls of short_work. A probe tool that subtracts its own overhead correctly reports the same.
 * Each call takes the previous call's result as its seed: otherwise the processor runs
 * the next call's chain beside this one's, and a batch measures how often calls can
 * start (77 ns here) rather than how long one takes (95 ns), which is what a probe sees.
 * Build: cc -O2 -g -o selftimed bench/c/selftimed.c
 *   (for uftrace: add -fpatchable-function-entry=5, or -pg) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#define MAX_SAMPLES (1 << 20)
static uint64_t samples[MAX_SAMPLES];
static long calls;
volatile uint64_t sink;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

__attribute__((noinline)) int cmp_keys(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* About 90 ns of dependent multiply-adds. Two copies with different constants (so that
 * the compiler cannot fold them into one): short_work is the one probed; the program times
 * short_twin in batches, unprobed, for its own figure. */
#define SHORT_BODY(c)                                               \
    uint64_t x = seed | 1;                                          \
    for (int i = 0; i < 80; i++)                                    \
        x = x * 6364136223846793005u + (c);                         \
    sink = x;                                                       \
    return x;
__attribute__((noinline)) uint64_t short_work(uint64_t seed) { SHORT_BODY(1442695040888963407u) }
__attribute__((noinline)) uint64_t short_twin(uint64_t seed) { SHORT_BODY(1442695040888963409u) }

__attribute__((noinline)) void spin_1ms(void)
{
    uint64_t t0 = __rdtsc(), start = now_ns();
    while (now_ns() - start < 1000000)
        ;
    uint64_t t1 = __rdtsc();
    if (calls < MAX_SAMPLES)
        samples[calls] = t1 - t0;
    calls++;
}

static int by_value(const void *a, const void *b) { return cmp_keys(a, b); }

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: selftimed qsort|short|spin N\n");
        return 2;
    }
    long n = atol(argv[2]);
    /* ticks per ns, measured over the run */
    uint64_t c0 = __rdtsc(), n0 = now_ns();
    if (!strcmp(argv[1], "qsort")) {
        uint64_t *keys = malloc(n * sizeof *keys), s = 88172645463325252u;
        for (long i = 0; i < n; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            keys[i] = s;
        }
        qsort(keys, n, sizeof *keys, cmp_keys);
        for (long i = 1; i < n; i++)
            if (keys[i - 1] > keys[i])
                return 3;
        printf("qsort: n=%ld sorted\n", n);
        return 0;
    }
    if (!strcmp(argv[1], "short")) {
        long batch = n / 1000 > 0 ? n / 1000 : 1;
        /* twin batches and probed calls interleaved: both see the same machine (another
           program on the other core slows both alike) */
        uint64_t chain = 1;
        for (long b = 0; b < 1000; b++) {
            uint64_t t0 = __rdtsc();
            for (long i = 0; i < batch; i++)
                chain = short_twin(chain);
            samples[calls++] = (__rdtsc() - t0) / batch;
            for (long i = 0; i < batch; i++)
                chain = short_work(chain);
        }
        sink = chain;
    }
    else if (!strcmp(argv[1], "spin"))
        for (long i = 0; i < n; i++)
            spin_1ms();
    else
        return 2;
    uint64_t c1 = __rdtsc(), n1 = now_ns();
    double ns_per_tick = (double)(n1 - n0) / (double)(c1 - c0);
    long k = calls < MAX_SAMPLES ? calls : MAX_SAMPLES;
    qsort(samples, k, sizeof *samples, by_value);
    double sum = 0;
    for (long i = 0; i < k; i++)
        sum += samples[i];
    printf("%s: calls=%ld mean_ns=%.1f median_ns=%.1f\n", argv[1][0] == 's' && argv[1][1] == 'h' ? "short_work" : "spin_1ms",
           argv[1][1] == 'h' ? n : calls, sum / k * ns_per_tick, samples[k / 2] * ns_per_tick);
    return 0;
}
