/* Nested loops: a small matrix multiply repeated, with an inner reduction loop. */
#include <stdlib.h>

#define N 8
double a[N][N], b[N][N], c[N][N];
volatile double sink;

__attribute__((noinline)) void multiply(void) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < N; k++)
                s += a[i][k] * b[k][j];
            c[i][j] = s;
        }
}

int main(int argc, char **argv) {
    long repeat = argc > 1 ? atol(argv[1]) : 10;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) { a[i][j] = i + j; b[i][j] = i - j; }
    for (long r = 0; r < repeat; r++) multiply();
    sink = c[N - 1][N - 1];
    return 0;
}
