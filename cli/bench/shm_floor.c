/*
 * shm_floor: the physical floors under a one-host collective, measured
 * between two processes as fccl's ranks are (bench/RESULTS.md, issue 28).
 *
 *   shm_floor [REPS]      default 200 repetitions per figure
 *
 * Prints, each the median over REPS (after a few untimed ones):
 *   line   one cache line's round trip between two processes (each waits
 *          for the other's store to a shared 64-byte line, then answers):
 *          the least any handshake through shared memory costs;
 *   memcpy one process's memcpy of S bytes, buffers warm (S = 256 KiB,
 *          512 KiB, 1 MiB, 64 MiB);
 *   2x memcpy  both processes copying S bytes each at once (what two
 *          ranks that both copy get of the memory system);
 *   readv  process_vm_readv of S bytes from the other process (the single
 *          copy CMA makes), alone, and both reading each other at once;
 *   writev process_vm_writev of S bytes into the other process.
 * GB/s are 1e9 bytes copied per second (each byte read once, written once).
 * A benchmark, so it makes its own processes (fork) and shared mapping.
 */

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE 64
#define MAXS ((size_t)64 << 20)

struct shared {
    _Alignas(LINE) _Atomic uint64_t ping;
    _Alignas(LINE) _Atomic uint64_t pong;
    _Alignas(LINE) _Atomic uint64_t go;   /* parent -> child: start test k */
    _Alignas(LINE) _Atomic uint64_t done; /* child -> parent: test k done */
    _Alignas(LINE) uint64_t child_buf;    /* child's buffer address */
    uint64_t child_dst;                   /* child's second buffer */
    int child_pid, parent_pid;
    uint64_t parent_buf;
    double child_ns;                      /* child's time of test k */
};

enum { T_PINGPONG = 1, T_MEMCPY, T_READV, T_QUIT };

struct job {
    int test;
    size_t bytes;
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void pull(int pid, uint64_t addr, void *dst, size_t len)
{
    struct iovec l = {dst, len}, r = {(void *)(uintptr_t)addr, len};
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)len) {
        perror("shm_floor: process_vm_readv");
        exit(1);
    }
}

static void push(int pid, uint64_t addr, const void *src, size_t len)
{
    struct iovec l = {(void *)src, len}, r = {(void *)(uintptr_t)addr, len};
    if (process_vm_writev(pid, &l, 1, &r, 1, 0) != (ssize_t)len) {
        perror("shm_floor: process_vm_writev");
        exit(1);
    }
}

/* The child: answers pings, or runs the parent's test k alongside it. */
static void child(struct shared *sh, unsigned char *a, unsigned char *b)
{
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        while ((g = atomic_load(&sh->go)) == seen)
            ;
        seen = g;
        int test = (int)(g >> 56);
        size_t bytes = (size_t)(g >> 8) & 0xffffffffffull;
        if (test == T_QUIT)
            _exit(0);
        if (test == T_PINGPONG) {
            for (uint64_t i = 1; i <= bytes; i++) {
                while (atomic_load_explicit(&sh->ping, memory_order_acquire) != i)
                    ;
                atomic_store_explicit(&sh->pong, i, memory_order_release);
            }
        }
        double t = now_ns();
        if (test == T_MEMCPY)
            memcpy(b, a, bytes);
        if (test == T_READV)
            pull(sh->parent_pid, sh->parent_buf, b, bytes);
        sh->child_ns = now_ns() - t;
        atomic_store(&sh->done, g);
    }
}

static uint64_t counter;

/* Start test `test` of `bytes` in the child (both start within a line's
 * round trip of each other). */
static uint64_t child_start(struct shared *sh, int test, size_t bytes)
{
    uint64_t g = ((uint64_t)test << 56) | ((uint64_t)bytes << 8) |
                 (++counter & 0xff);
    atomic_store(&sh->go, g);
    return g;
}

static void child_wait(struct shared *sh, uint64_t g)
{
    while (atomic_load(&sh->done) != g)
        ;
}

