/* A bytecode interpreter's dispatch loop, for seed-000 reconstruction of iterations that
 * differ (issue 42): main runs a fixed program N times (a count-down loop that sums and
 * multiplies); step() executes one instruction through a switch. Each opcode takes its
 * own path: the iterations (marker step) fall into one class per opcode, of different
 * shares.   usage: interp N */
#include <stdlib.h>

volatile long sink;

enum { PUSH, ADD, MUL, DUP, DEC, JNZ, SWAP, POP, HALT };

static const long program[] = {PUSH, 0, PUSH, 12, /* loop: */ SWAP, PUSH, 3, MUL, PUSH, 1, ADD, SWAP, DEC, DUP, JNZ, 4, POP, HALT};

struct vm {
    long stack[16];
    int sp;
    long pc;
};

__attribute__((noinline)) int step(struct vm *m) {
    long op = program[m->pc++];
    switch (op) {
    case PUSH: m->stack[m->sp++] = program[m->pc++]; break;
    case ADD: m->sp--; m->stack[m->sp - 1] += m->stack[m->sp]; break;
    case MUL: m->sp--; m->stack[m->sp - 1] *= m->stack[m->sp]; break;
    case DUP: m->stack[m->sp] = m->stack[m->sp - 1]; m->sp++; break;
    case DEC: m->stack[m->sp - 1]--; break;
    case JNZ: {
        long target = program[m->pc++];
        if (m->stack[--m->sp] != 0)
            m->pc = target;
        break;
    }
    case SWAP: {
        long t = m->stack[m->sp - 1];
        m->stack[m->sp - 1] = m->stack[m->sp - 2];
        m->stack[m->sp - 2] = t;
        break;
    }
    case POP: m->sp--; break;
    default: return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    long acc = 0;
    for (long i = 0; i < n; i++) {
        struct vm m = {.sp = 0, .pc = 0};
        while (step(&m))
            ;
        acc += m.stack[0];
    }
    sink = acc;
    return 0;
}
