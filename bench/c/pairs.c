/* Issue 44's probed program: work() called N times (argv[1]), one entry+exit pair each. */
#include <stdio.h>
#include <stdlib.h>
volatile long sink;
__attribute__((noinline)) void work(long i) { sink += i; }
int main(int argc, char **argv) { long n = atol(argv[1]); for (long i = 0; i < n; i++) work(i); printf("%ld\n", sink); return 0; }
