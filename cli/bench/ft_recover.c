/*
 * ft_recover: one rank of bench/ft.sh, which SIGKILLs one rank in the
 * middle of an all_reduce loop and measures how the others recover.
 * Every rank runs a checked 8-float all_reduce in a loop (after a first
 * barrier it prints "R<rank> pid <pid> looping"); the survivors print
 * wall-clock microseconds ("R<rank> ERR <us>" when their all_reduce
 * failed, then the recovery's steps) so the script can compare them with
 * the moment of the kill.  Modes (argv[1]):
 *   shrink   fccl_group_shrink(world, NULL, 0): "SHRINK <call> <ret>",
 *            then the first correct all_reduce on the new group: "OK <us>"
 *            (a new group that fails, a rank having died after the
 *            agreement, is shrunk again)
 *   reinit   fccl_finalize and fccl_init of the survivors (a new job id,
 *            world size n - 1, ranks renumbered): "OK <us>" after the first
 *            correct all_reduce of the new world
 *   restart  under fccl-run --max-restarts 1: attempt 0 loops until the
 *            kill; attempt 1 prints "OK <us>" after its first correct
 *            all_reduce
 *   grow     under fccl-run --respawn 1: the survivors shrink as above,
 *            then fccl_group_grow(shrunk, 1) takes the respawned rank back
 *            in: "GROW <call> <ret>"; the respawned rank (FCCL_REJOIN)
 *            prints "NEWCOMER <ready> <ret>", ready being when its
 *            fccl_init had the store and its endpoints (boot_last_init_stats)
 *            and could post itself; everyone then "OK <us>" after the first
 *            correct all_reduce of the grown group
 * The rank to kill is the script's choice; this program only waits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "fccl/fccl.h"

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* 8 floats of (world rank + 1); 0 when the sum is right. */
static int checked(fccl_group_t *g, int me)
{
    int n = fccl_group_size(g), m[1024];
    if (n > 1024 || fccl_group_members(g, m, 1024) < 0)
        return FCCL_ERR_INVALID;
    float x[8], want = 0;
    for (int r = 0; r < n; r++)
        want += (float)(m[r] + 1);
    for (int k = 0; k < 8; k++)
        x[k] = (float)(me + 1);
    int rc = fccl_all_reduce(x, x, 8, FCCL_FLOAT32, FCCL_SUM, g, NULL);
    for (int k = 0; rc == 0 && k < 8; k++)
        if (x[k] != want) {
            fprintf(stderr, "ft_recover: wrong sum %g, want %g\n", x[k], want);
            exit(4);
        }
    return rc;
}

/* Loop until an all_reduce fails (the kill); its time. */
static long long loop(fccl_group_t *w, int me)
{
    fccl_barrier(w, NULL);
    printf("R%d pid %d looping\n", me, (int)getpid());
    while (checked(w, me) == 0)
        ;
    long long t = now_us();
    printf("R%d ERR %lld\n", me, t);
    return t;
}

/* Shrink until an all_reduce of the new group is right: a rank that dies
 * after an agreement fails the new group, which is shrunk in turn (at
 * most 4 rounds).  The first shrink's times are printed. */
static int shrink_mode(fccl_group_t *w, int me)
{
    loop(w, me);
    fccl_group_t *g = w;
    long long t0 = 0, t1 = 0;
    int rc = -1;
    for (int round = 0; round < 4 && rc < 0; round++) {
        fccl_group_t *next;
        long long a = now_us();
        if ((rc = fccl_group_shrink(g, NULL, 0, &next)) < 0)
            break;
        if (round == 0)
            t0 = a, t1 = now_us();
        g = next;
        rc = checked(g, me);
    }
    if (rc < 0) {
        fprintf(stderr, "R%d: %s\n", me, fccl_last_error());
        return 1;
    }
    printf("R%d SHRINK %lld %lld\nR%d OK %lld\n", me, t0, t1, me, now_us());
    fccl_barrier(g, NULL);
    fccl_finalize();
    return 0;
}

static int reinit_mode(fccl_group_t *w, int me, int n)
{
    loop(w, me);
    int dead = fccl_group_failed_rank(w);
    fccl_finalize();
    fccl_init_opts_t o;
    fccl_init_opts_init(&o);
    char job[160];
    const char *j = getenv("FCCL_JOB_ID");
    snprintf(job, sizeof(job), "%s-reinit", j ? j : "fccl");
    o.job_id = job;
    o.world_size = n - 1;
    o.rank = me - (dead >= 0 && me > dead);
    int rc = fccl_init(&o, &w);
    if (rc < 0 || checked(w, o.rank) < 0) {
        fprintf(stderr, "R%d: %s\n", me, fccl_last_error());
        return 1;
    }
    printf("R%d OK %lld\n", me, now_us());
    fccl_finalize();
    return 0;
}

