/* Workloads for the monitor (seed 001): a CPU-bound and an I/O-bound job.
 *   workload cpu SECONDS WORKERS   fork WORKERS processes that compute for SECONDS
 *   workload io  SECONDS FILE      direct writes of 1 MiB blocks to FILE, wrapping over
 *                                  64 MiB and syncing once per wrap, for SECONDS
 * Each prints what it did when it ends. The I/O job bypasses the page cache (O_DIRECT)
 * and each write waits for its block to reach the device, so the device has a request
 * in flight nearly all the time while the CPU waits: I-O busy dominates. Where the file
 * system refuses O_DIRECT (tmpfs), it falls back to buffered writes + fdatasync. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

volatile unsigned long sink;

__attribute__((noinline)) unsigned long compute_block(unsigned long x) {
    for (int i = 0; i < 100000; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

__attribute__((noinline)) void compute_for(double seconds) {
    double end = now() + seconds;
    unsigned long x = 1, blocks = 0;
    while (now() < end) {
        x = compute_block(x);
        blocks++;
    }
    sink = x;
    printf("cpu worker %d: %lu blocks\n", (int)getpid(), blocks);
}

__attribute__((noinline)) void write_block(int fd, const char *buf, size_t len) {
    if (write(fd, buf, len) != (ssize_t)len) { perror("write"); exit(1); }
}

__attribute__((noinline)) void sync_file(int fd) {
    if (fdatasync(fd) != 0) { perror("fdatasync"); exit(1); }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: workload cpu SECONDS WORKERS | workload io SECONDS FILE\n");
        return 2;
    }
    double seconds = atof(argv[2]);
    if (strcmp(argv[1], "cpu") == 0) {
        int workers = atoi(argv[3]);
        for (int w = 1; w < workers; w++)
            if (fork() == 0) { compute_for(seconds); fflush(stdout); _exit(0); }
        compute_for(seconds);
        while (wait(NULL) > 0) {}
        return 0;
    }
    if (strcmp(argv[1], "io") == 0) {
        const size_t block = 1024 * 1024, span = 64 * 1024 * 1024;
        char *buf;
        if (posix_memalign((void **)&buf, 4096, block) != 0) { perror("posix_memalign"); return 1; }
        memset(buf, 'k', block);
        int direct = 1;
        int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
        if (fd < 0) {
            direct = 0;
            fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        }
        if (fd < 0) { perror(argv[3]); return 1; }
        double end = now() + seconds;
        long blocks = 0;
        size_t offset = 0;
        while (now() < end) {
            if (lseek(fd, (off_t)offset, SEEK_SET) < 0) { perror("lseek"); return 1; }
            write_block(fd, buf, block);
            blocks++;
            offset = (offset + block) % span;
            if (!direct || offset == 0) sync_file(fd);
        }
        close(fd);
        unlink(argv[3]);
        printf("io: %ld blocks of 1 MiB, %s\n", blocks, direct ? "O_DIRECT" : "buffered + fdatasync");
        free(buf);
        return 0;
    }
    fprintf(stderr, "workload: unknown mode %s\n", argv[1]);
    return 2;
}
