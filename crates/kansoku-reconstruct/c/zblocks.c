/* A block loop over Debian's zlib, for seed-000 markers in a library (issue 42): main
 * checksums N blocks of a fixed buffer with libz's adler32, one call per block, and mixes
 * the result in a function of its own. With `vary`, block i is 64 + 32 * (i % 3) bytes
 * long: three classes of iterations that differ in length. Without it every block is
 * 96 bytes, so the iterations are alike except where the dynamic linker binds adler32 on
 * its first call through the PLT (marker adler32@plt).   usage: zblocks N [vary] */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

volatile unsigned long sink;
static unsigned char buffer[4096];

__attribute__((noinline)) unsigned long mix(unsigned long a, unsigned long i) { return (a ^ (a >> 7)) + i * 2654435761u; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int vary = argc > 2 && strcmp(argv[2], "vary") == 0;
    unsigned x = 12345;
    for (unsigned i = 0; i < sizeof buffer; i++) {
        x = x * 1103515245u + 12345u;
        buffer[i] = (unsigned char)(x >> 16);
    }
    unsigned long acc = 0;
    for (long i = 0; i < n; i++) {
        unsigned len = vary ? 64 + 32 * (unsigned)(i % 3) : 96;
        unsigned long a = adler32(1, buffer + (i * 64) % 2048, len);
        acc = mix(acc, a);
    }
    sink = acc;
    return 0;
}