/* Shrink *g until an all_reduce of the new group is right (at most 4
 * rounds: ranks may keep dying); 0, or the last error. */
static int shrink_until_right(fccl_group_t **g, int me)
{
    int rc = -1;
    for (int round = 0; round < 4 && rc < 0; round++) {
        fccl_group_t *next;
        if ((rc = fccl_group_shrink(*g, NULL, 0, &next)) < 0)
            break;
        *g = next;
        rc = checked(*g, me);
    }
    return rc;
}

/* A kill during the grow (bench/ft_soak.sh) fails it, or the grown
 * group's first all_reduce: the survivors then shrink again and go on
 * ("GROWFAIL <message>", then "OK"). */
static int grow_mode(fccl_group_t *w, int me)
{
    loop(w, me);
    fccl_group_t *g = w, *g2 = NULL;
    int rc = shrink_until_right(&g, me);
    long long t0 = now_us(), t1 = 0;
    if (rc < 0) {
        fprintf(stderr, "R%d: %s\n", me, fccl_last_error());
        return 1;
    }
    if ((rc = fccl_group_grow(g, 1, &g2)) >= 0) {
        t1 = now_us();
        g = g2;
        rc = checked(g, me);
    }
    if (rc < 0) {
        printf("R%d GROWFAIL %s\n", me, fccl_last_error());
        rc = shrink_until_right(&g, me);
    }
    if (rc < 0) {
        fprintf(stderr, "R%d: %s\n", me, fccl_last_error());
        return 1;
    }
    if (t1)
        printf("R%d GROW %lld %lld\n", me, t0, t1);
    printf("R%d OK %lld\n", me, now_us());
    fccl_finalize();
    return 0;
}

static int newcomer_mode(fccl_group_t *g, int me, long long t_call,
                         long long t_ret)
{
    long long ready = t_call + (long long)(boot_last_init_stats()
                                               ->wall_ms[BOOT_PH_STORE] * 1e3);
    printf("R%d pid %d newcomer\n", me, (int)getpid());
    if (checked(g, me) < 0) {
        fprintf(stderr, "R%d: %s\n", me, fccl_last_error());
        return 1;
    }
    printf("R%d NEWCOMER %lld %lld\nR%d OK %lld\n", me, ready, t_ret, me,
           now_us());
    fccl_finalize();
    return 0;
}

static int restart_mode(fccl_group_t *w, int me)
{
    const char *a = getenv("RESTART_COUNT");
    if (!a || atoi(a) == 0) {
        loop(w, me);
        fccl_finalize();
        return 1;
    }
    if (checked(w, me) < 0)
        return 1;
    printf("R%d OK %lld\n", me, now_us());
    fccl_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: ft_recover shrink|reinit|restart|grow\n");
        return 2;
    }
    fccl_group_t *w;
    const char *rejoin = getenv("FCCL_REJOIN");
    fccl_init_opts_t o;
    fccl_init_opts_init(&o);
    /* A second rank killed and respawned during a grow waits for a grow
     * that never comes: a short wait keeps ft_soak's rounds short. */
    if (rejoin && *rejoin && strcmp(rejoin, "0") != 0 && getenv("FT_JOIN_MS"))
        o.timeout_ms = atoll(getenv("FT_JOIN_MS"));
    long long t_call = now_us();
    if (fccl_init(&o, &w) < 0) {
        fprintf(stderr, "ft_recover: init: %s\n", fccl_last_error());
        return 1;
    }
    long long t_ret = now_us();
    int me = fccl_get_rank(), n = fccl_get_world_size();
    if (rejoin && *rejoin && strcmp(rejoin, "0") != 0)
        return newcomer_mode(w, me, t_call, t_ret);
    if (strcmp(argv[1], "grow") == 0)
        return grow_mode(w, me);
    if (strcmp(argv[1], "shrink") == 0)
        return shrink_mode(w, me);
    if (strcmp(argv[1], "reinit") == 0)
        return reinit_mode(w, me, n);
    return restart_mode(w, me);
}