static double line_rtt(struct shared *sh, int reps)
{
    double *v = malloc(sizeof(double) * (size_t)reps);
    atomic_store(&sh->ping, 0);
    atomic_store(&sh->pong, 0);
    uint64_t g = child_start(sh, T_PINGPONG, (size_t)reps + 10);
    for (int i = 1; i <= reps + 10; i++) {
        double t = now_ns();
        atomic_store_explicit(&sh->ping, (uint64_t)i, memory_order_release);
        while (atomic_load_explicit(&sh->pong, memory_order_acquire) !=
               (uint64_t)i)
            ;
        if (i > 10)
            v[i - 11] = now_ns() - t;
    }
    child_wait(sh, g);
    double m = median(v, reps);
    free(v);
    return m;
}

/* kind: 0 memcpy alone, 1 both memcpy, 2 readv alone, 3 both readv,
 * 4 writev alone.  Returns the median GB/s (for "both": the slower
 * side's time per repetition). */
static double copy_bw(struct shared *sh, unsigned char *a, unsigned char *b,
                      int kind, size_t bytes, int reps)
{
    double *v = malloc(sizeof(double) * (size_t)reps);
    for (int i = -3; i < reps; i++) {
        uint64_t g = 0;
        if (kind == 1)
            g = child_start(sh, T_MEMCPY, bytes);
        if (kind == 3)
            g = child_start(sh, T_READV, bytes);
        double t = now_ns();
        if (kind <= 1)
            memcpy(b, a, bytes);
        else if (kind <= 3)
            pull(sh->child_pid, sh->child_buf, b, bytes);
        else
            push(sh->child_pid, sh->child_dst, a, bytes);
        double dt = now_ns() - t;
        if (g) {
            child_wait(sh, g);
            if (sh->child_ns > dt)
                dt = sh->child_ns;
        }
        if (i >= 0)
            v[i] = (double)bytes / dt;
    }
    double m = median(v, reps);
    free(v);
    return m;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    if (reps < 1 || reps > 100000) {
        fprintf(stderr, "usage: shm_floor [REPS 1..100000]\n");
        return 2;
    }
    struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned char *a = malloc(MAXS), *b = malloc(MAXS);
    if (sh == MAP_FAILED || !a || !b) {
        fprintf(stderr, "shm_floor: out of memory\n");
        return 1;
    }
    memset(a, 1, MAXS);
    memset(b, 2, MAXS);
    sh->parent_pid = (int)getpid();
    sh->parent_buf = (uint64_t)(uintptr_t)a;
    pid_t pid = fork();
    if (pid < 0) {
        perror("shm_floor: fork");
        return 1;
    }
    if (pid == 0) {
        /* the child's own copies of a and b (copy-on-write made private) */
        memset(a, 3, MAXS);
        memset(b, 4, MAXS);
        sh->child_buf = (uint64_t)(uintptr_t)a;
        sh->child_dst = (uint64_t)(uintptr_t)b;
        atomic_store(&sh->done, 1);
        child(sh, a, b);
    }
    sh->child_pid = (int)pid;
    while (atomic_load(&sh->done) != 1)
        ;
    printf("line round trip between two processes: %.0f ns (median of %d)\n",
           line_rtt(sh, reps * 50), reps * 50);
    static const size_t sizes[] = {256 << 10, 512 << 10, 1 << 20, 64 << 20};
    static const char *names[] = {"memcpy", "2x memcpy", "readv", "2x readv",
                                  "writev"};
    printf("| bytes | memcpy GB/s | 2x memcpy GB/s each | readv GB/s | "
           "2x readv GB/s each | writev GB/s |\n|---:|---:|---:|---:|---:|---:|\n");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        int r = sizes[s] >= MAXS ? (reps < 20 ? reps : 20) : reps;
        printf("| %zu |", sizes[s]);
        for (int k = 0; k < 5; k++)
            printf(" %.2f |", copy_bw(sh, a, b, k, sizes[s], r));
        printf("\n");
        (void)names;
    }
    child_start(sh, T_QUIT, 0);
    waitpid(pid, NULL, 0);
    return 0;
}
