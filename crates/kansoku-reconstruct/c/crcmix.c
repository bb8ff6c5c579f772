/* A reproducible region for seed-000 reconstruction (issue 13's new grid program): region()
 * runs a bitwise CRC-32 over 12 fixed bytes (a nested loop whose inner branch depends on
 * the data bit by bit) and, for every byte above a threshold, calls mix(), which loops a
 * data-dependent number of times; main calls region() N times. The data never change, so
 * every call executes the same instructions.   usage: crcmix N */
#include <stdlib.h>

volatile unsigned long sink;
static const unsigned char bytes[12] = {0x31, 0xa7, 0x05, 0xff, 0x42, 0x9c, 0x10, 0x77, 0xe3, 0x2b, 0x80, 0x66};

__attribute__((noinline)) unsigned long mix(unsigned long h, unsigned char b) {
    for (int k = 0; k < (b & 3) + 1; k++)
        h = (h << 5) ^ (h >> 2) ^ b;
    return h;
}

__attribute__((noinline)) unsigned long region(void) {
    unsigned long crc = 0xffffffffUL ^ (sink & 0); /* a volatile read keeps every call */
    unsigned long h = 0;
    for (int i = 0; i < 12; i++) {
        crc ^= bytes[i];
        for (int bit = 0; bit < 8; bit++) {
            if (crc & 1)
                crc = (crc >> 1) ^ 0xedb88320UL;
            else
                crc >>= 1;
        }
        if (bytes[i] > 0x40)
            h = mix(h, bytes[i]);
    }
    return crc ^ h;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < n; i++)
        sink = region();
    return 0;
}
