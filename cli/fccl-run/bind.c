/*
 * fccl-run: --bind-to core, the ranks' shares of this launcher's
 * cores.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* The first CPU of cpu's core (its lowest hardware-thread sibling), the
 * key that groups the threads of one core; the CPU itself when the
 * kernel does not say. */
static int core_key(int cpu)
{
    char path[128];
    snprintf(path, sizeof(path),
             "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
             cpu);
    FILE *f = fopen(path, "r");
    int first = cpu;
    if (f) {
        if (fscanf(f, "%d", &first) != 1)
            first = cpu;
        fclose(f);
    }
    return first;
}

/* "0-3,8,10-11" */
static void format_cpus(const cpu_set_t *set, size_t size, int ncpu,
                        char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int c = 0; c < ncpu && o < len; c++) {
        if (!CPU_ISSET_S(c, size, set))
            continue;
        int e = c;
        while (e + 1 < ncpu && CPU_ISSET_S(e + 1, size, set))
            e++;
        o += (size_t)snprintf(out + o, len - o, "%s%d", o ? "," : "", c);
        if (e > c && o < len)
            o += (size_t)snprintf(out + o, len - o, "-%d", e);
        c = e;
    }
}

/* This launcher's own CPU mask, sized for the machine. */
static cpu_set_t *own_cpus(size_t *size, int *ncpu)
{
    for (int n = 1024; n <= 1 << 18; n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        if (!set)
            return NULL;
        size_t sz = CPU_ALLOC_SIZE(n);
        if (sched_getaffinity(0, sz, set) == 0) {
            *size = sz;
            *ncpu = n;
            return set;
        }
        CPU_FREE(set);
        if (errno != EINVAL)
            return NULL;
    }
    return NULL;
}

/* With the kernel's autogroup scheduling (on by default) CPU is shared
 * between sessions first, then between a session's tasks.  Ranks left in
 * the launcher's session split one session's share against every other
 * program: with other work on every core, 2 ranks got about a third of a
 * core each (64 MiB all_gather, 2 ranks, two busy loops: 36 ms, 24 ms in
 * sessions of their own; MPICH's mpirun starts its ranks so).  With more
 * ranks than CPUs they stay together: their waiters yield to the rank
 * they wait for, and sched_yield() only passes the CPU to a task of the
 * same session (4 ranks, 2 cores, two busy loops: 8-byte all_reduce 9 us
 * in one session, 2 ms in four).  bench/RESULTS.md, "Waiting on a busy
 * machine, fourth pass".  A launcher of several nodes cannot tell whether
 * other nodes' ranks share this machine (namespace or container hosts on
 * one kernel, as in tests/multihost and bench/net.sh): there, four
 * namespace hosts on 2 cores with their ranks in sessions of their own
 * took an 8-byte all_reduce from 57 to 137 us (2 hosts x 2 ranks), so its
 * ranks stay in its session. */
int fr_own_sessions(int n, int nnodes)
{
    if (nnodes > 1)
        return 0;
    size_t size = 0;
    int ncpu = 0;
    cpu_set_t *own = own_cpus(&size, &ncpu);
    if (!own)
        return 0;
    int fits = n <= CPU_COUNT_S(size, own);
    CPU_FREE(own);
    return fits;
}

/* Share the allowed CPUs out by core: cores in the order of their first
 * CPU; C cores, N ranks: rank r gets C/N consecutive cores from r*(C/N),
 * or core r mod C when N > C (wrap-around).  Prints one line per rank. */
int fr_plan_binding(struct launcher *L)
{
    size_t size = 0;
    int ncpu = 0, ncores = 0;
    cpu_set_t *own = own_cpus(&size, &ncpu);
    int *key = own ? calloc((size_t)ncpu, sizeof(int)) : NULL;
    int *core_first = own ? calloc((size_t)ncpu, sizeof(int)) : NULL;
    if (!own || !key || !core_first) {
        fprintf(stderr, "fccl-run: --bind-to core: cannot read this "
                        "process's CPUs: %s\n", strerror(errno));
        goto fail;
    }
    /* key[c]: index of c's core among the allowed cores, -1 if c is not
     * allowed. */
    for (int c = 0; c < ncpu; c++) {
        key[c] = -1;
        if (!CPU_ISSET_S(c, size, own))
            continue;
        int k = core_key(c), i = 0;
        while (i < ncores && core_first[i] != k)
            i++;
        if (i == ncores)
            core_first[ncores++] = k;
        key[c] = i;
    }
    int per = ncores >= L->n ? ncores / L->n : 1;
    for (int r = 0; r < L->n; r++) {
        struct rank_proc *p = &L->ranks[r];
        int lo = ncores >= L->n ? r * per : r % ncores;
        if (!(p->cpus = CPU_ALLOC(ncpu)))
            goto fail;
        p->cpus_size = size;
        CPU_ZERO_S(size, p->cpus);
        for (int c = 0; c < ncpu; c++)
            if (key[c] >= lo && key[c] < lo + per)
                CPU_SET_S(c, size, p->cpus);
        char text[512];
        format_cpus(p->cpus, size, ncpu, text, sizeof(text));
        fprintf(stderr, "fccl-run: rank %d bound to CPUs %s\n",
                L->node_rank * L->n + r, text);
    }
    CPU_FREE(own);
    free(key);
    free(core_first);
    return 0;
fail:
    if (own)
        CPU_FREE(own);
    free(key);
    free(core_first);
    return -1;
}
