/* Two threads each run a small loop: for tests of multi-threaded tracing. */
#include <pthread.h>
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) void *worker(void *arg) {
    long n = (long)arg;
    for (long i = 0; i < n; i++) sink += i;
    return 0;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    pthread_t t;
    pthread_create(&t, 0, worker, (void *)n);
    worker((void *)n);
    pthread_join(t, 0);
    return 0;
}
