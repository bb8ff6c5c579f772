/* Baseline for the exact tracer: the smallest possible ptrace single-step loop (step,
 * wait, read registers; no recording, no symbols). Usage: singlestep PROGRAM ARGS...
 * Prints the number of stops and the microseconds per stop. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: singlestep PROGRAM ARGS...\n"); return 2; }
    pid_t child = fork();
    if (child == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    waitpid(child, &status, 0);
    long stops = 0;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (ptrace(PTRACE_SINGLESTEP, child, 0, 0) < 0) { perror("ptrace"); return 1; }
        waitpid(child, &status, 0);
        if (WIFEXITED(status) || WIFSIGNALED(status)) break;
        struct user_regs_struct regs;
        ptrace(PTRACE_GETREGS, child, 0, &regs);
        stops++;
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double s = (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
    printf("%ld %.6f\n", stops, s);
    return 0;
}
