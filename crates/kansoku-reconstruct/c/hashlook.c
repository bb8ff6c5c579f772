/* A hash-table lookup loop, for seed-000 reconstruction of iterations that differ
 * (issue 42): 120 keys are inserted into a chained table of 32 buckets, then main looks
 * up N keys, a fixed mix of hits and misses, one call of lookup() each. How far a lookup
 * walks its bucket's chain decides its path: the iterations (marker lookup) fall into a
 * handful of classes.   usage: hashlook N */
#include <stdlib.h>

volatile long sink;

struct node {
    unsigned long key;
    long value;
    struct node *next;
};

static struct node pool[120];
static struct node *table[32];

__attribute__((noinline)) static unsigned hash(unsigned long k) { return (unsigned)((k * 0x9E3779B97F4A7C15ul) >> 59); }

__attribute__((noinline)) long lookup(unsigned long key) {
    for (struct node *n = table[hash(key)]; n; n = n->next)
        if (n->key == key)
            return n->value;
    return -1;
}

int main(int argc, char **argv) {
    long count = argc > 1 ? atol(argv[1]) : 1000;
    for (int i = 0; i < 120; i++) {
        unsigned long k = 3ul * i + 1;
        unsigned h = hash(k);
        pool[i] = (struct node){k, i, table[h]};
        table[h] = &pool[i];
    }
    long acc = 0;
    for (long i = 0; i < count; i++)
        acc += lookup((unsigned long)((i * 7) % 40) * 3 + (i % 5 == 0 ? 2 : 1));
    sink = acc;
    return 0;
}
