/* A small bytecode interpreter: a dense switch inside a loop, the shape compilers turn
   into a jump table (and into a compare tree with -fno-jump-tables). */
#include <stdio.h>
#include <stdlib.h>

enum { PUSH, ADD, SUB, MUL, DUP, SWAP, JNZ, SUM, HALT };

__attribute__((noinline)) long run(const int *code, long *stack) {
    long sp = 0, pc = 0;
    for (;;) {
        int op = code[pc++];
        switch (op) {
        case PUSH: stack[sp++] = code[pc++]; break;
        case ADD: sp--; stack[sp - 1] += stack[sp]; break;
        case SUB: sp--; stack[sp - 1] -= stack[sp]; break;
        case MUL: sp--; stack[sp - 1] *= stack[sp]; break;
        case DUP: stack[sp] = stack[sp - 1]; sp++; break;
        case SWAP: { long t = stack[sp - 1]; stack[sp - 1] = stack[sp - 2]; stack[sp - 2] = t; break; }
        case JNZ: { int to = code[pc++]; if (stack[--sp]) pc = to; break; }
        case SUM: { long s = 0; for (long i = 0; i < sp; i++) s += stack[i]; stack[0] = s; sp = 1; break; }
        case HALT: return stack[sp - 1];
        default: abort();
        }
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    /* counter = n; do { counter = counter - 1 } while (counter) */
    int code[] = { PUSH, 0, PUSH, n, DUP, PUSH, 1, SUB, DUP, JNZ, 4, SUM, HALT };
    long stack[64];
    printf("%ld\n", run(code, stack));
    return 0;
}
