/* A tokenizer over the lines of a real text, for seed-000 reconstruction of iterations
 * that differ (issue 42): main reads FILE (e.g. /usr/share/common-licenses/BSD), then
 * tokenizes its lines R times over; tokenize() is called once per line and classifies
 * each character run as a word, a number or punctuation. Lines of different shape take
 * different paths: the iterations (marker tokenize) fall into many classes.
 * usage: tokenize FILE R */
#include <stdio.h>
#include <stdlib.h>

volatile long sink;
static char text[1 << 16];

__attribute__((noinline)) static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
__attribute__((noinline)) static int is_digit(int c) { return c >= '0' && c <= '9'; }

__attribute__((noinline)) long tokenize(const char *s, long n) {
    long words = 0, numbers = 0, punct = 0, i = 0;
    while (i < n) {
        char c = s[i];
        if (c == ' ' || c == '\t') {
            i++;
        } else if (is_alpha(c)) {
            while (i < n && (is_alpha(s[i]) || is_digit(s[i])))
                i++;
            words++;
        } else if (is_digit(c)) {
            while (i < n && is_digit(s[i]))
                i++;
            numbers++;
        } else {
            punct++;
            i++;
        }
    }
    return words * 10000 + numbers * 100 + punct;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tokenize FILE [R]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    long len = (long)fread(text, 1, sizeof text - 1, f);
    fclose(f);
    long rounds = argc > 2 ? atol(argv[2]) : 1;
    long acc = 0;
    for (long r = 0; r < rounds; r++) {
        long start = 0;
        for (long i = 0; i <= len; i++) {
            if (i == len || text[i] == '\n') {
                acc += tokenize(text + start, i - start);
                start = i + 1;
            }
        }
    }
    sink = acc;
    return 0;
}
